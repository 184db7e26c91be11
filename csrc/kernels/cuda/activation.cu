// silu_and_mul, gelu_and_mul, gelu and their backward ops on CUDA.
//
// Strategy: one grid-stride elementwise pass over "units" of the rows x cols output: a unit is V
// consecutive output elements of one row (V = 16 bytes / element size on the vector path, 1 on the scalar
// path), so an index maps to (row, column) with one division (32-bit when the unit count fits) and
// rows may be `stride` elements apart (non-contiguous leading dims, padded rows). The gated forward reads
// the a and b halves of a row side by side (two 16-byte loads) and writes one vector; the gated backward
// writes both halves of grad_x, g*b*act'(a) and g*act(a), in the same pass. Math in fp32 (fp64 for fp64),
// rounded once to the output dtype.
// Vector path: every pointer 16-byte aligned, and either one row (a contiguous gelu: the glue passes it
// as a single row of numel elements; the last unit may be partial, handled element by element) or rows
// whose length and strides are multiples of V (gated: cols % V == 0 so the b half is aligned too). A contiguous gelu
// (forward in fp16 / bf16, backward in every type) takes the flat kernels: no unit-to-row mapping at all.
// Anything else takes the scalar path (V = 1): any alignment, any length.
// Math (what torch's CUDA kernels compute):
//   silu(a)     = a * s, s = 1 / (1 + exp(-a)); silu'(a) = s * (1 + a * (1 - s)).
//   gelu (erf)  = x * Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2, in fp32 from the fits of normal_cdf below (relative
//                 accuracy kept on the lower tail); gelu' = Phi(x) + x * exp(-x^2 / 2) / sqrt(2 pi).
//   gelu (tanh) = x / 2 * (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as x * sigmoid(2u)
//                 (no cancellation on the lower tail); the derivative s + x s (1 - s) (2u)' with a
//                 sign-symmetric sigmoid (s(1 - s) = m / (1 + m)^2, m = e^-|2u|), torch's formula rewritten.
// Non-finite inputs give what torch gives (act(-inf) = NaN, act(inf) = inf).
#include "activation.h"
#include "activation_math.cuh"
#include "common.cuh"
#include "norm_common.cuh"  // norm::dram_gbs_per_sm

