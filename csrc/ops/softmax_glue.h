// The glue of softmax, log_softmax and their backward ops, shared by the CPU and CUDA backends: checks, the
// output, the (outer, dim, inner) view of each input (ops/softmax.h) and the kernels' parameters
// (kernels/softmax.h). A backend supplies, as static members of `Backend` (as for ops/activation_glue.h):
//   guard(x)              an object that keeps x's device current while it lives (CPU: nothing)
//   empty(sizes, opts)    a new output (CPU: cpu_empty, common/cpu_memory.h; CUDA: at::empty)
//   dtype(op, t)          the kernels' DType for t (a clear error for others)
//   forward(op, p), backward(op, p)   runs the kernel
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "kernels/softmax.h"
#include "ops/softmax.h"

namespace yirage {

template <typename Backend>
struct SoftmaxGlue {
  static at::Tensor forward(const char* op, const at::Tensor& x, int64_t dim, bool log) {
    dim = check_softmax(op, x, dim);
    const auto guard = Backend::guard(x);
    at::Tensor y = Backend::empty(x.sizes(), x.options());
    if (x.numel() == 0) return y;
    const SoftmaxShape s = softmax_shape(x, dim);
    const SoftmaxView xv = softmax_view(x, dim, s.inner);
    kernels::SoftmaxForward p;
    p.x = xv.tensor.const_data_ptr();
    p.x_outer_stride = xv.outer_stride;
    p.x_dim_stride = xv.dim_stride;
    p.out = y.data_ptr();
    p.outer = s.outer;
    p.dim = s.dim;
    p.inner = s.inner;
    p.log = log;
    p.dtype = Backend::dtype(op, x.scalar_type());
    Backend::forward(op, p);
    return y;
  }

  static at::Tensor backward(const char* op, const at::Tensor& grad_out, const at::Tensor& out, int64_t dim,
                             bool log) {
    dim = check_softmax_backward(op, grad_out, out, dim);
    const auto guard = Backend::guard(out);
    at::Tensor dx = Backend::empty(out.sizes(), out.options());
    if (out.numel() == 0) return dx;
    const SoftmaxShape s = softmax_shape(out, dim);
    const SoftmaxView gv = softmax_view(grad_out, dim, s.inner), ov = softmax_view(out, dim, s.inner);
    kernels::SoftmaxBackward p;
    p.grad_out = gv.tensor.const_data_ptr();
    p.grad_out_outer_stride = gv.outer_stride;
    p.grad_out_dim_stride = gv.dim_stride;
    p.out = ov.tensor.const_data_ptr();
    p.out_outer_stride = ov.outer_stride;
    p.out_dim_stride = ov.dim_stride;
    p.grad_x = dx.data_ptr();
    p.outer = s.outer;
    p.dim = s.dim;
    p.inner = s.inner;
    p.log = log;
    p.dtype = Backend::dtype(op, out.scalar_type());
    Backend::backward(op, p);
    return dx;
  }

  static at::Tensor softmax(const at::Tensor& x, int64_t dim) { return forward("softmax", x, dim, false); }

  static at::Tensor log_softmax(const at::Tensor& x, int64_t dim) { return forward("log_softmax", x, dim, true); }

  static at::Tensor softmax_backward(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
    return backward("softmax_backward", grad_out, out, dim, false);
  }

  static at::Tensor log_softmax_backward(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
    return backward("log_softmax_backward", grad_out, out, dim, true);
  }

  // The four ops' kernels for the backend's dispatch key.
  static void register_kernels(torch::Library& m) {
    m.impl("softmax", &softmax);
    m.impl("log_softmax", &log_softmax);
    m.impl("softmax_backward", &softmax_backward);
    m.impl("log_softmax_backward", &log_softmax_backward);
  }
};

}  // namespace yirage
