// softmax / log_softmax and their backward ops on CUDA over any dim.
//
// Rows (inner == 1: the softmax dim is the last non-trivial one), three kernels:
//  - register, warp level: rows of up to 32 * 8 vectors. A row belongs to L = 1..32 lanes of a warp (the
//    fewest that give each lane at most N = 1, 2, 4 or 8 vectors; N a template, L a power of two at run
//    time), 256 / L rows per block. Lane l holds vectors l, l + L, ... of its row in registers (16-byte
//    loads, coalesced), so the row is read once and written once: max over the registers, butterfly
//    shuffles over the L lanes, sum of exp(x - max) the same way, then exp(x - max) / sum, or
//    (x - max) - log(sum), computed from the registers.
//  - register, block level: one row per block of up to 512 threads, 8 vectors per thread (rows up to 4096
//    vectors: 16K fp32, 32K bf16/fp16), the same two reductions over the block (shared memory).
//  - global (any longer row, and every fp64 row): one row per block of 1024 threads; pass 1 keeps an
//    online (max, sum) per thread over the row (one read), the block merges them, pass 2 re-reads the row
//    (from L2) and writes. Two reads, one write.
// The vector width V is 16 bytes when the row starts, the row strides and the row length allow it
// (input and output), else 1 (element accesses: any alignment and length; the block-level register path
// then covers rows of up to 4096 elements).
// Columns (inner > 1): a block of bx x by threads covers bx adjacent inner indices of one outer index
// (threads along x map to the contiguous inner index, so accesses are coalesced) and splits the softmax
// dim over by threads (interleaved); each thread keeps an online (max, sum), the block merges them in
// shared memory, and a second pass over the same elements writes. No transposed copy.
// Backward (from the forward's output): softmax grad_x = out * (g - sum(g * out)), log_softmax grad_x =
// g - exp(out) * sum(g); the same three row kernels (register paths hold g and out) and the column kernel,
// with a sum in place of the (max, sum) pair.
// Numerics: fp32 accumulation (fp64 for fp64); x - max keeps any finite input safe. A row whose max is
// -inf (all -inf) or +inf, or that holds a NaN, gives NaN, as torch does; the online (max, sum) skips -inf
// elements so that a thread seeing only -inf contributes 0 to a row with a finite max.
// Limits: a row is handled by one block (very long rows are fast only with many rows); more than
// 2^31 - 1 blocks is refused (cudaErrorInvalidValue).
#include "common.cuh"
#include "softmax.h"

namespace yirage::kernels::cuda {
namespace {

__device__ __forceinline__ float sm_exp(float v) { return expf(v); }
__device__ __forceinline__ double sm_exp(double v) { return exp(v); }
__device__ __forceinline__ float sm_log(float v) { return logf(v); }
__device__ __forceinline__ double sm_log(double v) { return log(v); }

template <typename A>
__device__ __forceinline__ A neg_inf() {
  return A(-INFINITY);
}

// Reductions over groups of `lanes` (a power of two <= the warp) consecutive lanes; every lane of the warp
// must call them.
template <typename A>
__device__ __forceinline__ A group_max(A v, int lanes) {
  for (int m = lanes >> 1; m > 0; m >>= 1) v = max(v, shfl_xor(v, m));
  return v;
}
template <typename A>
__device__ __forceinline__ A group_sum(A v, int lanes) {
  for (int m = lanes >> 1; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}

// Online (max, sum of exp(x - max)) update with one element. -inf is skipped (it adds exp(-inf) = 0; this
// keeps a state of only -inf at (-inf, 0) instead of NaN); NaN makes the sum NaN.
template <typename A>
__device__ __forceinline__ void online_add(A& m, A& s, A v) {
  if (v > m) {
    s = s * sm_exp(m - v) + A(1);
    m = v;
  } else if (v != neg_inf<A>()) {
    s += sm_exp(v - m);
  }
}

constexpr int kRegThreads = 512;     // block-level register kernel: at most this many threads
constexpr int kWarpRowThreads = 256;  // warp-level register kernel: threads per block
constexpr int kGlobalThreads = 1024;  // global kernel
constexpr int kColThreads = 256;      // column kernel

// ------------------------------------------------------------------------------------ forward rows

template <typename T, int V, int N, bool BLOCK, bool LOG>
__global__ void __launch_bounds__(kRegThreads) softmax_rows_reg_kernel(SoftmaxForward p, int lanes) {
  using A = acc_t<T>;
  __shared__ A smem[kRegThreads / kWarpSize];
  const int L = BLOCK ? int(blockDim.x) : lanes;
  const int lane = BLOCK ? int(threadIdx.x) : int(threadIdx.x) % lanes;
  const int64_t row = BLOCK ? int64_t(blockIdx.x) : int64_t(blockIdx.x) * (blockDim.x / lanes) + threadIdx.x / lanes;
  const bool live = row < p.outer;
  const int64_t nvec = p.dim / V;
  const T* x = static_cast<const T*>(p.x) + (live ? row : 0) * p.x_outer_stride;
  Vec<T, V> r[N];
  A mx = neg_inf<A>();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (live && i < nvec) {
      r[k] = load_vec<T, V>(x + i * V);
#pragma unroll
      for (int j = 0; j < V; ++j) mx = max(mx, to_acc(r[k].v[j]));
    }
  }
  mx = BLOCK ? block_max(mx, smem) : group_max(mx, L);
  A s = 0;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (live && i < nvec) {
#pragma unroll
      for (int j = 0; j < V; ++j) s += sm_exp(to_acc(r[k].v[j]) - mx);
    }
  }
  s = BLOCK ? block_sum(s, smem) : group_sum(s, L);
  if (!live) return;
  const A f = LOG ? sm_log(s) : A(1) / s;
  T* y = static_cast<T*>(p.out) + row * p.dim;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (i < nvec) {
      Vec<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A z = to_acc(r[k].v[j]) - mx;
        o.v[j] = from_acc<T>(LOG ? z - f : sm_exp(z) * f);
      }
      store_vec<T, V>(y + i * V, o);
    }
  }
}

