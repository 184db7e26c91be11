// Element-wise parts of linear on CUDA (torch-free; kernels in linear_epilogue.cu): the forward epilogue
// (bias and activation) where the GEMM's own epilogue does not provide it, and the backward's
// dz = grad_out * act'(saved) with per-block column partial sums for the bias gradient.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../activation.h"
#include "types.h"

namespace yirage::kernels::cuda {

// out = act(z + bias), pre = z + bias (when pre is set). z, pre, out: rows x cols, contiguous; out and pre may
// alias z (in place). bias: null or cols contiguous elements.
struct LinearEpilogue {
  const void* z = nullptr;
  const void* bias = nullptr;
  void* pre = nullptr;
  void* out = nullptr;
  int64_t rows = 0, cols = 0;
  Activation act = Activation::none;
  DType dtype = DType::f32;
};

cudaError_t linear_epilogue(const LinearEpilogue& p, cudaStream_t stream);

// dz = grad_out * act'(saved) (saved: z for gelu, gelu_tanh, silu; the forward output for relu; unused for
// none), written to grad_pre when set; the column sums of dz over each block's rows written to
// bias_partial[split][col] (fp32; fp64 for fp64) when set, `splits` = linear_act_grad_splits(rows, cols) rows of
// partials (the caller sums them).
struct LinearActGrad {
  const void* grad_out = nullptr;
  int64_t grad_stride = 0;  // elements between rows (last dim contiguous)
  const void* saved = nullptr;
  int64_t saved_stride = 0;
  void* grad_pre = nullptr;  // rows x cols contiguous, or null
  void* bias_partial = nullptr;
  int64_t rows = 0, cols = 0;
  Activation act = Activation::none;
  DType dtype = DType::f32;
};

int64_t linear_act_grad_splits(int64_t rows, int64_t cols);
cudaError_t linear_act_grad(const LinearActGrad& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
