// Hopper (sm_90a) warpgroup MMA building blocks: wgmma.mma_async with fp32 accumulators, its fences, and the
// shared-memory matrix descriptor of the 128-byte swizzled layout. Used by the sm_90a attention forward
// (attention_fwd_sm90.cuh) and backward (attention_bwd_sm90.cuh).
//
// CUDA only, and only in a device pass for sm_90a (`9.0a` in TORCH_CUDA_ARCH_LIST): wgmma has no spelling
// for other architectures, where these functions compile to nothing and the kernels using them trap. The host
// launches those kernels only where attention_fwd_sm90_ready() says their real body was built.
//
// Shared-memory layout (the descriptors below assume it): a tile of R rows x C 16-bit columns is stored as
// C / 64 panels of R rows x 128 bytes; chunk c (16 bytes) of row r of a panel sits at r * 128 + ((c ^ (r % 8))
// * 16), each panel 1024-byte aligned. That is the hardware's 128-byte swizzle (address bits 4-6 XOR bits
// 7-9), so the same bytes serve as a K-major operand (rows = M or N, columns = K) and as an MN-major one
// (rows = K, columns = N).
//
// Register layouts (PTX ISA, "wgmma .m64nNk16"): warp w of the warpgroup holds rows 16w..16w+15; lane = 4g + t.
//   Accumulator (N / 2 floats): d[4j + e] at row g + 8 (e / 2), column 8j + 2t + (e % 2) — the mma.sync C
//   layout repeated over the N / 8 column tiles.
//   A from registers (4 x 32 bits per k16 step): the mma.sync m16n8k16 A fragment; two adjacent accumulator
//   column tiles (j = 2k, 2k + 1) packed to 16 bits are exactly the A fragment of k step k.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <cuda_runtime_api.h>

#include "common.cuh"
#include "sm90_sync.cuh"  // (defines YIRAGE_SM90A_DEVICE)