namespace yirage::kernels::cuda {
namespace {

// The unit index u as (row, first column): `upr` units per row; `fdiv` divides by upr when total < 2^31.
__device__ __forceinline__ void act_unit(int64_t u, int64_t upr, const FastDiv& fdiv, bool small, int64_t* row,
                                         int64_t* col) {
  if (small) {
    const uint32_t r = fdiv.div(uint32_t(u));
    *row = r;
    *col = int64_t(uint32_t(u) - r * fdiv.d);
  } else {
    *row = u / upr;
    *col = u - *row * upr;
  }
}

// One unit of the forward: the V outputs of a whole vector (a, and b for the gated ops), or the n < V elements of a
// row's last, partial unit one by one.
template <typename T, int V, Activation K, bool GATED>
__device__ __forceinline__ Vec<T, V> act_fwd_vec(const Vec<T, V>& va, const Vec<T, V>& vb) {
  using A = acc_t<T>;
  using M = ActMath<K, sizeof(T) == 2>;
  A a[V];
  unpack(va, a);
  Vec<T, V> o;
  if constexpr (GATED) {
    A b[V];
    unpack(vb, b);
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = from_acc<T>(M::f(a[j]) * b[j]);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = from_acc<T>(M::f(a[j]));
  }
  return o;
}
template <typename T, Activation K, bool GATED>
__device__ __forceinline__ void act_fwd_tail(const T* xr, T* yr, int n, int64_t cols) {
  using A = acc_t<T>;
  using M = ActMath<K, sizeof(T) == 2>;
  for (int j = 0; j < n; ++j) {
    A f = M::f(to_acc(xr[j]));
    if constexpr (GATED) f *= to_acc(xr[cols + j]);
    yr[j] = from_acc<T>(f);
  }
}

// U units per thread, all loaded before any is computed (U > 1: the units of a thread lie blockDim.x apart).
// U = 2 for the fp32 gelu on GPUs with much DRAM bandwidth per SM (kActHighGbsPerSm; H200, kernel alone: 16384x4096
// 134.0 -> 130.8 us, 4096x8192 69.9 -> 68.2; on an H100, at the copy bandwidth with one unit, 0.4% slower); 1
// elsewhere: fp16 / bf16 ran 8-22% slower with 2 and 4 (issue-bound: more registers, fewer threads), the fp32 gated
// ops level (benchmarks/results/cuda-activation-units-h200-2026-11-26.md).
template <typename T, int V, Activation K, bool GATED, int U>
__global__ void act_fwd_kernel(ActivationForward p, int64_t upr, int64_t total, FastDiv fdiv) {
  const bool small = total <= int64_t(0x7fffffff);
  const T* x = static_cast<const T*>(p.x);
  T* out = static_cast<T*>(p.out);
  const int64_t span = int64_t(blockDim.x) * U;
  for (int64_t u0 = int64_t(blockIdx.x) * span + threadIdx.x; u0 < total; u0 += int64_t(gridDim.x) * span) {
    if constexpr (U == 1) {
      int64_t row, c;
      act_unit(u0, upr, fdiv, small, &row, &c);
      c *= V;
      const T* xr = x + row * p.x_stride + c;
      T* yr = out + row * p.cols + c;
      if (V > 1 && c + V <= p.cols) {
        const Vec<T, V> va = load_vec<T, V>(xr);
        Vec<T, V> vb{};
        if constexpr (GATED) vb = load_vec<T, V>(xr + p.cols);
        store_vec<T, V>(yr, act_fwd_vec<T, V, K, GATED>(va, vb));
      } else {
        act_fwd_tail<T, K, GATED>(xr, yr, int(p.cols - c < V ? p.cols - c : V), p.cols);
      }
    } else {
      Vec<T, V> va[U], vb[U];
      const T* xr[U];
      T* yr[U];
      int64_t cs[U];  // first column of the unit, -1 past the end
#pragma unroll
      for (int k = 0; k < U; ++k) {
        const int64_t u = u0 + k * int64_t(blockDim.x);
        cs[k] = -1;
        if (u < total) {
          int64_t row, c;
          act_unit(u, upr, fdiv, small, &row, &c);
          c *= V;
          cs[k] = c;
          xr[k] = x + row * p.x_stride + c;
          yr[k] = out + row * p.cols + c;
          if (c + V <= p.cols) {
            va[k] = load_vec<T, V>(xr[k]);
            if constexpr (GATED) vb[k] = load_vec<T, V>(xr[k] + p.cols);
          }
        }
      }
#pragma unroll
      for (int k = 0; k < U; ++k) {
        const int64_t c = cs[k];
        if (c < 0) continue;
        if (c + V <= p.cols) {
          store_vec<T, V>(yr[k], act_fwd_vec<T, V, K, GATED>(va[k], vb[k]));
        } else {
          act_fwd_tail<T, K, GATED>(xr[k], yr[k], int(p.cols - c), p.cols);
        }
      }
    }
  }
}

// The contiguous, 16-byte aligned, non-gated forward (gelu of a contiguous tensor: the glue passes it as one row): the
// n elements as one flat array, unit u the V elements from u * V, indexed in 32 bits without a division; the thread
// just past the last whole unit does the partial one (n % V elements). The row-mapped kernel spends about 45
// instructions a unit on its 64-bit unit-to-row division and addressing, 5 an element of the bf16 gelu's 20 (the
// kernel is issue-bound); flat, about 15. H200, kernel alone, bf16 gelu 16384x4096 70.0 -> 65.4 us (91% -> 98% of a
// same-size copy), 4096x8192 35.6 -> 33.4; fp16 the same; fp32 (at the copy bandwidth either way; two units a
// thread there) 2% slower flat, so it keeps the row-mapped kernel
// (benchmarks/results/cuda-gelu-flat-h200-2026-11-27.md).
template <typename T, int V, Activation K>
__global__ void act_fwd_flat_kernel(const T* __restrict__ x, T* __restrict__ out, uint32_t units, int tail) {
  const uint32_t u = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t off = size_t(u) * V;
  if (u < units) {
    const Vec<T, V> va = load_vec<T, V>(x + off);
    store_vec<T, V>(out + off, act_fwd_vec<T, V, K, false>(va, va));
  } else if (u == units) {
    act_fwd_tail<T, K, false>(x + off, out + off, tail, 0);
  }
}

template <typename T, int V, Activation K, bool GATED>
__global__ void act_bwd_kernel(ActivationBackward p, int64_t upr, int64_t total, FastDiv fdiv) {
  using A = acc_t<T>;
  using M = ActMath<K, sizeof(T) == 2>;
  const bool small = total <= int64_t(0x7fffffff);
  const T* x = static_cast<const T*>(p.x);
  const T* g = static_cast<const T*>(p.grad_out);
  T* dx = static_cast<T*>(p.grad_x);
  const int64_t dx_stride = GATED ? 2 * p.cols : p.cols;
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < total; u += int64_t(gridDim.x) * blockDim.x) {
    int64_t row, c;
    act_unit(u, upr, fdiv, small, &row, &c);
    c *= V;
    const T* xr = x + row * p.x_stride + c;
    const T* gr = g + row * p.grad_out_stride + c;
    T* dr = dx + row * dx_stride + c;
    if (V > 1 && c + V <= p.cols) {
      A a[V], gv[V];
      unpack(load_vec<T, V>(xr), a);
      unpack(load_vec<T, V>(gr), gv);
      Vec<T, V> da;
      if constexpr (GATED) {
        A b[V];
        unpack(load_vec<T, V>(xr + p.cols), b);
        Vec<T, V> db;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          A f, df;
          M::f_df(a[j], &f, &df);
          da.v[j] = from_acc<T>(gv[j] * b[j] * df);
          db.v[j] = from_acc<T>(gv[j] * f);
        }
        store_vec<T, V>(dr + p.cols, db);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          A f, df;
          M::f_df(a[j], &f, &df);
          da.v[j] = from_acc<T>(gv[j] * df);
        }
      }
      store_vec<T, V>(dr, da);
    } else {
      const int n = int(p.cols - c < V ? p.cols - c : V);
      for (int j = 0; j < n; ++j) {
        A f, df;
        M::f_df(to_acc(xr[j]), &f, &df);
        const A gj = to_acc(gr[j]);
        if constexpr (GATED) {
          dr[j] = from_acc<T>(gj * to_acc(xr[p.cols + j]) * df);
          dr[p.cols + j] = from_acc<T>(gj * f);
        } else {
          dr[j] = from_acc<T>(gj * df);
        }
      }
    }
  }
}

