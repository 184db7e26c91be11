// The Hopper dK/dV kernel's configuration (Sm90BwdConfig: tile sizes, registers, shared-memory layout) and its
// producer's per-tile copy step (sm90_bwd_produce_tile, also the D = 256 kernel's). Device code, torch-free; CUDA
// only. The kernel and its scheme: attention_bwd_sm90.cuh.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>

#include <cuda.h>  // CUtensorMap

#include "attention_bwd_tile.cuh"
#include "wgmma_sm90.cuh"

namespace yirage::kernels::cuda {
namespace {

template <int kD_>
struct Sm90BwdConfig {
  static constexpr int kD = kD_;
  static constexpr int kBlockN = 128;                  // keys per block: 64 per math warpgroup
  static constexpr int kBlockM = kD == 64 ? 128 : 64;  // query rows per tile
  static constexpr int kThreads = 384;                 // the producer warpgroup, then two math warpgroups
  // Registers per thread after setmaxnreg: the math warpgroups take what the producer gives back (the CTA's pool,
  // at the launch's even share of 168). D = 128: 40 / 232. D = 64: 24 / 240. With Q and dO by TMA, 24 / 240 (ptxas:
  // 356 bytes of producer spills, in its copy paths) against 40 / 232 (24-56 bytes), kernel alone, H200, 2026-11-28:
  // D64 B4 H32 S4096 0.96-1.05x (7 rounds), causal 1.02-1.03x, B2 S8192 causal 1.03-1.04x, GQA (Hk 8) S2048 causal
  // 1.02-1.03x; D128 0.98-1.00x, causal 0.94-0.98x, B2 S8192 causal 0.95-1.00x (cuda-probes-h200-2026-11-28.md).
  // Before Q and dO moved to TMA the producer spilled 500 bytes at 24 and the kernel was slower for both.
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = kD == 64 ? 24 : 40;
  static constexpr int kMathRegs = (3 * kLaunchRegs - kProducerRegs) / 2 / 8 * 8;
  static_assert(2 * (kMathRegs - kLaunchRegs) <= kLaunchRegs - kProducerRegs, "register pool");
  static_assert(kProducerRegs >= 24 && kProducerRegs % 8 == 0 && kMathRegs <= 256, "setmaxnreg: 24..256, by 8");
  // The producer's view of the walk (BwdTraits): 128 threads, lse and delta by cp.async.
  using Walk = BwdTile<kBlockN, kBlockM, 1, 32, 1, true>;
  // Shared memory (bytes from the first 1024-byte boundary): K, V, two stages of Q and dO, dS^T (kBlockN rows
  // of kBlockM queries), two stages of lse / delta / key limits.
  static constexpr int kKV = kBlockN * kD * 2, kQ = kBlockM * kD * 2, kDS = kBlockN * kBlockM * 2;
  static constexpr int kRow = kBlockM * 4;
  static constexpr int kOffK = 0, kOffV = kKV, kOffQ = 2 * kKV, kOffDO = kOffQ + 2 * kQ, kOffDS = kOffDO + 2 * kQ,
                       kOffLse = kOffDS + kDS, kOffDelta = kOffLse + 2 * kRow, kOffLim = kOffDelta + 2 * kRow;
  // dQ parts, staged for the bulk reductions: two buffers of kBlockM rows of kD floats in dq_accum's layout (16-byte
  // chunk c of packed row R at chunk c ^ 2 (R % 4): the four rows of a half-warp's float2 stores fall in different
  // banks; with c ^ (R % 8) rows 2i and 2i + 1 shared theirs, two-way conflicts), so that a tile goes out in one
  // reduction.
  static constexpr int kDqRow = kD * 4, kDqBuf = kBlockM * kDqRow;
  // kD = 128: S^T and dP^T waited for one after the other (P^T computed and dV's products issued while dP^T is on the
  // tensor cores); kD = 64: both at once (the split was 1-2% slower there).
  static constexpr bool kSplitWaits = kD == 128;
  static constexpr int kOffDq = kOffLim + 2 * kRow;
  static constexpr int kOffBar = kOffDq + 2 * kDqBuf;  // mbarriers: full[2], empty[2], dq_full[2], dq_empty[2]
  static constexpr int kSmem = kOffBar + 8 * 8 + 1024;
  static constexpr int kDqM = kBlockM / 64;  // a tile's dQ part: kDqM products of m64 x kD (one warpgroup)
  static_assert(kD == 64 || kD == 128, "wgmma n = head dim for dK / dV: 64 or 128 here");
  static_assert(kBlockM == 64 || kBlockM == 128, "wgmma n = query tile for S^T / dP^T: 64 or 128");
  static_assert(BwdTraits<kD, Walk>::kThreads == 128, "the producer warpgroup copies");
  static_assert(kOffDS % 1024 == 0 && kOffQ % 1024 == 0, "wgmma tiles start at 1024-byte boundaries");
  static_assert(kOffDq % 16 == 0 && kDqRow % 16 == 0 && kOffBar % 8 == 0 && kSmem <= 232448,
                "bulk copies: 16-byte aligned rows");
};

// Q and dO of a tile by the tensor memory accelerator: maps of Q and dO (attention_tma_map.h, boxes of 64 columns x
// the tile's rows) and the coordinates of the tile's first row, (batch b, query head hq0 + walk.h, position walk.i).
struct Sm90BwdQTma {
  const CUtensorMap* q;
  const CUtensorMap* dout;
  int hq0, b;
};

// A producer warpgroup's thread (this kernel's and attention_bwd_sm90_d256.cuh's): the walk's current tile, its
// j-th, into stage s = j % 2 (Cfg's Q / dO tiles at base, lse / delta / key limits) once both math warpgroups have
// released the stage (mbarrier empty, a fresh one passing at once); then full: this thread's copies arrive when they
// land, then the thread itself, releasing its plain stores of the key limits. tma (not null): thread 0 copies Q and
// dO by the tensor memory accelerator instead, its own arrival the one that expects their bytes (rows past Sq come
// back as zeros: the launcher maps only tiles that lie in one query head). H200, 2026-11-28, the D = 64 / 128 kernel
// with TMA against the producer's cp.async copies of Q and dO: D128 B4 H32 S4096 1.01-1.02x, causal 1.01x, GQA (Hk 8)
// S2048 causal 1.01-1.03x, B2 S8192 causal 1.01-1.05x, D64 1.00-1.01x.
template <typename Cfg, typename Walk>
__device__ __forceinline__ void sm90_bwd_produce_tile(const Walk& walk, int j, uint32_t full, uint32_t empty,
                                                      uint32_t base, float* lse, float* delta, int* lim,
                                                      const Sm90BwdQTma* tma = nullptr) {
  const int s = j & 1;
  sm90::mbar_wait(empty, ((j >> 1) & 1) ^ 1);
  const uint32_t sQ = base + Cfg::kOffQ + s * Cfg::kQ, sDO = base + Cfg::kOffDO + s * Cfg::kQ;
  const bool lead = tma != nullptr && threadIdx.x == 0;
  walk.load_rows(lse + s * Cfg::kBlockM, delta + s * Cfg::kBlockM, lim + s * Cfg::kBlockM);  // (before lead's arrival)
  if (lead) {
    sm90::mbar_arrive_expect_tx(full, 2 * Cfg::kQ);
#pragma unroll
    for (int c = 0; c < Cfg::kD / 64; ++c) {
      sm90::tma_load_4d(sQ + c * Cfg::kBlockM * 128, tma->q, 64 * c, walk.i, tma->hq0 + walk.h, tma->b, full);
      sm90::tma_load_4d(sDO + c * Cfg::kBlockM * 128, tma->dout, 64 * c, walk.i, tma->hq0 + walk.h, tma->b, full);
    }
  } else if (tma == nullptr) {
    walk.load_tiles(sQ, sDO);
  }
  sm90::mbar_arrive_cp_async(full);
  if (!lead) sm90::mbar_arrive(full);
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
