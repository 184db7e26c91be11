// Device-side building blocks of the CUDA kernels (torch-free): element conversions, 16-byte vectors,
// warp and block reductions, the dtype switch and the launch-error check.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "compat.cuh"
#include "types.h"

namespace yirage::kernels::cuda {

#if YIRAGE_HIP && YIRAGE_HIP_BF16_CLASS
using bf16 = hip_bfloat16;  // HIP before 5.7: converts through its float constructor / operator (RNE)
using f16 = __half;
#elif YIRAGE_HIP
using bf16 = __hip_bfloat16;
using f16 = __half;
#else
using bf16 = __nv_bfloat16;
using f16 = __half;
#endif

// Accumulation type: float for fp32/fp16/bf16, double for double.
template <typename T> struct Acc { using type = float; };
template <> struct Acc<double> { using type = double; };
template <typename T> using acc_t = typename Acc<T>::type;

__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(f16 v) { return __half2float(v); }
#if YIRAGE_HIP && YIRAGE_HIP_BF16_CLASS
__device__ __forceinline__ float to_acc(bf16 v) { return static_cast<float>(v); }
#else
__device__ __forceinline__ float to_acc(bf16 v) { return __bfloat162float(v); }
#endif

template <typename T> __device__ __forceinline__ T from_acc(float v);
template <> __device__ __forceinline__ float from_acc<float>(float v) { return v; }
template <> __device__ __forceinline__ f16 from_acc<f16>(float v) { return __float2half_rn(v); }
#if YIRAGE_HIP && YIRAGE_HIP_BF16_CLASS
template <> __device__ __forceinline__ bf16 from_acc<bf16>(float v) { return bf16(v); }
#else
template <> __device__ __forceinline__ bf16 from_acc<bf16>(float v) { return __float2bfloat16_rn(v); }
#endif
template <typename T> __device__ __forceinline__ T from_acc(double v);
template <> __device__ __forceinline__ double from_acc<double>(double v) { return v; }

// N elements of T loaded or stored as one access (16 bytes for N = 16 / sizeof(T)).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Elements per 16-byte access.
template <typename T> constexpr int kVec = 16 / sizeof(T);

template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}
// A 16-byte Vec is stored with one 16-byte instruction. Left to the compiler, the struct copy was split: into
// eight 2-byte stores for 16-bit class types filled element by element, and into four 4-byte stores for
// some of the unrolled vectors of a row even after packing (seen in the PTX of the norm and softmax kernels).
// On CUDA the store is written as st.global.v4.b32; HIP packs the pairs into 32-bit words and stores a uint4.
template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
  if constexpr (sizeof(T) * N == 16 && sizeof(T) <= 4) {
    uint32_t w[4];
    if constexpr (sizeof(T) == 2) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        uint16_t lo, hi;
        __builtin_memcpy(&lo, &v.v[2 * i], 2);
        __builtin_memcpy(&hi, &v.v[2 * i + 1], 2);
        w[i] = uint32_t(lo) | (uint32_t(hi) << 16);  // little-endian: element 2i at the lower address
      }
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) __builtin_memcpy(&w[i], &v.v[i], 4);
    }
#if YIRAGE_HIP
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
#else
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
#endif
  } else {
    *reinterpret_cast<Vec<T, N>*>(p) = v;
  }
}

// A zero the compiler cannot see through (a volatile move, kept where it stands in a loop body): added to the address
// of a load_vec_hinted (below) inside a loop, it keeps the load from being hoisted out of the loop as loop-invariant
// (the layer_norm forward's weight and bias: hoisted above its row loop they held 32 registers for the whole kernel
// and spilled).
__device__ __forceinline__ int opaque_zero() {
#if !YIRAGE_HIP && defined(__CUDA_ARCH__)
  int z;
  asm volatile("mov.b32 %0, 0;" : "=r"(z));
  return z;
#else
  return 0;
#endif
}

