// Pieces shared by the normalization kernels (rms_norm.cu, rms_norm_bwd.cu, layer_norm.cu,
// layer_norm_bwd.cu), torch-free.
//
// - Row groups: a row is handled by `tpr` threads (1 .. 512: a power of two up to a warp, whole warps
//   beyond) of a block that holds blockDim.x / tpr rows. group_sum() reduces K values over the group: xor
//   shuffles inside the warp (groups never straddle a warp when tpr <= warp size), then, when a row spans
//   several warps, one value per warp through shared memory. Every thread of the block must call it (it has barriers when
//   tpr > warp size), so row loops are block-uniform and out-of-range rows are masked, never skipped.
// - block_sum_k(): the same for a whole block (one row per block, the long-row paths).
// - Launch facts (SMs, resident blocks), the register path's row plan and the persistent grid.
// The backwards' own pieces are in norm_bwd_common.cuh.
#pragma once

#include <cstdint>

#include "common.cuh"
#include "launch_facts.cuh"

namespace yirage::kernels::cuda::norm {

// The launch facts (launch_facts.cuh), long used here under norm::.
using cuda::blocks_per_sm;
using cuda::device_attribute;
using cuda::sm_count;
using cuda::smem_optin;

// A warp's sums of K values (K a power of two up to the warp size) by a reduce-scatter butterfly: at each of the
// first log2(K) steps a lane keeps half of the values it holds and adds its partner's copy of that half (one shuffle
// per value kept), then a plain butterfly over the remaining lane bits. Returns the warp's total of value
// k = lane / (kWarpSize / K), the same bits on every lane that holds it (each step adds the same two partial sums on
// both lanes, a + b == b + a). K = 4: 6 shuffles and adds and 6 selects, where a butterfly per value takes 20 of each.
// (group_sum's kScatter.)
template <int K, typename A>
__device__ __forceinline__ A warp_sum_scatter(const A (&v)[K], int lane) {
  static_assert(K >= 1 && (K & (K - 1)) == 0 && K <= kWarpSize, "K: a power of two up to the warp size");
  A cur[K];
#pragma unroll
  for (int k = 0; k < K; ++k) cur[k] = v[k];
#pragma unroll
  for (int s = 0; (1 << s) < K; ++s) {
    const int n = K >> s, m = kWarpSize >> (s + 1);  // values held, the partner's lane bit
    const bool up = (lane & m) != 0;               // keeps the upper half
#pragma unroll
    for (int k = 0; k < n / 2; ++k) {
      const A send = up ? cur[k] : cur[k + n / 2];
      const A keep = up ? cur[k + n / 2] : cur[k];
      cur[k] = keep + shfl_xor(send, m);
    }
  }
  A t = cur[0];
#pragma unroll
  for (int m = kWarpSize / K / 2; m > 0; m /= 2) t += shfl_xor(t, m);
  return t;
}

// Sum of K values over a group of `tpr` consecutive threads (a power of two up to the warp size, else a whole
// number of warps, at most 512 threads); every thread of the group gets the sums, the same bits on each. `sub` is
// the caller's group in the block (threadIdx.x / tpr). `smem` holds blockDim.x / kWarpSize * K values (only used
// when tpr > kWarpSize). Groups within a warp take a butterfly per value; whole warps too, then (several warps a
// row) one value per warp through shared memory, summed by a second butterfly: no division, no loop over the warps
// (the per-row overhead this replaces was a third of the forward kernels' instructions; rms_norm.cu).
// kScatter (whole warps): warp_sum_scatter instead, then lane l adds entries l, l + warp size, ... of the row's
// [warp][k] totals in shared memory, a butterfly over the lanes that hold the same value and a broadcast of each
// total: K = 4 over 16 warps about 31 instructions a thread where the butterflies take 84. Taken by the backward
// kernels of 2 vectors a thread or fewer, whose reductions are a large share of a row's work (16 elements a
// thread), and by layer_norm's 16-bit 4-vector backward (bf16 2048x16384 1.04x); fp32 layer_norm 4-vector ran 2%
// slower with it, and the forwards level (H200, 2026-11-27; cuda-norm-bwd-issue-h200-2026-11-27.md).
// kBarrierAfter false: no barrier after the reads of `smem`, for callers that alternate two buffers (the next
// call's writes to this buffer come after a barrier every thread reaches only once it has read this one).
template <int K, bool kBarrierAfter = true, bool kScatter = false, typename A>
__device__ __forceinline__ void group_sum(A (&v)[K], int tpr, int sub, A* smem) {
  if (tpr < kWarpSize || !kScatter) {
    if (tpr >= kWarpSize) {
#pragma unroll
      for (int m = kWarpSize / 2; m > 0; m /= 2) {
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] += shfl_xor(v[k], m);
      }
    } else {
      for (int m = tpr / 2; m > 0; m /= 2) {
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] += shfl_xor(v[k], m);
      }
    }
    if (tpr > kWarpSize) {
      // one value per warp through shared memory; lane l of every warp of the row reads warp l's and a second
      // butterfly sums them (a row has at most 512 / kWarpSize warps)
      const int wpr = tpr / kWarpSize;
      const int warp = threadIdx.x / kWarpSize, l = threadIdx.x % kWarpSize;
      if (l == 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) smem[warp * K + k] = v[k];
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < K; ++k) v[k] = l < wpr ? smem[(sub * wpr + l) * K + k] : A(0);
#pragma unroll
      for (int m = kWarpSize / 2; m > 0; m /= 2) {
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] += shfl_xor(v[k], m);
      }
      if constexpr (kBarrierAfter) __syncthreads();
    }
    return;
  }
  const int l = threadIdx.x % kWarpSize;
  A t = warp_sum_scatter<K>(v, l);  // this warp's total of value l / (kWarpSize / K)
  if (tpr > kWarpSize) {
    const int wpr = tpr / kWarpSize;
    const int warp = threadIdx.x / kWarpSize;
    if (l % (kWarpSize / K) == 0) smem[warp * K + l / (kWarpSize / K)] = t;
    __syncthreads();
    // the row's wpr * K entries, [warp][k]: lane l adds those congruent to l modulo the warp size (all of value l % K)
    const A* row = smem + sub * wpr * K;
    t = A(0);
#pragma unroll 2
    for (int i = l; i < wpr * K; i += kWarpSize) t += row[i];
#pragma unroll
    for (int m = K; m < kWarpSize; m *= 2) t += shfl_xor(t, m);  // lane l: the row's total of value l % K
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = shfl(t, k);
    if constexpr (kBarrierAfter) __syncthreads();
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = shfl(t, k * (kWarpSize / K));
  }
}

