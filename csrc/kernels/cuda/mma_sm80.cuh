// Tensor-core building blocks of the sm_80 class (Ampere, Ada, Hopper): mma.sync m16n8k16 with fp32
// accumulation, ldmatrix, cp.async, and the swizzled shared-memory tile they read. Used by the attention
// kernels.
//
// CUDA only: these are PTX instructions with no HIP spelling, so a ROCm build leaves out every kernel that
// includes this header (the code sits under `#if !YIRAGE_HIP`, and the glue keeps the portable kernel for
// ROCm). Device code compiled for an architecture below sm_80 traps; the glue never launches it there.
//
// Fragment layouts (PTX ISA, "mma.m16n8k16"), lane = 4 * g + t (g = lane / 4, t = lane % 4):
//   A (16 x 16, row-major), 4 registers of 2 elements: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..),
//     a3 (g+8, 2t+8..)
//   B (16 x 8, k x n), 2 registers: b0 (k = 2t..2t+1, n = g), b1 (k = 2t+8.., n = g)
//   C (16 x 8, fp32), 4 floats: c0, c1 (g, 2t..2t+1), c2, c3 (g+8, 2t..2t+1)
// Two C tiles side by side (16 x 16) hold exactly an A fragment: a0 = tile0 {c0,c1}, a1 = tile0 {c2,c3},
// a2 = tile1 {c0,c1}, a3 = tile1 {c2,c3} — the probabilities of one MMA feed the next without a shuffle.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>

#include "common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define YIRAGE_SM80_DEVICE 0  // device pass for an older GPU: the kernels compile to a trap
#else
#define YIRAGE_SM80_DEVICE 1
#endif

namespace yirage::kernels::cuda::sm80 {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; `valid` false zero-fills the destination (nothing is read, but
// `src` must still be a mapped address: pass the tensor's base pointer).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
#if YIRAGE_SM80_DEVICE
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
#endif
}
// 4-byte copy (through L1: .cg takes 16 bytes only); valid = false: zero-fills the destination, reads nothing.
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
#if YIRAGE_SM80_DEVICE
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if YIRAGE_SM80_DEVICE
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if YIRAGE_SM80_DEVICE
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// Four 8x8 matrices of 16-bit elements; lane l gives the address of row l % 8 of matrix l / 8, and
// register i receives, from matrix i, row g and columns 2t, 2t+1 (.trans: column g, rows 2t, 2t+1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
#if YIRAGE_SM80_DEVICE
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if YIRAGE_SM80_DEVICE
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

// d += a * b (16x8x16), fp32 accumulators; T is bf16 or f16.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if YIRAGE_SM80_DEVICE
  if constexpr (std::is_same_v<T, bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// Two floats rounded to T and packed into one 32-bit register (lo in the low half).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, bf16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&v));
  } else {
    return __half22float2(*reinterpret_cast<__half2*>(&v));
  }
}

// log2(e) and ln(2): the attention kernels keep scores and log-sum-exps in log2 units for exp2_approx.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.69314718055994531f;

// 2^x (PTX ex2.approx: 2^-inf = 0).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// A tile of kRows x kCols 16-bit elements in shared memory, rows of kCols / 8 chunks of 16 bytes, chunk c of
// row r stored at chunk c ^ (r % 8): the eight rows an ldmatrix reads (or a warp's 16-byte copies write) at
// one logical chunk fall in eight different bank groups. kCols must be a multiple of 64.
template <int kCols>
struct SwizzledTile {
  static_assert(kCols % 64 == 0, "a swizzled row holds a multiple of 8 chunks of 16 bytes");
  static constexpr int kChunks = kCols / 8;
  // byte offset of chunk `chunk` (16 bytes = 8 elements) of row `row`
  __device__ __forceinline__ static uint32_t offset(int row, int chunk) {
    return static_cast<uint32_t>(row * kCols * 2 + ((chunk ^ (row & 7)) << 4));
  }
};

}  // namespace yirage::kernels::cuda::sm80

#endif  // !YIRAGE_HIP