// Loads of data every block reads again (a norm's weight and bias, read once per row) under an L2 evict_last
// policy, so that the streamed rows do not push them out of L2 (torch.compile's kernels ask the same for such
// loads): norm forwards level to 7% faster, kernel alone on an H200
// (benchmarks/results/cuda-norm-param-evict-h200-2026-11-26.md).
// CUDA sm_80+: createpolicy once per thread (l2_keep_policy), then ld.global with L1 and L2 evict_last hints, as a
// non-volatile asm without a memory clobber (the data must not be written by the kernel); older GPUs and HIP: a
// plain load. Caution: counted free of side effects, the asm may be hoisted above a test that guards it, such as
// `if (weight)`, and then read through a null weight. A layer_norm backward variant tried on 2026-11-26 (2 vectors
// per thread, staged) did exactly that, caught by the GPU tests with no weight; the shipped kernels do not (their
// tests with no weight pass under compute-sanitizer). Making the asm volatile prevents it but cost the staged
// layer_norm backward 2-5% (cuda-layer-norm-plain-sums-h200-2026-11-26.md).
// The two L2 policies (createpolicy, fraction 1.0): kLast evict_last (data read again), else evict_first (data read
// for the last time); 0 on HIP and older GPUs.
template <bool kLast>
__device__ __forceinline__ uint64_t l2_policy() {
  uint64_t pol = 0;
#if !YIRAGE_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kLast) {
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  } else {
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  }
#endif
  return pol;
}
// A 16-byte load under policy `pol` of l2_policy<kLast> and the L1 hint of the same name (HIP and older GPUs: a
// plain load).
template <bool kLast, typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec_hinted(const T* p, uint64_t pol) {
#if !YIRAGE_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(T) * N == 16) {
    uint32_t w[4];
    if constexpr (kLast) {
      asm("ld.global.L1::evict_last.L2::cache_hint.v4.b32 {%0, %1, %2, %3}, [%4], %5;"
          : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
          : "l"(p), "l"(pol));
    } else {
      asm("ld.global.L1::evict_first.L2::cache_hint.v4.b32 {%0, %1, %2, %3}, [%4], %5;"
          : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
          : "l"(p), "l"(pol));
    }
    Vec<T, N> v;
    __builtin_memcpy(&v, w, 16);
    return v;
  }
#endif
  (void)pol;
  return load_vec<T, N>(p);
}
__device__ __forceinline__ uint64_t l2_keep_policy() { return l2_policy<true>(); }
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec_keep(const T* p, uint64_t pol) {
  return load_vec_hinted<true, T, N>(p, pol);
}
// Loads of data read for the last time (evict_first), the same asm form and the same caution as load_vec_keep. The
// fp32 rms_norm forward reads its row with load_vec_keep, then again with this, as torch.compile's kernel does.
__device__ __forceinline__ uint64_t l2_first_policy() { return l2_policy<false>(); }
template <typename T, int N>
__device__ __forceinline__ Vec<T, N> load_vec_first(const T* p, uint64_t pol) {
  return load_vec_hinted<false, T, N>(p, pol);
}

// The V elements of a vector in the accumulation type. bf16 pairs by bit operations on their 32-bit word (the low
// element shifted up, the high one masked: two instructions a pair, where the conversions took three).
template <typename T, int V>
__device__ __forceinline__ void unpack(const Vec<T, V>& v, acc_t<T> (&f)[V]) {
  if constexpr (std::is_same_v<T, bf16> && V % 2 == 0) {
    uint32_t u[V / 2];
    __builtin_memcpy(u, &v, sizeof(u));
#pragma unroll
    for (int i = 0; i < V / 2; ++i) {
      f[2 * i] = __uint_as_float(u[i] << 16);
      f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) f[e] = to_acc(v.v[e]);
  }
}

// Element e of a vector in the accumulation type, converted on its own (bf16: a shift or a mask of its 32-bit word,
// one instruction, where the conversion of an odd element took two); for loops that convert just in time.
template <typename T, int V>
__device__ __forceinline__ acc_t<T> elem(const Vec<T, V>& v, int e) {
  if constexpr (std::is_same_v<T, bf16> && V % 2 == 0) {
    uint32_t u;
    __builtin_memcpy(&u, &v.v[e & ~1], 4);
    return __uint_as_float((e & 1) ? (u & 0xffff0000u) : (u << 16));
  } else {
    return to_acc(v.v[e]);
  }
}

// Whether a pointer is aligned for an access of `bytes`.
__host__ __device__ __forceinline__ bool aligned(const void* p, int bytes) {
  return (reinterpret_cast<uintptr_t>(p) % bytes) == 0;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int m = kWarpSize / 2; m > 0; m /= 2) v += shfl_xor(v, m);
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int m = kWarpSize / 2; m > 0; m /= 2) v = max(v, shfl_xor(v, m));
  return v;
}