// Whether `pred` holds for any thread of the row groups that reduce together: the warp when a row fits in
// one (tpr <= warp size: the reductions are warp-wide shuffles), else the whole block (barriers). The
// branch it decides is then uniform wherever a reduction inside it needs that. Every thread calls it.
__device__ __forceinline__ bool group_any(bool pred, int tpr) {
  return tpr <= kWarpSize ? warp_any(pred) : __syncthreads_or(pred) != 0;
}

// group_any of a predicate computed from group_sum's results only: those are bit-identical on every thread of
// the row (each butterfly step adds the same two values on both lanes, a + b == b + a; the warps of a row sum the
// same partials in the same order), so where a block holds one row the predicate is already uniform and needs no
// barrier; otherwise as group_any.
__device__ __forceinline__ bool group_any_of_sums(bool pred, int tpr) {
  return tpr <= kWarpSize ? warp_any(pred) : int(blockDim.x) == tpr ? pred : __syncthreads_or(pred) != 0;
}

// Sum of K values over the whole block; every thread gets the sums. `smem`: 1024 / kWarpSize * K values.
template <int K, typename A>
__device__ __forceinline__ void block_sum_k(A (&v)[K], A* smem) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = warp_sum(v[k]);
  if (warps == 1) return;
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) smem[warp * K + k] = v[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = A(0);
  for (int w = 0; w < warps; ++w) {
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] += smem[w * K + k];
  }
  __syncthreads();
}

inline int next_pow2(int64_t v) {
  int p = 1;
  while (p < v && p < (1 << 30)) p *= 2;
  return p;
}

// The current device's peak DRAM bandwidth per SM in GB/s (memory clock x 2 transfers x bus width / SMs; an H100
// SXM: 3352 GB/s over 132 SMs, 25.4; an H200: 4814 over 132, 36.5), 0 if the device does not say. A latency-bound
// kernel needs bytes in flight per SM in proportion to it.
inline double dram_gbs_per_sm() {
  const int khz = device_attribute(cudaDevAttrMemoryClockRate, -4, 0);
  const int bits = device_attribute(cudaDevAttrGlobalMemoryBusWidth, -5, 0);
  return 2.0 * double(khz) * 1e3 * double(bits / 8) / 1e9 / double(sm_count());
}

constexpr int64_t kMaxGrid = 0x7fffffff;

// A persistent grid of `kernel`: as many blocks of `block` threads as the GPU holds at once (at least one per SM),
// capped by the `groups` of rows there are to do.
template <typename K>
inline dim3 resident_grid(K kernel, int block, int64_t groups) {
  const int64_t cap = int64_t(sm_count()) * blocks_per_sm(kernel, block, 0);
  const int64_t n = groups < cap ? groups : cap;
  return dim3(unsigned(n < kMaxGrid ? n : kMaxGrid));
}

