// CUDA / HIP portability: the only place that knows the warp width and the shuffle signatures differ.
//
// Sources stay hipify-clean: torch's hipify turns cuda* runtime names and headers into hip* ones; what it
// cannot translate (warp width 32 vs 64, 32- vs 64-bit lane masks of the *_sync shuffles) is decided here
// at compile time. No raw PTX: every intrinsic used has a HIP equivalent.
// A <<<...>>> launch goes in a braced block or on its own line: hipify's rewrite into hipLaunchKernelGGL drops
// the space before the kernel name, so `else k<<<g, b>>>(p);` becomes the identifier `elsehipLaunchKernelGGL`.
// `make hip-check` hipifies and compiles the kernels with HIP 5.2's hipcc.
#pragma once

#if defined(__HIPCC__) || defined(USE_ROCM)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#if __has_include(<hip/hip_bf16.h>)  // ROCm 5.7+: __hip_bfloat16 with the CUDA-named conversions
#include <hip/hip_bf16.h>
#define YIRAGE_HIP_BF16_CLASS 0
#else  // older HIP (5.2, Debian's): only the hip_bfloat16 class (common.cuh picks the type)
#include <hip/hip_bfloat16.h>
#define YIRAGE_HIP_BF16_CLASS 1
#endif
#define YIRAGE_HIP 1
#else
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define YIRAGE_HIP 0
#endif

namespace yirage::kernels::cuda {

#if YIRAGE_HIP
#if defined(__GFX9__) || !defined(__AMDGCN_WAVEFRONT_SIZE)
constexpr int kWarpSize = 64;  // CDNA (gfx9): 64-wide wavefronts
#else
constexpr int kWarpSize = __AMDGCN_WAVEFRONT_SIZE;
#endif
#else
constexpr int kWarpSize = 32;
#endif

// Butterfly shuffle over the whole warp (every lane participates).
template <typename T>
__device__ __forceinline__ T shfl_xor(T v, int lane_mask) {
#if YIRAGE_HIP
  return __shfl_xor(v, lane_mask, kWarpSize);
#else
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, kWarpSize);
#endif
}

template <typename T>
__device__ __forceinline__ T shfl(T v, int src_lane) {
#if YIRAGE_HIP
  return __shfl(v, src_lane, kWarpSize);
#else
  return __shfl_sync(0xffffffffu, v, src_lane, kWarpSize);
#endif
}

// Whether `pred` holds for any lane of the warp (every lane participates).
__device__ __forceinline__ bool warp_any(bool pred) {
#if YIRAGE_HIP
  return __any(pred);
#else
  return __any_sync(0xffffffffu, pred);
#endif
}

}  // namespace yirage::kernels::cuda
