// LayerNorm forward on CUDA; the backward is in layer_norm_bwd.cu.
//
// Register path (fp32 / fp16 / bf16, rows of 16-byte-aligned vectors): a row is held by `tpr` threads
// (1 .. 512: a power of two up to a warp, whole warps beyond) with NV 16-byte vectors each (plan_rows in
// norm_common.cuh; forward up to 512 * 8 vectors, about 4 per thread: 1024 bf16 -> a warp per row, 4096 bf16 ->
// 128 threads per row, 5120 bf16 -> 160).
// x is read once, y written once. All of a row's loads are issued first; then one reduction of the sums of
// x and x^2 gives the mean and the variance. When the mean lies far from 0 (more than 4 standard deviations)
// those sums lose digits, and the block takes them again from the registers around that first estimate of the
// mean (one more reduction; a common offset then cancels exactly). Until 2026-11-26 the sums were shifted by
// x[0] in every row (d = x - x[0]), which cost a subtraction per element twice. H100, bf16
// 16384x4096, kernel alone: 75% of the copy bandwidth with two reductions and an fp32 copy of the row, 91%
// with one (benchmarks/results/cuda-rowops-h100-2026-11-23.md). Reductions: xor shuffles in the warp, shared
// memory across warps (group_sum). A persistent grid (as many blocks as fit the GPU at once, each looping
// over rows; now only up to 16 row groups per SM, kPersistentMax), rstd by rsqrtf and 32-bit column indices:
// the kernel was issue-bound on an H200 (61 M warp instructions at bf16 16384x4096, Liger's 42 M); 47 M after,
// 82.6 -> 75.0 us (benchmarks/results/cuda-norm-fwd-instructions-h200-2026-11-26.md). Per element of the output
// then: x - x[0] (gone since), a multiply-add by rstd, and one multiply-add of weight and bias (a kernel for the
// case with both), the bf16 elements unpacked by bit operations (`unpack`, common.cuh): the kernel ran 682 warp
// instructions a row at bf16 65536x1024 where torch.compile's ran 390, and the harness time fell 2.5-7.5% (bf16
// 4096x8192 44.6 -> 42.2 us, 2048x16384 47.1 -> 43.8; cuda-norm-bwd-h200-2026-11-26.md). The launch facts (rows per
// block, the thread's row and lane, row groups, 1 / cols) come from the host (norm::RowGroups): the kernel's own
// divisions and reciprocal were ~150 instructions a warp ahead of the first load, paid per row with a block per row:
// bf16 4096x8192 37.9 -> 34.5 us, 16384x4096 68.6 -> 65.5, 65536x1024 67.3 -> 65.6, fp16 1.02-1.06x, fp32 up to 1.04x
// (cuda-norm-fwd-launch-facts-h200-2026-11-27.md).
// Long-row path (any dtype, fp64 always; longer rows, unaligned rows / strides / odd lengths): one block
// per row (grid-stride over rows); pass 1 sums x - x[0] and its square (shifted sums, one read; the same sums
// around that first estimate of the mean in one more read when x[0] lies far from it, as above), pass 2
// re-reads the row (from L2) and writes; 16-byte vectors when aligned, element accesses otherwise.
// Accumulation in fp32 (fp64 for fp64).
#include <type_traits>

#include "layer_norm.h"
#include "norm_common.cuh"

// Tuning builds: YIRAGE_LN_FWD_EARLY 0 loads the weight and bias after the row's reduction (kEarly below).
#ifndef YIRAGE_LN_FWD_EARLY
#define YIRAGE_LN_FWD_EARLY 1
#endif

