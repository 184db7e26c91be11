// RMSNorm forward (optionally fused with the residual add) on CUDA; the backward is in rms_norm_bwd.cu.
//
// Register path (fp32 / fp16 / bf16, rows of 16-byte-aligned vectors, up to 512 * 8 vectors = 32K bf16
// or 16K fp32 elements): a row is held by `tpr` threads (1 .. 512: a power of two up to a warp, whole warps
// beyond, 5120 bf16 -> 160), each with NV (1, 2, 4, 8) 16-byte vectors, about 4 per thread (plan_rows in
// norm_common.cuh): 1024 fp32 -> a warp per row,
// eight rows per 256-thread block; 4096 fp32 -> 256 threads per row. The plain bf16/fp16 forward aims at 2
// vectors per thread on rows up to 4096 elements when there are many rows (4096 bf16 -> 256 threads per row,
// 2560 -> 160), at 4 elsewhere (8192 bf16 -> 256 x 4; fwd_target below); the fused forward keeps 4 (two
// loads per vector already in flight).
// x is read once and y written once (fused: x and residual read, y and h written). Reductions: xor
// shuffles within the warp, shared memory across the warps of a row (group_sum).
// Long-row path (any dtype, fp64 always; rows longer than the register path, or unaligned rows /
// strides / odd lengths): one block per row (grid-stride over rows), pass 1 reduces, pass 2 re-reads
// the row (from L2) and writes; 16-byte vectors when aligned, element accesses otherwise.
// Accumulation in fp32 (fp64 for fp64).
#include <type_traits>

#include "norm_common.cuh"
#include "rms_norm.h"

namespace yirage::kernels::cuda {
namespace {

using norm::group_sum;
using norm::block_sum_k;
using norm::RowPlan;

// ---------------------------------------------------------------- forward, register path
template <typename T, int NV, bool kRes>
__global__ void __launch_bounds__(512) rms_fwd_regs(RmsNormForward p, int tpr) {
  using A = float;
  constexpr int V = kVec<T>;
  __shared__ A smem[512 / kWarpSize];
  const int rpb = blockDim.x / tpr;
  const int lane = threadIdx.x % tpr, sub = threadIdx.x / tpr;
  const int64_t nvec = p.cols / V;
  const int64_t groups = (p.rows + rpb - 1) / rpb;
  const T* w = static_cast<const T*>(p.weight);
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t row = g * rpb + sub;
    const bool live = row < p.rows;
    const int64_t rr = live ? row : 0;
    const T* x = static_cast<const T*>(p.x) + rr * p.x_stride;
    Vec<T, V> h[NV];
    if constexpr (!kRes) {
      // plain: every load of the row is issued before any arithmetic (bf16 16384x4096 on an H100: 88% -> 99%
      // of the copy bandwidth); the fused forward measured faster (99% vs 85%) loading, adding and storing h
      // vector by vector, as below
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int64_t j = int64_t(k) * tpr + lane;
        if (live && j < nvec) h[k] = load_vec<T, V>(x + j * V);
      }
    }
    A ss[1] = {A(0)};
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t j = int64_t(k) * tpr + lane;
      if (live && j < nvec) {
        if constexpr (kRes) {
          h[k] = load_vec<T, V>(x + j * V);
          const Vec<T, V> r = load_vec<T, V>(static_cast<const T*>(p.residual) + rr * p.residual_stride + j * V);
#pragma unroll
          for (int e = 0; e < V; ++e) h[k].v[e] = from_acc<T>(to_acc(h[k].v[e]) + to_acc(r.v[e]));
          store_vec<T, V>(static_cast<T*>(p.residual_out) + rr * p.cols + j * V, h[k]);
        }
#pragma unroll
        for (int e = 0; e < V; ++e) { const A f = to_acc(h[k].v[e]); ss[0] += f * f; }
      }
    }
    group_sum<1>(ss, tpr, smem);
    const A rstd = A(1) / sqrtf(ss[0] / A(p.cols) + A(p.eps));
    T* y = static_cast<T*>(p.out) + rr * p.cols;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t j = int64_t(k) * tpr + lane;
      if (live && j < nvec) {
        Vec<T, V> o;
        if (w) {
          const Vec<T, V> b = load_vec<T, V>(w + j * V);
#pragma unroll
          for (int e = 0; e < V; ++e) o.v[e] = from_acc<T>(to_acc(h[k].v[e]) * rstd * to_acc(b.v[e]));
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) o.v[e] = from_acc<T>(to_acc(h[k].v[e]) * rstd);
        }
        store_vec<T, V>(y + j * V, o);
      }
    }
  }
}