// The backward's flat form (x, grad_out and grad_x contiguous and 16-byte aligned, non-gated), as act_fwd_flat_kernel
// (H200, kernel alone: gelu backward bf16 / fp16 1.01-1.03x, 98-101% of a same-size copy; fp32 level).
template <typename T, int V, Activation K>
__global__ void act_bwd_flat_kernel(const T* __restrict__ x, const T* __restrict__ g, T* __restrict__ dx,
                                    uint32_t units, int tail) {
  using A = acc_t<T>;
  using M = ActMath<K, sizeof(T) == 2>;
  const uint32_t u = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t off = size_t(u) * V;
  const int n = u < units ? V : u == units ? tail : 0;
  if (n == V) {
    A a[V], gv[V];
    unpack(load_vec<T, V>(x + off), a);
    unpack(load_vec<T, V>(g + off), gv);
    Vec<T, V> da;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      A f, df;
      M::f_df(a[j], &f, &df);
      da.v[j] = from_acc<T>(gv[j] * df);
    }
    store_vec<T, V>(dx + off, da);
  } else {
    for (int j = 0; j < n; ++j) {
      A f, df;
      M::f_df(to_acc(x[off + j]), &f, &df);
      dx[off + j] = from_acc<T>(to_acc(g[off + j]) * df);
    }
  }
}