namespace yirage::kernels::cuda {
namespace {

using norm::block_sum_k;
using norm::group_sum;
using norm::RowPlan;

// ---------------------------------------------------------------- forward, register path
// At most 64 registers for NV <= 4 (two 512-thread blocks, or four of 256, per SM): left free, ptxas gave the bf16
// NV=4 kernel 76 to 92 registers depending on small changes elsewhere, and the occupancy that left ran it at 73-90%
// of the copy bandwidth on an H100 (16384x4096, 4096x8192, kernel alone); capped, 93-96% (16 bytes of spills).
// NV=8 keeps its registers (capped, it spills 80-184 bytes and fp32 16384-column rows ran slower).
// kAffine: both weight and bias (the common case), each output one fused multiply-add of them; otherwise either
// or none, tested per row.
template <typename T, int NV, bool kAffine>
__global__ void __launch_bounds__(512, NV <= 4 ? 2 : 1) ln_fwd_regs(LayerNormForward p, norm::RowGroups rg) {
  using A = float;
  constexpr int V = kVec<T>;
  __shared__ A smem[512 / kWarpSize * 2];
  const int tpr = rg.tpr, rpb = rg.rpb;
  const int sub = rg.sub(), lane = int(threadIdx.x) - sub * tpr;
  const int nvec = rg.nvec;  // at most 512 * 8 on this path
  const int64_t groups = rg.groups;
  const A inv_n = rg.inv_n;
  const uint64_t keep = l2_keep_policy();  // weight and bias, read again by every row
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    // the parameters' loads stay in the loop (opaque_zero)
    const int z = opaque_zero();
    const T* w = p.weight ? static_cast<const T*>(p.weight) + z : nullptr;
    const T* bias = p.bias ? static_cast<const T*>(p.bias) + z : nullptr;
    const int64_t row = g * rpb + sub;
    const bool live = row < p.rows;
    const int64_t rr = live ? row : 0;
    const T* x = static_cast<const T*>(p.x) + rr * p.x_stride;
    Vec<T, V> xv[NV];
    // every load of the row is issued before any arithmetic
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = k * tpr + lane;
      if (live && j < nvec) xv[k] = load_vec<T, V>(x + j * V);
    }
    // the mean of d = x - base and the variance from the sums of d and d^2 (one reduction over the registers);
    // kShift false: base = 0, d = x
    // kEarly (fp16 / bf16 with weight and bias, NV <= 4): the weight's loads go out after this thread's sums, before
    // the reduction, whose shuffles and barrier then cover their latency (they were issued after it, on the way to
    // the stores). H200, kernel alone: bf16 16384x4096 70.1 -> 68.8 us, 65536x1024 68.4 -> 67.3, 4096x5120 25.8 ->
    // 25.3, 4096x8192 level; fp16 up to 2.7% faster; fp32 level, so not taken. The bias too spilled 80 bytes at the
    // 64-register cap; an L1 prefetch of both (prefetch.global.L1, no registers) ran the kernel 1.2-2.5x slower
    // (cuda-norm-bwd-issue-h200-2026-11-27.md).
    constexpr bool kEarly = YIRAGE_LN_FWD_EARLY && kAffine && NV <= 4 && sizeof(T) == 2;
    Vec<T, V> wv[kEarly ? NV : 1];
    auto moments = [&](auto shift_tag, A base, A& off, A& var) {
      constexpr bool kShift = decltype(shift_tag)::value;
      A s[2] = {A(0), A(0)};
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = k * tpr + lane;
        if (live && j < nvec) {
          A f[V];
          unpack(xv[k], f);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const A d = kShift ? f[e] - base : f[e];
            s[0] += d;
            s[1] += d * d;
          }
        }
      }
      if constexpr (kEarly && !kShift) {
#pragma unroll
        for (int k = 0; k < NV; ++k) {
          const int j = k * tpr + lane;
          if (live && j < nvec) {
            wv[k] = load_vec_keep<T, V>(w + j * V, keep);
          }
        }
      }
      group_sum<2>(s, tpr, sub, smem);
      off = s[0] * inv_n;
      var = s[1] * inv_n - off * off;
    };
    // First the plain sums of x and x^2. mean(x^2) - mean^2 loses about log2(1 + mean^2 / var) bits: when the
    // mean lies more than 4 standard deviations from 0 (or the difference rounded to <= 0 with a mean != 0), the
    // block takes the sums again around this first estimate of the mean (base), within a small fraction of a
    // standard deviation of it; x - base is then exact (a large common offset cancels), and x - mean is formed as
    // (x - base) - off. group_any keeps the branch uniform over the warp, or the block when a row spans warps (the
    // reduction has full-warp shuffles, and barriers across warps). Against shifting every row by its x[0] (the
    // long-row path below still does), this saves a subtraction per element in the sums and in the output, and
    // the load of x[0]: H200, kernel alone, 44.1 -> 40.4 M warp instructions at bf16 65536x1024, bf16 1-2.5% faster
    // (71.9 -> 70.5 us; 4096x8192 40.8 -> 39.8), fp32 level to 2% (cuda-layer-norm-plain-sums-h200-2026-11-26.md).
    A base = A(0), off, var;
    moments(std::false_type{}, base, off, var);
    const bool shifted = norm::group_any(off * off > A(16) * var, tpr);
    if (shifted) {
      base = off;
      moments(std::true_type{}, base, off, var);
    }
    const A rstd = rsqrtf((var > A(0) ? var : A(0)) + A(p.eps));
    // ((x - base) - off) * rstd as one multiply-add of x - base (of x when not shifted): |off| is at most 4
    // standard deviations here, so the shift is at most 4 in magnitude and nothing cancels that the two roundings
    // kept
    const A shift = -off * rstd;
    T* y = static_cast<T*>(p.out) + rr * p.cols;
    auto write = [&](auto shift_tag) {
      constexpr bool kShift = decltype(shift_tag)::value;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = k * tpr + lane;
        if (live && j < nvec) {
          A o[V];
          unpack(xv[k], o);
#pragma unroll
          for (int e = 0; e < V; ++e) o[e] = fmaf(kShift ? o[e] - base : o[e], rstd, shift);
          if constexpr (kAffine) {
            A wf[V], bf[V];
            if constexpr (kEarly) {
              unpack(wv[k], wf);
              unpack(load_vec_keep<T, V>(bias + j * V, keep), bf);
            } else {
              unpack(load_vec_keep<T, V>(w + j * V, keep), wf);
              unpack(load_vec_keep<T, V>(bias + j * V, keep), bf);
            }
#pragma unroll
            for (int e = 0; e < V; ++e) o[e] = fmaf(o[e], wf[e], bf[e]);
          } else {
            if (w) {
              A wf[V];
              unpack(load_vec_keep<T, V>(w + j * V, keep), wf);
#pragma unroll
              for (int e = 0; e < V; ++e) o[e] *= wf[e];
            }
            if (bias) {
              A bf[V];
              unpack(load_vec_keep<T, V>(bias + j * V, keep), bf);
#pragma unroll
              for (int e = 0; e < V; ++e) o[e] += bf[e];
            }
          }
          Vec<T, V> ov;
#pragma unroll
          for (int e = 0; e < V; ++e) ov.v[e] = from_acc<T>(o[e]);
          store_vec<T, V>(y + j * V, ov);
        }
      }
    };
    if (shifted) {
      write(std::true_type{});
    } else {
      write(std::false_type{});
    }
  }
}

