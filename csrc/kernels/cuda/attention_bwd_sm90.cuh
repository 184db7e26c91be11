// The flash attention backward's dK/dV kernel on Hopper warpgroup MMAs (device code, torch-free; CUDA sm_90a
// only): fp16/bf16, head dims 64 and 128. Included by attention_bwd.cu, which runs it instead of
// flash_attention_bwd_dkdv_kernel (attention_bwd_kernel.cuh) on compute capability 9.0 when its sm_90a code was
// built: the same arguments (BwdArgs), the same walk over the query tiles (BwdQueryWalk, with this kernel's
// shared-memory layout), the same results (grad_k, grad_v; dQ added into dq_accum, here by bulk reductions).
//
// One block per (128 keys, key/value head, batch), three warpgroups with different roles (warp specialization):
//   warpgroup 0, the producer (setmaxnreg down to kProducerRegs): copies K and V once, then each query tile's Q, dO
//     (wgmma_sm90.cuh's 128-byte swizzled layout) and rows' lse, delta and last visible key into one of two stages
//     with cp.async once both math warpgroups have released it (empty[s]), and signals full[s]
//     (sm90_bwd_produce_tile); q_tma: its thread 0 copies Q and dO by the tensor memory accelerator instead (the
//     launcher's choice: tiles in one query head, maps made). Its thread 0 adds each tile's dQ part, once staged
//     (dq_full[b]), into dq_accum with one bulk reduction of the tile (the copy engine's atomic adds) and hands the
//     buffer back once read (dq_empty[b]).
//   warpgroups 1 and 2, the math (setmaxnreg up to kMathRegs): math warpgroup w owns keys 64w..64w+63 and keeps
//     their dK and dV in fp32 accumulators (m64 x kD each) over the whole walk of the G * Sq stacked query rows, in
//     tiles of kBlockM rows. Per tile j, once full[s]:
//   S^T = K_w Q^T, dP^T = V_w dO^T      (wgmma, A and B from shared memory; kD = 128: S^T waited for first)
//   P^T = exp2(S^T * scale * log2(e) - lse * log2(e)), 0 where the key is hidden;
//   dV_w += P^T dO                      (wgmma, A from registers, B MN-major; not waited for yet)
//   dS^T = P^T (dP^T - delta); dK_w += dS^T Q (the same way)
//   dS^T (rounded to T) into the block's dS^T tile, then dV / dK waited for. The tile's dQ part is one warpgroup's,
//   warpgroup j % 2 (the two take turns, so that while one computes dQ the other is already at the next tile):
//     the other warpgroup signals that its dS^T is stored (named barrier 3 + j % 2), releases the stage and goes on;
//     the dQ warpgroup waited, before its stores, for the other's dQ products of tile j - 1 (barrier 1 + j % 2), then
//     waits for its dS^T and computes dQ_part = dS K (wgmma, kBlockM / 64 products of m64 x kD, A = dS read
//     MN-major from the dS^T tile, B = K MN-major), releases the stage, signals barrier 1 + (j + 1) % 2 (if a tile
//     follows) and stages dQ_part in buffer j % 2 once dq_empty, then dq_full.
// The math warpgroups issue no copy and never wait for a reduction of the tile they just finished.
// dq_accum's rows are stored with their 16-byte chunks permuted (chunk c of packed row R at c ^ 2 (R % 4)), the staged
// tile's bank-conflict-free order, so that the tile is one contiguous range; the dQ conversion kernel reads them
// back in that order (attention_bwd.cu).
// kD = 256 would need 256 accumulator registers per thread for dK and dV alone: attention_bwd_sm90_d256.cuh splits
// their columns between the warpgroups instead.
// Measured (backward harness benchmarks/cuda/attention_bwd_sm90_tune.cu, H200, bf16 B4 H32 S4096, TFLOP/s, kD = 128
// / causal / kD = 64 / causal): per-tile bulk reductions, both warpgroups at every tile's dQ (split by columns or
// rows) 418-427 / 362-366 / 370-374 / 313-316; warp-specialized 443-447 / 376-377 / 382-383 / 325-326; dQ by turns
// (2026-11-28) 451-462 / 384-386 / 407 / 339; with the reductions a tile later and the staging free of bank conflicts
// 487 / 442-443 / 441-446 / 368. What was tried, and where the time goes:
// benchmarks/results/cuda-attention-bwd-ws-h200-2026-11-27.md, cuda-attention-bwd-dq-turns-h200-2026-11-28.md.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>
#include <type_traits>

