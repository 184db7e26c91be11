// The flash attention backward's tile shapes, kernel arguments and query-tile walk (device code, torch-free;
// CUDA only). Included by attention_bwd_kernel.cuh; attention_bwd.cu's header comment describes the algorithm.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>

#include "attention.h"
#include "attention_tile_order.cuh"
#include "common.cuh"
#include "mma_sm80.cuh"

namespace yirage::kernels::cuda {
namespace {

using namespace sm80;

// A tile shape: kBlockN keys per block, kBlockM query rows per tile, kWarpKeys keys per warp; kDSplit warps
// share a key slice for dK / dV (each owns kD / kDSplit columns); kQSplit: warps sharing a key slice split the
// tile's query rows for S^T and dP^T (1: each computes all of them) and exchange P^T and dS^T through shared
// memory (kQSplit = kDSplit); kAsyncRows: the rows' lse and delta are copied with cp.async and the next
// query tile's copies issued after the barrier that opens a tile (else: plain loads, copies issued before it;
// see the kernel's loop).
template <int kBlockN_, int kBlockM_, int kDSplit_, int kWarpKeys_ = 16, int kQSplit_ = 1, bool kAsyncRows_ = false>
struct BwdTile {
  static constexpr int kBlockN = kBlockN_, kBlockM = kBlockM_, kDSplit = kDSplit_, kWarpKeys = kWarpKeys_,
                       kQSplit = kQSplit_;
  static constexpr bool kAsyncRows = kAsyncRows_;
};
// The tile shapes per head dim (see attention_bwd.cu): `wide` where a block may use that much shared memory
// (sm_90; sm_80 for kD = 64 and 128), `type` otherwise (sm_86 / sm_89: 99 KB). kAsyncRows on every wide
// tile: faster on an H100 (B4 S4096 bf16, backward harness benchmarks/cuda/attention_bwd_tune.cu: kD = 128 10.9 ->
// 10.3 ms, kD = 256 13.9 -> 12.9 ms, kD = 64 6.05-6.12 -> 5.77-5.82 ms; kD = 64 lost 6-10% in builds without the
// unmasked fast path); the narrow tiles were not measured and keep plain loads.
template <int kD>
struct BwdConfig;
template <>
struct BwdConfig<64> {
  using type = BwdTile<128, 64, 1>;
  using wide = BwdTile<128, 128, 2, 32, 2, true>;
};
template <>
struct BwdConfig<128> {
  using type = BwdTile<64, 32, 1>;
  using wide = BwdTile<128, 64, 2, 32, 2, true>;
};
template <>
struct BwdConfig<256> {
  using type = BwdTile<64, 32, 2>;
  using wide = BwdTile<64, 64, 4, 32, 4, true>;
};

template <int kD, typename Cfg = typename BwdConfig<kD>::type>
struct BwdTraits {
  static constexpr int kBlockN = Cfg::kBlockN, kBlockM = Cfg::kBlockM, kDSplit = Cfg::kDSplit;
  static constexpr int kWarpKeys = Cfg::kWarpKeys, kQSplit = Cfg::kQSplit;
  static constexpr bool kAsyncRows = Cfg::kAsyncRows;
  static constexpr int kMI = kWarpKeys / 16;  // 16-key MMA row tiles per warp
  static constexpr int kKeyWarps = kBlockN / kWarpKeys;
  static constexpr int kWarps = kKeyWarps * kDSplit;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kDW = kD / kDSplit;                    // dK / dV columns per warp
  static constexpr int kWarpQ = kBlockM / kQSplit;            // query rows per warp in S^T and dP^T
  static constexpr int kSCols = kBlockM < 64 ? 64 : kBlockM;  // P^T / dS^T tile row length (a swizzled row >= 64)
  static constexpr int kChunks = kD / 8;                      // 16-byte chunks per row of Q, K, V, dO
  // shared memory (bytes): K, V, two stages of Q and dO, dS^T (and P^T when kQSplit > 1), two stages of
  // lse / delta / key limits
  static constexpr int kKV = kBlockN * kD * 2;
  static constexpr int kQ = kBlockM * kD * 2;
  static constexpr int kDS = kBlockN * kSCols * 2;
  static constexpr int kRow = kBlockM * 4;
  static constexpr int kOffK = 0, kOffV = kKV, kOffQ = 2 * kKV, kOffDO = kOffQ + 2 * kQ, kOffDS = kOffDO + 2 * kQ,
                       kOffP = kOffDS + kDS, kOffLse = kOffP + (kQSplit > 1 ? kDS : 0),
                       kOffDelta = kOffLse + 2 * kRow, kOffLim = kOffDelta + 2 * kRow;
  static constexpr int kSmem = kOffLim + 2 * kRow;
  static_assert(kBlockM % (16 * kQSplit) == 0 && kWarpKeys % 16 == 0 && kDW % 16 == 0 && kD % 64 == 0,
                "tile shape");
  static_assert(kQSplit == 1 || kQSplit == kDSplit, "the warps of a key slice split queries as they split dK / dV");
  static_assert(kRow % 128 == 0, "shared arrays stay 128-byte aligned");
  static_assert(kThreads >= kBlockM, "one thread per query row loads lse, delta and the key limit");
};

// One lane's ldmatrix addresses in a swizzled tile for the rows row_l + 16 R and the chunks 2 J + cb
// (row_l and cb depend on the lane): 16 R rows keep row % 8, and chunk bits above the three the swizzle
// XORs add, so every address is one of four registers plus a constant (which ptxas folds into the
// instruction) instead of a register per (R, J) pair held across the query loop.
template <int kCols>
struct BwdLaneTile {
  uint32_t x[4];
  __device__ __forceinline__ BwdLaneTile(uint32_t base, int row_l, int cb) {
#pragma unroll
    for (int j = 0; j < 4; ++j) x[j] = base + SwizzledTile<kCols>::offset(row_l, 2 * j + cb);
  }
  // = base + SwizzledTile<kCols>::offset(row_l + 16 R, 2 J + cb)
  __device__ __forceinline__ uint32_t at(int R, int J) const {
    return x[J & 3] + static_cast<uint32_t>(R * 16 * kCols * 2 + (J >> 2) * 128);
  }
};

// Kernel arguments: the entry point's parameters and the derived sizes.
struct BwdArgs {
  AttentionBackward p;
  int64_t group;       // G = Hq / Hk
  int64_t group_rows;  // G * Sq: stacked query rows per key/value head
  int64_t q_tiles;     // ceil(G * Sq / kBlockM)
  int key_blocks;      // ceil(Sk / kBlockN)
  float scale_log2;    // scale * log2(e)
};

// A block's place: key block nb (first key n_base) of key/value head hk of batch b; row_base is that head's packed
// row 0 in (B, Hq, Sq). Without a mask blockIdx.x = (b * Hk + hk) * key_blocks + nb: the blocks running at once
// share a few heads' Q, dO and dq_accum in L2. Under a causal mask a block's work falls with nb (key block 0 sees
// every query), and that order left the last heads' longest blocks to start last; there the heads go in groups
// of kLptHeads, each group's blocks by nb, then head (longest first; L2 shared by a group's heads). Hopper kernel,
// H200, 2026-11-28, against the plain order: D128 B4 H32 S4096 1.02x, S2048 1.03x, D64 1.02x, GQA (Hk 8) S2048
// 1.17x, B2 S8192 1.02-1.08x, D256 level; groups of 16 within 3% of 8, of 4 up to 10% slower (GQA, S8192).
struct BwdBlock {
  static constexpr int kLptHeads = kCausalLptHeads;  // (attention_tile_order.cuh)
  int64_t hk = 0, b = 0, n_base = 0, row_base = 0;
  __device__ __forceinline__ BwdBlock(const BwdArgs& a, int block_n) {
    const int64_t bid = blockIdx.x;
    int nb;
    int64_t head;  // b * Hk + hk
    if (a.p.shape.causal) {
      const int64_t per_group = static_cast<int64_t>(kLptHeads) * a.key_blocks, grp = bid / per_group;
      const int64_t in = bid - grp * per_group, heads = a.p.shape.batch * a.p.shape.heads_k;
      const int64_t here = heads - grp * kLptHeads < kLptHeads ? heads - grp * kLptHeads : kLptHeads;
      nb = static_cast<int>(in / here);
      head = grp * kLptHeads + in % here;
    } else {
      nb = static_cast<int>(bid % a.key_blocks);
      head = bid / a.key_blocks;
    }
    hk = head % a.p.shape.heads_k;
    b = head / a.p.shape.heads_k;
    n_base = static_cast<int64_t>(nb) * block_n;
    row_base = (b * a.p.shape.heads_k + hk) * a.group_rows;
  }
  // cp.async copies of the block's K and V tiles (kBlockN x kD, rows past Sk zero-filled) to shared memory at sK
  // and sV, chunk c of row r at Layout::offset(r, c), by the kThreads threads of the block.
  template <typename T, int kD, int kBlockN, int kThreads, typename Layout>
  __device__ __forceinline__ void load_kv(const AttentionBackward& p, uint32_t sK, uint32_t sV) const {
    constexpr int kChunks = kD / 8;
    const T* kb = static_cast<const T*>(p.k.ptr) + b * p.k.batch_stride + hk * p.k.head_stride;
    const T* vb = static_cast<const T*>(p.v.ptr) + b * p.v.batch_stride + hk * p.v.head_stride;
    for (int c = threadIdx.x; c < kBlockN * kChunks; c += kThreads) {
      const int row = c / kChunks, ch = c % kChunks;
      const bool valid = n_base + row < p.shape.seq_k;
      const int64_t j = valid ? n_base + row : 0;
      const uint32_t off = Layout::offset(row, ch);
      cp_async_16(sK + off, valid ? kb + j * p.k.seq_stride + ch * 8 : p.k.ptr, valid);
      cp_async_16(sV + off, valid ? vb + j * p.v.seq_stride + ch * 8 : p.v.ptr, valid);
    }
  }
};

// The walk of one block over the query tiles of its key/value head: tile m holds the stacked rows
// m * kBlockM .. (row r = (head hk * G + r / Sq, position r % Sq)). The cursor (m, h, i) names the tile's first
// row as (head offset h, position i) and is stepped, not divided out (the launcher keeps G * Sq + kBlockM below
// 2^31). Tiles that a causal mask hides from the block's keys entirely are skipped. `Layout::offset(row, chunk)`
// places 16-byte chunk `chunk` of tile row `row` in the shared Q and dO tiles.
template <typename T, int kD, typename Cfg, typename Layout = SwizzledTile<kD>>
struct BwdQueryWalk {
  using Tr = BwdTraits<kD, Cfg>;
  static constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN;
  static constexpr int kRowStep = Tr::kThreads / Tr::kChunks, kQIters = kBlockM / kRowStep;
  static_assert(Tr::kThreads % Tr::kChunks == 0 && kBlockM % kRowStep == 0, "whole rows per pass of the block");