// ---------------------------------------------------------------- forward, long-row path
template <typename T, int V>
__global__ void __launch_bounds__(1024) ln_fwd_general(LayerNormForward p) {
  using A = acc_t<T>;
  __shared__ A smem[1024 / kWarpSize * 2];
  const int64_t nv = p.cols / V;
  const T* w = static_cast<const T*>(p.weight);
  const T* bias = static_cast<const T*>(p.bias);
  const A inv_n = A(1) / A(p.cols);
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    // as the register path: the mean of x - base and the variance from one read of the row
    auto moments = [&](A base, A& off, A& var) {
      A s[2] = {A(0), A(0)};
      for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        const Vec<T, V> a = load_vec<T, V>(x + i * V);
#pragma unroll
        for (int e = 0; e < V; ++e) { const A d = to_acc(a.v[e]) - base; s[0] += d; s[1] += d * d; }
      }
      block_sum_k<2>(s, smem);
      off = s[0] * inv_n;
      var = s[1] * inv_n - off * off;
    };
    A base = to_acc(x[0]), off, var;
    moments(base, off, var);
    if (off * off > A(16) * var) {  // x[0] far from the mean (uniform: every thread has the block's sums)
      base += off;
      moments(base, off, var);
    }
    var = var > A(0) ? var : A(0);
    const A rstd = A(1) / sqrt(var + A(p.eps));
    T* y = static_cast<T*>(p.out) + row * p.cols;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      const Vec<T, V> a = load_vec<T, V>(x + i * V);
      Vec<T, V> bw, bb, o;
      if (w) bw = load_vec<T, V>(w + i * V);
      if (bias) bb = load_vec<T, V>(bias + i * V);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        A f = ((to_acc(a.v[e]) - base) - off) * rstd;
        if (w) f *= to_acc(bw.v[e]);
        if (bias) f += to_acc(bb.v[e]);
        o.v[e] = from_acc<T>(f);
      }
      store_vec<T, V>(y + i * V, o);
    }
  }
}

