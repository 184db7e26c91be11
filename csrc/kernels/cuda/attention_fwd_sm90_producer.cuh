// The producer warpgroup of the Hopper attention forward (flash_attention_fwd_sm90_kernel, attention_fwd_sm90.cuh;
// device code, torch-free; CUDA sm_90a only) and the block's stage barriers it shares with the consumers.
//
// The producer streams the key and value tiles of the block's key range through kStages stages of swizzled shared
// memory (wgmma_sm90.cuh's layout): stage s is refilled once every consumer warp released it (empty_k/v[s]), and its
// copies' completion arrives on full_k/v[s]. Either the warpgroup's 128 threads copy 16-byte chunks with cp.async
// (chunk pt % kChunks of rows pt / kChunks + i * kRowStep of every tile; rows past Sk zero-filled, and
// cp.async.mbarrier.arrive signals the stage), or (Cfg::kTma) one thread issues a tensor-memory-accelerator copy per
// 64-column panel (the hardware's 128-byte swizzle is the consumers' layout; rows past Sk come back as zeros) and
// the bytes complete on full_k/v[s] (expect_tx).
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>

#include <cuda.h>  // CUtensorMap

#include "attention_fwd_config.cuh"
#include "mma_sm80.cuh"
#include "wgmma_sm90.cuh"

namespace yirage::kernels::cuda {
namespace {

// The block's mbarriers, 8 bytes each from `base`: full_k[s], full_v[s], empty_k[s], empty_v[s], full_q.
template <int kStages>
struct Sm90FwdBars {
  static constexpr int kCount = 4 * kStages + 1;
  uint32_t base;
  __device__ __forceinline__ explicit Sm90FwdBars(uint32_t b) : base(b) {}
  __device__ __forceinline__ uint32_t full_q() const { return base + 4 * kStages * 8; }  // the query tile by TMA
  __device__ __forceinline__ uint32_t full_k(int s) const { return base + s * 8; }
  __device__ __forceinline__ uint32_t full_v(int s) const { return base + (kStages + s) * 8; }
  __device__ __forceinline__ uint32_t empty_k(int s) const { return base + (2 * kStages + s) * 8; }
  __device__ __forceinline__ uint32_t empty_v(int s) const { return base + (3 * kStages + s) * 8; }
};

// Thread pt (0..127) of the producer warpgroup: tiles 0 .. n_blocks - 1 of key/value head hk of batch b into the
// stages at s_k / s_v. Returns once its last copy is issued (cp.async: completed).
template <typename T, typename Cfg>
__device__ __forceinline__ void sm90_fwd_produce(const FwdParams& p, const CUtensorMap* tm_k, const CUtensorMap* tm_v,
                                                 int pt, int hk, int b, int n_blocks, uint32_t s_k, uint32_t s_v,
                                                 const Sm90FwdBars<Cfg::kStages>& bars) {
  using namespace sm80;
  using namespace sm90;
  constexpr int kD = Cfg::kD, kBlockN = Cfg::kBlockN, kChunks = Cfg::kChunks, kStages = Cfg::kStages;
  if constexpr (Cfg::kTma) {
    if (pt != 0) return;
    constexpr int kPanels = kD / 64;
    constexpr uint32_t kBytes = Cfg::kTileKV;  // the whole box counts, rows past Sk (zeros) included
    for (int nb = 0; nb < n_blocks; ++nb) {
      const int s = nb % kStages;
      const uint32_t parity = ((nb / kStages) & 1) ^ 1;
      mbar_wait(bars.empty_k(s), parity);
      mbar_arrive_expect_tx(bars.full_k(s), kBytes);
#pragma unroll
      for (int c = 0; c < kPanels; ++c) {
        tma_load_4d(s_k + s * Cfg::kTileKV + c * kBlockN * 128, tm_k, 64 * c, nb * kBlockN, hk, b, bars.full_k(s));
      }
      mbar_wait(bars.empty_v(s), parity);
      mbar_arrive_expect_tx(bars.full_v(s), kBytes);
#pragma unroll
      for (int c = 0; c < kPanels; ++c) {
        tma_load_4d(s_v + s * Cfg::kTileKV + c * kBlockN * 128, tm_v, 64 * c, nb * kBlockN, hk, b, bars.full_v(s));
      }
    }
    return;
  }
  constexpr int kRowStep = 128 / kChunks, kIters = kBlockN / kRowStep;
  const int sk = p.seq_k;
  const int row0 = pt / kChunks, ch0 = pt % kChunks;
  const T* k_next = static_cast<const T*>(p.k) + b * p.k_b + hk * p.k_h + static_cast<int64_t>(row0) * p.k_s + ch0 * 8;
  const T* v_next = static_cast<const T*>(p.v) + b * p.v_b + hk * p.v_h + static_cast<int64_t>(row0) * p.v_s + ch0 * 8;
  const int64_t k_step = kRowStep * p.k_s, v_step = kRowStep * p.v_s;
  auto load_rows = [&](uint32_t dst, const T*& next, int64_t step, const T* base, int nb) {
    const int rows_left = sk - nb * kBlockN - row0;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const bool valid = i * kRowStep < rows_left;  // rows past Sk are zeros (0 * V stays 0 under p = 0)
      cp_async_16(dst + sw128_offset(row0 + i * kRowStep, ch0, kBlockN), valid ? next + i * step : base, valid);
    }
    next += kIters * step;
  };
  for (int nb = 0; nb < n_blocks; ++nb) {
    const int s = nb % kStages;
    const uint32_t parity = ((nb / kStages) & 1) ^ 1;
    mbar_wait(bars.empty_k(s), parity);
    load_rows(s_k + s * Cfg::kTileKV, k_next, k_step, static_cast<const T*>(p.k), nb);
    mbar_arrive_cp_async(bars.full_k(s));
    mbar_wait(bars.empty_v(s), parity);
    load_rows(s_v + s * Cfg::kTileKV, v_next, v_step, static_cast<const T*>(p.v), nb);
    mbar_arrive_cp_async(bars.full_v(s));
  }
  cp_async_wait<0>();
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
