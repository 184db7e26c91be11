// The flash attention backward's dK/dV kernel (device code, torch-free; CUDA only). Included by
// attention_bwd.cu (the delta and dQ-convert kernels, the launch and the entry point), whose header comment
// describes the algorithm; the tile shapes and the query-tile walk are in attention_bwd_tile.cuh.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>
#include <type_traits>

#include "attention_bwd_tile.cuh"

namespace yirage::kernels::cuda {
namespace {

// ---------------------------------------------------------------- 2. dK, dV (and dQ into dq_accum)
template <typename T, int kD, typename Cfg>
__global__ void __launch_bounds__(BwdTraits<kD, Cfg>::kThreads) flash_attention_bwd_dkdv_kernel(const BwdArgs a) {
#if !YIRAGE_SM80_DEVICE
  __trap();  // built for a GPU older than sm_80: never launched there (attention_native is false)
#else
  using Tr = BwdTraits<kD, Cfg>;
  constexpr int kBlockN = Tr::kBlockN, kBlockM = Tr::kBlockM, kThreads = Tr::kThreads, kDW = Tr::kDW,
                kKeyWarps = Tr::kKeyWarps, kMI = Tr::kMI, kQSplit = Tr::kQSplit;
  constexpr int kQT = Tr::kWarpQ / 16;  // 16-query column blocks of S^T / dP^T per warp
  using TileD = SwizzledTile<kD>;
  using TileS = SwizzledTile<Tr::kSCols>;
  const AttentionBackward& p = a.p;

  extern __shared__ __align__(128) unsigned char bwd_smem[];
  const uint32_t s_base = smem_u32(bwd_smem);
  const uint32_t sK = s_base + Tr::kOffK, sV = s_base + Tr::kOffV, sDS = s_base + Tr::kOffDS, sP = s_base + Tr::kOffP;
  float* s_lse = reinterpret_cast<float*>(bwd_smem + Tr::kOffLse);      // [2][kBlockM]: lse (see walk.load)
  float* s_delta = reinterpret_cast<float*>(bwd_smem + Tr::kOffDelta);  // [2][kBlockM]
  int* s_lim = reinterpret_cast<int*>(bwd_smem + Tr::kOffLim);          // [2][kBlockM]: last visible key - n_base

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane >> 2, t = lane & 3;                    // fragment row group and thread in group
  const int kw = warp % kKeyWarps, dsl = warp / kKeyWarps;  // key slice and dK/dV column slice
  const int d0 = dsl * kDW, q0 = (kQSplit > 1 ? dsl : 0) * Tr::kWarpQ;  // ... and the S^T query columns q0 ..
  // ldmatrix address patterns (offsets from the tile start; see the MMA comments below)
  const BwdLaneTile<kD> lt_a(0, lane & 15, lane >> 4);                               // A, non-trans
  const BwdLaneTile<kD> lt_b(0, (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);   // B [n][k], non-trans
  const BwdLaneTile<kD> lt_bt(0, (lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);  // B [k][n], .trans
  // ... from the column slice d0: a whole swizzled row (d0 % 64 = 0) is a byte offset, else part of the lane tile
  constexpr bool kWholeRows = kDW % 64 == 0;
  const BwdLaneTile<kD> lt_bd(0, (lane & 7) + (((lane >> 3) & 1) << 3), (lane >> 4) + (kWholeRows ? 0 : d0 / 8));

  const BwdBlock blk(a, kBlockN);
  const int64_t hk_count = p.shape.heads_k, hk = blk.hk, b = blk.b;
  const int64_t sk = p.shape.seq_k, rows = a.group_rows;
  const int64_t n_base = blk.n_base, row_base = blk.row_base;  // row_base: packed row 0 of the head in (B, Hq, Sq)
  blk.load_kv<T, kD, kBlockN, kThreads, TileD>(p, sK, sV);

  BwdQueryWalk<T, kD, Cfg> walk(a, b, hk, n_base);
  auto load = [&](int s) {
    walk.load(s_base + Tr::kOffQ + s * Tr::kQ, s_base + Tr::kOffDO + s * Tr::kQ, s_lse + s * kBlockM,
              s_delta + s * kBlockM, s_lim + s * kBlockM);
  };

  // C tiles: keys kw * kWarpKeys + 16 mi + (g, g+8), columns d0 + 8n + (2t, 2t+1)
  float acc_dk[kMI][kDW / 8][4], acc_dv[kMI][kDW / 8][4];
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
    for (int n = 0; n < kDW / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_dk[mi][n][e] = acc_dv[mi][n][e] = 0.f;
    }
  }

  // Two stages of query tiles: while tile m is computed on, tile m + 1's copies are in flight. kAsyncRows
  // tiles issue them after the barrier that opens tile m (the lse and delta rows among them, see
  // BwdQueryWalk::load); the others before it, as soon as the barrier closing tile m - 1 has freed the stage.
  walk.next();
  if (!walk.done()) load(0);
  cp_async_commit();  // group: K, V and the first query tile
  int stage = 0;
  while (!walk.done()) {
    const int64_t m = walk.m;
    if constexpr (Tr::kAsyncRows) {
      cp_async_wait<0>();  // this thread's copies of tile m (and K, V) have landed
      __syncthreads();     // ... and everyone's
      walk.step();
      walk.next();
      if (!walk.done()) load(stage ^ 1);
      cp_async_commit();
    } else {
      walk.step();
      walk.next();
      if (!walk.done()) load(stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();  // this thread's copies of tile m (and K, V) have landed
      __syncthreads();     // ... and everyone's
    }

    const uint32_t sQ = s_base + Tr::kOffQ + stage * Tr::kQ, sDO = s_base + Tr::kOffDO + stage * Tr::kQ;
    const float* lse_row = s_lse + stage * kBlockM;
    const float* dlt = s_delta + stage * kBlockM;
    const int* lim = s_lim + stage * kBlockM;

    // S^T = K_w Q^T and dP^T = V_w dO^T (kWarpKeys keys x the queries q0 .. q0 + kWarpQ each).
    //   A = K_w / V_w (m = key, k = d), stored [key][d] = row-major A: ldmatrix (non-trans), matrix i =
    //     (rows +8 * (i & 1), chunk +(i >> 1)): lane -> row lane & 15, chunk lane >> 4.
    //   B = Q^T / dO^T (k = d, n = query), stored [query][d] = [n][k]: ldmatrix (non-trans), register i =
    //     (n block i >> 1, k half i & 1): lane -> row (lane & 7) + 8 * (lane >> 4), chunk (lane >> 3) & 1.
    float acc_s[kMI][2 * kQT][4], acc_dp[kMI][2 * kQT][4];  // C: keys (as dK), queries q0 + 8n + (2t, 2t+1)
    auto key_by_query = [&](float(&acc)[kMI][2 * kQT][4], uint32_t sA, uint32_t sB) {
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
        for (int n = 0; n < 2 * kQT; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mi][n][e] = 0.f;
        }
      }
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        uint32_t fa[kMI][4];
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi) ldmatrix_x4(fa[mi], sA + lt_a.at(kw * kMI + mi, kk));
#pragma unroll
        for (int np = 0; np < kQT; ++np) {
          uint32_t fb[4];
          ldmatrix_x4(fb, sB + lt_b.at(q0 / 16 + np, kk));
#pragma unroll
          for (int mi = 0; mi < kMI; ++mi) {
            mma_16816<T>(acc[mi][2 * np], fa[mi], fb[0], fb[1]);
            mma_16816<T>(acc[mi][2 * np + 1], fa[mi], fb[2], fb[3]);
          }
        }
      }
    };
    key_by_query(acc_s, sK, sQ);
    key_by_query(acc_dp, sV, sDO);

