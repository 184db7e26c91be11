// Rotary position embedding on CUDA, forward and backward.
//
// Strategy: a thread owns one unit of one token's head layout - V rotated pairs at pair index i0 (or P
// pass-through features beyond R).
// - Forward, and the backward without cos/sin gradients (rotary_flat_kernel): one unit of one head per thread,
//   the flat index split into (token, head, unit) by precomputed 32-bit divisors. Every thread's loads are
//   independent and in flight at once; cos/sin are re-read per head (L1 hits). It replaced a loop over chunks
//   of 4 heads per thread, whose loads of one head waited for the stores of the previous one and whose 64-bit
//   index arithmetic cost 88 registers: bf16 4096x32x8x128 on an H100 ran at 58% of the DRAM peak (ncu).
// - Backward with cos/sin gradients (rotary_kernel): a thread loops over all heads of q and k, summing its
//   unit's cos/sin gradients in registers.
// Consecutive threads take consecutive units of one head row (coalesced).
// 16-byte vector accesses (V = 16 bytes / element size pairs for neox, half of that for interleaved pairs)
// when every pointer, stride and R allow it; element accesses otherwise (any alignment, odd D, any R <= D).
// Inputs may be strided (one stride per batch, seq and head dim, last dim contiguous); outputs are contiguous.
// cos/sin gradients: each thread sums its unit over all heads of q and k in registers and writes one per-token
// value (no atomics; the glue sums the broadcast leading dims with at::sum), so the result is deterministic.
// Limits: a grid-stride loop covers any number of tokens; 64-bit indexing throughout.
#include "common.cuh"
#include "rotary.h"