constexpr int kActThreads = 256;

// Units per row and the grid for `rows` rows of `cols` elements, V per unit, `units_per_thread` a thread.
struct ActGrid {
  int64_t upr = 0, total = 0;
  FastDiv fdiv;  // by upr, when total < 2^31
  unsigned blocks = 0;
};

ActGrid act_grid(int64_t rows, int64_t cols, int v, int units_per_thread = 1) {
  ActGrid g;
  g.upr = (cols + v - 1) / v;
  g.total = rows * g.upr;
  if (g.total <= int64_t(0x7fffffff)) g.fdiv = FastDiv(uint32_t(g.upr));
  const int64_t per_block = int64_t(kActThreads) * units_per_thread;
  const int64_t blocks = (g.total + per_block - 1) / per_block;
  g.blocks = unsigned(blocks < 0x7fffffff ? blocks : 0x7fffffff);
  return g;
}

// Rows start 16-byte aligned and hold whole vectors (or there is one row: its tail is done per element).
bool act_rows_vec(int64_t rows, int64_t cols, int64_t stride, int v) {
  return rows == 1 || (cols % v == 0 && stride % v == 0);
}

// DRAM bandwidth per SM (GB/s) from which the fp32 gelu takes two units per thread (act_fwd_kernel): an H100 has
// 25.4, an H200 36.5.
constexpr double kActHighGbsPerSm = 30.0;

template <typename T, int V, bool GATED, int U>
cudaError_t act_fwd_launch_units(const ActivationForward& p, cudaStream_t stream) {
  const ActGrid g = act_grid(p.rows, p.cols, V, U);
  auto launch = [&](auto kernel) { kernel<<<g.blocks, kActThreads, 0, stream>>>(p, g.upr, g.total, g.fdiv); };
  switch (p.act) {
    case Activation::silu: launch(act_fwd_kernel<T, V, Activation::silu, GATED, U>); break;
    case Activation::gelu: launch(act_fwd_kernel<T, V, Activation::gelu, GATED, U>); break;
    case Activation::gelu_tanh: launch(act_fwd_kernel<T, V, Activation::gelu_tanh, GATED, U>); break;
    default: return cudaErrorInvalidValue;
  }
  return launch_status();
}

// Whole units and the partial one of a flat (contiguous) n elements, when the flat kernels' 32-bit indices hold them.
struct ActFlat {
  uint32_t units = 0;
  int tail = 0;
  bool ok = false;
};
ActFlat act_flat(int64_t n, int v) {
  ActFlat f;
  f.ok = n / v < int64_t(0x7fff0000);
  f.units = uint32_t(n / v);
  f.tail = int(n % v);
  return f;
}

template <typename T, int V, Activation K>
cudaError_t act_fwd_flat_launch(const ActivationForward& p, const ActFlat& f, cudaStream_t stream) {
  const unsigned blocks = (f.units + 1 + kActThreads - 1) / kActThreads;  // + 1: the partial unit's thread
  act_fwd_flat_kernel<T, V, K>
      <<<blocks, kActThreads, 0, stream>>>(static_cast<const T*>(p.x), static_cast<T*>(p.out), f.units, f.tail);
  return launch_status();
}

