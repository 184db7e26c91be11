// RMSNorm and fused residual-add + RMSNorm on the CPU, forward and backward (torch-free).
//
// Strategy: one row at a time, the row kept in L1/L2 between passes. Forward: pass 1 sums squares
// (and, fused, writes h = x + residual rounded to the element type, squaring the rounded value);
// pass 2 writes y = src * rstd * weight. Backward: sums squares, the dot product sum(g * w * x), then
// writes dx and accumulates the weight gradient into the caller's fp32 row of partial sums. fp32
// accumulation for fp32/fp16/bf16 (fp64 for fp64); vectorized per ISA (isa.h) with the tail of each
// row handled by a masked copy, so any row length (1 .. huge) works without alignment requirements.
//
// The caller (glue) splits rows across threads: every function works on rows [row_begin, row_end).
// Inputs are rows with a row stride (the last dim must be contiguous); outputs are contiguous.
#pragma once

#include <cstdint>

#include "../norm.h"
#include "types.h"

namespace yirage::kernels::cpu {

using kernels::RmsNormForward;  // ../norm.h

struct RmsNormBackward {
  const void* grad_out = nullptr;
  int64_t grad_out_stride = 0;
  const void* x = nullptr;          // the normalized input (h for the fused op)
  int64_t x_stride = 0;
  const void* weight = nullptr;     // null: weight of ones
  const void* grad_add = nullptr;   // null, or a gradient added to grad_x (the fused op's dh)
  int64_t grad_add_stride = 0;
  void* grad_x = nullptr;           // rows x cols, contiguous
  void* weight_grad_acc = nullptr;  // null, or `cols` accumulators (float; double for f64), added to
  int64_t rows = 0, cols = 0;
  double eps = 1e-6;
  DType dtype = DType::f32;
};

Status rms_norm_forward(const RmsNormForward& p, int64_t row_begin, int64_t row_end);
Status rms_norm_backward(const RmsNormBackward& p, int64_t row_begin, int64_t row_end);

}  // namespace yirage::kernels::cpu
