// CUDA glue for silu_and_mul, gelu_and_mul, gelu and their backward ops: checks, device guard, current
// stream, row views (kernels/cuda/activation.h). Inputs are read in place when their rows have one stride
// (rows.h); any other layout is copied to a contiguous tensor first.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include <vector>

#include "common/cuda_launch.h"
#include "common/rows.h"
#include "kernels/cuda/activation.h"
#include "ops/activation.h"

namespace yirage {
namespace {

namespace kc = kernels::cuda;

kc::Activation activation_cuda_gelu_kind(const char* op, c10::string_view approximate) {
  return check_approximate(op, approximate) ? kc::Activation::gelu_tanh : kc::Activation::gelu;
}

// silu for the SwiGLU ops (approximate == nullptr), gelu's variant otherwise; checked after x.
kc::Activation activation_cuda_gated_kind(const char* op, const c10::string_view* approximate) {
  return approximate ? activation_cuda_gelu_kind(op, *approximate) : kc::Activation::silu;
}

// An elementwise operand as rows: any shape (0-dim included) whose rows have one stride.
struct ActivationCudaRows {
  Rows rows;
  int64_t cols = 0;
};

ActivationCudaRows activation_cuda_rows(const at::Tensor& t) {
  const at::Tensor v = t.dim() == 0 ? t.reshape({1}) : t;
  return {as_rows(v), v.size(-1)};
}

at::Tensor activation_cuda_gated_forward(const char* op, const at::Tensor& x, const c10::string_view* approximate) {
  check_gated(op, x);
  const kc::Activation act = activation_cuda_gated_kind(op, approximate);
  const c10::cuda::CUDAGuard guard(x.device());
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() /= 2;
  at::Tensor y = at::empty(sizes, x.options());
  if (y.numel() == 0) return y;
  const Rows xr = as_rows(x);
  kc::ActivationForward p;
  p.x = xr.tensor.const_data_ptr();
  p.x_stride = xr.stride;
  p.out = y.data_ptr();
  p.cols = sizes.back();
  p.rows = y.numel() / p.cols;
  p.act = act;
  p.gated = true;
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  check_launch(op, kc::activation_forward(p, current_stream()));
  return y;
}

at::Tensor activation_cuda_gated_backward(const char* op, const at::Tensor& grad_out, const at::Tensor& x,
                                          const c10::string_view* approximate) {
  check_gated_backward(op, grad_out, x);
  const kc::Activation act = activation_cuda_gated_kind(op, approximate);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor dx = at::empty(x.sizes(), x.options());
  if (dx.numel() == 0) return dx;
  const Rows xr = as_rows(x), gr = as_rows(grad_out);
  kc::ActivationBackward p;
  p.grad_out = gr.tensor.const_data_ptr();
  p.grad_out_stride = gr.stride;
  p.x = xr.tensor.const_data_ptr();
  p.x_stride = xr.stride;
  p.grad_x = dx.data_ptr();
  p.cols = x.size(-1) / 2;
  p.rows = x.numel() / x.size(-1);
  p.act = act;
  p.gated = true;
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  check_launch(op, kc::activation_backward(p, current_stream()));
  return dx;
}

at::Tensor silu_and_mul_cuda(const at::Tensor& x) { return activation_cuda_gated_forward("silu_and_mul", x, nullptr); }

at::Tensor gelu_and_mul_cuda(const at::Tensor& x, c10::string_view approximate) {
  return activation_cuda_gated_forward("gelu_and_mul", x, &approximate);
}

at::Tensor silu_and_mul_backward_cuda(const at::Tensor& grad_out, const at::Tensor& x) {
  return activation_cuda_gated_backward("silu_and_mul_backward", grad_out, x, nullptr);
}

at::Tensor gelu_and_mul_backward_cuda(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  return activation_cuda_gated_backward("gelu_and_mul_backward", grad_out, x, &approximate);
}

at::Tensor gelu_cuda(const at::Tensor& x, c10::string_view approximate) {
  const char* op = "gelu";
  check_gelu(op, x, approximate);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty(x.sizes(), x.options());
  if (y.numel() == 0) return y;
  const ActivationCudaRows xe = activation_cuda_rows(x);
  const bool flat = xe.rows.stride == xe.cols;  // contiguous: one row of numel elements
  kc::ActivationForward p;
  p.x = xe.rows.tensor.const_data_ptr();
  p.cols = flat ? y.numel() : xe.cols;
  p.x_stride = flat ? p.cols : xe.rows.stride;
  p.rows = y.numel() / p.cols;
  p.out = y.data_ptr();
  p.act = activation_cuda_gelu_kind(op, approximate);
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  check_launch(op, kc::activation_forward(p, current_stream()));
  return y;
}

at::Tensor gelu_backward_cuda(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  const char* op = "gelu_backward";
  check_gelu_backward(grad_out, x, approximate);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor dx = at::empty(x.sizes(), x.options());
  if (dx.numel() == 0) return dx;
  const ActivationCudaRows xe = activation_cuda_rows(x), ge = activation_cuda_rows(grad_out);
  const bool flat = xe.rows.stride == xe.cols && ge.rows.stride == ge.cols;
  kc::ActivationBackward p;
  p.grad_out = ge.rows.tensor.const_data_ptr();
  p.x = xe.rows.tensor.const_data_ptr();
  p.cols = flat ? dx.numel() : xe.cols;
  p.grad_out_stride = flat ? p.cols : ge.rows.stride;
  p.x_stride = flat ? p.cols : xe.rows.stride;
  p.rows = dx.numel() / p.cols;
  p.grad_x = dx.data_ptr();
  p.act = activation_cuda_gelu_kind(op, approximate);
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  check_launch(op, kc::activation_backward(p, current_stream()));
  return dx;
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) {
  m.impl("silu_and_mul", &silu_and_mul_cuda);
  m.impl("gelu_and_mul", &gelu_and_mul_cuda);
  m.impl("gelu", &gelu_cuda);
  m.impl("silu_and_mul_backward", &silu_and_mul_backward_cuda);
  m.impl("gelu_and_mul_backward", &gelu_and_mul_backward_cuda);
  m.impl("gelu_backward", &gelu_backward_cuda);
}

}  // namespace yirage
