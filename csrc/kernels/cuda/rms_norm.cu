// RMSNorm forward (optionally fused with the residual add) on CUDA; the backward is in rms_norm_bwd.cu.
//
// Register path (fp32 / fp16 / bf16, rows of 16-byte-aligned vectors, up to 512 * 8 vectors = 32K bf16
// or 16K fp32 elements): a row is held by `tpr` threads (1 .. 512: a power of two up to a warp, whole warps
// beyond, 5120 bf16 -> 160), each with NV (1, 2, 4, 8) 16-byte vectors, about 4 per thread (plan_rows in
// norm_common.cuh): 1024 fp32 -> a warp per row, two rows per 64-thread block (kFwdBlockThreads); 4096 fp32 ->
// 256 threads per row. The plain forward (fwd_target below) aims at 4 vectors per thread, a block per row group,
// except on fp32 rows of up to 4096 elements: those it reads twice (the second time from L2) at 2 vectors per
// thread and 32 registers (fwd_launch).
// The fused forward aims at 2 vectors per thread and does not keep the row in registers: it writes
// h = x + residual, reduces, then reads h back (from L2) for the output, at 32 registers (rms_fwd_reread), on
// rows of up to 2 vectors per thread; longer ones keep the row in registers at 4 vectors per thread, on a
// persistent grid for fp16 / bf16.
// x is read once from DRAM and y written once (fused: x and residual read, y and h written). Reductions: xor
// shuffles within the warp, shared memory across the warps of a row (group_sum).
// Why (H200, bf16, kernel alone in Nsight Compute; benchmarks/results/cuda-norm-fwd-instructions-h200-2026-11-26.md):
// the forward was issue-bound, not memory-bound: 64 M warp instructions at 16384x4096 against 33 M for Liger's
// kernel, 79% of issue slots busy. Most of it was per-row overhead: a runtime-width shuffle loop, a division to
// find the row's first warp, a looped sum over the warps' partials, an IEEE division, square root and reciprocal
// for rstd, 64-bit column indices, and the block prologue (a block per row). Now: a fixed butterfly, the warps'
// partials summed by a second butterfly, rsqrtf, 32-bit column indices, a persistent grid and 4 vectors per
// thread: 31 M instructions, 79 -> 70 us (Liger 63-66 us in the same runs). The persistent grid was dropped again
// when timed with the L2 flushed before each call, as the benchmark does (launch below). The launch facts then moved
// to the host (norm::RowGroups; bf16 1.00-1.04x, fp32 up to 1.08x at 2048x16384;
// cuda-norm-fwd-launch-facts-h200-2026-11-27.md).
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
// kReread: the row is not kept in registers but read again in the second pass: the fused forward's h (written in
// the first pass), the plain forward's x (fp32 rows, see fwd_launch: loaded with an L2 evict_last hint in the first
// pass and evict_first in the second, as torch.compile's kernel does).
template <typename T, int NV, bool kRes, bool kReread>
__device__ __forceinline__ void rms_fwd_rows(const RmsNormForward& p, const norm::RowGroups& rg) {
  using A = float;
  constexpr int V = kVec<T>;
  __shared__ A smem[512 / kWarpSize];
  const int tpr = rg.tpr, rpb = rg.rpb;
  const int sub = rg.sub(), lane = int(threadIdx.x) - sub * tpr;
  const int nvec = rg.nvec;  // at most 512 * 8 on this path
  const int64_t groups = rg.groups;
  const A inv_n = rg.inv_n;
  const uint64_t keep = l2_keep_policy();  // the weight, read again by every row
  // The plain forward loads the weight with the row, before the reduction, as Liger's kernel does, so that its
  // latency overlaps the row's (H200, kernel alone, bf16 0.7-4.8% faster: 16384x4096 70.6 -> 69.7 us, 4096x8192
  // 38.0 -> 37.4, 8192x2048 21.9 -> 20.9; fp32 0.3-1.8%). The fused forward keeps it after the reduction: there
  // it ran 6% slower (32 registers for four blocks an SM), as did layer_norm's forward with weight and bias early
  // (28%: spills under its 64-register cap) (benchmarks/results/cuda-norm-fwd-weight-early-h200-2026-11-26.md).
  constexpr bool kEarlyW = !kRes && !kReread;
  constexpr bool kRereadX = kReread && !kRes;
  const uint64_t last_read = kRereadX ? l2_first_policy() : 0;
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    // the weight's loads stay in the loop (opaque_zero)
    const T* w = p.weight ? static_cast<const T*>(p.weight) + opaque_zero() : nullptr;
    const int64_t row = g * rpb + sub;
    const bool live = row < p.rows;
    const int64_t rr = live ? row : 0;
    const T* x = static_cast<const T*>(p.x) + rr * p.x_stride;
    Vec<T, V> h[NV], wv[NV];
    if constexpr (!kRes) {
      // plain: every load of the row is issued before any arithmetic (bf16 16384x4096 on an H100: 88% -> 99%
      // of the copy bandwidth); the fused forward measured faster (99% vs 85%) loading, adding and storing h
      // vector by vector, as below
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = k * tpr + lane;
        if (live && j < nvec) h[k] = kRereadX ? load_vec_keep<T, V>(x + j * V, keep) : load_vec<T, V>(x + j * V);
      }
    }
    if constexpr (kEarlyW) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = k * tpr + lane;
        // with no weight, the row itself: the asm load may be hoisted above a test of w (common.cuh)
        if (live && j < nvec) wv[k] = load_vec_keep<T, V>((w ? w : x) + j * V, keep);
      }
    }
    A ss[1] = {A(0)};
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = k * tpr + lane;
      if (live && j < nvec) {
        if constexpr (kRes) {
          h[k] = load_vec<T, V>(x + j * V);
          const Vec<T, V> r = load_vec<T, V>(static_cast<const T*>(p.residual) + rr * p.residual_stride + j * V);
#pragma unroll
          for (int e = 0; e < V; ++e) h[k].v[e] = from_acc<T>(to_acc(h[k].v[e]) + to_acc(r.v[e]));
          store_vec<T, V>(static_cast<T*>(p.residual_out) + rr * p.cols + j * V, h[k]);
        }
        A f[V];
        unpack(h[k], f);
#pragma unroll
        for (int e = 0; e < V; ++e) ss[0] += f[e] * f[e];
      }
    }
    group_sum<1>(ss, tpr, sub, smem);
    const A rstd = rsqrtf(ss[0] * inv_n + A(p.eps));
    T* y = static_cast<T*>(p.out) + rr * p.cols;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = k * tpr + lane;
      if (live && j < nvec) {
        // the fused forward's h was stored by this thread in the first pass
        if constexpr (kRereadX) {
          h[k] = load_vec_first<T, V>(x + j * V, last_read);
        } else if constexpr (kReread) {
          h[k] = load_vec<T, V>(static_cast<const T*>(p.residual_out) + rr * p.cols + j * V);
        }
        Vec<T, V> o;
        A f[V];
        unpack(h[k], f);
        if (w) {
          A wf[V];
          if constexpr (kEarlyW) {
            unpack(wv[k], wf);
          } else {
            unpack(load_vec_keep<T, V>(w + j * V, keep), wf);
          }
#pragma unroll
          for (int e = 0; e < V; ++e) o.v[e] = from_acc<T>(f[e] * rstd * wf[e]);
        } else {
#pragma unroll
          for (int e = 0; e < V; ++e) o.v[e] = from_acc<T>(f[e] * rstd);
        }
        store_vec<T, V>(y + j * V, o);
      }
    }
  }
}

