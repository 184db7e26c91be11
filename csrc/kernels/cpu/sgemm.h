// fp32 GEMM of our own for matmul / linear on CPUs where torch's BLAS leaves half the vector width unused
// (torch-free).
//
// torch's CPU builds link MKL, which runs its AVX2 kernels on AMD CPUs: on a 2-core AVX-512 EPYC (Zen 5) torch.mm
// reached about 110 GFLOP/s a core where AVX-512 FMA tiles reach about 265 (benchmarks/cpu/gemm_avx512_bench.cpp).
// This is the classic blocked GEMM (Goto / BLIS): B in panels of kKc rows x kNc columns packed into 64-column
// micro-panels (one micro-panel, kKc x 64 floats, stays in L1), A in blocks of kMc rows packed 6 rows at a time
// (L2), the 6 x 64 register tile of gemm_f32_avx512.h over them, C read and written once per kKc block of K.
// Operands of any strides: packing reads rows, columns (16 x 16 transposes) or single elements as they lie.
#pragma once

#include <cstdint>

#include "types.h"

namespace yirage::kernels::cpu {

struct SgemmArgs {
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;  // element (i, p) of A (m x k) at a[i * a_rs + p * a_cs]
  int64_t a_rs = 0, a_cs = 0;
  const float* b = nullptr;  // element (p, j) of B (k x n) at b[p * b_rs + j * b_cs]
  int64_t b_rs = 0, b_cs = 0;
  float* c = nullptr;  // C (m x n), rows of contiguous elements, row stride ldc
  int64_t ldc = 0;
  bool accumulate = false;  // C += A B; else C = A B (C not read)
};

// Whether sgemm() runs here and is the better choice over torch's BLAS: an x86-64 CPU from AMD with AVX-512,
// the active CPU variant (isa.h) one of the AVX-512 ones, and YIRAGE_CPU_SGEMM not 0 (read once). MKL runs
// AVX-512 kernels of its own on Intel CPUs, so those keep it.
bool sgemm_preferred();

// C = A B (or C += A B), one thread (callers split the work), with per-thread packing buffers. Returns
// invalid_argument when the AVX-512 code cannot run here or sizes are negative.
Status sgemm(const SgemmArgs& args);

}  // namespace yirage::kernels::cpu