  const BwdArgs& a;
  const int sq32, rows32, tid, row0, ch0;  // this thread copies chunk ch0 of the tile rows row0 + it * kRowStep
  const int64_t n_base, row_base;          // the block's first key; packed row 0 of the key/value head
  const T* q_head0;                        // chunk ch0 of (batch, head hk * G, position 0) of Q and dO
  const T* g_head0;
  int m = 0, h = 0, i = 0;                 // the cursor

  __device__ __forceinline__ BwdQueryWalk(const BwdArgs& args, int64_t b, int64_t hk, int64_t n0)
      : a(args), sq32(static_cast<int>(args.p.shape.seq_q)), rows32(static_cast<int>(args.group_rows)),
        tid(threadIdx.x), row0(threadIdx.x / Tr::kChunks), ch0(threadIdx.x % Tr::kChunks), n_base(n0),
        row_base((b * args.p.shape.heads_k + hk) * args.group_rows),
        q_head0(static_cast<const T*>(args.p.q.ptr) + b * args.p.q.batch_stride +
                hk * args.group * args.p.q.head_stride + ch0 * 8),
        g_head0(static_cast<const T*>(args.p.grad_out.ptr) + b * args.p.grad_out.batch_stride +
                hk * args.group * args.p.grad_out.head_stride + ch0 * 8) {}