// The plain forward and the fused one that keeps its row in registers; ptxas gives the 4-vector instance 64
// registers only with a minimum of 2 blocks (72-77 without: one block fewer per SM, 36 -> 42 us at bf16
// 4096x8192), as does the fused fp32 8-vector one (rows of 8K-16K floats: 74 registers without since the launch facts
// moved to the host, 2048x16384 136.4 -> 166.5 us; 64 with, no spills), the others their (512) allocation (a minimum
// of 0 is the same as none; 1 is not: see cuda-gelu-rotary-h100-2026-11-25.md).
template <typename T, int NV, bool kRes>
__global__ void __launch_bounds__(512, NV == 4 || (kRes && NV == 8 && sizeof(T) == 4) ? 2 : 0)
    rms_fwd_regs(RmsNormForward p, norm::RowGroups rg) {
  rms_fwd_rows<T, NV, kRes, false>(p, rg);
}
// The forwards reading their row back: 32 registers (four 512-thread blocks per SM); the fused one does not spill
// at 1 or 2 vectors, the plain fp32 one spills 4 bytes at 2.
template <typename T, int NV, bool kRes>
__global__ void __launch_bounds__(512, 4) rms_fwd_reread(RmsNormForward p, norm::RowGroups rg) {
  rms_fwd_rows<T, NV, kRes, true>(p, rg);
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

// Vectors per thread the register plan aims at: 4 for the plain forward (8192 bf16 -> 256 threads x 4, 1024 -> a
// warp x 4), 2 for the fused one (its re-reading kernel; rows that need more than 2 fall back to 4 in registers).
// With the per-row overhead of the old kernel, 2 vectors per thread (more threads per row) measured faster on rows
// of at most 4096 bf16 elements (H100, cuda-norm-fwd-h100-2026-11-25.md); without it, 4 is as fast or faster at
// every shape measured on an H200, kernel alone: 16384x4096 71.2 -> 70.1 us, 65536x1024 69.6 -> 68.4, 8192x2048
// 19.6 -> 18.8 (cuda-norm-fwd-instructions-h200-2026-11-26.md).
template <bool kRes>
constexpr int fwd_target() {
  return kRes ? 2 : 4;
}

template <typename T, bool kRes>
cudaError_t fwd_launch(const RmsNormForward& p, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const bool vec = fwd_vec_ok<T>(p);
  if constexpr (!std::is_same_v<T, double>) {
    using Kernel = void (*)(RmsNormForward, norm::RowGroups);
    RowPlan rp = vec ? norm::plan_rows(p.cols / V, 8, fwd_target<kRes>(), /*whole_warps=*/true,
                                       norm::kFwdBlockThreads)
                     : RowPlan{};
    if constexpr (kRes || sizeof(T) == 4) {
      // Rows of up to 2 vectors a thread read twice, the second time from L2, at 32 registers (rms_fwd_reread): the
      // fused forward's h (a block per row group; a persistent grid measured 2-5% slower, H200), and the plain
      // forward's x for fp32 (4096 columns at 512 threads), as torch.compile's kernel does. H200, kernel alone:
      // 16384x4096 133.4 -> 131.9 us, 65536x1024 130.7 -> 128.2, 8192x2048 37.4 -> 36.3. Slower without the cache
      // hints (144.9 us at 16384x4096), for 16-bit types (bf16 11-20%), for longer rows (8192: 69.9 -> 81.1 us,
      // registers spill) and for layer_norm's forward (2-26% slower with the best of the variants tried)
      // (benchmarks/results/cuda-norm-fwd-reread-h200-2026-11-26.md).
      const RowPlan rr = kRes ? rp : vec ? norm::plan_rows(p.cols / V, 8, 2, /*whole_warps=*/true,
                                                           norm::kFwdBlockThreads)
                                         : RowPlan{};
      if (rr.regs && rr.nv <= 2) {
        const norm::RowGroups rg = norm::row_groups(rr, p.rows, p.cols, V);
        const dim3 grid(unsigned(rg.groups < norm::kMaxGrid ? rg.groups : norm::kMaxGrid));
        const Kernel kernel = rr.nv == 1 ? Kernel(rms_fwd_reread<T, 1, kRes>) : Kernel(rms_fwd_reread<T, 2, kRes>);
        kernel<<<grid, rr.block, 0, stream>>>(p, rg);
        return launch_status();
      }
    }
    if (kRes && rp.regs) rp = norm::plan_rows(p.cols / V, 8, 4, /*whole_warps=*/true, norm::kFwdBlockThreads);
    if (rp.regs) {
      const Kernel kernel = rp.nv == 1   ? Kernel(rms_fwd_regs<T, 1, kRes>)
                            : rp.nv == 2 ? Kernel(rms_fwd_regs<T, 2, kRes>)
                            : rp.nv == 4 ? Kernel(rms_fwd_regs<T, 4, kRes>)
                                         : Kernel(rms_fwd_regs<T, 8, kRes>);
      // The plain forward: a block per row group. A persistent grid (SMs x resident blocks) ran 3-5% slower for
      // fp16 / bf16 with the L2 flushed before each call, as the benchmark times it (H200, bf16 16384x4096 72.0
      // against 75.6 us, 4096x8192 39.6 against 41.8) and 2-3% slower for fp32. The fused forward's register
      // kernel (rows of more than 2 vectors per thread) keeps one for fp16 / bf16: 78.2 against 76.0 us without
      // (2048x16384; benchmarks/results/cuda-norm-bwd-h200-2026-11-26.md).
      const norm::RowGroups rg = norm::row_groups(rp, p.rows, p.cols, V);
      const int64_t groups = rg.groups;
      const dim3 grid = kRes && sizeof(T) == 2 ? norm::resident_grid(kernel, rp.block, groups)
                                               : dim3(unsigned(groups < norm::kMaxGrid ? groups : norm::kMaxGrid));
      kernel<<<grid, rp.block, 0, stream>>>(p, rg);
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
