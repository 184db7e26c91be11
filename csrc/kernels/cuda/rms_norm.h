// RMSNorm on CUDA (torch-free entry points; the forward kernels in rms_norm.cu, the backward in
// rms_norm_bwd.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../norm.h"
#include "types.h"

namespace yirage::kernels::cuda {

// y = x * rsqrt(mean(x^2) + eps) * weight per row. With `residual`: h = x + residual rounded to the
// dtype, written to `residual_out`, and y = rms_norm(h).
using kernels::RmsNormForward;  // ../norm.h

cudaError_t rms_norm_forward(const RmsNormForward& p, cudaStream_t stream);

// grad_x = vjp of rms_norm at grad_out (+ grad_add); grad_weight = sum over rows of g * x * rstd.
struct RmsNormBackward {
  const void* grad_out = nullptr;
  int64_t grad_out_stride = 0;
  const void* x = nullptr;
  int64_t x_stride = 0;
  const void* weight = nullptr;     // null: an all-ones weight
  const void* grad_add = nullptr;   // null, or rows x cols with `grad_add_stride`
  int64_t grad_add_stride = 0;
  void* grad_x = nullptr;           // rows x cols, contiguous
  void* grad_weight = nullptr;      // null (not wanted) or `cols` elements
  // Scratch for the weight gradient's partial sums: rms_norm_backward_workspace(p) elements of the
  // accumulation type (float; double for f64). Needed only when grad_weight is set.
  void* workspace = nullptr;
  int64_t rows = 0, cols = 0;
  double eps = 1e-6;
  DType dtype = DType::f32;
};

// Elements of scratch rms_norm_backward(p) needs on the current device (0 when grad_weight is null).
int64_t rms_norm_backward_workspace(const RmsNormBackward& p);
cudaError_t rms_norm_backward(const RmsNormBackward& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