    // P^T = exp2(S^T * scale * log2(e) - lse[query] * log2(e)) where the key is visible, 0 elsewhere (kAsyncRows:
    // a row whose lse is -inf sees no key, so the select drops its +inf; else lse arrives in log2 units), then
    // dS^T = P^T * (dP^T - delta[query]) (kept in acc_dp). Element e of C tile (mi, n): key
    // kw * kWarpKeys + 16 mi + g + 8 (e >> 1), query q0 + 8n + 2t + (e & 1).
    // A warp whose keys are all visible from all its queries (lim >= its last key for each of them: no causal
    // edge, no key past Sk, no row past G * Sq) skips the per-element select.
    auto probs = [&](auto masked) {
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
        for (int n = 0; n < 2 * kQT; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int q = q0 + 8 * n + 2 * t + (e & 1), key = kw * Tr::kWarpKeys + 16 * mi + g + 8 * (e >> 1);
            const float lse2 = Tr::kAsyncRows ? lse_row[q] * kLog2e : lse_row[q];
            float pr = exp2_approx(fmaf(acc_s[mi][n][e], a.scale_log2, -lse2));
            if constexpr (decltype(masked)::value) pr = key <= lim[q] ? pr : 0.f;
            acc_s[mi][n][e] = pr;
            acc_dp[mi][n][e] = pr * (acc_dp[mi][n][e] - dlt[q]);
          }
        }
      }
    };
    bool all_visible = true;
