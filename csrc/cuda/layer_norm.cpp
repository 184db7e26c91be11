// CUDA glue for layer_norm (ops/norm_glue.h, shared with the CPU) and layer_norm_backward: checks, device guard,
// current stream, row views, the parameter-gradient workspace (kernels/cuda/layer_norm.h).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>

#include "common/cuda_launch.h"
#include "common/rows.h"
#include "kernels/cuda/layer_norm.h"
#include "ops/layer_norm.h"
#include "ops/norm_glue.h"

namespace yirage {
namespace {

at::Tensor layer_norm_cuda_param(const std::optional<at::Tensor>& t) {
  return has(t) ? t->contiguous() : at::Tensor();
}

struct LayerNormCuda : CudaGlueBackend {
  static void forward(const char* op, const kernels::LayerNormForward& p) {
    check_launch(op, kernels::cuda::layer_norm_forward(p, current_stream()));
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_cuda(
    const at::Tensor& grad_out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
    bool weight_grad, bool bias_grad) {
  const char* op = "layer_norm_backward";
  check_layer_norm_backward(grad_out, x, weight, eps);
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t cols = x.size(-1);
  at::Tensor dx = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) {
    const auto zeros_or_none = [&](bool wanted) {
      return wanted ? at::zeros({cols}, x.options()) : at::empty({0}, x.options());
    };
    return {dx, zeros_or_none(weight_grad), zeros_or_none(bias_grad)};
  }
  at::Tensor dw = at::empty({weight_grad ? cols : 0}, x.options());
  at::Tensor db = at::empty({bias_grad ? cols : 0}, x.options());
  const Rows xr = as_rows(x), gr = as_rows(grad_out);
  const at::Tensor w = layer_norm_cuda_param(weight);
  kernels::cuda::LayerNormBackward p;
  p.grad_out = gr.tensor.const_data_ptr();
  p.grad_out_stride = gr.stride;
  p.x = xr.tensor.const_data_ptr();
  p.x_stride = xr.stride;
  p.weight = w.defined() ? w.const_data_ptr() : nullptr;
  p.grad_x = dx.data_ptr();
  p.grad_weight = weight_grad ? dw.data_ptr() : nullptr;
  p.grad_bias = bias_grad ? db.data_ptr() : nullptr;
  p.rows = x.numel() / cols;
  p.cols = cols;
  p.eps = eps;
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  // per-block partial sums of both parameter gradients (fp32; fp64 for fp64), reduced by the second pass
  at::Tensor workspace;
  const int64_t ws = kernels::cuda::layer_norm_backward_workspace(p);
  if (ws > 0) {
    workspace = at::empty({ws}, x.options().dtype(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat));
    p.workspace = workspace.data_ptr();
  }
  check_launch(op, kernels::cuda::layer_norm_backward(p, current_stream()));
  return {dx, dw, db};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) {
  LayerNormGlue<LayerNormCuda>::register_forward(m);
  m.impl("layer_norm_backward", &layer_norm_backward_cuda);
}

}  // namespace yirage