namespace yirage::kernels::cuda::sm90 {

// Descriptor of a shared-memory operand in the 128-byte swizzled layout. K-major (A, or B with transpose 0):
// rows of the M / N dim 128 bytes apart, groups of 8 rows `sbo` bytes apart; `lbo` unused. MN-major (B with
// transpose 1; A likewise): rows of the K dim 128 bytes apart, groups of 8 K rows `sbo` apart, 64-column panels of
// the M / N dim `lbo` apart. `addr`: the shared-memory address of the k step's first element.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (1ull << 62);  // layout type 1: 128-byte swizzle
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of `rows` rows in the layout above.
__device__ __forceinline__ uint32_t sw128_offset(int row, int chunk, int rows) {
  return static_cast<uint32_t>((chunk >> 3) * rows * 128 + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
}
// Thread tid % 128 of warpgroup `wg`: copies the warpgroup's 64 rows (64 wg .. 64 wg + 63) of a kRows-row tile of kD
// columns at `tile` (the layout above) to rows m0 + 64 wg .. of `dst` (kD elements a row, contiguous), 16 bytes at
// a time, rows at or past `rows` left out. The caller has made the tile's rows visible (a barrier of the warpgroup).
template <typename T, int kD, int kRows>
__device__ __forceinline__ void store_tile_rows(uint32_t tile, int tid, int wg, int m0, int rows, T* dst) {
  constexpr int kChunks = kD / 8;
  for (int c = tid & 127; c < 64 * kChunks; c += 128) {
    const int row = wg * 64 + c / kChunks, ch = c % kChunks;
    const int r = m0 + row;
    if (r >= rows) continue;
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(tile + sw128_offset(row, ch, kRows)));
    *reinterpret_cast<uint4*>(dst + static_cast<int64_t>(r) * kD + ch * 8) = v;
  }
}
// The same as a tile type, for code that takes one (BwdQueryWalk's Layout).
template <int kRows>
struct PanelTile {
  __device__ __forceinline__ static uint32_t offset(int row, int chunk) { return sw128_offset(row, chunk, kRows); }
};

// Orders this thread's register writes before the wgmmas that follow read them (accumulators, A fragments).
__device__ __forceinline__ void wgmma_fence() {
#if YIRAGE_SM90A_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if YIRAGE_SM90A_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most N of the warpgroup's committed wgmma groups are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if YIRAGE_SM90A_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Makes writes of the generic proxy to shared memory (cp.async, st.shared) visible to wgmma's reads (the
// async proxy); then a barrier.
__device__ __forceinline__ void fence_proxy_async() {
#if YIRAGE_SM90A_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Pins an accumulator register in place: the compiler may not move its reads or writes across this point
// (wgmma writes its accumulators asynchronously, behind the compiler's back, until wgmma_wait).
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The wrappers below spell each wgmma once, for both 16-bit input types, from these pieces:
// YIRAGE_WGMMA_R<n>: the n accumulator operands' text "{%0, ..., %(n-1)}" (n = N / 2 registers per thread);
// YIRAGE_WGMMA_D<n>(c, i): their constraints c(d[i]) .. c(d[i + n - 1]), c = "+f" (accumulate) or "=f" (d = A * B,
// the registers only written); YIRAGE_WGMMA_PTX: the instruction, predicate p = (scale operand != 0) choosing
// d = A * B + d or d = A * B; YIRAGE_WGMMA: that instruction for T = bf16 or f16, with the operand lists given.
#define YIRAGE_WGMMA_R32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define YIRAGE_WGMMA_R40 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39}"
#define YIRAGE_WGMMA_R64 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define YIRAGE_WGMMA_R88 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87}"
#define YIRAGE_WGMMA_R128 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define YIRAGE_WGMMA_D8(c, i) \
  c(d[i]), c(d[i + 1]), c(d[i + 2]), c(d[i + 3]), c(d[i + 4]), c(d[i + 5]), c(d[i + 6]), c(d[i + 7])
#define YIRAGE_WGMMA_D32(c, i) \
  YIRAGE_WGMMA_D8(c, i), YIRAGE_WGMMA_D8(c, i + 8), YIRAGE_WGMMA_D8(c, i + 16), YIRAGE_WGMMA_D8(c, i + 24)
#define YIRAGE_WGMMA_D40(c, i) YIRAGE_WGMMA_D32(c, i), YIRAGE_WGMMA_D8(c, i + 32)
#define YIRAGE_WGMMA_D64(c, i) YIRAGE_WGMMA_D32(c, i), YIRAGE_WGMMA_D32(c, i + 32)
#define YIRAGE_WGMMA_D88(c, i) \
  YIRAGE_WGMMA_D64(c, i), YIRAGE_WGMMA_D8(c, i + 64), YIRAGE_WGMMA_D8(c, i + 72), YIRAGE_WGMMA_D8(c, i + 80)
#define YIRAGE_WGMMA_D128(c, i) YIRAGE_WGMMA_D64(c, i), YIRAGE_WGMMA_D64(c, i + 64)
// shape: "m64nNk16"; a, b: the A operand(s) and B's descriptor; scale: the scale operand; tail: the immediates
// after "p, 1, 1" (A's transpose where A is in shared memory, then B's)
#define YIRAGE_WGMMA_PTX(shape, ty, regs, a, b, scale, tail)   \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " scale ", 0;\n"          \
  "wgmma.mma_async.sync.aligned." shape ".f32." ty "." ty " " regs ", " a ", " b ", p, 1, 1, " tail ";\n}\n"
#define YIRAGE_WGMMA(shape, regs, a, b, scale, tail, outs, ...)                                      \
  if constexpr (std::is_same_v<T, bf16>) {                                                          \
    asm volatile(YIRAGE_WGMMA_PTX(shape, "bf16", regs, a, b, scale, tail) : outs : __VA_ARGS__);   \
  } else {                                                                                          \
    static_assert(std::is_same_v<T, f16>, "wgmma: bf16 or f16 inputs");                           \
    asm volatile(YIRAGE_WGMMA_PTX(shape, "f16", regs, a, b, scale, tail) : outs : __VA_ARGS__);    \
  }

// d (+)= A * B for one k16 step, m64nNk16, fp32 accumulators (scale_d = 0: d = A * B). wgmma_ss: A and B from
// shared memory (descriptors); wgmma_rs: A from registers. kTransB = 1: B is MN-major; kTransA = 1 (wgmma_ss_n64
// and _n128): A is MN-major (rows of the K dim 128 bytes apart, as B's MN-major layout).
template <typename T, int kTransB, int kTransA = 0>
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n64k16", YIRAGE_WGMMA_R32, "%32", "%33", "%34", "%36, %35", YIRAGE_WGMMA_D32("+f", 0),
               "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB), "n"(kTransA))
#endif
}

template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n64k16", YIRAGE_WGMMA_R32, "{%32, %33, %34, %35}", "%36", "%37", "%38", YIRAGE_WGMMA_D32("+f", 0),
               "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB))
#endif
}

template <typename T, int kTransB, int kTransA = 0>
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n128k16", YIRAGE_WGMMA_R64, "%64", "%65", "%66", "%68, %67", YIRAGE_WGMMA_D64("+f", 0),
               "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB), "n"(kTransA))
#endif
}

