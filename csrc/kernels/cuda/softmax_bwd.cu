// The backward ops of softmax / log_softmax on CUDA over any dim (the forward and its kernels, which the
// backward mirrors: softmax.cu; the pieces both use: softmax_common.cuh).
//
// Backward (from the forward's output): softmax grad_x = out * (g - sum(g * out)), log_softmax grad_x =
// g - exp(out) * sum(g); the same three row kernels (register paths hold g and out) and the column kernel,
// with a sum in place of the (max, sum) pair.
// Numerics: fp32 accumulation (fp64 for fp64).
// Limits: a row is handled by one block (very long rows are fast only with many rows); more than
// 2^31 - 1 blocks is refused (cudaErrorInvalidValue).
#include "softmax.h"
#include "softmax_common.cuh"

namespace yirage::kernels::cuda {
namespace {

using softmax::sm_exp;
using softmax::group_sum;
using softmax::kRegThreads;
using softmax::kGlobalThreads;
using softmax::kColThreads;
using softmax::kSoftmaxRegisters;
using softmax::kMaxNBwd;
using softmax::kWarpMaxN;
using softmax::row_exp;
using softmax::RowPlan;
using softmax::softmax_row_plan;
using softmax::softmax_row_blocks;
using softmax::ColPlan;
using softmax::softmax_col_plan;

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
  // every load of the row is issued before any arithmetic (as the norms')
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (live && i < nvec) {
      rg[k] = load_vec<T, V>(g + i * V);
      ro[k] = load_vec<T, V>(ot + i * V);
    }
  }
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t i = lane + int64_t(k) * L;
    if (live && i < nvec) {
#pragma unroll
      for (int j = 0; j < V; ++j) s += LOG ? to_acc(rg[k].v[j]) : to_acc(rg[k].v[j]) * to_acc(ro[k].v[j]);
    }
  }
  s = BLOCK ? block_sum<false>(s, smem) : group_sum(s, L);  // smem's only use: no barrier after
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
        o.v[j] = from_acc<T>(LOG ? gj - row_exp<T, false>(oj) * s : oj * (gj - s));
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
    if (r.n == 2) {
      softmax_bwd_rows_reg_kernel<T, V, 2, true, LOG><<<blocks, r.threads, 0, stream>>>(p, 0);
    } else {
      softmax_bwd_rows_reg_kernel<T, V, kMaxNBwd, true, LOG><<<blocks, r.threads, 0, stream>>>(p, 0);
    }
  } else if (r.n == 1) {
    softmax_bwd_rows_reg_kernel<T, V, 1, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes);
  } else {
    softmax_bwd_rows_reg_kernel<T, V, kWarpMaxN, false, LOG><<<blocks, r.threads, 0, stream>>>(p, r.lanes);
  }
  return launch_status();
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

cudaError_t softmax_backward(const SoftmaxBackward& p, cudaStream_t stream) {
  if (p.outer <= 0 || p.dim <= 0 || p.inner <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return softmax_backward_typed<T>(p, stream));
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
