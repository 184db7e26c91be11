// The CPU GEMM under matmul, linear and linear_backward: a BLAS product straight into the caller's
// preallocated output, then the fused epilogue (kernels/cpu/linear_epilogue.h) over the block it just wrote.
//
// The product is ATen's CPU kernel (at::cpu::mm_out / bmm_out: the BLAS torch links, MKL or OpenBLAS, with
// no dispatcher round trip and no autograd bookkeeping), called with the output as `out`, so it allocates
// nothing. Measured on a 2-core AVX2 machine, one product over all rows with BLAS threading and then one
// epilogue pass beat row blocks with an epilogue after each: BLAS repacks the weight for every block, which
// costs more than the epilogue's pass over an output that mostly still sits in the last-level cache.
//
// bf16/fp16 where torch has no native half GEMM (no AVX-512 / AVX512-FP16 / AVX-NE-CONVERT: torch 2.13 falls
// back to a scalar loop about 100x slower than sgemm): fp32 copies of b, then per block of rows an fp32 copy
// of a's rows, sgemm into an fp32 scratch block, and the epilogue rounds that block into the output once
// (so bias and activation see the fp32 product). Elsewhere torch's own half GEMM runs (fp32 accumulation).
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