#pragma unroll
    for (int j = lane; j < Tr::kWarpQ; j += 32) all_visible &= lim[q0 + j] >= (kw + 1) * Tr::kWarpKeys - 1;
    if (__all_sync(0xffffffffu, all_visible)) {
      probs(std::false_type{});
    } else {
      probs(std::true_type{});
    }

    // The A fragments of P^T and dS^T (m = key, k = query) for the 16 queries q0 + 16 kq .. from two C tiles
    // side by side (mma_sm80.cuh): a0 = tile 2kq {c0,c1}, a1 = tile 2kq {c2,c3}, a2 = tile 2kq+1 {c0,c1},
    // a3 = tile 2kq+1 {c2,c3}. They also go to shared memory as T ([key][query], swizzled; dS^T for dQ, P^T
    // too when the warps of a key slice split the queries): a0 = (key g, queries 16kq + 2t..), a1 = (g + 8,
    // same), a2 = (g, 16kq + 8 + 2t..), a3 = (g + 8, same); query column 8c + 2t sits in chunk c at byte 4t.
    auto pack_a = [&](const float(&acc)[kMI][2 * kQT][4], int mi, int kq, uint32_t(&f)[4]) {
      f[0] = pack2<T>(acc[mi][2 * kq][0], acc[mi][2 * kq][1]);
      f[1] = pack2<T>(acc[mi][2 * kq][2], acc[mi][2 * kq][3]);
      f[2] = pack2<T>(acc[mi][2 * kq + 1][0], acc[mi][2 * kq + 1][1]);
      f[3] = pack2<T>(acc[mi][2 * kq + 1][2], acc[mi][2 * kq + 1][3]);
    };
    auto store_a = [&](int off, int mi, int kq, const uint32_t(&f)[4]) {
      const int key = kw * Tr::kWarpKeys + 16 * mi + g, c = (q0 / 16 + kq) * 2;
      unsigned char* d = bwd_smem + off + 4 * t;
      *reinterpret_cast<uint32_t*>(d + TileS::offset(key, c)) = f[0];
      *reinterpret_cast<uint32_t*>(d + TileS::offset(key + 8, c)) = f[1];
      *reinterpret_cast<uint32_t*>(d + TileS::offset(key, c + 1)) = f[2];
      *reinterpret_cast<uint32_t*>(d + TileS::offset(key + 8, c + 1)) = f[3];
    };
    if constexpr (kQSplit > 1) {
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
        for (int kq = 0; kq < kQT; ++kq) {
          uint32_t f[4];
          pack_a(acc_s, mi, kq, f);
          store_a(Tr::kOffP, mi, kq, f);
          pack_a(acc_dp, mi, kq, f);
          store_a(Tr::kOffDS, mi, kq, f);
        }
      }
      __syncthreads();  // P^T and dS^T complete
    }

    // dV_w += P^T dO and dK_w += dS^T Q, k = query in steps of 16 (all kBlockM queries of the tile).
    //   A = P^T / dS^T: from the registers above, or (kQSplit > 1) from shared memory: ldmatrix (non-trans),
    //     the same lane pattern as for K above.
    //   B = dO / Q (k = query, n = d), stored [query][d] = [k][n]: ldmatrix .trans, register i = (k half i & 1,
    //     n block i >> 1): lane -> row (lane & 7) + 8 * ((lane >> 3) & 1), chunk lane >> 4.
    const BwdLaneTile<Tr::kSCols> lt_s(0, lane & 15, lane >> 4);
#pragma unroll
    for (int kq = 0; kq < kBlockM / 16; ++kq) {
      uint32_t ap[kMI][4], ads[kMI][4];
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi) {
        if constexpr (kQSplit > 1) {
          ldmatrix_x4(ap[mi], sP + lt_s.at(kw * kMI + mi, kq));
          ldmatrix_x4(ads[mi], sDS + lt_s.at(kw * kMI + mi, kq));
        } else {
          pack_a(acc_s, mi, kq, ap[mi]);
          pack_a(acc_dp, mi, kq, ads[mi]);
          if (dsl == 0) store_a(Tr::kOffDS, mi, kq, ads[mi]);  // one warp per key slice writes dS^T
        }
      }
