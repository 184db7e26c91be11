// CUDA glue for softmax, log_softmax and their backward ops: checks, device guard, current stream, the
// (outer, dim, inner) view of each input (kernels/cuda/softmax.h), as the CPU glue builds it.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "common/cuda_launch.h"
#include "kernels/cuda/softmax.h"
#include "ops/softmax.h"

namespace yirage {
namespace {

namespace kc = kernels::cuda;

at::Tensor softmax_cuda_impl(const char* op, const at::Tensor& x, int64_t dim, bool log) {
  dim = check_softmax(op, x, dim);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  const SoftmaxShape s = softmax_shape(x, dim);
  const SoftmaxView xv = softmax_view(x, dim, s.inner);
  kc::SoftmaxForward p;
  p.x = xv.tensor.const_data_ptr();
  p.x_outer_stride = xv.outer_stride;
  p.x_dim_stride = xv.dim_stride;
  p.out = y.data_ptr();
  p.outer = s.outer;
  p.dim = s.dim;
  p.inner = s.inner;
  p.log = log;
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  check_launch(op, kc::softmax_forward(p, current_stream()));
  return y;
}

at::Tensor softmax_cuda_backward_impl(const char* op, const at::Tensor& grad_out, const at::Tensor& out,
                                      int64_t dim, bool log) {
  dim = check_softmax_backward(op, grad_out, out, dim);
  const c10::cuda::CUDAGuard guard(out.device());
  at::Tensor dx = at::empty(out.sizes(), out.options());
  if (out.numel() == 0) return dx;
  const SoftmaxShape s = softmax_shape(out, dim);
  const SoftmaxView gv = softmax_view(grad_out, dim, s.inner), ov = softmax_view(out, dim, s.inner);
  kc::SoftmaxBackward p;
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
  p.dtype = cuda_kernel_dtype(op, out.scalar_type());
  check_launch(op, kc::softmax_backward(p, current_stream()));
  return dx;
}

at::Tensor softmax_cuda(const at::Tensor& x, int64_t dim) { return softmax_cuda_impl("softmax", x, dim, false); }

at::Tensor log_softmax_cuda(const at::Tensor& x, int64_t dim) {
  return softmax_cuda_impl("log_softmax", x, dim, true);
}

at::Tensor softmax_backward_cuda(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  return softmax_cuda_backward_impl("softmax_backward", grad_out, out, dim, false);
}

at::Tensor log_softmax_backward_cuda(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  return softmax_cuda_backward_impl("log_softmax_backward", grad_out, out, dim, true);
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) {
  m.impl("softmax", &softmax_cuda);
  m.impl("log_softmax", &log_softmax_cuda);
  m.impl("softmax_backward", &softmax_backward_cuda);
  m.impl("log_softmax_backward", &log_softmax_backward_cuda);
}

}  // namespace yirage
