// LayerNorm on the CPU over the last dim, forward and backward (torch-free).
//
// Strategy: one row at a time, kept in L1/L2 between passes. Forward: mean and variance in one pass over
// x - x[0] (shifted data: little cancellation, and a large common offset keeps its digits; see
// layer_norm_impl.h), then y = (x - mean) * rstd * weight + bias. Backward recomputes mean and rstd, sums g*w and
// g*w*xhat, writes dx = rstd * (g*w - sum(g*w)/N - xhat * sum(g*w*xhat)/N) and accumulates the weight
// and bias gradients into the caller's fp32 rows of partial sums. fp32 accumulation (fp64 for fp64);
// vectorized per ISA (isa.h); any row length. Rows [row_begin, row_end) per call, as rms_norm.h.
#pragma once

#include <cstdint>

#include "../norm.h"
#include "types.h"

namespace yirage::kernels::cpu {

using kernels::LayerNormForward;  // ../norm.h

struct LayerNormBackward {
  const void* grad_out = nullptr;
  int64_t grad_out_stride = 0;
  const void* x = nullptr;
  int64_t x_stride = 0;
  const void* weight = nullptr;     // null: weight of ones
  void* grad_x = nullptr;           // rows x cols, contiguous
  void* weight_grad_acc = nullptr;  // null, or `cols` accumulators (float; double for f64), added to
  void* bias_grad_acc = nullptr;    // null, or `cols` accumulators, added to
  int64_t rows = 0, cols = 0;
  double eps = 1e-5;
  DType dtype = DType::f32;
};

Status layer_norm_forward(const LayerNormForward& p, int64_t row_begin, int64_t row_end);
Status layer_norm_backward(const LayerNormBackward& p, int64_t row_begin, int64_t row_end);

}  // namespace yirage::kernels::cpu
