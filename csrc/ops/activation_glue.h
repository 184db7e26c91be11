// The glue of silu_and_mul, gelu_and_mul, gelu and their backward ops, shared by the CPU and CUDA backends:
// checks, the output, row views of the operands and the kernel's parameters (kernels/activation.h). Inputs are
// read in place when their rows have one stride (rows.h); any other layout (e.g. a transposed x) is copied to a
// contiguous tensor first. A backend supplies, as static members of `Backend`:
//   guard(x)              an object that keeps x's device current while it lives (CPU: nothing)
//   empty(sizes, opts)    a new output (CPU: cpu_empty, common/cpu_memory.h; CUDA: at::empty)
//   dtype(op, t)          the kernels' DType for t (a clear error for others)
//   forward(op, p), backward(op, p)   runs the kernel on the rows x cols output (grad_out)
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include <vector>

#include "common/rows.h"
#include "kernels/activation.h"
#include "ops/activation.h"

namespace yirage {

template <typename Backend>
struct ActivationGlue {
  using Act = kernels::Activation;

  static Act gelu_kind(const char* op, c10::string_view approximate) {
    return check_approximate(op, approximate) ? Act::gelu_tanh : Act::gelu;
  }

  // silu for the SwiGLU ops (approximate == nullptr), gelu's variant otherwise; checked after x.
  static Act gated_kind(const char* op, const c10::string_view* approximate) {
    return approximate ? gelu_kind(op, *approximate) : Act::silu;
  }

  // An elementwise operand as rows: any shape (0-dim included) whose rows have one stride; `flat` when the whole
  // tensor is one row of numel elements (contiguous).
  struct Elementwise {
    Rows rows;
    int64_t cols = 0;
    bool flat() const { return rows.stride == cols; }
  };

  static Elementwise elementwise_rows(const at::Tensor& t) {
    const at::Tensor v = t.dim() == 0 ? t.reshape({1}) : t;
    return {as_rows(v), v.size(-1)};
  }

  static at::Tensor gated_forward(const char* op, const at::Tensor& x, const c10::string_view* approximate) {
    check_gated(op, x);
    const Act act = gated_kind(op, approximate);
    const auto guard = Backend::guard(x);
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() /= 2;
    at::Tensor y = Backend::empty(sizes, x.options());
    if (y.numel() == 0) return y;
    const Rows xr = as_rows(x);
    kernels::ActivationForward p;
    p.x = xr.tensor.const_data_ptr();
    p.x_stride = xr.stride;
    p.out = y.data_ptr();
    p.cols = sizes.back();
    p.rows = y.numel() / p.cols;
    p.act = act;
    p.gated = true;
    p.dtype = Backend::dtype(op, x.scalar_type());
    Backend::forward(op, p);
    return y;
  }

  static at::Tensor gated_backward(const char* op, const at::Tensor& grad_out, const at::Tensor& x,
                                   const c10::string_view* approximate) {
    check_gated_backward(op, grad_out, x);
    const Act act = gated_kind(op, approximate);
    const auto guard = Backend::guard(x);
    at::Tensor dx = Backend::empty(x.sizes(), x.options());
    if (dx.numel() == 0) return dx;
    const Rows xr = as_rows(x), gr = as_rows(grad_out);
    kernels::ActivationBackward p;
    p.grad_out = gr.tensor.const_data_ptr();
    p.grad_out_stride = gr.stride;
    p.x = xr.tensor.const_data_ptr();
    p.x_stride = xr.stride;
    p.grad_x = dx.data_ptr();
    p.cols = x.size(-1) / 2;
    p.rows = x.numel() / x.size(-1);
    p.act = act;
    p.gated = true;
    p.dtype = Backend::dtype(op, x.scalar_type());
    Backend::backward(op, p);
    return dx;
  }

  static at::Tensor silu_and_mul(const at::Tensor& x) { return gated_forward("silu_and_mul", x, nullptr); }

  static at::Tensor gelu_and_mul(const at::Tensor& x, c10::string_view approximate) {
    return gated_forward("gelu_and_mul", x, &approximate);
  }

  static at::Tensor silu_and_mul_backward(const at::Tensor& grad_out, const at::Tensor& x) {
    return gated_backward("silu_and_mul_backward", grad_out, x, nullptr);
  }

  static at::Tensor gelu_and_mul_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                          c10::string_view approximate) {
    return gated_backward("gelu_and_mul_backward", grad_out, x, &approximate);
  }

  static at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
    const char* op = "gelu";
    check_gelu(op, x, approximate);
    const auto guard = Backend::guard(x);
    at::Tensor y = Backend::empty(x.sizes(), x.options());
    if (y.numel() == 0) return y;
    const Elementwise xe = elementwise_rows(x);
    const bool flat = xe.flat();
    kernels::ActivationForward p;
    p.x = xe.rows.tensor.const_data_ptr();
    p.cols = flat ? y.numel() : xe.cols;
    p.x_stride = flat ? p.cols : xe.rows.stride;
    p.rows = y.numel() / p.cols;
    p.out = y.data_ptr();
    p.act = gelu_kind(op, approximate);
    p.dtype = Backend::dtype(op, x.scalar_type());
    Backend::forward(op, p);
    return y;
  }

  static at::Tensor gelu_backward(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
    const char* op = "gelu_backward";
    check_gelu_backward(grad_out, x, approximate);
    const auto guard = Backend::guard(x);
    at::Tensor dx = Backend::empty(x.sizes(), x.options());
    if (dx.numel() == 0) return dx;
    const Elementwise xe = elementwise_rows(x), ge = elementwise_rows(grad_out);
    const bool flat = xe.flat() && ge.flat();
    kernels::ActivationBackward p;
    p.grad_out = ge.rows.tensor.const_data_ptr();
    p.x = xe.rows.tensor.const_data_ptr();
    p.cols = flat ? dx.numel() : xe.cols;
    p.grad_out_stride = flat ? p.cols : ge.rows.stride;
    p.x_stride = flat ? p.cols : xe.rows.stride;
    p.rows = dx.numel() / p.cols;
    p.grad_x = dx.data_ptr();
    p.act = gelu_kind(op, approximate);
    p.dtype = Backend::dtype(op, x.scalar_type());
    Backend::backward(op, p);
    return dx;
  }

  // The six ops' kernels for the backend's dispatch key.
  static void register_kernels(torch::Library& m) {
    m.impl("silu_and_mul", &silu_and_mul);
    m.impl("gelu_and_mul", &gelu_and_mul);
    m.impl("gelu", &gelu);
    m.impl("silu_and_mul_backward", &silu_and_mul_backward);
    m.impl("gelu_and_mul_backward", &gelu_and_mul_backward);
    m.impl("gelu_backward", &gelu_backward);
  }
};

}  // namespace yirage
