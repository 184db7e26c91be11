// CPU glue for softmax, log_softmax and their backward ops: checks, the (outer, dim, inner) view of each
// input, the thread split. The kernels (kernels/cpu/softmax.h) are vectorized per ISA, chosen at run time.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "common/cpu_launch.h"
#include "common/cpu_memory.h"
#include "kernels/cpu/softmax.h"
#include "ops/softmax.h"

namespace yirage {
namespace {

namespace k = kernels::cpu;

at::Tensor softmax_impl(const char* op, const at::Tensor& x, int64_t dim, bool log) {
  dim = check_softmax(op, x, dim);
  at::Tensor y = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  advise_huge_pages(y);
  const SoftmaxShape s = softmax_shape(x, dim);
  const SoftmaxView xv = softmax_view(x, dim, s.inner);
  k::SoftmaxForward p;
  p.x = xv.tensor.const_data_ptr();
  p.x_outer_stride = xv.outer_stride;
  p.x_dim_stride = xv.dim_stride;
  p.out = y.data_ptr();
  p.outer = s.outer;
  p.dim = s.dim;
  p.inner = s.inner;
  p.log = log;
  p.dtype = cpu_kernel_dtype(op, x.scalar_type());
  const k::SoftmaxTasks tasks = k::softmax_tasks(s.outer, s.dim, s.inner, p.dtype);
  cpu_for_rows(op, tasks.count, tasks.elems, [&](int64_t b, int64_t e) { return k::softmax_forward(p, b, e); });
  return y;
}

at::Tensor softmax_backward_impl(const char* op, const at::Tensor& grad_out, const at::Tensor& out, int64_t dim,
                                 bool log) {
  dim = check_softmax_backward(op, grad_out, out, dim);
  at::Tensor dx = at::empty(out.sizes(), out.options());
  if (out.numel() == 0) return dx;
  advise_huge_pages(dx);
  const SoftmaxShape s = softmax_shape(out, dim);
  const SoftmaxView gv = softmax_view(grad_out, dim, s.inner), ov = softmax_view(out, dim, s.inner);
  k::SoftmaxBackward p;
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
  p.dtype = cpu_kernel_dtype(op, out.scalar_type());
  const k::SoftmaxTasks tasks = k::softmax_tasks(s.outer, s.dim, s.inner, p.dtype);
  cpu_for_rows(op, tasks.count, tasks.elems, [&](int64_t b, int64_t e) { return k::softmax_backward(p, b, e); });
  return dx;
}

at::Tensor softmax_cpu(const at::Tensor& x, int64_t dim) { return softmax_impl("softmax", x, dim, false); }

at::Tensor log_softmax_cpu(const at::Tensor& x, int64_t dim) { return softmax_impl("log_softmax", x, dim, true); }

at::Tensor softmax_backward_cpu(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  return softmax_backward_impl("softmax_backward", grad_out, out, dim, false);
}

at::Tensor log_softmax_backward_cpu(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  return softmax_backward_impl("log_softmax_backward", grad_out, out, dim, true);
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) {
  m.impl("softmax", &softmax_cpu);
  m.impl("log_softmax", &log_softmax_cpu);
  m.impl("softmax_backward", &softmax_backward_cpu);
  m.impl("log_softmax_backward", &log_softmax_backward_cpu);
}

}  // namespace yirage
