// softmax / log_softmax on CUDA over any dim; their backward ops are in softmax_bwd.cu, the pieces both use
// (row and column plans, reductions) in softmax_common.cuh.
//
// Rows (inner == 1: the softmax dim is the last non-trivial one), three kernels:
//  - register, warp level: rows of up to 32 * 2 vectors. A row belongs to L = 1..32 lanes of a warp (the
//    fewest that give each lane at most N = 1 or 2 vectors; L a power of two at run time), 256 / L rows per
//    block. Lane l holds vectors l, l + L, ... of its row in registers (16-byte loads, coalesced), so the
//    row is read once and written once: max over the registers, butterfly shuffles over the L lanes, sum of
//    exp(x - max) the same way (softmax keeps these exps in registers for the output), then exp(x - max) /
//    sum, or (x - max) - log(sum).
//  - register, block level: one row per block of up to 512 threads with 2 vectors each (4 or 8 for rows
//    too long for that: up to 4096 vectors, 16K fp32, 32K bf16/fp16), the same two reductions over the
//    block (shared memory). Few vectors and registers per thread keep the SM full (softmax_common.cuh).
//    fp16 / bf16 take exp from the hardware exp2 (row_exp; 9% faster than expf for bf16 log_softmax) and the
//    row's log from the hardware log2 where that is accurate enough (row_log).
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
// Numerics: fp32 accumulation (fp64 for fp64); x - max keeps any finite input safe. A row whose max is
// -inf (all -inf) or +inf, or that holds a NaN, gives NaN, as torch does; the online (max, sum) skips -inf
// elements so that a thread seeing only -inf contributes 0 to a row with a finite max.
// Limits: a row is handled by one block (very long rows are fast only with many rows); more than
// 2^31 - 1 blocks is refused (cudaErrorInvalidValue).
#include "softmax.h"
#include "softmax_common.cuh"

