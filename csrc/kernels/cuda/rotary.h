// Rotary position embedding on CUDA (torch-free entry points; kernels in rotary.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "types.h"

namespace yirage::kernels::cuda {

// One of q, k (or, in backward, the gradient of an output): (batch, seq, heads, head_dim) with the last dim
// contiguous and one stride per other dim. heads = 0 when absent.
struct RotaryHeads {
  const void* x = nullptr;
  int64_t heads = 0;
  int64_t stride_b = 0, stride_s = 0, stride_h = 0;
  // backward with cos/sin gradients: the forward input (q or k), same shape, its own strides
  const void* saved = nullptr;
  int64_t saved_stride_b = 0, saved_stride_s = 0, saved_stride_h = 0;
  void* out = nullptr;  // (batch, seq, heads, head_dim), contiguous
};

struct RotaryParams {
  RotaryHeads q, k;
  int64_t batch = 0, seq = 0, head_dim = 0;
  int64_t half = 0;  // R/2: pairs rotated per head (R <= head_dim)
  bool interleaved = false;
  DType dtype = DType::f32;      // q, k, outputs
  DType cos_dtype = DType::f32;  // cos, sin: dtype, or f32 for f16/bf16 inputs
  const void* cos = nullptr;     // (batch, seq, half) with the last dim contiguous (stride 0 over broadcast dims)
  const void* sin = nullptr;
  int64_t cos_stride_b = 0, cos_stride_s = 0, sin_stride_b = 0, sin_stride_s = 0;
  // backward only, optional: per-token sums over heads, (batch * seq, half) contiguous, fp32 (fp64 for fp64)
  void* grad_cos = nullptr;
  void* grad_sin = nullptr;
};

// out = x rotated by theta (neox pairs (i, i + R/2), or interleaved pairs (2i, 2i+1)); features >= R copied.
cudaError_t rotary_forward(const RotaryParams& p, cudaStream_t stream);
// out = gradient rotated by -theta; grad_cos/grad_sin (when set) as described above.
cudaError_t rotary_backward(const RotaryParams& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