// Row groups per SM up to which the register path runs a persistent grid (as many blocks as the GPU holds at once,
// each looping over row groups); with more, a block per row group. H200, harness with the L2 flushed before each
// call: 4096+ groups (31 a SM) ran 1.4-7% faster with a block per group (fp32 16384x4096 145.3 -> 135.6 us,
// 65536x1024 145.1 -> 135.2, 8192x2048 42.0 -> 39.4; bf16 4096x8192 42.7 -> 42.1), 1024-2048 groups 3-6% slower
// (fp32 2048x16384 86.9 -> 91.9, 1024x4096 14.4 -> 15.1; bf16 2048x16384 44.0 -> 45.5)
// (benchmarks/results/cuda-norm-bwd-h200-2026-11-26.md).
constexpr int64_t kPersistentMax = 16;

template <typename T>
cudaError_t fwd_launch(const LayerNormForward& p, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const bool vec = p.cols % V == 0 && p.x_stride % V == 0 && aligned(p.x, 16) && aligned(p.out, 16) &&
                   (p.weight == nullptr || aligned(p.weight, 16)) && (p.bias == nullptr || aligned(p.bias, 16));
  if constexpr (!std::is_same_v<T, double>) {
    const RowPlan rp =
        vec ? norm::plan_rows(p.cols / V, 8, 4, /*whole_warps=*/true, norm::kFwdBlockThreads) : RowPlan{};
    if (rp.regs) {
      using Kernel = void (*)(LayerNormForward, norm::RowGroups);
      const bool affine = p.weight != nullptr && p.bias != nullptr;
      const Kernel kernel = affine ? (rp.nv == 1   ? Kernel(ln_fwd_regs<T, 1, true>)
                                      : rp.nv == 2 ? Kernel(ln_fwd_regs<T, 2, true>)
                                      : rp.nv == 4 ? Kernel(ln_fwd_regs<T, 4, true>)
                                                   : Kernel(ln_fwd_regs<T, 8, true>))
                                   : (rp.nv == 1   ? Kernel(ln_fwd_regs<T, 1, false>)
                                      : rp.nv == 2 ? Kernel(ln_fwd_regs<T, 2, false>)
                                      : rp.nv == 4 ? Kernel(ln_fwd_regs<T, 4, false>)
                                                   : Kernel(ln_fwd_regs<T, 8, false>));
      const norm::RowGroups rg = norm::row_groups(rp, p.rows, p.cols, V);
      const int64_t groups = rg.groups;
      const dim3 grid = groups > kPersistentMax * norm::sm_count()
                            ? dim3(unsigned(groups < norm::kMaxGrid ? groups : norm::kMaxGrid))
                            : norm::resident_grid(kernel, rp.block, groups);
      kernel<<<grid, rp.block, 0, stream>>>(p, rg);
      return launch_status();
    }
  }
  const dim3 grid(unsigned(p.rows < norm::kMaxGrid ? p.rows : norm::kMaxGrid));
  if (vec) {
    ln_fwd_general<T, V><<<grid, norm::general_block(p.cols / V), 0, stream>>>(p);
  } else {
    ln_fwd_general<T, 1><<<grid, norm::general_block(p.cols), 0, stream>>>(p);
  }
  return launch_status();
}

}  // namespace

cudaError_t layer_norm_forward(const LayerNormForward& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return fwd_launch<T>(p, stream));
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