#include <cuda.h>  // CUtensorMap

#include "attention_bwd_sm90_config.cuh"
#include "attention_bwd_tile.cuh"
#include "wgmma_sm90.cuh"

namespace yirage::kernels::cuda {
namespace {

template <typename T, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flash_attention_bwd_sm90_kernel(const BwdArgs a, const bool q_tma, const __grid_constant__ CUtensorMap tm_q,
                                    const __grid_constant__ CUtensorMap tm_do) {
#if !YIRAGE_SM90A_DEVICE
  __trap();
#else
  using namespace sm90;
  constexpr int kD = Cfg::kD, kBlockN = Cfg::kBlockN, kBlockM = Cfg::kBlockM;
  constexpr int kNT = kBlockM / 8;  // 8-query column tiles of S^T / dP^T per thread
  constexpr int kDT = kD / 8;       // 8-column tiles of dK / dV per thread
  const AttentionBackward& p = a.p;

  extern __shared__ __align__(1024) unsigned char bwd90_smem[];
  const uint32_t raw = smem_u32(bwd90_smem);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* const base_ptr = bwd90_smem + (base - raw);
  const uint32_t sK = base + Cfg::kOffK, sV = base + Cfg::kOffV, sDS = base + Cfg::kOffDS;
  float* const s_lse = reinterpret_cast<float*>(base_ptr + Cfg::kOffLse);      // [2][kBlockM], natural log
  float* const s_delta = reinterpret_cast<float*>(base_ptr + Cfg::kOffDelta);  // [2][kBlockM]
  int* const s_lim = reinterpret_cast<int*>(base_ptr + Cfg::kOffLim);          // [2][kBlockM]: last key - n_base
  const uint32_t bars = base + Cfg::kOffBar;
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 16 + 8 * s; };
  auto dq_full = [&](int s) { return bars + 32 + 8 * s; };
  auto dq_empty = [&](int s) { return bars + 48 + 8 * s; };

  const int tid = threadIdx.x, lane = tid & 31;
  const BwdBlock blk(a, kBlockN);
  const int64_t hk_count = p.shape.heads_k, hk = blk.hk, b = blk.b;
  const int64_t sk = p.shape.seq_k, rows = a.group_rows;
  const int64_t n_base = blk.n_base, row_base = blk.row_base;  // row_base: packed row 0 of the head in (B, Hq, Sq)

  if (tid == 0) {
    for (int s = 0; s < 2; ++s) {
      mbar_init(full(s), 256);   // the producer's threads: their copies' arrival, then their own
      mbar_init(empty(s), 256);  // the math threads
      mbar_init(dq_full(s), 128);  // the math warpgroup whose turn it was
      mbar_init(dq_empty(s), 1);
    }
  }
  __syncthreads();

  if (tid < 128) {  // the producer warpgroup
    setmaxnreg_dec<Cfg::kProducerRegs>();
    BwdQueryWalk<T, kD, typename Cfg::Walk, PanelTile<kBlockM>> walk(a, b, hk, n_base);
    blk.load_kv<T, kD, kBlockN, 128, PanelTile<kBlockN>>(p, sK, sV);  // lands with the first tile's copies
    // Thread 0: tile j's dQ (first row m0), staged in buffer j % 2, into dq_accum; then buffer (j - 1) % 2, which
    // the reduction of tile j - 1 read, back to the math warpgroups. Tile j's reduction is issued after tile j + 2's
    // copies (m0s: the first rows of the last two tiles): after tile j + 1's, the copies of tile j + 2 (into the
    // stage tile j released just before staging its dQ) waited for that staging, and the warpgroup ahead for them
    // (12% of the math warps' samples at D = 128; 1.05-1.13x without).
    auto reduce = [&](int j, int64_t m0) {
      const int buf = j & 1;
      mbar_wait(dq_full(buf), (j >> 1) & 1);
      const int64_t n = rows - m0 < kBlockM ? rows - m0 : kBlockM;
      bulk_reduce_add_f32(p.dq_accum + (row_base + m0) * kD, base + Cfg::kOffDq + buf * Cfg::kDqBuf,
                          static_cast<uint32_t>(n * kD * 4));
      bulk_commit();
      bulk_wait_read<1>();
      if (j > 0) mbar_arrive(dq_empty(buf ^ 1));
    };
    const Sm90BwdQTma tma{&tm_q, &tm_do, static_cast<int>(hk * a.group), static_cast<int>(b)};
    walk.next();
    int j = 0;
    int64_t m0s[2] = {0, 0};
    while (!walk.done()) {
      sm90_bwd_produce_tile<Cfg>(walk, j, full(j & 1), empty(j & 1), base, s_lse, s_delta, s_lim,
                                 q_tma ? &tma : nullptr);
      if (tid == 0 && j > 1) reduce(j - 2, m0s[j & 1]);
      m0s[j & 1] = static_cast<int64_t>(walk.m) * kBlockM;
      walk.step();
      walk.next();
      ++j;
    }
    if (tid == 0) {
      if (j > 1) reduce(j - 2, m0s[j & 1]);
      if (j > 0) reduce(j - 1, m0s[(j - 1) & 1]);
      bulk_wait<0>();
    }
    cp_async_wait<0>();  // K and V, when no tile was visible
    return;
  }