template <typename T, int V, bool LOG>
__global__ void __launch_bounds__(kGlobalThreads) softmax_rows_global_kernel(SoftmaxForward p) {
  using A = acc_t<T>;
  __shared__ A smem[kGlobalThreads / kWarpSize];
  const int64_t row = blockIdx.x;
  const int64_t nvec = p.dim / V;
  const T* x = static_cast<const T*>(p.x) + row * p.x_outer_stride;
  A m = neg_inf<A>(), s = 0;
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const Vec<T, V> a = load_vec<T, V>(x + i * V);
#pragma unroll
    for (int j = 0; j < V; ++j) online_add(m, s, to_acc(a.v[j]));
  }
  const A mx = block_max(m, smem);
  // a thread without elements (m = -inf, s = 0) adds 0 unless the whole row is -inf (then NaN, wanted)
  s = block_sum(s * sm_exp(m - mx), smem);
  const A f = LOG ? sm_log(s) : A(1) / s;
  T* y = static_cast<T*>(p.out) + row * p.dim;
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const Vec<T, V> a = load_vec<T, V>(x + i * V);
    Vec<T, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A z = to_acc(a.v[j]) - mx;
      o.v[j] = from_acc<T>(LOG ? z - f : sm_exp(z) * f);
    }
    store_vec<T, V>(y + i * V, o);
  }
}

// --------------------------------------------------------------------------------- forward columns

template <typename T, bool LOG>
__global__ void __launch_bounds__(kColThreads) softmax_cols_kernel(SoftmaxForward p, int64_t tiles) {
  using A = acc_t<T>;
  __shared__ A sm[kColThreads], ss[kColThreads];
  const int bx = blockDim.x, by = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t o = blockIdx.x / tiles;
  const int64_t i = (blockIdx.x % tiles) * bx + tx;
  const bool live = i < p.inner;
  const T* x = static_cast<const T*>(p.x) + o * p.x_outer_stride + i;
  A m = neg_inf<A>(), s = 0;
  if (live)
    for (int64_t d = ty; d < p.dim; d += by) online_add(m, s, to_acc(x[d * p.x_dim_stride]));
  sm[ty * bx + tx] = m;
  ss[ty * bx + tx] = s;
  __syncthreads();
  A mx = neg_inf<A>();
  for (int t = 0; t < by; ++t) mx = max(mx, sm[t * bx + tx]);
  A sum = 0;
  for (int t = 0; t < by; ++t) sum += ss[t * bx + tx] * sm_exp(sm[t * bx + tx] - mx);
  if (!live) return;
  const A f = LOG ? sm_log(sum) : A(1) / sum;
  T* y = static_cast<T*>(p.out) + o * p.dim * p.inner + i;
  for (int64_t d = ty; d < p.dim; d += by) {
    const A z = to_acc(x[d * p.x_dim_stride]) - mx;
    y[d * p.inner] = from_acc<T>(LOG ? z - f : sm_exp(z) * f);
  }
}

// ----------------------------------------------------------------------------------- backward rows