// The register-resident path: a row of `nvec` 16-byte vectors over `tpr` threads with `nv` vectors each.
struct RowPlan {
  bool regs = false;  // false: one block per row, looping over global memory
  int nv = 0;         // vectors per thread (1, 2, 4 or 8)
  int tpr = 0;        // threads per row (<= 512: a power of two up to a warp, else whole warps)
  int block = 0;      // threads per block (tpr, or as many rows of tpr as fit `block_threads`)
};

// Rows up to 512 * max_nv vectors (max_nv 8: 32K bf16/f16 elements, 16K fp32) stay in registers; each
// thread holds about 4 vectors (32 bf16 / 16 fp32 elements), a row gets as many threads as that needs.
// `target`: the vectors per thread aimed at (fewer for kernels with more registers per element).
// `whole_warps`: a row of more than a warp's worth gets the fewest whole warps that hold it at `target` vectors
// each, not the next power of two of threads (kernels whose row groups reduce with group_sum and vote with
// group_any, which take any number of warps per row; a block then holds one row, or as many as fit block_threads).
// 5120 bf16 columns: 160 threads x 4 vectors, where a power of two (256 x 4) leaves 3/8 of the slots idle.
// `block_threads`: rows of fewer threads share blocks of this many (the forwards: kFwdBlockThreads).
inline RowPlan plan_rows(int64_t nvec, int max_nv = 8, int target = 4, bool whole_warps = false,
                         int block_threads = 256) {
  RowPlan r;
  if (nvec <= 0 || nvec > int64_t(512) * max_nv) return r;
  const int64_t want = (nvec + target - 1) / target;
  int tpr = next_pow2(want);
  if (whole_warps && want > kWarpSize) tpr = int((want + kWarpSize - 1) / kWarpSize * kWarpSize);
  if (tpr > 512) tpr = 512;
  const int64_t need = (nvec + tpr - 1) / tpr;
  r.nv = need <= 1 ? 1 : need <= 2 ? 2 : need <= 4 ? 4 : 8;
  r.tpr = tpr;
  r.block = tpr >= block_threads ? tpr : tpr * (block_threads / tpr);
  r.regs = true;
  return r;
}

// A register plan's per-launch facts, computed on the host and passed to the forward kernels. Computed in the kernel
// (rows per block and the thread's row and lane by 32-bit divisions, the row-group count by a 64-bit one, 1 / cols by
// an IEEE division) they took about 150 instructions a warp, most of them a dependent chain ahead of the row's first
// load, and with a block per row group every row paid for them.
struct RowGroups {
  int tpr = 0;         // threads per row
  int shift = -1;      // log2(tpr) when tpr is a power of two, else -1
  int rpb = 0;         // rows per block
  int nvec = 0;        // 16-byte vectors per row
  int64_t groups = 0;  // row groups (blocks' worth of rows)
  float inv_n = 0.f;   // 1 / cols, rounded as the kernels would round it

  // the calling thread's row within its block's group
  __device__ __forceinline__ int sub() const {
    return shift >= 0 ? int(threadIdx.x) >> shift : int(threadIdx.x) / tpr;
  }
};
inline RowGroups row_groups(const RowPlan& rp, int64_t rows, int64_t cols, int v) {
  RowGroups g;
  g.tpr = rp.tpr;
  for (int s = 0; s < 31; ++s) {
    if ((1 << s) == rp.tpr) g.shift = s;
  }
  g.rpb = rp.block / rp.tpr;
  g.nvec = int(cols / v);
  g.groups = (rows + g.rpb - 1) / g.rpb;
  g.inv_n = 1.f / float(cols);
  return g;
}

// Block size the norm forwards' row groups fill (plan_rows' block_threads): one row per block from 64 threads per
// row up, two rows of 32. Against 256 (eight rows of a warp, two of 128 threads) it ran level or faster at every
// shape measured on an H200, kernel alone: layer_norm bf16 8192x2048 24.0 -> 22.7 us, 16384x4096 75.2 -> 73.2,
// fp32 65536x1024 133.7 -> 131.0; rms_norm fp32 65536x1024 134.3 -> 130.9, fused bf16 65536x1024 135.4 -> 132.7
// (benchmarks/results/cuda-norm-param-evict-h200-2026-11-26.md). The backwards keep 256.
constexpr int kFwdBlockThreads = 64;

// Threads per block of the long-row (global memory) path for `units` accesses per row.
inline int general_block(int64_t units) {
  int t = kWarpSize;
  while (t < 1024 && int64_t(t) * 4 < units) t *= 2;
  return t;
}

}  // namespace yirage::kernels::cuda::norm