template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n128k16", YIRAGE_WGMMA_R64, "{%64, %65, %66, %67}", "%68", "%69", "%70", YIRAGE_WGMMA_D64("+f", 0),
               "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(kTransB))
#endif
}

template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_ss_n256(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n256k16", YIRAGE_WGMMA_R128, "%128", "%129", "%130", "0, %131", YIRAGE_WGMMA_D128("+f", 0),
               "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB))
#endif
}

template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_rs_n256(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n256k16", YIRAGE_WGMMA_R128, "{%128, %129, %130, %131}", "%132", "%133", "%134",
               YIRAGE_WGMMA_D128("+f", 0), "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d),
               "n"(kTransB))
#endif
}

// The first k step of a product: d = A * B, the accumulators only written (no dependence on their old values,
// which would make the compiler define them first and serialize the wgmma pipeline).
template <typename T, int kTransB, int kTransA = 0>
__device__ __forceinline__ void wgmma_ss_n64_zero(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n64k16", YIRAGE_WGMMA_R32, "%32", "%33", "%34", "%36, %35", YIRAGE_WGMMA_D32("=f", 0),
               "l"(desc_a), "l"(desc_b), "r"(0), "n"(kTransB), "n"(kTransA))
#endif
}

template <typename T, int kTransB, int kTransA = 0>
__device__ __forceinline__ void wgmma_ss_n128_zero(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n128k16", YIRAGE_WGMMA_R64, "%64", "%65", "%66", "%68, %67", YIRAGE_WGMMA_D64("=f", 0),
               "l"(desc_a), "l"(desc_b), "r"(0), "n"(kTransB), "n"(kTransA))
#endif
}

// m64n80 (an 80-key tile of Q K^T at head dim 256) and m64n176 (a 176-key tile), as the n128 ones above.
template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_ss_n80(float (&d)[40], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n80k16", YIRAGE_WGMMA_R40, "%40", "%41", "%42", "0, %43", YIRAGE_WGMMA_D40("+f", 0),
               "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB))
#endif
}

template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_ss_n80_zero(float (&d)[40], uint64_t desc_a, uint64_t desc_b) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n80k16", YIRAGE_WGMMA_R40, "%40", "%41", "%42", "0, %43", YIRAGE_WGMMA_D40("=f", 0),
               "l"(desc_a), "l"(desc_b), "r"(0), "n"(kTransB))
#endif
}

template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_ss_n176(float (&d)[88], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n176k16", YIRAGE_WGMMA_R88, "%88", "%89", "%90", "0, %91", YIRAGE_WGMMA_D88("+f", 0),
               "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB))
#endif
}

template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_ss_n176_zero(float (&d)[88], uint64_t desc_a, uint64_t desc_b) {
#if YIRAGE_SM90A_DEVICE
  YIRAGE_WGMMA("m64n176k16", YIRAGE_WGMMA_R88, "%88", "%89", "%90", "0, %91", YIRAGE_WGMMA_D88("=f", 0),
               "l"(desc_a), "l"(desc_b), "r"(0), "n"(kTransB))
#endif
}

