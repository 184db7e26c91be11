// Parts of linear on CUDA that are not cuBLAS (torch-free; kernels in linear_epilogue.cu and linear_skinny.cu):
// the forward epilogue (bias and activation) where the GEMM's own epilogue does not provide it, the backward's
// dz = grad_out * act'(saved) with per-block column partial sums for the bias gradient, and the skinny GEMM
// (a few rows of x: decode) with bias and activation fused into its epilogue.
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

// out (M, N) = act(x (M, K) @ w (N, K)^T + bias) in one kernel for M <= kLinearSkinnyMaxRows (fp16 / bf16, tensor
// cores of the sm_80 class, fp32 accumulation): blocks of 16 or 32 output columns, each block's warps splitting K
// and reading the weight rows once with 16-byte loads; bias and activation applied to the fp32 sums before the one
// rounding; pre (when set) receives z + bias rounded. Preconditions (linear_skinny_ok): x, w 16-byte aligned with
// rows ldx / ldw elements apart (multiples of 8) and contiguous last dims, K a multiple of 8, out and pre
// contiguous rows of N, bias contiguous. cudaErrorNotSupported on ROCm (the caller keeps the BLAS path there).
constexpr int64_t kLinearSkinnyMaxRows = 16;

struct LinearSkinny {
  const void* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  int64_t ldw = 0;
  const void* bias = nullptr;
  void* out = nullptr;
  void* pre = nullptr;
  int64_t m = 0, n = 0, k = 0;
  Activation act = Activation::none;
  DType dtype = DType::bf16;
};

// Whether linear_skinny takes these operands (dtype, row count, alignment; not the GPU's architecture: the
// caller checks for sm_80 or newer).
bool linear_skinny_ok(const LinearSkinny& p);
cudaError_t linear_skinny(const LinearSkinny& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