// Sum over the block; every thread gets the result. `smem` holds at least blockDim.x / kWarpSize values;
// the call ends with a barrier after reading it, so it can be reused by the next reduction. kReuse = false drops
// that barrier, for a last use of `smem` (a kernel whose reductions each have their own smem).
template <bool kReuse = true, typename T>
__device__ __forceinline__ T block_sum(T v, T* smem) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warp_sum(v);
  if (warps == 1) return v;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  T t = lane < warps ? smem[lane] : T(0);
  t = warp_sum(t);
  if constexpr (kReuse) __syncthreads();
  return t;
}

template <bool kReuse = true, typename T>
__device__ __forceinline__ T block_max(T v, T* smem) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warp_max(v);
  if (warps == 1) return v;
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  T t = lane < warps ? smem[lane] : T(-INFINITY);
  t = warp_max(t);
  if constexpr (kReuse) __syncthreads();
  return t;
}

// n / d for 0 <= n < 2^31 and 1 <= d < 2^31 as a multiply-high, an add and a shift, the divisor's magic number
// computed once on the host (Granlund-Montgomery, as PyTorch's IntDivider): about 3 instructions against a
// 32-bit division's 20 or a 64-bit one's 70, in kernels that split a flat thread index into several coordinates.
struct FastDiv {
  uint32_t d = 1, m = 1, s = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    while (s < 31 && (uint32_t(1) << s) < divisor) ++s;
    m = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << s) - divisor)) / divisor + 1);
  }
  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    return (__umulhi(n, m) + n) >> s;
#else
    return uint32_t(((uint64_t(n) * m >> 32) + n) >> s);
#endif
  }
};

// The launch's error (cudaSuccess when the kernel was queued).
inline cudaError_t launch_status() { return cudaGetLastError(); }

// Raises `kernel`'s dynamic shared memory limit to `smem` bytes once per device (0..63; others on every call):
// `done` is the caller's static word of the devices done, one per kernel and size. (The attention launches called
// cudaFuncSetAttribute before every launch until 2026-11-27: host time per call, and a call other runtimes avoid
// because it can wait for copies in flight; its GPU-side cost was not measurable apart from the change beside it,
// cuda-attention-decode-merge-h200-2026-11-27.md.) Thread-safe: two first calls both set the same value. The
// attribute belongs to the device's context: a device reset after the first launch would need it set again.
inline cudaError_t raise_smem_once(std::atomic<uint64_t>& done, const void* kernel, int smem) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return cudaGetLastError();
  const uint64_t bit = dev >= 0 && dev < 64 ? uint64_t(1) << dev : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e == cudaSuccess && bit != 0) done.fetch_or(bit, std::memory_order_release);
  return e;
}

// 2^v and 1/v with the hardware approximations and subnormal results flushed to zero (CUDA: ex2 / rcp .approx.ftz,
// one instruction each; without ftz the compiler adds a range check and a rescale around each). HIP: exp2f and a
// division. Used by the activations (activation_math.cuh) and the 16-bit softmax rows (softmax_common.cuh).
__device__ __forceinline__ float exp2_ftz(float v) {
#if YIRAGE_HIP
  return exp2f(v);
#else
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
#endif
}
__device__ __forceinline__ float rcp_ftz(float v) {
#if YIRAGE_HIP
  return 1.f / v;
#else
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
#endif
}

// Programmatic dependent launch (compute capability 9.0 and up; no-ops elsewhere and on ROCm). A kernel launched
// with launch_dependent() may be scheduled as soon as every block of the kernel before it on the stream has called
// pdl_launch_dependents() (or exited); it must call pdl_wait() before it reads what that kernel wrote: the wait
// returns once that grid has completed and its memory is visible.
__device__ __forceinline__ void pdl_launch_dependents() {
#if !YIRAGE_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if !YIRAGE_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace yirage::kernels::cuda

// Runs the statement with `T` bound to the element type of `dtype`; an unknown dtype returns
// cudaErrorInvalidValue from the enclosing function (never a silent no-op).
#define YIRAGE_CUDA_DISPATCH(dtype, T, ...)                                           \
  switch (dtype) {                                                                    \
    case ::yirage::kernels::cuda::DType::f32: { using T = float; __VA_ARGS__; break; } \
    case ::yirage::kernels::cuda::DType::f16: { using T = ::yirage::kernels::cuda::f16; __VA_ARGS__; break; } \
    case ::yirage::kernels::cuda::DType::bf16: { using T = ::yirage::kernels::cuda::bf16; __VA_ARGS__; break; } \
    case ::yirage::kernels::cuda::DType::f64: { using T = double; __VA_ARGS__; break; } \
    default: return cudaErrorInvalidValue;                                            \
  }