  setmaxnreg_inc<Cfg::kMathRegs>();
  const int mt = tid - 128, wg = mt >> 7, warp_in_wg = (mt >> 5) & 3;
  const int g = lane >> 2, t = lane & 3;
  const int key0 = wg * 64 + warp_in_wg * 16 + g;  // this thread's keys in the block: key0 and key0 + 8

  BwdQueryWalk<T, kD, typename Cfg::Walk, PanelTile<kBlockM>> walk(a, b, hk, n_base);  // its cursor only

  float dv[kD / 2], dk[kD / 2];  // accumulators: keys key0 + 8 (e / 2), columns 8j + 2t + (e % 2)
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) dv[i] = dk[i] = 0.f;
  fence_regs(dv);
  fence_regs(dk);

  const uint32_t k_wg = sK + wg * 64 * 128, v_wg = sV + wg * 64 * 128;
  const float scale_log2 = a.scale_log2;
  const int q_row = warp_in_wg * 16 + g;
  constexpr int kDqM = Cfg::kDqM;
  float dqa[kDqM][kD / 2];  // a tile's dQ part: rows q_row + 64 mi (+ 8), columns 8 j + 2t + (0, 1)
  // Tile jj's dQ part (first row m0) into buffer jj % 2 once the reduction two tiles back has read it; then tell
  // the producer's thread 0.
  auto stage_dq = [&](int jj, int64_t m0) {
    const int buf = jj & 1;
    mbar_wait(dq_empty(buf), ((jj >> 1) & 1) ^ 1);
    unsigned char* const staged = base_ptr + Cfg::kOffDq + buf * Cfg::kDqBuf;
    const int rb = static_cast<int>((row_base + m0) & 7), c0 = t >> 1;
#pragma unroll
    for (int mi = 0; mi < kDqM; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = q_row + 64 * mi + 8 * h, rs = 2 * ((row + rb) & 3);
        unsigned char* const rp = staged + row * Cfg::kDqRow + 8 * (t & 1);
#pragma unroll
        for (int jc = 0; jc < kD / 8; ++jc) {
          *reinterpret_cast<float2*>(rp + (((c0 + 2 * jc) ^ rs) << 4)) =
              make_float2(dqa[mi][4 * jc + 2 * h], dqa[mi][4 * jc + 2 * h + 1]);
        }
      }
    }
    fence_proxy_async();
    mbar_arrive(dq_full(buf));
  };
  walk.next();
  int j = 0;
  while (!walk.done()) {
    const int64_t m0 = static_cast<int64_t>(walk.m) * kBlockM;
    const int stage = j & 1;
    mbar_wait(full(stage), (j >> 1) & 1);
    fence_proxy_async();

    const uint32_t sQ = base + Cfg::kOffQ + stage * Cfg::kQ, sDO = base + Cfg::kOffDO + stage * Cfg::kQ;
    const float* lse_t = s_lse + stage * kBlockM;
    const float* dlt_t = s_delta + stage * kBlockM;
    const int* lim_t = s_lim + stage * kBlockM;

    // S^T = K_w Q^T, dP^T = V_w dO^T: m64 (keys) x kBlockM (queries), k = kD; A = this warpgroup's rows of K / V,
    // B = Q / dO (both K-major: 16-element k steps along the 64-column panels).
    float s[kBlockM / 2], dp[kBlockM / 2];
    auto key_by_query = [&](float(&acc)[kBlockM / 2], uint32_t a_rows, uint32_t b_tile) {
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const uint32_t panel = kk >> 2, col = (kk & 3) * 32;
        wgmma_ss_step<T, kBlockM>(acc, smem_desc(a_rows + panel * kBlockN * 128 + col, 16, 1024),
                                  smem_desc(b_tile + panel * kBlockM * 128 + col, 16, 1024), kk == 0);
      }
    };
    wgmma_fence();
    key_by_query(s, k_wg, sQ);
    if constexpr (Cfg::kSplitWaits) wgmma_commit();
    key_by_query(dp, v_wg, sDO);
    wgmma_commit();
    if constexpr (Cfg::kSplitWaits) {
      wgmma_wait<1>();  // S^T
    } else {
      wgmma_wait<0>();
      fence_regs(dp);
    }
    fence_regs(s);

    // P^T in place (kWithDs: and dS^T = P^T (dP^T - delta) in the same pass). Element e of column tile nt: key
    // key0 + 8 (e >> 1), query 8 nt + 2t + (e & 1). A warp whose 16 keys every query of the tile sees (no causal
    // edge, no key past Sk, no row past G * Sq, no row without keys, whose lse is -inf) skips the select.
    auto probs = [&](auto masked, auto with_ds) {
      constexpr bool kMasked = decltype(masked)::value, kWithDs = decltype(with_ds)::value;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int q = 8 * nt + 2 * t + c;
          const float lse2 = lse_t[q] * kLog2e;
          const float dl = kWithDs ? dlt_t[q] : 0.f;
          int lim = 0;
          if constexpr (kMasked) lim = lim_t[q];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int e = nt * 4 + 2 * h + c;
            float pr = exp2_approx(fmaf(s[e], scale_log2, -lse2));
            if constexpr (kMasked) pr = key0 + 8 * h <= lim ? pr : 0.f;
            s[e] = pr;
            if constexpr (kWithDs) dp[e] = pr * (dp[e] - dl);
          }
        }
      }
    };
    bool all_visible = true;