#pragma unroll
      for (int np = 0; np < kDW / 16; ++np) {
        // row kq*16 + (lane & 7) + 8 ((lane >> 3) & 1), chunk d0/8 + 2np + (lane >> 4)
        const uint32_t o = lt_bd.at(kq, np) + (kWholeRows ? 2 * d0 : 0);
        uint32_t bo[4], bq[4];
        ldmatrix_x4_trans(bo, sDO + o);
        ldmatrix_x4_trans(bq, sQ + o);
#pragma unroll
        for (int mi = 0; mi < kMI; ++mi) {
          mma_16816<T>(acc_dv[mi][2 * np], ap[mi], bo[0], bo[1]);
          mma_16816<T>(acc_dv[mi][2 * np + 1], ap[mi], bo[2], bo[3]);
          mma_16816<T>(acc_dk[mi][2 * np], ads[mi], bq[0], bq[1]);
          mma_16816<T>(acc_dk[mi][2 * np + 1], ads[mi], bq[2], bq[3]);
        }
      }
    }
    if constexpr (kQSplit == 1) __syncthreads();  // dS^T complete

    // dQ_tile (kBlockM x kD) = dS K, in items of 16 query rows x 64 columns spread over the warps.
    //   A = dS (m = query, k = key), stored [key][query] = [k][m]: ldmatrix .trans, register i = (m half i & 1,
    //     k half i >> 1): lane -> row (lane & 7) + 8 * (lane >> 4), chunk (lane >> 3) & 1.
    //   B = K (k = key, n = d), stored [key][d] = [k][n]: ldmatrix .trans as for dO above.
    {
      constexpr int kRowTiles = kBlockM / 16, kItems = kRowTiles * (kD / 64);
      const int64_t m_base = m * kBlockM;
#pragma unroll 1
      for (int it = warp; it < kItems; it += Tr::kWarps) {
        const int mt = it % kRowTiles, dc = it / kRowTiles;
        // dS^T rows kk*16 + (lane & 7) + 8 (lane >> 4), chunk 2mt + ((lane >> 3) & 1) (mt is not a constant)
        const uint32_t ds_addr = sDS + TileS::offset((lane & 7) + ((lane >> 4) << 3), 2 * mt + ((lane >> 3) & 1));
        float acc_dq[8][4];  // C: queries mt*16 + (g, g+8), columns dc*64 + 8n + (2t, 2t+1)
#pragma unroll
        for (int n = 0; n < 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc_dq[n][e] = 0.f;
        }
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk) {
          uint32_t ad[4];
          ldmatrix_x4_trans(ad, ds_addr + kk * 16 * Tr::kSCols * 2);
#pragma unroll
          for (int np = 0; np < 4; ++np) {
            uint32_t bk[4];
            // row kk*16 + (lane & 7) + 8 ((lane >> 3) & 1), chunk 8dc + 2np + (lane >> 4)
            ldmatrix_x4_trans(bk, sK + lt_bt.at(kk, np) + dc * 128);
            mma_16816<T>(acc_dq[2 * np], ad, bk[0], bk[1]);
            mma_16816<T>(acc_dq[2 * np + 1], ad, bk[2], bk[3]);
          }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int64_t r = m_base + mt * 16 + g + 8 * half;
          if (r < rows) {
            float* dst = p.dq_accum + (row_base + r) * kD + dc * 64 + 2 * t;
#pragma unroll
            for (int n = 0; n < 8; ++n) {
#if __CUDA_ARCH__ >= 900
              atomicAdd(reinterpret_cast<float2*>(dst + 8 * n), make_float2(acc_dq[n][2 * half], acc_dq[n][2 * half + 1]));
#else
              atomicAdd(dst + 8 * n, acc_dq[n][2 * half]);
              atomicAdd(dst + 8 * n + 1, acc_dq[n][2 * half + 1]);
#endif
            }
          }
        }
      }
    }
    __syncthreads();  // dS^T and this stage's Q / dO are free again
    stage ^= 1;
  }
  cp_async_wait<0>();  // no copy left in flight at exit (when no query tile was visible)

  // grad_k = scale * dK, grad_v = dV: (B, Hk, Sk, D) contiguous, rows past Sk not written.
  const float scale = p.shape.scale;
  T* gk = static_cast<T*>(p.grad_k);
  T* gv = static_cast<T*>(p.grad_v);
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t j = n_base + kw * Tr::kWarpKeys + 16 * mi + g + 8 * half;
      if (j < sk) {
        const int64_t off = ((b * hk_count + hk) * sk + j) * kD + d0 + 2 * t;
#pragma unroll
        for (int n = 0; n < kDW / 8; ++n) {
          const float(&dk)[4] = acc_dk[mi][n];
          const float(&dv)[4] = acc_dv[mi][n];
          *reinterpret_cast<uint32_t*>(gk + off + 8 * n) = pack2<T>(dk[2 * half] * scale, dk[2 * half + 1] * scale);
          *reinterpret_cast<uint32_t*>(gv + off + 8 * n) = pack2<T>(dv[2 * half], dv[2 * half + 1]);
        }
      }
    }
  }
#endif  // YIRAGE_SM80_DEVICE
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