template <typename T, int V, int N, bool BLOCK, bool LOG>
__global__ void __launch_bounds__(kRegThreads) softmax_bwd_rows_reg_kernel(SoftmaxBackward p, int lanes) {
  using A = acc_t<T>;
  __shared__ A smem[kRegThreads / kWarpSize];
  const int L = BLOCK ? int(blockDim.x) : lanes;
  const int lane = BLOCK ? int(threadIdx.x) : int(threadIdx.x) % lanes;
  const int64_t row = BLOCK ? int64_t(blockIdx.x) : int64_t(blockIdx.x) * (blockDim.x / lanes) + threadIdx.x / lanes;
  const bool live = row < p.outer;
  const int64_t nvec = p.dim / V;
  const T* g = static_cast<const T*>(p.grad_out) + (live ? row : 0) * p.grad_out_outer_stride;
  const T* ot = static_cast<const T*>(p.out) + (live ? row : 0) * p.out_outer_stride;
  Vec<T, V> rg[N], ro[N];
  A s = 0;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (live && i < nvec) {
      rg[k] = load_vec<T, V>(g + i * V);
      ro[k] = load_vec<T, V>(ot + i * V);
#pragma unroll
      for (int j = 0; j < V; ++j) s += LOG ? to_acc(rg[k].v[j]) : to_acc(rg[k].v[j]) * to_acc(ro[k].v[j]);
    }
  }
  s = BLOCK ? block_sum(s, smem) : group_sum(s, L);
  if (!live) return;
  T* dx = static_cast<T*>(p.grad_x) + row * p.dim;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (i < nvec) {
      Vec<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A gj = to_acc(rg[k].v[j]), oj = to_acc(ro[k].v[j]);
        o.v[j] = from_acc<T>(LOG ? gj - sm_exp(oj) * s : oj * (gj - s));
      }
      store_vec<T, V>(dx + i * V, o);
    }
  }
}

template <typename T, int V, bool LOG>
__global__ void __launch_bounds__(kGlobalThreads) softmax_bwd_rows_global_kernel(SoftmaxBackward p) {
  using A = acc_t<T>;
  __shared__ A smem[kGlobalThreads / kWarpSize];
  const int64_t row = blockIdx.x;
  const int64_t nvec = p.dim / V;
  const T* g = static_cast<const T*>(p.grad_out) + row * p.grad_out_outer_stride;
  const T* ot = static_cast<const T*>(p.out) + row * p.out_outer_stride;
  A s = 0;
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const Vec<T, V> a = load_vec<T, V>(g + i * V);
    if (LOG) {
#pragma unroll
      for (int j = 0; j < V; ++j) s += to_acc(a.v[j]);
    } else {
      const Vec<T, V> b = load_vec<T, V>(ot + i * V);
#pragma unroll
      for (int j = 0; j < V; ++j) s += to_acc(a.v[j]) * to_acc(b.v[j]);
    }
  }
  s = block_sum(s, smem);
  T* dx = static_cast<T*>(p.grad_x) + row * p.dim;
  for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
    const Vec<T, V> a = load_vec<T, V>(g + i * V), b = load_vec<T, V>(ot + i * V);
    Vec<T, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const A gj = to_acc(a.v[j]), oj = to_acc(b.v[j]);
      o.v[j] = from_acc<T>(LOG ? gj - sm_exp(oj) * s : oj * (gj - s));
    }
    store_vec<T, V>(dx + i * V, o);
  }
}

// -------------------------------------------------------------------------------- backward columns

template <typename T, bool LOG>
__global__ void __launch_bounds__(kColThreads) softmax_bwd_cols_kernel(SoftmaxBackward p, int64_t tiles) {
  using A = acc_t<T>;
  __shared__ A ss[kColThreads];
  const int bx = blockDim.x, by = blockDim.y, tx = threadIdx.x, ty = threadIdx.y;
  const int64_t o = blockIdx.x / tiles;
  const int64_t i = (blockIdx.x % tiles) * bx + tx;
  const bool live = i < p.inner;
  const T* g = static_cast<const T*>(p.grad_out) + o * p.grad_out_outer_stride + i;
  const T* ot = static_cast<const T*>(p.out) + o * p.out_outer_stride + i;
  A s = 0;
  if (live)
    for (int64_t d = ty; d < p.dim; d += by) {
      const A gj = to_acc(g[d * p.grad_out_dim_stride]);
      s += LOG ? gj : gj * to_acc(ot[d * p.out_dim_stride]);
    }
  ss[ty * bx + tx] = s;
  __syncthreads();
  A sum = 0;
  for (int t = 0; t < by; ++t) sum += ss[t * bx + tx];
  if (!live) return;
  T* dx = static_cast<T*>(p.grad_x) + o * p.dim * p.inner + i;
  for (int64_t d = ty; d < p.dim; d += by) {
    const A gj = to_acc(g[d * p.grad_out_dim_stride]), oj = to_acc(ot[d * p.out_dim_stride]);
    dx[d * p.inner] = from_acc<T>(LOG ? gj - sm_exp(oj) * sum : oj * (gj - sum));
  }
}