#pragma unroll
    for (int jj = lane; jj < kBlockM; jj += 32) all_visible &= lim_t[jj] >= wg * 64 + warp_in_wg * 16 + 15;
    constexpr std::bool_constant<!Cfg::kSplitWaits> kDsWithP{};
    if (__all_sync(0xffffffffu, all_visible)) {
      probs(std::false_type{}, kDsWithP);
    } else {
      probs(std::true_type{}, kDsWithP);
    }
    // A fragments (k = query) of P^T and dS^T: column tiles 2kk and 2kk + 1 side by side (wgmma_sm90.cuh).
    auto pack = [&](const float(&x)[kBlockM / 2], uint32_t(&f)[kBlockM / 16][4]) {
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk) {
#pragma unroll
        for (int i = 0; i < 4; ++i) f[kk][i] = pack2<T>(x[(2 * kk + (i >> 1)) * 4 + 2 * (i & 1)],
                                                        x[(2 * kk + (i >> 1)) * 4 + 2 * (i & 1) + 1]);
      }
    };
    // dV_w += P^T dO, dK_w += dS^T Q: m64 (keys) x kD, k = the tile's queries; B = dO / Q MN-major. Not waited
    // for here. kSplitWaits: dV's products issued before dP^T is waited for, dK's after dS^T; else together.
    uint32_t pa[kBlockM / 16][4], pd[kBlockM / 16][4];
    pack(s, pa);
    auto b_desc = [&](uint32_t tile, int kk) { return smem_desc(tile + kk * 16 * 128, kBlockM * 128, 1024); };
    if constexpr (Cfg::kSplitWaits) {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk) wgmma_rs_acc<T, kD, 1>(dv, pa[kk], b_desc(sDO, kk));
      wgmma_commit();
      wgmma_wait<1>();  // dP^T (dV's products may still run)
      fence_regs(dp);
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float dl = dlt_t[8 * nt + 2 * t + c];
#pragma unroll
          for (int h = 0; h < 2; ++h) dp[nt * 4 + 2 * h + c] = s[nt * 4 + 2 * h + c] * (dp[nt * 4 + 2 * h + c] - dl);
        }
      }
      pack(dp, pd);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk) wgmma_rs_acc<T, kD, 1>(dk, pd[kk], b_desc(sQ, kk));
    } else {
      pack(dp, pd);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockM / 16; ++kk) {
        wgmma_rs_acc<T, kD, 1>(dv, pa[kk], b_desc(sDO, kk));
        wgmma_rs_acc<T, kD, 1>(dk, pd[kk], b_desc(sQ, kk));
      }
    }
    wgmma_commit();

    // Tile j's dQ part is warpgroup (j % 2)'s: the other warpgroup's products of tile j - 1 read dS^T until it
    // signals (named barrier 1 + this warpgroup); its own, if any, it waited for. Each barrier has one waiting and one
    // arriving warpgroup (barriers 1 + w and 3 + w: warpgroup w waits, the other arrives), so that the two strictly
    // alternate: with one barrier for both turns, a warpgroup arriving at the end of tile j - 1 and waiting at tile
    // j + 1 could complete a barrier alone while the other had not yet waited at tile j (it hung: 1 run in 4 of the
    // backward harness at kD = 64).
    const bool dq_turn = (j & 1) == wg;
    if (j > 0 && dq_turn) named_sync(1 + wg, 256);
    // dS^T to shared memory: key rows (kBlockN), query columns (kBlockM); query 8nt + 2t + c in chunk nt, byte 4t.