  __device__ __forceinline__ bool done() const { return m >= a.q_tiles; }
  __device__ __forceinline__ void step() {
    ++m;
    for (i += kBlockM; i >= sq32; i -= sq32) ++h;
  }
  // Whether the tile has no visible key in this block: causal, and every row's last visible key i + Sk - Sq
  // lies before the block's first key (a tile reaching into the next head holds i = Sq - 1: never hidden).
  __device__ __forceinline__ bool hidden() const {
    if (!a.p.shape.causal) return false;
    const int r0 = m * kBlockM, span = (r0 + kBlockM < rows32 ? kBlockM : rows32 - r0) - 1;
    const int64_t i_max = i + span < sq32 ? i + span : sq32 - 1;
    return i_max + a.p.shape.seq_k - a.p.shape.seq_q < n_base;
  }
  // Moves on to the next tile with a visible key (or past the last tile).
  __device__ __forceinline__ void next() {
    while (!done() && hidden()) step();
  }

  // Q and dO of the current tile (rows past G * Sq zero-filled) into the shared tiles at sQ / sDO, and the
  // rows' lse, delta (rows past G * Sq: 0) and last visible key - n_base (clamped to -1 .. kBlockN; -1 for
  // rows past G * Sq and rows that see no key, whose lse is -inf) into s_lse / s_delta / s_lim. kAsyncRows: lse
  // and delta are cp.async copies of the caller's commit group, lse as it is; else lse is stored in log2 units
  // (+inf for rows past G * Sq and where it is -inf). A tile in one head is copied from one pointer per tensor
  // stepped by kRowStep positions, any other row by row.
  __device__ __forceinline__ void load(uint32_t sQ, uint32_t sDO, float* s_lse, float* s_delta, int* s_lim) const {
    load_tiles(sQ, sDO);
    load_rows(s_lse, s_delta, s_lim);
  }
  // load's Q and dO part.
  __device__ __forceinline__ void load_tiles(uint32_t sQ, uint32_t sDO) const {
    const AttentionBackward& p = a.p;
    const int r_base = m * kBlockM;
    const bool one_head = i + kBlockM <= sq32;  // the same for the whole block
    if (one_head) {
      const T* qs = q_head0 + h * p.q.head_stride + (i + row0) * p.q.seq_stride;
      const T* gs = g_head0 + h * p.grad_out.head_stride + (i + row0) * p.grad_out.seq_stride;
#pragma unroll
      for (int it = 0; it < kQIters; ++it) {
        const uint32_t off = Layout::offset(row0 + it * kRowStep, ch0);
        cp_async_16(sQ + off, qs + it * kRowStep * p.q.seq_stride, true);
        cp_async_16(sDO + off, gs + it * kRowStep * p.grad_out.seq_stride, true);
      }
    } else {
      int hh = h, ii = i + row0;
      for (; ii >= sq32; ii -= sq32) ++hh;
#pragma unroll
      for (int it = 0; it < kQIters; ++it) {
        const bool valid = r_base + row0 + it * kRowStep < rows32;
        const T* qs = static_cast<const T*>(p.q.ptr);
        const T* gs = static_cast<const T*>(p.grad_out.ptr);
        if (valid) {
          qs = q_head0 + hh * p.q.head_stride + ii * p.q.seq_stride;
          gs = g_head0 + hh * p.grad_out.head_stride + ii * p.grad_out.seq_stride;
        }
        const uint32_t off = Layout::offset(row0 + it * kRowStep, ch0);
        cp_async_16(sQ + off, qs, valid);
        cp_async_16(sDO + off, gs, valid);
        if (it + 1 < kQIters) {
          ii += kRowStep;
          for (; ii >= sq32; ii -= sq32) ++hh;
        }
      }
    }
  }
  // load's lse, delta and key-limit part.
  __device__ __forceinline__ void load_rows(float* s_lse, float* s_delta, int* s_lim) const {
    const AttentionBackward& p = a.p;
    const int r_base = m * kBlockM;
    const bool one_head = i + kBlockM <= sq32;
    if (tid < kBlockM) {
      const int r = r_base + tid;
      const bool valid = r < rows32;
      if constexpr (Tr::kAsyncRows) {
        // by cp.async like the tiles: a plain load holds this warp (and, at the next barrier, the block) for a
        // global-memory round trip per tile (Nsight Compute, kD = 128: barrier stalls 1.24 cycles per
        // instruction against FlashAttention-2's 0.25)
        cp_async_4(smem_u32(s_lse + tid), valid ? p.lse + row_base + r : p.lse, valid);
        cp_async_4(smem_u32(s_delta + tid), valid ? p.delta + row_base + r : p.delta, valid);
      } else {  // lse in log2 units, +inf where it is -inf (P = 0 without the mask)
        const float l = valid ? p.lse[row_base + r] : -INFINITY;
        s_lse[tid] = l == -INFINITY ? INFINITY : l * kLog2e;
        s_delta[tid] = valid ? p.delta[row_base + r] : 0.f;
      }
      const int64_t sk = p.shape.seq_k;
      int64_t lim = -1;
      if (valid) {
        lim = sk - 1;
        if (p.shape.causal) {
          const int64_t c = (one_head ? i + tid : r % sq32) + sk - p.shape.seq_q;
          lim = c < lim ? c : lim;
        }
        lim -= n_base;
        lim = lim < -1 ? -1 : (lim > kBlockN ? kBlockN : lim);
      }
      s_lim[tid] = static_cast<int>(lim);
    }
  }
};

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