// ------------------------------------------------------------------------------------------ launch

int softmax_pow2_ceil(int64_t n, int cap) {
  int v = 1;
  while (v < cap && v < n) v *= 2;
  return v;
}

// Register kernels for every dtype but fp64 (fp64 is for gradcheck: the global kernel serves it).
template <typename T>
constexpr bool kSoftmaxRegisters = sizeof(T) < 8;

// How a row of nvec vectors is handled: the register kernels (lanes per row or a whole block, vectors per
// thread) or the global kernel.
struct RowPlan {
  enum Kind { warp, block, global } kind = global;
  int n = 0;        // vectors per thread (register kernels)
  int lanes = 0;    // lanes per row (warp kernel)
  int threads = 0;  // block size
};

constexpr int kMaxN = 8;     // forward: vectors per thread at most (x: 32 registers)
constexpr int kMaxNBwd = 4;  // backward: the same registers for g and out

RowPlan softmax_row_plan(int64_t nvec, bool registers, int max_n) {
  RowPlan r;
  if (!registers) {
    r.threads = kGlobalThreads;
    return r;
  }
  if (nvec <= int64_t(kWarpSize) * max_n) {
    r.kind = RowPlan::warp;
    r.n = 1;
    while (int64_t(r.n) * kWarpSize < nvec) r.n *= 2;
    r.lanes = softmax_pow2_ceil((nvec + r.n - 1) / r.n, kWarpSize);
    r.threads = kWarpRowThreads;
    return r;
  }
  const int64_t threads = ((nvec + max_n - 1) / max_n + kWarpSize - 1) / kWarpSize * kWarpSize;
  if (threads <= kRegThreads) {
    r.kind = RowPlan::block;
    r.n = max_n;
    r.threads = int(threads);
    return r;
  }
  r.threads = kGlobalThreads;
  return r;
}

// Blocks for `rows` rows under plan r; 0 when over the grid limit.
unsigned softmax_row_blocks(int64_t rows, const RowPlan& r) {
  const int64_t per = r.kind == RowPlan::warp ? r.threads / r.lanes : 1;
  const int64_t b = (rows + per - 1) / per;
  return b > 0x7fffffff ? 0u : unsigned(b);
}

template <typename T, int V, bool LOG>
cudaError_t softmax_rows_launch(const SoftmaxForward& p, cudaStream_t stream) {
  const RowPlan r = softmax_row_plan(p.dim / V, kSoftmaxRegisters<T>, kMaxN);
  const unsigned blocks = softmax_row_blocks(p.outer, r);
  if (blocks == 0) return cudaErrorInvalidValue;
  if constexpr (!kSoftmaxRegisters<T>) {
    softmax_rows_global_kernel<T, V, LOG><<<blocks, r.threads, 0, stream>>>(p);
  } else if (r.kind == RowPlan::global) {
    softmax_rows_global_kernel<T, V, LOG><<<blocks, r.threads, 0, stream>>>(p);
  } else if (r.kind == RowPlan::block) {
    softmax_rows_reg_kernel<T, V, kMaxN, true, LOG><<<blocks, r.threads, 0, stream>>>(p, 0);
  } else {
    switch (r.n) {
      case 1: softmax_rows_reg_kernel<T, V, 1, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes); break;
      case 2: softmax_rows_reg_kernel<T, V, 2, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes); break;
      case 4: softmax_rows_reg_kernel<T, V, 4, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes); break;
      default: softmax_rows_reg_kernel<T, V, 8, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes); break;
    }
  }
  return launch_status();
}