#pragma unroll
    for (int kk = 0; kk < kBlockM / 16; ++kk) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = key0 + 8 * (i & 1), chunk = 2 * kk + (i >> 1);
        const uint32_t addr = sDS + sw128_offset(row, chunk, kBlockN) + 4 * t;
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(pd[kk][i]));
      }
    }
    fence_proxy_async();
    if (!dq_turn) named_arrive(3 + (wg ^ 1), 256);  // this warpgroup's dS^T is there
    wgmma_wait<0>();  // dV / dK (before dQ's accumulators are taken: at 232 registers ptxas serialized the wgmmas)
    fence_regs(dv);
    fence_regs(dk);
    if (!dq_turn) {  // on to the next tile
      mbar_arrive(empty(stage));
      walk.step();
      walk.next();
      ++j;
      continue;
    }
    named_sync(3 + wg, 256);  // the other warpgroup's dS^T is there

    // dQ_part = dS K: kDqM x m64 (queries) x kD, k = the block's keys; A = dS, MN-major in the dS^T tile (its 64-query
    // panels kBlockN * 128 bytes apart); B = K, MN-major (64-column panels as far apart).
    wgmma_fence();
#pragma unroll
    for (int mi = 0; mi < kDqM; ++mi) {
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        const uint64_t da = smem_desc(sDS + mi * kBlockN * 128 + kk * 16 * 128, kBlockN * 128, 1024);
        const uint64_t db = smem_desc(sK + kk * 16 * 128, kBlockN * 128, 1024);
        wgmma_ss_step<T, kD, 1, 1>(dqa[mi], da, db, kk == 0);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int mi = 0; mi < kDqM; ++mi) fence_regs(dqa[mi]);
    mbar_arrive(empty(stage));  // this thread is done with the stage
    walk.step();
    walk.next();
    if (!walk.done()) named_arrive(1 + (wg ^ 1), 256);  // dS^T free for the other's next stores (none after the last)
    stage_dq(j, m0);
    ++j;
  }

  // grad_k = scale * dK, grad_v = dV: (B, Hk, Sk, D) contiguous, rows past Sk not written.
  const float scale = p.shape.scale;
  T* gk = static_cast<T*>(p.grad_k);
  T* gv = static_cast<T*>(p.grad_v);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t jk = n_base + key0 + 8 * h;
    if (jk < sk) {
      const int64_t off = ((b * hk_count + hk) * sk + jk) * kD + 2 * t;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        *reinterpret_cast<uint32_t*>(gk + off + 8 * dt) =
            pack2<T>(dk[dt * 4 + 2 * h] * scale, dk[dt * 4 + 2 * h + 1] * scale);
        *reinterpret_cast<uint32_t*>(gv + off + 8 * dt) = pack2<T>(dv[dt * 4 + 2 * h], dv[dt * 4 + 2 * h + 1]);
      }
    }
  }
#endif  // YIRAGE_SM90A_DEVICE
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
