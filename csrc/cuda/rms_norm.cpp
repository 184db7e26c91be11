// CUDA glue for rms_norm: checks, device guard, current stream, row views (kernels/cuda/rms_norm.h).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "common/cuda_launch.h"
#include "common/rows.h"
#include "kernels/cuda/rms_norm.h"
#include "ops/rms_norm.h"

namespace yirage {
namespace {

at::Tensor rms_norm_cuda(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  const char* op = "rms_norm";
  check_rms_norm(op, x, weight, eps);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  const Rows xr = as_rows(x);
  const at::Tensor w = has(weight) ? weight->contiguous() : at::Tensor();
  kernels::cuda::RmsNormForward p;
  p.x = xr.tensor.const_data_ptr();
  p.x_stride = xr.stride;
  p.weight = w.defined() ? w.const_data_ptr() : nullptr;
  p.out = y.data_ptr();
  p.cols = x.size(-1);
  p.rows = x.numel() / p.cols;
  p.eps = eps;
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  check_launch(op, kernels::cuda::rms_norm_forward(p, current_stream()));
  return y;
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) { m.impl("rms_norm", &rms_norm_cuda); }

}  // namespace yirage
