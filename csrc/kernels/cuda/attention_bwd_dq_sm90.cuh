// The flash attention backward's dQ for head dim 256 on Hopper warpgroup MMAs (device code, torch-free; CUDA sm_90a
// only): fp16/bf16. Included by attention_bwd.cu, which runs it after flash_attention_bwd_sm90_d256_kernel built
// without dQ (kDq = false): that kernel, one block per 64 keys, had added each tile's dQ into dq_accum with fp32
// atomics, 64 KB per 64 x 64 tile, and those adds took 40% of its time (B4 H16 S4096 on an H200: 300 TFLOP/s with
// them, 495-499 with the same kernel not issuing them). Here dQ is computed the way the forward computes O, at the
// price of recomputing S and dP: no atomics, no fp32 workspace, grad_q written once.
//
// One block per (tile of 128 stacked query rows, key/value head, batch): a producer warpgroup and two consumer
// warpgroups (warpgroup w owns rows 64w..64w+63), as flash_attention_fwd_sm90_kernel. The producer's thread 0 copies
// the tile's Q and dO by TMA where the tile lies in one query head (q_tma; else each consumer warpgroup copies its
// rows with cp.async), then streams the key tiles (64 keys) by TMA, K through two stages and V through one (the
// 64 KB each of Q and dO leave 96 KB). Per key tile the warpgroups take turns at the tensor cores (named barriers 1
// and 2, as the forward's ring); each
//   dP = dO V^T, S = Q K^T   (m64 x n64, k = 256; both operands in shared memory; dP first: V's single stage is
//                             released as soon as both warpgroups' dP are done)
//   P = exp2(S scale log2(e) - lse log2(e)) (0 where the key is hidden), dS = P (dP - delta)
//   dQ += dS K               (m64 x n256, k = 64; A = dS from registers, B = K MN-major; not waited for: the key
//                             stage is released at the next tile)
// then dQ * scale goes out through the warpgroup's rows of the Q tile (16-byte stores).
// Measured (the whole backward, harness benchmarks/cuda/attention_bwd_sm90_tune.cu, bf16, against the dK/dV kernel
// with dQ's atomics): H200 B4 H16 S4096 301 -> 361-366 TFLOP/s, causal 273 -> 338-342, S2048 causal 235 -> 287-290,
// B4 Hq32 Hk8 S2048 causal 241 -> 318-320; H100 1.28-1.40x (benchmarks/results/cuda-attention-bwd-d256-dq-h200-
// 2026-11-28.md). With few blocks and many key tiles (Sq = 1 against 4K keys) it is slower: the launcher's rule.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <algorithm>
#include <cstdint>

#include <cuda.h>  // CUtensorMap

#include "attention_bwd_tile.cuh"  // BwdArgs
#include "attention_tile_order.cuh"
#include "mma_sm80.cuh"
#include "wgmma_sm90.cuh"

