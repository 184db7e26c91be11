// The CPU GEMM under matmul, linear and linear_backward: a BLAS product straight into the caller's
// preallocated output, with the fused epilogue (kernels/cpu/linear_epilogue.h) run on each block right after
// the product that wrote it.
//
// The product is ATen's CPU kernel (at::cpu::mm_out: the BLAS torch links, MKL or OpenBLAS, without a
// dispatcher round trip or autograd bookkeeping), handed the output (or a block of it) as `out`, so it
// allocates nothing - or, for fp32 on AMD CPUs with AVX-512, our own blocked GEMM (sgemm_fp32 below).
// Threads: the larger of M and N is split into one block per thread, each a single-threaded product followed
// by the epilogue on that block while it is in that core's cache (split_product in gemm.cpp says what was
// measured) - except bf16 / fp16 products of 32 rows or more on CPUs with AMX for that type, which are one oneDNN
// call on its own threads (matrix_engine_half). Single-threaded, the bias + activation pass costs ~0.2 ns (bias only) to ~1.2 ns (gelu) per output
// element on AVX2, against 2K / (BLAS FLOP rate) for the product.
//
// bf16/fp16 where torch has no native half GEMM (no AVX-512 / AVX512-FP16 / AVX-NE-CONVERT): torch 2.13 falls
// back to its own loops there, dot products at about a third of sgemm's speed when both operands are contiguous
// along K, a strided scalar loop about 100x slower than sgemm otherwise. Where that loses (gemm_via_fp32), we
// copy b to fp32 once and, per block of rows, a's rows, run sgemm into an fp32 scratch block, and the epilogue
// rounds that block into the output once (bias and activation see the fp32 product). Elsewhere torch's half
// GEMM runs (fp32 accumulation).
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/activation.h"

namespace yirage {

// What happens to each output block after its product.
struct GemmEpilogue {
  at::Tensor bias;  // undefined, or (N,) contiguous in the output dtype
  kernels::Activation act = kernels::Activation::none;
  at::Tensor pre;   // undefined, or (M, N) with out's row stride: receives z = product + bias
  bool any() const { return bias.defined() || act != kernels::Activation::none || pre.defined(); }
};

// Whether fp32 products run on our own blocked GEMM (kernels/cpu/sgemm.h: AMD CPUs with AVX-512, where torch's
// MKL runs AVX2 kernels) rather than torch's BLAS; blocks under 4 rows or 64 columns keep the BLAS.
bool sgemm_fp32();

// Whether a (..., M, K) @ b (..., K, N) goes through fp32 (see above; it depends on the sizes and on whether
// both operands are contiguous along K, the layout torch's half fallback handles well).
bool gemm_via_fp32(const at::Tensor& a, const at::Tensor& b);

// t in fp32, in t's own layout where it is dense (a transposed weight stays transposed: a straight copy),
// in huge pages when large (a fresh multi-megabyte buffer otherwise costs more in page faults than the copy).
at::Tensor to_fp32(const at::Tensor& t);

// out (M, N) with a contiguous last dim; a (M, K) and b (K, N) with any strides, out's dtype, or fp32 when
// gemm_via_fp32 holds (callers may convert once for many products). out = epilogue(a @ b).
void gemm_into(const char* op, const at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
               const GemmEpilogue& epilogue = {});

}  // namespace yirage