namespace yirage::kernels::cuda {
namespace {

using softmax::sm_exp;
using softmax::sm_log;
using softmax::group_max;
using softmax::group_sum;
using softmax::kRegThreads;
using softmax::kGlobalThreads;
using softmax::kColThreads;
using softmax::kSoftmaxRegisters;
using softmax::kMaxN;
using softmax::kWarpMaxN;
using softmax::row_exp;
using softmax::row_log;
using softmax::RowPlan;
using softmax::softmax_row_plan;
using softmax::softmax_row_blocks;
using softmax::ColPlan;
using softmax::softmax_col_plan;

template <typename A>
__device__ __forceinline__ A neg_inf() {
  return A(-INFINITY);
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

// ------------------------------------------------------------------------------------ forward rows

template <typename T, int V, int N, bool BLOCK, bool LOG>
__global__ void __launch_bounds__(kRegThreads) softmax_rows_reg_kernel(SoftmaxForward p, int lanes) {
  using A = acc_t<T>;
  // one array per reduction, each used once: no barrier after either (block_max / block_sum with kReuse false)
  __shared__ A smem_max[kRegThreads / kWarpSize], smem_sum[kRegThreads / kWarpSize];
  const int L = BLOCK ? int(blockDim.x) : lanes;
  const int lane = BLOCK ? int(threadIdx.x) : int(threadIdx.x) % lanes;
  const int64_t row = BLOCK ? int64_t(blockIdx.x) : int64_t(blockIdx.x) * (blockDim.x / lanes) + threadIdx.x / lanes;
  const bool live = row < p.outer;
  const int64_t nvec = p.dim / V;
  const T* x = static_cast<const T*>(p.x) + (live ? row : 0) * p.x_outer_stride;
  Vec<T, V> r[N];
  // every load of the row is issued before any arithmetic (as the norms')
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (live && i < nvec) r[k] = load_vec<T, V>(x + i * V);
  }
  // the row in the accumulation type, converted once (it was converted again in each pass: bf16 on an H200, kernel
  // alone, log_softmax 65536x1024 72.6 -> 69.1 us, softmax 69.7 -> 68.3; fp16 up to 4% faster, fp32 level;
  // cuda-log-softmax-log-h200-2026-11-26.md); softmax then keeps exp(x - max) there for the output
  A xf[N][V];
  A mx = neg_inf<A>();
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (live && i < nvec) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        xf[k][j] = to_acc(r[k].v[j]);
        mx = max(mx, xf[k][j]);
      }
    }
  }
  // kPair (block kernel, rows of 4 or 8 vectors a thread): (max, sum) pairs reduced once across the warps: each warp
  // sums exp(x - its own max), then one exchange through shared memory (one barrier, where a max and then a sum
  // over the block take two) gives the row's max M and sum S = sum over warps of s_w * exp(m_w - M); softmax scales
  // a warp's kept exps by exp(m_w - M) / S. A warp whose elements are all -inf counts with the reference 0 (its exps
  // and sum are 0); a row of only -inf gives NaN as before (S = 0 * exp(-inf + inf)). H200, kernel alone, against
  // the two reductions: bf16 2048x16384 1.02-1.08x, fp32 1.00-1.03x, fp32 4096x8192 level; 2-vector rows (up to
  // 8192 bf16 / 4096 fp32 columns) ran up to 2% slower with it (an exp and a division more per thread) and keep
  // the two (benchmarks/results/cuda-row-barriers-h200-2026-11-27.md).
  constexpr bool kPair = BLOCK && N >= 4;
  if constexpr (kPair) {
    mx = warp_max(mx);
  } else {
    mx = BLOCK ? block_max<false>(mx, smem_max) : group_max(mx, L);
  }
  const A mref = kPair && mx == neg_inf<A>() ? A(0) : mx;
  A s = 0;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (live && i < nvec) {
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A t = row_exp<T>(xf[k][j] - mref);
        if constexpr (!LOG) xf[k][j] = t;
        s += t;
      }
    }
  }
  A f, row_max = mx;
  if constexpr (kPair) {
    s = warp_sum(s);
    const int warps = int(blockDim.x) / kWarpSize, wl = int(threadIdx.x) % kWarpSize;
    if (wl == 0) {
      smem_max[threadIdx.x / kWarpSize] = mx;
      smem_sum[threadIdx.x / kWarpSize] = s;
    }
    __syncthreads();
    const A mt = wl < warps ? smem_max[wl] : neg_inf<A>();
    row_max = warp_max(mt);
    const A S = warp_sum(wl < warps ? smem_sum[wl] * row_exp<T>(mt - row_max) : A(0));
    if constexpr (LOG) {
      f = row_log<T>(S);
    } else {
      f = (mx == neg_inf<A>() ? A(0) : row_exp<T>(mx - row_max)) / S;
    }
  } else {
    s = BLOCK ? block_sum<false>(s, smem_sum) : group_sum(s, L);
    f = LOG ? row_log<T>(s) : A(1) / s;
  }
  if (!live) return;
  T* y = static_cast<T*>(p.out) + row * p.dim;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (i < nvec) {
      Vec<T, V> o;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        if constexpr (LOG) {
          o.v[j] = from_acc<T>(xf[k][j] - row_max - f);
        } else {
          o.v[j] = from_acc<T>(xf[k][j] * f);
        }
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

// ------------------------------------------------------------------------------------------ launch

template <typename T, int V, bool LOG>
cudaError_t softmax_rows_launch(const SoftmaxForward& p, cudaStream_t stream) {
  const RowPlan r = softmax_row_plan(p.dim / V, kSoftmaxRegisters<T>, kMaxN, softmax::softmax_fwd_min_n(p.dim / V));
  const unsigned blocks = softmax_row_blocks(p.outer, r);
  if (blocks == 0) return cudaErrorInvalidValue;
  if constexpr (!kSoftmaxRegisters<T>) {
    softmax_rows_global_kernel<T, V, LOG><<<blocks, r.threads, 0, stream>>>(p);
  } else if (r.kind == RowPlan::global) {
    softmax_rows_global_kernel<T, V, LOG><<<blocks, r.threads, 0, stream>>>(p);
  } else if (r.kind == RowPlan::block) {
    switch (r.n) {
      case 2: softmax_rows_reg_kernel<T, V, 2, true, LOG><<<blocks, r.threads, 0, stream>>>(p, 0); break;
      case 4: softmax_rows_reg_kernel<T, V, 4, true, LOG><<<blocks, r.threads, 0, stream>>>(p, 0); break;
      default: softmax_rows_reg_kernel<T, V, kMaxN, true, LOG><<<blocks, r.threads, 0, stream>>>(p, 0); break;
    }
  } else if (r.n == 1) {
    softmax_rows_reg_kernel<T, V, 1, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes);
  } else {
    softmax_rows_reg_kernel<T, V, kWarpMaxN, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes);
  }
  return launch_status();
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

}  // namespace

cudaError_t softmax_forward(const SoftmaxForward& p, cudaStream_t stream) {
  if (p.outer <= 0 || p.dim <= 0 || p.inner <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return softmax_forward_typed<T>(p, stream));
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