namespace yirage::kernels::cuda {
namespace {

struct Sm90BwdDqConfig {
  static constexpr int kD = 256, kBlockM = 128, kBlockN = 64, kWG = 2;
  static constexpr int kThreads = 128 * (kWG + 1);
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;  // 168
  static constexpr int kProducerRegs = 24;                      // one thread issues the copies
  static constexpr int kConsumerRegs = (3 * kLaunchRegs - kProducerRegs) / 2 / 8 * 8;  // 240
  static_assert(kWG * (kConsumerRegs - kLaunchRegs) <= kLaunchRegs - kProducerRegs, "register pool");
  static constexpr int kChunks = kD / 8;  // 16-byte chunks per row
  static constexpr int kTileQ = kBlockM * kD * 2, kTileKV = kBlockN * kD * 2;
  static constexpr int kOffQ = 0, kOffDO = kTileQ, kOffK = 2 * kTileQ, kOffV = kOffK + 2 * kTileKV,
                       kOffBar = kOffV + kTileKV;
  static constexpr int kSmem = kOffBar + 7 * 8 + 1024;  // mbarriers full_k[2], empty_k[2], full_v, empty_v, full_q
  static_assert(kSmem <= 232448, "a block's opt-in shared memory on sm_90");
};

template <typename T>
__global__ void __launch_bounds__(Sm90BwdDqConfig::kThreads, 1)
    flash_attention_bwd_dq_sm90_kernel(const BwdArgs a, const int batch_offset, const bool q_tma,
                                       const __grid_constant__ CUtensorMap tm_k,
                                       const __grid_constant__ CUtensorMap tm_v,
                                       const __grid_constant__ CUtensorMap tm_q,
                                       const __grid_constant__ CUtensorMap tm_do) {
#if !YIRAGE_SM90A_DEVICE
  __trap();
#else
  using namespace sm80;
  using namespace sm90;
  using Cfg = Sm90BwdDqConfig;
  constexpr int kD = Cfg::kD, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kChunks = Cfg::kChunks;
  constexpr int kWG = Cfg::kWG, kNT = kBlockN / 8, kDT = kD / 8;
  const AttentionBackward& p = a.p;
  extern __shared__ __align__(1024) unsigned char dq_smem[];

  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, warp_in_wg = (tid >> 5) & 3;
  const QueryTileBlock blk = query_tile_block(p.shape.causal);  // causal: longest rows first, heads in groups
  const int tile = blk.tile, hk = blk.y, b = batch_offset + blk.z;
  const int R = static_cast<int>(a.group_rows), m0 = tile * kBlockM, row_end = std::min(m0 + kBlockM, R);
  const int sq = static_cast<int>(p.shape.seq_q), sk = static_cast<int>(p.shape.seq_k);
  const int group = static_cast<int>(a.group);

  int i_min = 0, i_max = sq - 1;  // the query positions the tile spans
  if (m0 / sq == (row_end - 1) / sq) {
    i_min = m0 % sq;
    i_max = (row_end - 1) % sq;
  }
  int key_end = sk;  // keys at or past key_end are hidden from every row of the tile
  if (p.shape.causal) key_end = std::max(0, std::min(sk, i_max + sk - sq + 1));
  const int n_blocks = (key_end + kBlockN - 1) / kBlockN;
  const int unmasked_end = p.shape.causal ? std::min(sk, i_min + sk - sq + 1) : sk;

  const uint32_t base = (smem_u32(dq_smem) + 1023u) & ~1023u;
  const uint32_t s_q = base + Cfg::kOffQ, s_do = base + Cfg::kOffDO, s_k = base + Cfg::kOffK, s_v = base + Cfg::kOffV;
  const uint32_t bars = base + Cfg::kOffBar;
  auto full_k = [&](int s) { return bars + 8 * s; };
  auto empty_k = [&](int s) { return bars + 16 + 8 * s; };
  const uint32_t full_v = bars + 32, empty_v = bars + 40, full_q = bars + 48;
  if (tid == 0) {
    for (int s = 0; s < 2; ++s) {
      mbar_init(full_k(s), 1);
      mbar_init(empty_k(s), 4 * kWG);  // lane 0 of each consumer warp
    }
    mbar_init(full_v, 1);
    mbar_init(empty_v, 4 * kWG);
    mbar_init(full_q, 1);
  }
  __syncthreads();

  if (tid >= 128 * kWG) {  // the producer warpgroup: its thread 0 copies the key tiles
    setmaxnreg_dec<Cfg::kProducerRegs>();
    if (tid != 128 * kWG) return;
    if (q_tma) {  // the query tile's Q and dO first
      mbar_arrive_expect_tx(full_q, 2 * Cfg::kTileQ);  // whole boxes: rows past Sq come back as zeros
#pragma unroll
      for (int c = 0; c < kD / 64; ++c) {
        const int hq = hk * group + m0 / sq;
        tma_load_4d(s_q + c * kBlockM * 128, &tm_q, 64 * c, m0 % sq, hq, b, full_q);
        tma_load_4d(s_do + c * kBlockM * 128, &tm_do, 64 * c, m0 % sq, hq, b, full_q);
      }
    }
    for (int nb = 0; nb < n_blocks; ++nb) {
      const int s = nb & 1;
      mbar_wait(empty_k(s), ((nb >> 1) & 1) ^ 1);
      mbar_arrive_expect_tx(full_k(s), Cfg::kTileKV);  // the whole box: rows past Sk come back as zeros
#pragma unroll
      for (int c = 0; c < kD / 64; ++c) {
        tma_load_4d(s_k + s * Cfg::kTileKV + c * kBlockN * 128, &tm_k, 64 * c, nb * kBlockN, hk, b, full_k(s));
      }
      mbar_wait(empty_v, (nb & 1) ^ 1);
      mbar_arrive_expect_tx(full_v, Cfg::kTileKV);
#pragma unroll
      for (int c = 0; c < kD / 64; ++c) {
        tma_load_4d(s_v + c * kBlockN * 128, &tm_v, 64 * c, nb * kBlockN, hk, b, full_v);
      }
    }
    return;
  }

  // Consumers: this warpgroup's 64 rows of Q and dO (rows past G * Sq zero-filled), unless the producer copies the
  // tile.
  setmaxnreg_inc<Cfg::kConsumerRegs>();
  const int64_t hq0 = static_cast<int64_t>(hk) * group;
  const T* qg = static_cast<const T*>(p.q.ptr) + b * p.q.batch_stride + hq0 * p.q.head_stride;
  const T* dog = static_cast<const T*>(p.grad_out.ptr) + b * p.grad_out.batch_stride + hq0 * p.grad_out.head_stride;
  for (int c = tid & 127; c < (q_tma ? 0 : 64 * kChunks); c += 128) {
    const int row = wg * 64 + c / kChunks, ch = c % kChunks;
    const int r = m0 + row;
    const bool valid = r < R;
    const int64_t hr = valid ? r / sq : 0, ir = valid ? r % sq : 0;
    const uint32_t off = sw128_offset(row, ch, kBlockM);
    cp_async_16(s_q + off, qg + hr * p.q.head_stride + ir * p.q.seq_stride + ch * 8, valid);
    cp_async_16(s_do + off, dog + hr * p.grad_out.head_stride + ir * p.grad_out.seq_stride + ch * 8, valid);
  }
  cp_async_commit();

  // This thread's two rows (g and g + 8 of its warp's 16): the last key each sees (-1: none), lse (log2 units) and
  // delta.
  const int row_in_tile = wg * 64 + warp_in_wg * 16 + (lane >> 2);
  const int64_t row_all0 = (static_cast<int64_t>(b) * p.shape.heads_k + hk) * R;  // stacked rows are contiguous
  int last_key[2];
  float lse2[2], delta[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = m0 + row_in_tile + h * 8;
    const int i = r % sq;
    last_key[h] = r >= R ? -1 : (p.shape.causal ? std::min(sk - 1, i + sk - sq) : sk - 1);
    const float l = r < R ? p.lse[row_all0 + r] : 0.f;
    if (l == -INFINITY) last_key[h] = -1;  // no visible key
    lse2[h] = last_key[h] < 0 ? 0.f : l * kLog2e;
    delta[h] = r < R ? p.delta[row_all0 + r] : 0.f;
  }
  const float scale_log2 = a.scale_log2;

  float dq[kD / 2];
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) dq[i] = 0.f;
  fence_regs(dq);