#undef YIRAGE_WGMMA
#undef YIRAGE_WGMMA_PTX
#undef YIRAGE_WGMMA_D128
#undef YIRAGE_WGMMA_D88
#undef YIRAGE_WGMMA_D64
#undef YIRAGE_WGMMA_D40
#undef YIRAGE_WGMMA_D32
#undef YIRAGE_WGMMA_D8
#undef YIRAGE_WGMMA_R128
#undef YIRAGE_WGMMA_R88
#undef YIRAGE_WGMMA_R64
#undef YIRAGE_WGMMA_R40
#undef YIRAGE_WGMMA_R32

// One k step of an m64 x kN product with both operands in shared memory: d = A * B on the first step (the
// accumulators only written), d += A * B after. kN = 64, 80, 128 or 176 (kTransA: only for 64 and 128); `first` is a
// constant once the k loop is unrolled.
template <typename T, int kN, int kTransB = 0, int kTransA = 0>
__device__ __forceinline__ void wgmma_ss_step(float (&d)[kN / 2], uint64_t desc_a, uint64_t desc_b, bool first) {
  static_assert(kN == 64 || kN == 128 || ((kN == 80 || kN == 176) && kTransA == 0),
                "wgmma_ss_step: m64n64 or m64n128 (A either way), m64n80, m64n176");
  if constexpr (kN == 80) {
    if (first) {
      wgmma_ss_n80_zero<T, kTransB>(d, desc_a, desc_b);
    } else {
      wgmma_ss_n80<T, kTransB>(d, desc_a, desc_b, 1);
    }
  } else if constexpr (kN == 176) {
    if (first) {
      wgmma_ss_n176_zero<T, kTransB>(d, desc_a, desc_b);
    } else {
      wgmma_ss_n176<T, kTransB>(d, desc_a, desc_b, 1);
    }
  } else if constexpr (kN == 64) {
    if (first) {
      wgmma_ss_n64_zero<T, kTransB, kTransA>(d, desc_a, desc_b);
    } else {
      wgmma_ss_n64<T, kTransB, kTransA>(d, desc_a, desc_b, 1);
    }
  } else {
    if (first) {
      wgmma_ss_n128_zero<T, kTransB, kTransA>(d, desc_a, desc_b);
    } else {
      wgmma_ss_n128<T, kTransB, kTransA>(d, desc_a, desc_b, 1);
    }
  }
}

// d += A * B for one k step of an m64 x kN product, A from registers (kN = 64, 128 or 256).
template <typename T, int kN, int kTransB>
__device__ __forceinline__ void wgmma_rs_acc(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc_b) {
  static_assert(kN == 64 || kN == 128 || kN == 256, "wgmma_rs_acc: n = 64, 128 or 256");
  if constexpr (kN == 256) {
    wgmma_rs_n256<T, kTransB>(d, a, desc_b, 1);
  } else if constexpr (kN == 128) {
    wgmma_rs_n128<T, kTransB>(d, a, desc_b, 1);
  } else {
    wgmma_rs_n64<T, kTransB>(d, a, desc_b, 1);
  }
}

// Host: whether the current device runs the Hopper kernel `kernel` (one of those built from this header):
// compute capability 9.0 and its real body built (a device pass for sm_90a; other passes compile it to a trap, a
// handful of registers, where it needs more than a hundred), unless YIRAGE_CUDA_ATTENTION_WGMMA=0 turns the
// Hopper kernels off. Asked once per device; `state` keeps the answers (0: unknown, 1: yes, -1: no).
constexpr int kMaxReadyDevices = 64;
inline bool kernel_ready(const void* kernel, std::atomic<signed char> (&state)[kMaxReadyDevices]) {
  static const bool enabled = [] {
    const char* env = std::getenv("YIRAGE_CUDA_ATTENTION_WGMMA");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  if (!enabled) return false;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxReadyDevices) {
    (void)cudaGetLastError();
    return false;
  }
  const signed char known = state[dev].load(std::memory_order_relaxed);
  if (known != 0) return known > 0;
  int major = 0, minor = 0;
  cudaFuncAttributes attr{};
  const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
                  major == 9 && minor == 0 && cudaFuncGetAttributes(&attr, kernel) == cudaSuccess &&
                  attr.numRegs >= 64;
  (void)cudaGetLastError();
  state[dev].store(ok ? 1 : -1, std::memory_order_relaxed);
  return ok;
}

}  // namespace yirage::kernels::cuda::sm90

#endif  // !YIRAGE_HIP
