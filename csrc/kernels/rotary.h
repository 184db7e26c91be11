// The parameters of the rotary embedding kernels, shared by the CPU (cpu/rotary.h) and CUDA (cuda/rotary.h)
// entry points (torch-free). Tokens t = b * seq + s of a (batch, seq) grid; per token, `heads` rows of head_dim
// features for each input (q, then k); the first R = 2 * half features of a row are rotated, the rest copied.
#pragma once

#include <cstdint>

#include "dtype.h"

namespace yirage::kernels {

// One of q, k: forward, the input; backward, the gradient of its output (`saved` the forward input).
// (batch, seq, heads, head_dim) with the last dim contiguous and one stride per other dim.
struct RotaryInput {
  const void* x = nullptr;  // null (heads = 0): absent (backward: no gradient for this output); nothing is read
                            // or written for it
  int64_t heads = 0;
  int64_t stride_b = 0, stride_s = 0, stride_h = 0;  // elements between batches, tokens, heads of x
  const void* saved = nullptr;  // backward with cos/sin gradients: the forward input, same sizes as x
  int64_t saved_stride_b = 0, saved_stride_s = 0, saved_stride_h = 0;
  void* out = nullptr;  // (batch, seq, heads, head_dim) contiguous: the rotated rows or the input gradient
};

struct RotaryParams {
  RotaryInput q, k;
  const void* cos = nullptr;  // (batch, seq, half) with the strides below (0 where broadcast), last dim contiguous
  const void* sin = nullptr;
  int64_t cos_stride_b = 0, cos_stride_s = 0, sin_stride_b = 0, sin_stride_s = 0;
  int64_t batch = 0, seq = 0, head_dim = 0, half = 0;  // 2 * half <= head_dim
  bool interleaved = false;      // gpt-j pairs (2i, 2i + 1); neox pairs (i, i + half) otherwise
  DType dtype = DType::f32;      // q, k and the outputs
  DType cos_dtype = DType::f32;  // cos and sin: dtype, or f32 with f16/bf16 inputs
  // backward only: null, or (batch * seq, half) contiguous in the accumulation type (float; double for f64): the
  // token's cos/sin gradients summed over the heads of both inputs; every row is written
  void* grad_cos = nullptr;
  void* grad_sin = nullptr;
  bool stream_out = false;  // CPU forward: write the outputs with non-temporal stores (outputs beyond the last-level
                            // cache; set by the glue)
};

}  // namespace yirage::kernels