  if (q_tma) {
    mbar_wait(full_q, 0);
    fence_proxy_async();
  } else {
    cp_async_wait<0>();
    fence_proxy_async();
    named_sync(1 + kWG + wg, 128);
  }

  const uint32_t q_wg = s_q + wg * 64 * 128, do_wg = s_do + wg * 64 * 128;  // this warpgroup's rows of each panel
  auto issue_ss = [&](float (&d)[kBlockN / 2], uint32_t a_rows, uint32_t b_tile) {
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t panel = kk >> 2, col = (kk & 3) * 32;
      const uint64_t da = smem_desc(a_rows + panel * kBlockM * 128 + col, 16, 1024);
      const uint64_t db = smem_desc(b_tile + panel * kBlockN * 128 + col, 16, 1024);
      wgmma_ss_step<T, kBlockN>(d, da, db, kk == 0);
    }
  };
  auto release = [&](uint32_t bar) {
    if (lane == 0) mbar_arrive(bar);
  };
  if (wg == kWG - 1) named_arrive(1, 256);  // warpgroup 0 issues first

  for (int nb = 0; nb < n_blocks; ++nb) {
    const int ks = nb & 1;
    const uint32_t k_tile = s_k + ks * Cfg::kTileKV;
    float s[kBlockN / 2], dp[kBlockN / 2];
    mbar_wait(full_k(ks), (nb >> 1) & 1);
    mbar_wait(full_v, nb & 1);
    fence_proxy_async();
    named_sync(1 + wg, 256);
    wgmma_fence();
    issue_ss(dp, do_wg, s_v);
    wgmma_commit();
    issue_ss(s, q_wg, k_tile);
    wgmma_commit();
    named_arrive(1 + (wg + 1) % kWG, 256);
    wgmma_wait<1>();  // dQ of the previous tile, and dP
    fence_regs(dp);
    fence_regs(dq);
    release(empty_v);
    if (nb > 0) release(empty_k(ks ^ 1));
    wgmma_wait<0>();  // S
    fence_regs(s);

    // Element e of column tile nt: key n0 + 8 nt + 2 (lane % 4) + (e % 2) of row h = e / 2.
    const int n0 = nb * kBlockN;
    const bool masked = n0 + kBlockN > unmasked_end;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        float pr = exp2_approx(fmaf(s[nt * 4 + e], scale_log2, -lse2[h]));
        if (masked && n0 + nt * 8 + (lane & 3) * 2 + (e & 1) > last_key[h]) pr = 0.f;
        s[nt * 4 + e] = pr * (dp[nt * 4 + e] - delta[h]);
      }
    }
    uint32_t da[kBlockN / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      da[kk][0] = pack2<T>(s[(2 * kk) * 4 + 0], s[(2 * kk) * 4 + 1]);
      da[kk][1] = pack2<T>(s[(2 * kk) * 4 + 2], s[(2 * kk) * 4 + 3]);
      da[kk][2] = pack2<T>(s[(2 * kk + 1) * 4 + 0], s[(2 * kk + 1) * 4 + 1]);
      da[kk][3] = pack2<T>(s[(2 * kk + 1) * 4 + 2], s[(2 * kk + 1) * 4 + 3]);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      wgmma_rs_acc<T, kD, 1>(dq, da[kk], smem_desc(k_tile + kk * 16 * 128, kBlockN * 128, 1024));
    }
    wgmma_commit();
  }
  wgmma_wait<0>();
  fence_regs(dq);
  if (wg == 0) named_sync(1, 256);  // the last warpgroup's last turn signal

  // dQ * scale to this warpgroup's rows of the Q tile (the swizzle keeps a store's 8 rows on different banks), then
  // 16-byte copies out to grad_q ((B, Hq, Sq, D), contiguous).
  const float scale = p.shape.scale;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row_in_tile + h * 8;
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
      const uint32_t v = pack2<T>(dq[dt * 4 + 2 * h] * scale, dq[dt * 4 + 2 * h + 1] * scale);
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(s_q + sw128_offset(row, dt, kBlockM) + (lane & 3) * 4), "r"(v));
    }
  }
  named_sync(1 + kWG + wg, 128);
  store_tile_rows<T, kD, kBlockM>(s_q, tid, wg, m0, R, static_cast<T*>(p.grad_q) + row_all0 * kD);
#endif  // YIRAGE_SM90A_DEVICE
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