// ---------------------------------------------------------------- forward, long-row path
template <typename T, int V, bool kRes>
__global__ void __launch_bounds__(1024) rms_fwd_general(RmsNormForward p) {
  using A = acc_t<T>;
  __shared__ A smem[1024 / kWarpSize];
  const int64_t nv = p.cols / V;
  const T* w = static_cast<const T*>(p.weight);
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    T* y = static_cast<T*>(p.out) + row * p.cols;
    T* h = kRes ? static_cast<T*>(p.residual_out) + row * p.cols : nullptr;
    A ss[1] = {A(0)};
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      Vec<T, V> a = load_vec<T, V>(x + i * V);
      if constexpr (kRes) {
        const Vec<T, V> r = load_vec<T, V>(static_cast<const T*>(p.residual) + row * p.residual_stride + i * V);
#pragma unroll
        for (int e = 0; e < V; ++e) a.v[e] = from_acc<T>(to_acc(a.v[e]) + to_acc(r.v[e]));
        store_vec<T, V>(h + i * V, a);  // re-read below by this same thread
      }
#pragma unroll
      for (int e = 0; e < V; ++e) { const A f = to_acc(a.v[e]); ss[0] += f * f; }
    }
    block_sum_k<1>(ss, smem);
    const A rstd = A(1) / sqrt(ss[0] / A(p.cols) + A(p.eps));
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      const Vec<T, V> a = load_vec<T, V>(kRes ? h + i * V : x + i * V);
      Vec<T, V> o;
      if (w) {
        const Vec<T, V> b = load_vec<T, V>(w + i * V);
#pragma unroll
        for (int e = 0; e < V; ++e) o.v[e] = from_acc<T>(to_acc(a.v[e]) * rstd * to_acc(b.v[e]));
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) o.v[e] = from_acc<T>(to_acc(a.v[e]) * rstd);
      }
      store_vec<T, V>(y + i * V, o);
    }
  }
}

template <typename T>
bool fwd_vec_ok(const RmsNormForward& p) {
  constexpr int V = kVec<T>;
  bool ok = p.cols % V == 0 && p.x_stride % V == 0 && aligned(p.x, 16) && aligned(p.out, 16) &&
            (p.weight == nullptr || aligned(p.weight, 16));
  if (p.residual) {
    ok = ok && p.residual_stride % V == 0 && aligned(p.residual, 16) && aligned(p.residual_out, 16);
  }
  return ok;
}

// Vectors per thread the register plan aims at. The plain fp16/bf16 forward takes 2 on rows of at most 512 vectors
// (4096 elements) when there are at least 4096 rows; 4 everywhere else. H100, bf16, kernel alone, % of the copy
// bandwidth with 2 vs 4 (rows of whole warps): 8192x2560 96.3 / 93.7, 4096x3072 94.7 / 91.9, 16384x1536 97.0 /
// 94.8; 16384x4096 98.8 / 98.1, 65536x1024 99.3 / 98.1; but 8192x5120 91.6 / 97.0, 4096x8192 93.6 / 96.9,
// 2048x2048 83.9 / 93.7 (benchmarks/results/cuda-norm-fwd-h100-2026-11-25.md).
template <typename T, bool kRes>
int fwd_target(const RmsNormForward& p) {
  if (sizeof(T) != 2 || kRes) return 4;
  return p.cols / kVec<T> <= 512 && p.rows >= 4096 ? 2 : 4;
}

template <typename T, bool kRes>
cudaError_t fwd_launch(const RmsNormForward& p, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const bool vec = fwd_vec_ok<T>(p);
  if constexpr (!std::is_same_v<T, double>) {
    const RowPlan rp =
        vec ? norm::plan_rows(p.cols / V, 8, fwd_target<T, kRes>(p), /*whole_warps=*/true) : RowPlan{};
    if (rp.regs) {
      const int rpb = rp.block / rp.tpr;
      const int64_t groups = (p.rows + rpb - 1) / rpb;
      const dim3 grid(unsigned(groups < norm::kMaxGrid ? groups : norm::kMaxGrid));
      switch (rp.nv) {
        case 1: rms_fwd_regs<T, 1, kRes><<<grid, rp.block, 0, stream>>>(p, rp.tpr); break;
        case 2: rms_fwd_regs<T, 2, kRes><<<grid, rp.block, 0, stream>>>(p, rp.tpr); break;
        case 4: rms_fwd_regs<T, 4, kRes><<<grid, rp.block, 0, stream>>>(p, rp.tpr); break;
        default: rms_fwd_regs<T, 8, kRes><<<grid, rp.block, 0, stream>>>(p, rp.tpr); break;
      }
      return launch_status();
    }
  }
  const dim3 grid(unsigned(p.rows < norm::kMaxGrid ? p.rows : norm::kMaxGrid));
  if (vec) {
    rms_fwd_general<T, V, kRes><<<grid, norm::general_block(p.cols / V), 0, stream>>>(p);
  } else {
    rms_fwd_general<T, 1, kRes><<<grid, norm::general_block(p.cols), 0, stream>>>(p);
  }
  return launch_status();
}

}  // namespace

cudaError_t rms_norm_forward(const RmsNormForward& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  if (p.residual) {
    YIRAGE_CUDA_DISPATCH(p.dtype, T, return fwd_launch<T, true>(p, stream));
  } else {
    YIRAGE_CUDA_DISPATCH(p.dtype, T, return fwd_launch<T, false>(p, stream));
  }
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
