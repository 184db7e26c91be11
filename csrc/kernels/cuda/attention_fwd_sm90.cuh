// The flash attention forward on Hopper warpgroup MMAs (device code, torch-free; CUDA sm_90a only): prefill
// without key splits, fp16/bf16, head dims 64, 128 and 256. Included by attention_fwd.cu and by the tuning harness
// in benchmarks/cuda/. Same parameters and results as flash_attention_fwd_kernel (attention_fwd_kernel.cuh).
//
// Warp-specialized, as FlashAttention-3: one block per (tile of 64 x kWarpGroups stacked query rows, key/value head,
// batch): kWarpGroups (2 or 3) consumer warpgroups (warpgroup w owns rows 64w..64w+63) and one producer warpgroup.
//   producer (setmaxnreg down to kProducerRegs): streams the key and value tiles through kStages stages of shared
//     memory, by cp.async or (kTma) the tensor memory accelerator (attention_fwd_sm90_producer.cuh).
//   Its thread 0 first copies the query tile by TMA where no tile spans two query heads (the launcher's q_tma;
//     full_q): the consumers' own cp.async copies of it, the fallback, took 1.5-2.8 us of a block's start.
//   consumers (setmaxnreg up to kConsumerRegs): get their query rows, then per key tile wait for full_k/v,
//     compute, release. The warpgroups take turns at the tensor cores in a ring (named barrier 1 + w: warpgroup w's
//     turn, signalled by warpgroup w - 1): while one issues its products, the others run their softmax.
//   kOverlap = false, per key tile j: S_j = Q K_j^T (issued in turn, waited for), online softmax (the
//     FlashAttention-2 arithmetic, in log2 units), O += P_j V_j (A = P_j from registers; issued, not waited for).
//   kOverlap = true: S_j and P_{j-1} V_{j-1} issued together in turn; the softmax of S_j runs while P_{j-1} V_{j-1}
//     is on the tensor cores; O is rescaled once that product is done.
// The output goes out through the warpgroup's rows of the query tile (16-byte stores), with the log-sum-exp.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cuda.h>  // CUtensorMap

#include "attention_fwd_config.cuh"
#include "attention_fwd_sm90_producer.cuh"
#include "attention_tile_order.cuh"
#include "common.cuh"
#include "mma_sm80.cuh"
#include "wgmma_sm90.cuh"