namespace yirage::kernels::cuda {
namespace {

// N elements of T into the accumulation type: 16-byte (or smaller, N * sizeof(T)) vector accesses when VEC.
template <typename T, int N, bool VEC, typename A>
__device__ __forceinline__ void rotary_load(const T* p, A* out) {
  if constexpr (VEC) {
    constexpr int W = (N * sizeof(T) > 16) ? int(16 / sizeof(T)) : N;
#pragma unroll
    for (int c = 0; c < N; c += W) {
      const Vec<T, W> v = load_vec<T, W>(p + c);
#pragma unroll
      for (int j = 0; j < W; ++j) out[c + j] = A(to_acc(v.v[j]));
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) out[j] = A(to_acc(p[j]));
  }
}

template <typename T, int N, bool VEC, typename A>
__device__ __forceinline__ void rotary_store(T* p, const A* in) {
  if constexpr (VEC) {
    constexpr int W = (N * sizeof(T) > 16) ? int(16 / sizeof(T)) : N;
#pragma unroll
    for (int c = 0; c < N; c += W) {
      Vec<T, W> v;
#pragma unroll
      for (int j = 0; j < W; ++j) v.v[j] = from_acc<T>(in[c + j]);
      store_vec<T, W>(p + c, v);
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) p[j] = from_acc<T>(in[j]);
  }
}

// x1, x2 of V pairs starting at pair index i0 of one head row.
template <typename T, int V, bool VEC, bool INTER, typename A>
__device__ __forceinline__ void rotary_load_pairs(const T* row, int64_t i0, int64_t half, A* x1, A* x2) {
  if constexpr (INTER) {
    A xx[2 * V];
    rotary_load<T, 2 * V, VEC>(row + 2 * i0, xx);
#pragma unroll
    for (int j = 0; j < V; ++j) { x1[j] = xx[2 * j]; x2[j] = xx[2 * j + 1]; }
  } else {
    rotary_load<T, V, VEC>(row + i0, x1);
    rotary_load<T, V, VEC>(row + half + i0, x2);
  }
}

template <typename T, int V, bool VEC, bool INTER, typename A>
__device__ __forceinline__ void rotary_store_pairs(T* row, int64_t i0, int64_t half, const A* o1, const A* o2) {
  if constexpr (INTER) {
    A oo[2 * V];
#pragma unroll
    for (int j = 0; j < V; ++j) { oo[2 * j] = o1[j]; oo[2 * j + 1] = o2[j]; }
    rotary_store<T, 2 * V, VEC>(row + 2 * i0, oo);
  } else {
    rotary_store<T, V, VEC>(row + i0, o1);
    rotary_store<T, V, VEC>(row + half + i0, o2);
  }
}

// Rotates the V pairs at pair index i0 of one head row x into o (x1, x2: the loaded pairs, for the cos/sin
// gradients).
template <typename T, int V, bool VEC, bool INTER, typename A>
__device__ __forceinline__ void rotate_unit(const T* x, T* o, int64_t i0, int64_t half, const A* cs, const A* sn,
                                            A* x1, A* x2) {
  A o1[V], o2[V];
  rotary_load_pairs<T, V, VEC, INTER>(x, i0, half, x1, x2);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    o1[j] = x1[j] * cs[j] - x2[j] * sn[j];
    o2[j] = x2[j] * cs[j] + x1[j] * sn[j];
  }
  rotary_store_pairs<T, V, VEC, INTER>(o, i0, half, o1, o2);
}

// sign = +1: rotate by theta (forward); -1: by -theta (backward). No cos/sin gradients. total = tokens * heads *
// units < 2^31.
template <typename T, typename C, bool VEC, bool INTER>
__global__ void __launch_bounds__(256) rotary_flat_kernel(const RotaryParams p, FastDiv units, FastDiv heads,
                                                          FastDiv seq, uint32_t total, float sign) {
  using A = acc_t<T>;
  constexpr int V = VEC ? (INTER ? kVec<T> / 2 : kVec<T>) : 1;
  constexpr int P = VEC ? kVec<T> : 1;
  const uint32_t rot_units = uint32_t(p.half / V);
  const uint32_t qh = uint32_t(p.q.heads);
  for (uint32_t idx = blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += gridDim.x * blockDim.x) {
    const uint32_t r = units.div(idx), u = idx - r * units.d;
    const uint32_t t = heads.div(r), h = r - t * heads.d;
    const uint32_t b = seq.div(t), s = t - b * seq.d;
    const bool is_q = h < qh;
    const RotaryInput& in = is_q ? p.q : p.k;
    const int64_t hh = is_q ? h : h - qh;
    const T* x = static_cast<const T*>(in.x) + b * in.stride_b + s * in.stride_s + hh * in.stride_h;
    T* o = static_cast<T*>(in.out) + (int64_t(t) * in.heads + hh) * p.head_dim;
    if (u < rot_units) {
      const int64_t i0 = int64_t(u) * V;
      A cs[V], sn[V], x1[V], x2[V];
      rotary_load<C, V, VEC>(static_cast<const C*>(p.cos) + b * p.cos_stride_b + s * p.cos_stride_s + i0, cs);
      rotary_load<C, V, VEC>(static_cast<const C*>(p.sin) + b * p.sin_stride_b + s * p.sin_stride_s + i0, sn);
#pragma unroll
      for (int j = 0; j < V; ++j) sn[j] *= A(sign);
      rotate_unit<T, V, VEC, INTER>(x, o, i0, p.half, cs, sn, x1, x2);
    } else {
      const int64_t e0 = 2 * p.half + int64_t(u - rot_units) * P;
      if constexpr (VEC) {
        store_vec<T, P>(o + e0, load_vec<T, P>(x + e0));
      } else {
        o[e0] = x[e0];
      }
    }
  }
}

// sign = +1: rotate by theta (forward); -1: by -theta (backward).
template <typename T, typename C, bool VEC, bool INTER>
__global__ void __launch_bounds__(256) rotary_kernel(const RotaryParams p, int64_t units_per_head,
                                                     int64_t nchunks, int64_t chunk, int64_t total, float sign) {
  using A = acc_t<T>;
  constexpr int V = VEC ? (INTER ? kVec<T> / 2 : kVec<T>) : 1;  // pairs per rotation unit
  constexpr int P = VEC ? kVec<T> : 1;                          // features per pass-through unit
  const int64_t rot_units = p.half / V;
  const int64_t heads = p.q.heads + p.k.heads;
  const int64_t D = p.head_dim;
  const A sg = A(sign);
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t u = idx % units_per_head;
    const int64_t r = idx / units_per_head;
    const int64_t c = r % nchunks;
    const int64_t t = r / nchunks;
    const int64_t b = t / p.seq, s = t % p.seq;
    const int64_t h0 = c * chunk;
    const int64_t h1 = min(h0 + chunk, heads);
    if (u < rot_units) {
      const int64_t i0 = u * V;
      A cs[V], sn[V];
      rotary_load<C, V, VEC>(static_cast<const C*>(p.cos) + b * p.cos_stride_b + s * p.cos_stride_s + i0, cs);
      rotary_load<C, V, VEC>(static_cast<const C*>(p.sin) + b * p.sin_stride_b + s * p.sin_stride_s + i0, sn);
#pragma unroll
      for (int j = 0; j < V; ++j) sn[j] *= sg;
      A gc[V], gs[V];
#pragma unroll
      for (int j = 0; j < V; ++j) { gc[j] = A(0); gs[j] = A(0); }
      for (int64_t h = h0; h < h1; ++h) {
        const bool is_q = h < p.q.heads;
        const RotaryInput& in = is_q ? p.q : p.k;
        const int64_t hh = is_q ? h : h - p.q.heads;
        const T* x = static_cast<const T*>(in.x) + b * in.stride_b + s * in.stride_s + hh * in.stride_h;
        T* o = static_cast<T*>(in.out) + (t * in.heads + hh) * D;
        A x1[V], x2[V];
        rotate_unit<T, V, VEC, INTER>(x, o, i0, p.half, cs, sn, x1, x2);
        if (p.grad_cos != nullptr) {  // x is the output gradient g here, y the forward input
          const T* y = static_cast<const T*>(in.saved) + b * in.saved_stride_b + s * in.saved_stride_s +
                       hh * in.saved_stride_h;
          A y1[V], y2[V];
          rotary_load_pairs<T, V, VEC, INTER>(y, i0, p.half, y1, y2);
#pragma unroll
          for (int j = 0; j < V; ++j) {
            gc[j] += x1[j] * y1[j] + x2[j] * y2[j];
            gs[j] += x2[j] * y1[j] - x1[j] * y2[j];
          }
        }
      }
      if (p.grad_cos != nullptr) {  // nchunks == 1: this thread saw every head
        A* gcp = static_cast<A*>(p.grad_cos) + t * p.half + i0;
        A* gsp = static_cast<A*>(p.grad_sin) + t * p.half + i0;
#pragma unroll
        for (int j = 0; j < V; ++j) { gcp[j] = gc[j]; gsp[j] = gs[j]; }
      }
    } else {
      const int64_t e0 = 2 * p.half + (u - rot_units) * P;
      for (int64_t h = h0; h < h1; ++h) {
        const bool is_q = h < p.q.heads;
        const RotaryInput& in = is_q ? p.q : p.k;
        const int64_t hh = is_q ? h : h - p.q.heads;
        const T* x = static_cast<const T*>(in.x) + b * in.stride_b + s * in.stride_s + hh * in.stride_h + e0;
        T* o = static_cast<T*>(in.out) + (t * in.heads + hh) * D + e0;
        if constexpr (VEC) {
          store_vec<T, P>(o, load_vec<T, P>(x));
        } else {
          *o = *x;
        }
      }
    }
  }
}

