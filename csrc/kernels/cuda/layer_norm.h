// LayerNorm on CUDA (torch-free entry points; the forward kernels in layer_norm.cu, the backward in
// layer_norm_bwd.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../norm.h"
#include "types.h"

namespace yirage::kernels::cuda {

// y = (x - mean) * rsqrt(var + eps) * weight + bias per row (biased variance).
using kernels::LayerNormForward;  // ../norm.h

cudaError_t layer_norm_forward(const LayerNormForward& p, cudaStream_t stream);

// grad_x = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)); grad_weight = sum over rows of g * xhat;
// grad_bias = sum over rows of g.
struct LayerNormBackward {
  const void* grad_out = nullptr;
  int64_t grad_out_stride = 0;
  const void* x = nullptr;
  int64_t x_stride = 0;
  const void* weight = nullptr;     // null: an all-ones weight
  void* grad_x = nullptr;           // rows x cols, contiguous
  void* grad_weight = nullptr;      // null (not wanted) or `cols` elements
  void* grad_bias = nullptr;        // null (not wanted) or `cols` elements
  // Scratch for the partial sums of both parameter gradients: layer_norm_backward_workspace(p) elements
  // of the accumulation type (float; double for f64). Needed when grad_weight or grad_bias is set.
  void* workspace = nullptr;
  int64_t rows = 0, cols = 0;
  double eps = 1e-5;
  DType dtype = DType::f32;
};

// Elements of scratch layer_norm_backward(p) needs on the current device (0 when no parameter gradient).
int64_t layer_norm_backward_workspace(const LayerNormBackward& p);
cudaError_t layer_norm_backward(const LayerNormBackward& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