namespace yirage::kernels::cuda {
namespace {

template <int kD_, int kBlockN_ = 128, int kStages_ = 2, bool kOverlap_ = false, int kWarpGroups_ = 2,
          bool kTma_ = false>
struct Sm90FwdConfig {
  static constexpr int kD = kD_;
  // K/V tiles loaded by the tensor memory accelerator (one thread of the producer warpgroup, a 64-column panel per
  // copy; the launcher passes tensor maps of K and V) instead of the producer warpgroup's cp.async copies.
  static constexpr bool kTma = kTma_;
  // The fallback where no tensor map can be made: the same tiles by the producer warpgroup's cp.async (at 176-key
  // tiles without the overlap, the best cp.async kernel measured at D = 128: with it, it spills at 224 registers).
  using CpAsync = Sm90FwdConfig<kD_, kBlockN_, kStages_, kOverlap_ && kBlockN_ != 176, kWarpGroups_, false>;
  static constexpr int kWarpGroups = kWarpGroups_;  // consumer warpgroups, 64 query rows each
  static constexpr int kBlockM = 64 * kWarpGroups;  // query rows per block
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  static constexpr bool kOverlap = kOverlap_;
  static constexpr int kMinBlocks = 1;
  static constexpr int kConsumers = 128 * kWarpGroups;
  static constexpr int kThreads = kConsumers + 128;  // + the producer warpgroup
  // Registers per thread after setmaxnreg. The consumers take only what the producer gives back (the CTA's pool):
  // kWarpGroups (kConsumerRegs - kLaunchRegs) <= kLaunchRegs - kProducerRegs, at the launch's even share (65536 /
  // kThreads, rounded down to 8: 168 for two consumer warpgroups, 128 for three). With TMA, two consumer warpgroups
  // take 240 and leave the producer 24 (one thread issues its copies): D = 256's 80-key tiles spilled 32 bytes at 232
  // (1.03-1.05x); D = 128's 176-key tiles with the overlap spilled at 224 (4 bytes stored, 24 loaded) and at 240 ran
  // 1.06-1.08x the unoverlapped cp.async kernel (cuda-attention-fwd-d128-regs-h200-2026-11-28.md).
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kConsumerRegs = kWarpGroups == 3 ? 160 : kTma ? 240 : kD == 256 ? 232 : 224;
  static constexpr int kProducerRegs = kWarpGroups == 3 ? 24 : 3 * kLaunchRegs - 2 * kConsumerRegs;
  static_assert(kWarpGroups == 2 || kWarpGroups == 3, "two or three consumer warpgroups");
  static_assert(kWarpGroups * (kConsumerRegs - kLaunchRegs) <= kLaunchRegs - kProducerRegs, "register pool");
  static_assert(kProducerRegs >= 24 && kProducerRegs % 8 == 0 && kConsumerRegs % 8 == 0,
                "setmaxnreg takes 24..256, multiples of 8");
  static constexpr int kChunks = kD / 8;             // 16-byte chunks per row
  static constexpr int kTileQ = kBlockM * kD * 2;
  static constexpr int kTileKV = kBlockN * kD * 2;
  static constexpr int kOffK = kTileQ, kOffV = kOffK + kStages * kTileKV, kOffBar = kOffV + kStages * kTileKV;
  static constexpr int kSmem = kOffBar + Sm90FwdBars<kStages>::kCount * 8 + 1024;  // + 1 KB: 1024-byte alignment
  static_assert(kD == 64 || kD == 128 || kD == 256, "wgmma n = head dim for P V: 64, 128 or 256");
  static_assert(kBlockN == 64 || kBlockN == 80 || kBlockN == 128 || kBlockN == 176,
                "wgmma n = key tile for Q K^T: 64, 80, 128, 176");
  static_assert(128 % kChunks == 0, "the producer warpgroup copies whole rows per pass");
};

template <typename T, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flash_attention_fwd_sm90_kernel(const FwdParams p, const bool q_tma, const __grid_constant__ CUtensorMap tm_k,
                                    const __grid_constant__ CUtensorMap tm_v,
                                    const __grid_constant__ CUtensorMap tm_q) {
#if !YIRAGE_SM90A_DEVICE
  __trap();
#else
  using namespace sm80;
  using namespace sm90;
  constexpr int kD = Cfg::kD, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kChunks = Cfg::kChunks;
  constexpr int kStages = Cfg::kStages, kWG = Cfg::kWarpGroups;
  constexpr int kNT = kBlockN / 8;  // 8-key column tiles of S per thread
  constexpr int kDT = kD / 8;       // 8-column tiles of O per thread
  extern __shared__ __align__(1024) unsigned char smem_raw[];

  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, warp_in_wg = (tid >> 5) & 3;
  // The block's tile, key/value head and batch (causal: longest tiles first, heads in groups; attention_tile_order.cuh)
  const QueryTileBlock blk = query_tile_block(p.causal);
  const int tile = blk.tile, hk = blk.y, b = p.batch_offset + blk.z;
  // Row indices in 32 bits (the launcher keeps R under 2^31): fewer registers and instructions than 64-bit ones.
  const int R = static_cast<int>(p.rows), m0 = tile * kBlockM;
  const int row_end = std::min(m0 + kBlockM, R);
  const int sq = p.seq_q, sk = p.seq_k;

  int i_min = 0, i_max = sq - 1;  // the query positions the tile spans
  if (m0 / sq == (row_end - 1) / sq) {
    i_min = m0 % sq;
    i_max = (row_end - 1) % sq;
  }
  int key_end = sk;  // keys at or past key_end are hidden from every row of the tile
  if (p.causal) key_end = std::max(0, std::min(sk, i_max + sk - sq + 1));
  const int n_blocks = (key_end + kBlockN - 1) / kBlockN;
  const int unmasked_end = p.causal ? std::min(sk, i_min + sk - sq + 1) : sk;

  const uint32_t s_q = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t s_k = s_q + Cfg::kOffK, s_v = s_q + Cfg::kOffV;
  const Sm90FwdBars<kStages> bars(s_q + Cfg::kOffBar);
  auto full_k = [&](int s) { return bars.full_k(s); };
  auto full_v = [&](int s) { return bars.full_v(s); };
  auto empty_k = [&](int s) { return bars.empty_k(s); };
  auto empty_v = [&](int s) { return bars.empty_v(s); };
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_k(s), Cfg::kTma ? 1 : 128);
      mbar_init(full_v(s), Cfg::kTma ? 1 : 128);
      mbar_init(empty_k(s), 4 * Cfg::kWarpGroups);
      mbar_init(empty_v(s), 4 * Cfg::kWarpGroups);
    }
    mbar_init(bars.full_q(), 1);
  }
  __syncthreads();

  if (tid >= Cfg::kConsumers) {
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (q_tma && tid == Cfg::kConsumers) {  // the query tile first: the block's first product needs it and K_0
      mbar_arrive_expect_tx(bars.full_q(), Cfg::kTileQ);  // (the whole box: rows past Sq come back as zeros)
#pragma unroll
      for (int c = 0; c < kD / 64; ++c) {
        tma_load_4d(s_q + c * kBlockM * 128, &tm_q, 64 * c, m0 % sq, hk * p.group + m0 / sq, b, bars.full_q());
      }
    }
    sm90_fwd_produce<T, Cfg>(p, &tm_k, &tm_v, tid - Cfg::kConsumers, hk, b, n_blocks, s_k, s_v, bars);
    return;
  }

  // Consumers. This warpgroup's 64 query rows: by the producer's TMA copies, or its own cp.async copies.
  setmaxnreg_inc<Cfg::kConsumerRegs>();
  if (q_tma) {
    mbar_wait(bars.full_q(), 0);
    fence_proxy_async();
  } else {
    const T* qg = static_cast<const T*>(p.q) + b * p.q_b + static_cast<int64_t>(hk) * p.group * p.q_h;
    for (int c = tid & 127; c < 64 * kChunks; c += 128) {
      const int row = wg * 64 + c / kChunks, ch = c % kChunks;
      const int r = m0 + row;
      const bool valid = r < R;
      const T* src = valid ? qg + (r / sq) * p.q_h + (r % sq) * p.q_s + ch * 8 : static_cast<const T*>(p.q);
      cp_async_16(s_q + sw128_offset(row, ch, kBlockM), src, valid);
    }
    cp_async_commit();
    cp_async_wait<0>();
    fence_proxy_async();
    named_sync(1 + kWG + wg, 128);
  }

  // This thread's two rows (g and g + 8 of its warp's 16): the last key each sees (-1: none).
  const int row_in_tile = wg * 64 + warp_in_wg * 16 + (lane >> 2);
  int last_key[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = m0 + row_in_tile + h * 8;
    const int i = r % sq;
    last_key[h] = r >= R ? -1 : (p.causal ? std::min(sk - 1, i + sk - sq) : sk - 1);
  }

  float o[kD / 2];
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] = 0.f;
  fence_regs(o);  // (without it ptxas serializes the wgmmas: C7515)
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

  const uint32_t q_wg = s_q + wg * 64 * 128;  // this warpgroup's 64 rows of every panel
  const bool lazy_scale = p.scale_log2 > 0.f;
  const float exp_scale = lazy_scale ? p.scale_log2 : 1.f;
  if (wg == kWG - 1) named_arrive(1, 256);  // warpgroup 0 issues first

  auto issue_s = [&](float (&s)[kBlockN / 2], uint32_t k_tile) {
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t panel = (kk >> 2), col = (kk & 3) * 32;
      const uint64_t da = smem_desc(q_wg + panel * kBlockM * 128 + col, 16, 1024);
      const uint64_t db = smem_desc(k_tile + panel * kBlockN * 128 + col, 16, 1024);
      wgmma_ss_step<T, kBlockN>(s, da, db, kk == 0);
    }
  };
  auto issue_pv = [&](const uint32_t (&pa)[kBlockN / 16][4], uint32_t v_tile) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint64_t db = smem_desc(v_tile + kk * 16 * 128, kBlockN * 128, 1024);
      wgmma_rs_acc<T, kD, 1>(o, pa[kk], db);
    }
  };
  // Online softmax of tile nb in place (s -> probabilities); returns the factors the output rows are rescaled by.
  auto softmax = [&](float (&s)[kBlockN / 2], int nb, float (&scale_row)[2]) {
    const int n0 = nb * kBlockN;
    if (!lazy_scale) {
#pragma unroll
      for (int i = 0; i < kBlockN / 2; ++i) s[i] *= p.scale_log2;
    }
    if (n0 + kBlockN > unmasked_end) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (n0 + nt * 8 + (lane & 3) * 2 + (e & 1) > last_key[e >> 1]) s[nt * 4 + e] = -INFINITY;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) mx = fmaxf(mx, fmaxf(s[nt * 4 + 2 * h], s[nt * 4 + 2 * h + 1]));
      mx = fmaxf(mx, shfl_xor(mx, 1));
      mx = fmaxf(mx, shfl_xor(mx, 2));
      const float mx_new = fmaxf(row_max[h], mx * exp_scale);
      const float base = mx_new == -INFINITY ? 0.f : mx_new;
      const float alpha = exp2_approx(row_max[h] - base);
      row_max[h] = mx_new;
      scale_row[h] = alpha;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const float p0 = exp2_approx(fmaf(s[nt * 4 + 2 * h], exp_scale, -base));
        const float p1 = exp2_approx(fmaf(s[nt * 4 + 2 * h + 1], exp_scale, -base));
        s[nt * 4 + 2 * h] = p0;
        s[nt * 4 + 2 * h + 1] = p1;
        sum += p0 + p1;
      }
      row_sum[h] = row_sum[h] * scale_row[h] + sum;
    }
  };
  auto rescale = [&](const float (&scale_row)[2]) {
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
      o[dt * 4 + 0] *= scale_row[0];
      o[dt * 4 + 1] *= scale_row[0];
      o[dt * 4 + 2] *= scale_row[1];
      o[dt * 4 + 3] *= scale_row[1];
    }
  };
  auto pack = [&](const float (&s)[kBlockN / 2], uint32_t (&pa)[kBlockN / 16][4]) {
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      pa[kk][0] = pack2<T>(s[(2 * kk) * 4 + 0], s[(2 * kk) * 4 + 1]);
      pa[kk][1] = pack2<T>(s[(2 * kk) * 4 + 2], s[(2 * kk) * 4 + 3]);
      pa[kk][2] = pack2<T>(s[(2 * kk + 1) * 4 + 0], s[(2 * kk + 1) * 4 + 1]);
      pa[kk][3] = pack2<T>(s[(2 * kk + 1) * 4 + 2], s[(2 * kk + 1) * 4 + 3]);
    }
  };
  auto release = [&](uint32_t bar) {
    if (lane == 0) mbar_arrive(bar);
  };

  if constexpr (!Cfg::kOverlap) {
    for (int nb = 0; nb < n_blocks; ++nb) {
      const int stage = nb % kStages;
      const uint32_t parity = (nb / kStages) & 1;
      float s[kBlockN / 2];
      mbar_wait(full_k(stage), parity);
      fence_proxy_async();
      named_sync(1 + wg, 256);
      wgmma_fence();
      issue_s(s, s_k + stage * Cfg::kTileKV);
      wgmma_commit();
      named_arrive(1 + (wg + 1) % kWG, 256);
      wgmma_wait<0>();  // S_nb, and P_{nb-1} V_{nb-1}
      fence_regs(s);
      fence_regs(o);
      release(empty_k(stage));
      if (nb > 0) release(empty_v((nb - 1) % kStages));
      float scale_row[2];
      softmax(s, nb, scale_row);
      rescale(scale_row);
      uint32_t pa[kBlockN / 16][4];
      pack(s, pa);
      mbar_wait(full_v(stage), parity);
      fence_proxy_async();
      wgmma_fence();
      issue_pv(pa, s_v + stage * Cfg::kTileKV);
      wgmma_commit();
    }
    wgmma_wait<0>();
    fence_regs(o);
  } else if (n_blocks > 0) {
    uint32_t pa[kBlockN / 16][4];
    {  // tile 0: S_0 alone
      float s[kBlockN / 2];
      mbar_wait(full_k(0), 0);
      fence_proxy_async();
      named_sync(1 + wg, 256);
      wgmma_fence();
      issue_s(s, s_k);
      wgmma_commit();
      named_arrive(1 + (wg + 1) % kWG, 256);
      wgmma_wait<0>();
      fence_regs(s);
      release(empty_k(0));
      float scale_row[2];
      softmax(s, 0, scale_row);
      pack(s, pa);
    }
    for (int nb = 1; nb < n_blocks; ++nb) {
      const int stage = nb % kStages, ps = (nb - 1) % kStages;
      float s[kBlockN / 2];
      mbar_wait(full_k(stage), (nb / kStages) & 1);
      fence_proxy_async();
      mbar_wait(full_v(ps), ((nb - 1) / kStages) & 1);
      fence_proxy_async();
      named_sync(1 + wg, 256);
      wgmma_fence();
      issue_s(s, s_k + stage * Cfg::kTileKV);
      wgmma_commit();
      issue_pv(pa, s_v + ps * Cfg::kTileKV);
      wgmma_commit();
      named_arrive(1 + (wg + 1) % kWG, 256);
      wgmma_wait<1>();  // S_nb
      fence_regs(s);
      release(empty_k(stage));
      float scale_row[2];
      softmax(s, nb, scale_row);
      wgmma_wait<0>();  // P_{nb-1} V_{nb-1}
      fence_regs(o);
      release(empty_v(ps));
      rescale(scale_row);
      pack(s, pa);
    }
    const int ps = (n_blocks - 1) % kStages;
    mbar_wait(full_v(ps), ((n_blocks - 1) / kStages) & 1);
    fence_proxy_async();
    wgmma_fence();
    issue_pv(pa, s_v + ps * Cfg::kTileKV);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
  }
  if (wg == 0) named_sync(1, 256);  // the last warpgroup's last turn signal

  // Epilogue: normalized rows to this warpgroup's rows of the query tile (the swizzle keeps the 8 rows of a
  // store on different banks), then 16-byte copies out; the log-sum-exp from the first lane of each row.
  const int64_t out_row0 = (static_cast<int64_t>(b) * p.heads_k + hk) * R;  // stacked rows are contiguous
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = row_sum[h];
    l += shfl_xor(l, 1);
    l += shfl_xor(l, 2);
    const float inv = l > 0.f ? 1.f / l : 0.f;  // no visible key: zeros
    const int row = row_in_tile + h * 8;
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
      const uint32_t v = pack2<T>(o[dt * 4 + 2 * h] * inv, o[dt * 4 + 2 * h + 1] * inv);
      const uint32_t addr = s_q + sw128_offset(row, dt, kBlockM) + (lane & 3) * 4;
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v));
    }
    const int r = m0 + row;
    if ((lane & 3) == 0 && r < R && p.lse != nullptr) {
      p.lse[out_row0 + r] = l > 0.f ? (row_max[h] + __log2f(l)) * kLn2 : -INFINITY;
    }
  }
  named_sync(1 + kWG + wg, 128);
  store_tile_rows<T, kD, kBlockM>(s_q, tid, wg, m0, R, static_cast<T*>(p.out) + out_row0 * kD);
#endif
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
