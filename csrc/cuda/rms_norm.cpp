// CUDA glue for rms_norm, fused_add_rms_norm (ops/norm_glue.h, shared with the CPU) and rms_norm_backward:
// checks, device guard, current stream, row views, the weight-gradient workspace (kernels/cuda/rms_norm.h).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>

#include "common/cuda_launch.h"
#include "common/rows.h"
#include "kernels/cuda/rms_norm.h"
#include "ops/rms_norm.h"
#include "ops/norm_glue.h"

namespace yirage {
namespace {

struct RmsNormCuda : CudaGlueBackend {
  static void forward(const char* op, const kernels::RmsNormForward& p) {
    check_launch(op, kernels::cuda::rms_norm_forward(p, current_stream()));
  }
};

std::tuple<at::Tensor, at::Tensor> rms_norm_backward_cuda(const at::Tensor& grad_out, const at::Tensor& x,
                                                          const std::optional<at::Tensor>& weight, double eps,
                                                          const std::optional<at::Tensor>& grad_add,
                                                          bool weight_grad) {
  const char* op = "rms_norm_backward";
  check_rms_norm_backward(grad_out, x, weight, eps, grad_add);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t cols = x.size(-1);
  at::Tensor dx = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) {
    return {dx, weight_grad ? at::zeros({cols}, x.options()) : at::empty({0}, x.options())};
  }
  at::Tensor dw = at::empty({weight_grad ? cols : 0}, x.options());
  const Rows xr = as_rows(x), gr = as_rows(grad_out);
  const Rows ar = has(grad_add) ? as_rows(*grad_add) : Rows{};
  const at::Tensor w = has(weight) ? weight->contiguous() : at::Tensor();
  kernels::cuda::RmsNormBackward p;
  p.grad_out = gr.tensor.const_data_ptr();
  p.grad_out_stride = gr.stride;
  p.x = xr.tensor.const_data_ptr();
  p.x_stride = xr.stride;
  p.weight = w.defined() ? w.const_data_ptr() : nullptr;
  p.grad_add = has(grad_add) ? ar.tensor.const_data_ptr() : nullptr;
  p.grad_add_stride = ar.stride;
  p.grad_x = dx.data_ptr();
  p.grad_weight = weight_grad ? dw.data_ptr() : nullptr;
  p.rows = x.numel() / cols;
  p.cols = cols;
  p.eps = eps;
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  // per-block partial sums of the weight gradient (fp32; fp64 for fp64), reduced by the kernel's second pass
  at::Tensor workspace;
  const int64_t ws = kernels::cuda::rms_norm_backward_workspace(p);
  if (ws > 0) {
    workspace = at::empty({ws}, x.options().dtype(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
    p.workspace = workspace.data_ptr();
  }
  check_launch(op, kernels::cuda::rms_norm_backward(p, current_stream()));
  return {dx, dw};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) {
  RmsNormGlue<RmsNormCuda>::register_forward(m);
  m.impl("rms_norm_backward", &rms_norm_backward_cuda);
}

}  // namespace yirage