template <typename T, int V, bool GATED>
cudaError_t act_fwd_launch(const ActivationForward& p, cudaStream_t stream) {
  if constexpr (V > 1 && !GATED && sizeof(T) == 2) {
    const ActFlat f = act_flat(p.rows * p.cols, V);
    if (f.ok && (p.rows == 1 || p.x_stride == p.cols)) {
      switch (p.act) {
        case Activation::gelu: return act_fwd_flat_launch<T, V, Activation::gelu>(p, f, stream);
        case Activation::gelu_tanh: return act_fwd_flat_launch<T, V, Activation::gelu_tanh>(p, f, stream);
        default: break;  // silu: gated only
      }
    }
  }
  if constexpr (V == 4 && std::is_same_v<T, float> && !GATED) {
    if (norm::dram_gbs_per_sm() >= kActHighGbsPerSm) return act_fwd_launch_units<T, V, GATED, 2>(p, stream);
  }
  return act_fwd_launch_units<T, V, GATED, 1>(p, stream);
}

template <typename T, int V, Activation K>
cudaError_t act_bwd_flat_launch(const ActivationBackward& p, const ActFlat& f, cudaStream_t stream) {
  const unsigned blocks = (f.units + 1 + kActThreads - 1) / kActThreads;
  act_bwd_flat_kernel<T, V, K><<<blocks, kActThreads, 0, stream>>>(
      static_cast<const T*>(p.x), static_cast<const T*>(p.grad_out), static_cast<T*>(p.grad_x), f.units, f.tail);
  return launch_status();
}

template <typename T, int V, bool GATED>
cudaError_t act_bwd_launch(const ActivationBackward& p, cudaStream_t stream) {
  if constexpr (V > 1 && !GATED) {
    const ActFlat f = act_flat(p.rows * p.cols, V);
    if (f.ok && (p.rows == 1 || (p.x_stride == p.cols && p.grad_out_stride == p.cols))) {
      switch (p.act) {
        case Activation::gelu: return act_bwd_flat_launch<T, V, Activation::gelu>(p, f, stream);
        case Activation::gelu_tanh: return act_bwd_flat_launch<T, V, Activation::gelu_tanh>(p, f, stream);
        default: break;  // silu: gated only
      }
    }
  }
  const ActGrid g = act_grid(p.rows, p.cols, V);
  auto launch = [&](auto kernel) { kernel<<<g.blocks, kActThreads, 0, stream>>>(p, g.upr, g.total, g.fdiv); };
  switch (p.act) {
    case Activation::silu: launch(act_bwd_kernel<T, V, Activation::silu, GATED>); break;
    case Activation::gelu: launch(act_bwd_kernel<T, V, Activation::gelu, GATED>); break;
    case Activation::gelu_tanh: launch(act_bwd_kernel<T, V, Activation::gelu_tanh, GATED>); break;
    default: return cudaErrorInvalidValue;
  }
  return launch_status();
}

template <typename T>
cudaError_t act_forward_typed(const ActivationForward& p, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const bool vec = aligned(p.x, 16) && aligned(p.out, 16) && act_rows_vec(p.rows, p.cols, p.x_stride, V) &&
                   (!p.gated || p.cols % V == 0);
  if (p.gated) return vec ? act_fwd_launch<T, V, true>(p, stream) : act_fwd_launch<T, 1, true>(p, stream);
  return vec ? act_fwd_launch<T, V, false>(p, stream) : act_fwd_launch<T, 1, false>(p, stream);
}

template <typename T>
cudaError_t act_backward_typed(const ActivationBackward& p, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const bool vec = aligned(p.x, 16) && aligned(p.grad_out, 16) && aligned(p.grad_x, 16) &&
                   act_rows_vec(p.rows, p.cols, p.x_stride, V) && act_rows_vec(p.rows, p.cols, p.grad_out_stride, V) &&
                   (!p.gated || p.cols % V == 0);
  if (p.gated) return vec ? act_bwd_launch<T, V, true>(p, stream) : act_bwd_launch<T, 1, true>(p, stream);
  return vec ? act_bwd_launch<T, V, false>(p, stream) : act_bwd_launch<T, 1, false>(p, stream);
}

}  // namespace

cudaError_t activation_forward(const ActivationForward& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return act_forward_typed<T>(p, stream));
  return cudaErrorInvalidValue;
}

cudaError_t activation_backward(const ActivationBackward& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return act_backward_typed<T>(p, stream));
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