bool rotary_heads_aligned(const RotaryInput& h, int v, bool saved) {
  if (h.heads == 0) return true;
  bool ok = aligned(h.x, 16) && aligned(h.out, 16) && h.stride_b % v == 0 && h.stride_s % v == 0 &&
            h.stride_h % v == 0;
  if (saved) {
    ok = ok && aligned(h.saved, 16) && h.saved_stride_b % v == 0 && h.saved_stride_s % v == 0 &&
         h.saved_stride_h % v == 0;
  }
  return ok;
}

template <typename T, typename C>
cudaError_t rotary_launch(const RotaryParams& p, float sign, cudaStream_t stream) {
  const int64_t tokens = p.batch * p.seq;
  const int64_t heads = p.q.heads + p.k.heads;
  if (tokens == 0 || heads == 0 || p.head_dim == 0) return cudaSuccess;
  constexpr int kv = kVec<T>;
  const int vpairs = p.interleaved ? kv / 2 : kv;  // pairs per vector unit
  const bool with_saved = p.grad_cos != nullptr;
  const int cos_bytes = int(sizeof(C)) * vpairs < 16 ? int(sizeof(C)) * vpairs : 16;
  const bool vec = p.head_dim % kv == 0 && p.half % vpairs == 0 && rotary_heads_aligned(p.q, kv, with_saved) &&
                   rotary_heads_aligned(p.k, kv, with_saved) && aligned(p.cos, cos_bytes) &&
                   aligned(p.sin, cos_bytes) && p.cos_stride_b % vpairs == 0 && p.cos_stride_s % vpairs == 0 &&
                   p.sin_stride_b % vpairs == 0 && p.sin_stride_s % vpairs == 0;
  const int v = vec ? vpairs : 1, pv = vec ? kv : 1;
  const int64_t units_per_head = p.half / v + (p.head_dim - 2 * p.half) / pv;
  constexpr int threads = 256;
  if (!with_saved && tokens * heads * units_per_head <= int64_t(0x7fffffff)) {
    const uint32_t total = uint32_t(tokens * heads * units_per_head);
    const FastDiv du{uint32_t(units_per_head)}, dh{uint32_t(heads)}, ds{uint32_t(p.seq)};
    const dim3 grid(unsigned((total + threads - 1) / threads));
    if (vec) {
      if (p.interleaved) { rotary_flat_kernel<T, C, true, true><<<grid, threads, 0, stream>>>(p, du, dh, ds, total, sign); }
      else { rotary_flat_kernel<T, C, true, false><<<grid, threads, 0, stream>>>(p, du, dh, ds, total, sign); }
    } else {
      if (p.interleaved) { rotary_flat_kernel<T, C, false, true><<<grid, threads, 0, stream>>>(p, du, dh, ds, total, sign); }
      else { rotary_flat_kernel<T, C, false, false><<<grid, threads, 0, stream>>>(p, du, dh, ds, total, sign); }
    }
    return launch_status();
  }
  const int64_t chunk = with_saved ? heads : (heads < 4 ? heads : 4);
  const int64_t nchunks = (heads + chunk - 1) / chunk;
  const int64_t total = tokens * nchunks * units_per_head;
  if (total == 0) return cudaSuccess;
  int64_t blocks = (total + threads - 1) / threads;
  if (blocks > (int64_t(1) << 22)) blocks = int64_t(1) << 22;  // grid-stride beyond
  const dim3 grid(static_cast<unsigned>(blocks));
  if (vec) {
    if (p.interleaved) { rotary_kernel<T, C, true, true><<<grid, threads, 0, stream>>>(p, units_per_head, nchunks, chunk, total, sign); }
    else { rotary_kernel<T, C, true, false><<<grid, threads, 0, stream>>>(p, units_per_head, nchunks, chunk, total, sign); }
  } else {
    if (p.interleaved) { rotary_kernel<T, C, false, true><<<grid, threads, 0, stream>>>(p, units_per_head, nchunks, chunk, total, sign); }
    else { rotary_kernel<T, C, false, false><<<grid, threads, 0, stream>>>(p, units_per_head, nchunks, chunk, total, sign); }
  }
  return launch_status();
}

cudaError_t rotary_dispatch(const RotaryParams& p, float sign, cudaStream_t stream) {
  if (p.seq <= 0 || p.batch <= 0) return cudaSuccess;
  if (p.cos_dtype == DType::f32 && (p.dtype == DType::f16 || p.dtype == DType::bf16)) {
    if (p.dtype == DType::f16) return rotary_launch<f16, float>(p, sign, stream);
    return rotary_launch<bf16, float>(p, sign, stream);
  }
  if (p.cos_dtype != p.dtype) return cudaErrorInvalidValue;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return rotary_launch<T, T>(p, sign, stream));
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t rotary_forward(const RotaryParams& p, cudaStream_t stream) {
  if (p.grad_cos != nullptr || p.grad_sin != nullptr) return cudaErrorInvalidValue;
  return rotary_dispatch(p, 1.0f, stream);
}

cudaError_t rotary_backward(const RotaryParams& p, cudaStream_t stream) {
  if ((p.grad_cos == nullptr) != (p.grad_sin == nullptr)) return cudaErrorInvalidValue;
  return rotary_dispatch(p, -1.0f, stream);
}

}  // namespace yirage::kernels::cuda
