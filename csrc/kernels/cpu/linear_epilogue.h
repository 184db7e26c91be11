// The epilogue of a GEMM on the CPU (torch-free): bias and activation applied to a block of output rows
// right after the GEMM that produced them, and the backward's first step, dz = grad_out * act'(z).
//
// Strategy: the GEMM itself is BLAS (the glue calls it); these loops make one pass over the block it just
// wrote, while it is still in cache: forward z = gemm + bias, optionally stored (the backward's saved
// pre-activation), out = act(z), converted to the output dtype once; backward dz = g * act'(saved) and the
// bias gradient's column sums in the same pass. Vectorized per ISA (isa.h), any row length; fp32 math (fp64
// for fp64). The GEMM result may be fp32 scratch (the glue's fp32 path for bf16/fp16) or the output itself
// (in place). The activations and their derivatives are the activation kernels' (activation.h: vexp, a
// normal CDF with relative accuracy on its lower tail, tanh through a sigmoid; fp64 lanes use std::erfc /
// std::exp). Rows [row_begin, row_end) per call, for at::parallel_for.
#pragma once

#include <cstdint>

#include "../activation.h"
#include "types.h"

namespace yirage::kernels::cpu {

using kernels::Activation;

struct LinearEpilogue {
  const void* in = nullptr;  // rows x cols GEMM result (row stride in_stride), or null for zeros (K = 0)
  int64_t in_stride = 0;
  DType in_dtype = DType::f32;  // f32 (fp32 scratch) or `dtype`
  const void* bias = nullptr;   // null or `cols` contiguous elements of `dtype`
  void* pre = nullptr;          // null, or rows x cols (row stride out_stride): z = in + bias, in `dtype`
  void* out = nullptr;          // rows x cols (row stride out_stride): act(z), in `dtype`; may be `in` itself
  int64_t out_stride = 0;
  int64_t rows = 0, cols = 0;
  Activation act = Activation::none;
  DType dtype = DType::f32;
};

struct LinearActGrad {
  const void* grad_out = nullptr;  // rows x cols, row stride grad_stride
  int64_t grad_stride = 0;
  const void* saved = nullptr;  // rows x cols (row stride saved_stride): z for gelu/gelu_tanh/silu, the forward
  int64_t saved_stride = 0;     // output for relu (relu' = out > 0), unused for none
  void* grad_pre = nullptr;     // null, or rows x cols contiguous: dz = grad_out * act'(z), in `dtype`
  void* bias_grad_acc = nullptr;  // null, or `cols` accumulators (float; double for f64): column sums of dz
  int64_t rows = 0, cols = 0;
  Activation act = Activation::none;
  DType dtype = DType::f32;
};

Status linear_epilogue(const LinearEpilogue& p, int64_t row_begin, int64_t row_end);
Status linear_act_grad(const LinearActGrad& p, int64_t row_begin, int64_t row_end);

}  // namespace yirage::kernels::cpu