template <typename T, int V, bool LOG>
cudaError_t softmax_bwd_rows_launch(const SoftmaxBackward& p, cudaStream_t stream) {
  const RowPlan r = softmax_row_plan(p.dim / V, kSoftmaxRegisters<T>, kMaxNBwd);
  const unsigned blocks = softmax_row_blocks(p.outer, r);
  if (blocks == 0) return cudaErrorInvalidValue;
  if constexpr (!kSoftmaxRegisters<T>) {
    softmax_bwd_rows_global_kernel<T, V, LOG><<<blocks, r.threads, 0, stream>>>(p);
  } else if (r.kind == RowPlan::global) {
    softmax_bwd_rows_global_kernel<T, V, LOG><<<blocks, r.threads, 0, stream>>>(p);
  } else if (r.kind == RowPlan::block) {
    softmax_bwd_rows_reg_kernel<T, V, kMaxNBwd, true, LOG><<<blocks, r.threads, 0, stream>>>(p, 0);
  } else {
    switch (r.n) {
      case 1: softmax_bwd_rows_reg_kernel<T, V, 1, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes); break;
      case 2: softmax_bwd_rows_reg_kernel<T, V, 2, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes); break;
      default: softmax_bwd_rows_reg_kernel<T, V, 4, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes); break;
    }
  }
  return launch_status();
}

// The column kernel's block shape (bx inner indices x by splits of the dim, bx * by <= kColThreads) and
// the tiles of bx per outer index.
struct ColPlan {
  dim3 block;
  int64_t tiles = 0;
  unsigned blocks = 0;
};

ColPlan softmax_col_plan(int64_t outer, int64_t dim, int64_t inner) {
  const int bx0 = softmax_pow2_ceil(inner, kWarpSize);
  const int by = softmax_pow2_ceil(dim, kColThreads / bx0);
  const int bx = softmax_pow2_ceil(inner, kColThreads / by);
  ColPlan c;
  c.block = dim3(unsigned(bx), unsigned(by));
  c.tiles = (inner + bx - 1) / bx;
  const int64_t blocks = outer * c.tiles;
  c.blocks = blocks > 0x7fffffff ? 0u : unsigned(blocks);
  return c;
}

template <typename T>
cudaError_t softmax_forward_typed(const SoftmaxForward& p, cudaStream_t stream) {
  if (p.inner > 1) {
    const ColPlan c = softmax_col_plan(p.outer, p.dim, p.inner);
    if (c.blocks == 0) return cudaErrorInvalidValue;
    if (p.log) { softmax_cols_kernel<T, true><<<c.blocks, c.block, 0, stream>>>(p, c.tiles); }
    else { softmax_cols_kernel<T, false><<<c.blocks, c.block, 0, stream>>>(p, c.tiles); }
    return launch_status();
  }
  constexpr int V = kVec<T>;
  const bool vec = p.dim % V == 0 && p.x_outer_stride % V == 0 && aligned(p.x, 16) && aligned(p.out, 16);
  if (vec) return p.log ? softmax_rows_launch<T, V, true>(p, stream) : softmax_rows_launch<T, V, false>(p, stream);
  return p.log ? softmax_rows_launch<T, 1, true>(p, stream) : softmax_rows_launch<T, 1, false>(p, stream);
}

template <typename T>
cudaError_t softmax_backward_typed(const SoftmaxBackward& p, cudaStream_t stream) {
  if (p.inner > 1) {
    const ColPlan c = softmax_col_plan(p.outer, p.dim, p.inner);
    if (c.blocks == 0) return cudaErrorInvalidValue;
    if (p.log) { softmax_bwd_cols_kernel<T, true><<<c.blocks, c.block, 0, stream>>>(p, c.tiles); }
    else { softmax_bwd_cols_kernel<T, false><<<c.blocks, c.block, 0, stream>>>(p, c.tiles); }
    return launch_status();
  }
  constexpr int V = kVec<T>;
  const bool vec = p.dim % V == 0 && p.grad_out_outer_stride % V == 0 && p.out_outer_stride % V == 0 &&
                   aligned(p.grad_out, 16) && aligned(p.out, 16) && aligned(p.grad_x, 16);
  if (vec) return p.log ? softmax_bwd_rows_launch<T, V, true>(p, stream) : softmax_bwd_rows_launch<T, V, false>(p, stream);
  return p.log ? softmax_bwd_rows_launch<T, 1, true>(p, stream) : softmax_bwd_rows_launch<T, 1, false>(p, stream);
}

}  // namespace

cudaError_t softmax_forward(const SoftmaxForward& p, cudaStream_t stream) {
  if (p.outer <= 0 || p.dim <= 0 || p.inner <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return softmax_forward_typed<T>(p, stream));
  return cudaErrorInvalidValue;
}

cudaError_t softmax_backward(const SoftmaxBackward& p, cudaStream_t stream) {
  if (p.outer <= 0 || p.dim <= 0 || p.inner <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return softmax_backward_typed<T>(p, stream));
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
