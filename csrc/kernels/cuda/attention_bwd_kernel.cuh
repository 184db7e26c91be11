// The flash attention backward's dK/dV kernel (device code, torch-free; CUDA only), its tile shapes and
// arguments. Included by attention_bwd.cu (the delta and dQ-convert kernels, the launch and the entry point),
// whose header comment describes the algorithm.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>
#include <type_traits>

#include "common.cuh"
#include "mma_sm80.cuh"

namespace yirage::kernels::cuda {
namespace {

using namespace sm80;

constexpr float bwd_log2e = 1.4426950408889634f;

// A tile shape: keys per block, query rows per tile, warps sharing a 16-key slice.
template <int kBlockN_, int kBlockM_, int kDSplit_>
struct BwdTile {
  static constexpr int kBlockN = kBlockN_, kBlockM = kBlockM_, kDSplit = kDSplit_;
};
// The tile shape per head dim (see the header comment).
template <int kD>
struct BwdConfig;
template <>
struct BwdConfig<64> {
  using type = BwdTile<128, 64, 1>;
};
template <>
struct BwdConfig<128> {
  using type = BwdTile<64, 32, 1>;
};
template <>
struct BwdConfig<256> {
  using type = BwdTile<64, 32, 2>;
};

template <int kD, typename Cfg = typename BwdConfig<kD>::type>
struct BwdTraits {
  static constexpr int kBlockN = Cfg::kBlockN;  // keys per block
  static constexpr int kBlockM = Cfg::kBlockM;  // query rows per tile
  static constexpr int kDSplit = Cfg::kDSplit;  // warps sharing a 16-key slice (each owns kD / kDSplit columns)
  static constexpr int kKeyWarps = kBlockN / 16;
  static constexpr int kWarps = kKeyWarps * kDSplit;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kDW = kD / kDSplit;                    // dK / dV columns per warp
  static constexpr int kSCols = kBlockM < 64 ? 64 : kBlockM;  // dS tile row length (a swizzled row >= 64)
  static constexpr int kChunks = kD / 8;                      // 16-byte chunks per row of Q, K, V, dO
  // shared memory (bytes): K, V, two stages of Q and dO, dS^T, two stages of lse / delta / key limits
  static constexpr int kKV = kBlockN * kD * 2;
  static constexpr int kQ = kBlockM * kD * 2;
  static constexpr int kDS = kBlockN * kSCols * 2;
  static constexpr int kRow = kBlockM * 4;
  static constexpr int kOffK = 0, kOffV = kKV, kOffQ = 2 * kKV, kOffDO = kOffQ + 2 * kQ, kOffDS = kOffDO + 2 * kQ,
                       kOffLse = kOffDS + kDS, kOffDelta = kOffLse + 2 * kRow, kOffLim = kOffDelta + 2 * kRow;
  static constexpr int kSmem = kOffLim + 2 * kRow;
  static_assert(kBlockM % 16 == 0 && kBlockN % 16 == 0 && kDW % 16 == 0 && kD % 64 == 0, "tile shape");
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

// ---------------------------------------------------------------- 2. dK, dV (and dQ into dq_accum)
template <typename T, int kD, typename Cfg>
__global__ void __launch_bounds__(BwdTraits<kD, Cfg>::kThreads) flash_attention_bwd_dkdv_kernel(const BwdArgs a) {
#if !YIRAGE_SM80_DEVICE
  __trap();  // built for a GPU older than sm_80: never launched there (attention_native is false)
#else
  using Tr = BwdTraits<kD, Cfg>;
  constexpr int kBlockN = Tr::kBlockN, kBlockM = Tr::kBlockM, kThreads = Tr::kThreads, kDW = Tr::kDW,
                kChunks = Tr::kChunks, kKeyWarps = Tr::kKeyWarps;
  constexpr int kMT = kBlockM / 8;  // 8-query C tiles of S^T / dP^T per warp
  using TileD = SwizzledTile<kD>;
  using TileS = SwizzledTile<Tr::kSCols>;
  const AttentionBackward& p = a.p;

  extern __shared__ __align__(128) unsigned char bwd_smem[];
  const uint32_t s_base = smem_u32(bwd_smem);
  const uint32_t sK = s_base + Tr::kOffK, sV = s_base + Tr::kOffV, sDS = s_base + Tr::kOffDS;
  float* s_lse = reinterpret_cast<float*>(bwd_smem + Tr::kOffLse);      // [2][kBlockM], log2 units, +inf: P = 0
  float* s_delta = reinterpret_cast<float*>(bwd_smem + Tr::kOffDelta);  // [2][kBlockM]
  int* s_lim = reinterpret_cast<int*>(bwd_smem + Tr::kOffLim);  // [2][kBlockM]: last visible key - n_base

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane >> 2, t = lane & 3;               // fragment row group and thread in group
  const int kw = warp % kKeyWarps, dsl = warp / kKeyWarps;  // key slice and dK/dV column slice
  const int d0 = dsl * kDW;
  // ldmatrix address patterns (offsets from the tile start; see the MMA comments below)
  const BwdLaneTile<kD> lt_a(0, lane & 15, lane >> 4);                                // A, non-trans
  const BwdLaneTile<kD> lt_b(0, (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);    // B [n][k], non-trans
  const BwdLaneTile<kD> lt_bt(0, (lane & 7) + (((lane >> 3) & 1) << 3), lane >> 4);   // B [k][n], .trans

  int64_t bid = blockIdx.x;
  const int nb = static_cast<int>(bid % a.key_blocks);
  bid /= a.key_blocks;
  const int64_t hk_count = p.shape.heads_k;
  const int64_t hk = bid % hk_count, b = bid / hk_count;
  const int64_t sq = p.shape.seq_q, sk = p.shape.seq_k, rows = a.group_rows;
  const int sq32 = static_cast<int>(sq), rows32 = static_cast<int>(rows);  // see bwd_load_q_tile
  const int64_t n_base = static_cast<int64_t>(nb) * kBlockN;
  const int64_t row_base = (b * hk_count + hk) * rows;  // packed row 0 of this key/value head in (B, Hq, Sq)

  // K and V tiles (kBlockN x kD), rows past Sk zero-filled
  {
    const T* kb = static_cast<const T*>(p.k.ptr) + b * p.k.batch_stride + hk * p.k.head_stride;
    const T* vb = static_cast<const T*>(p.v.ptr) + b * p.v.batch_stride + hk * p.v.head_stride;
    for (int c = tid; c < kBlockN * kChunks; c += kThreads) {
      const int row = c / kChunks, ch = c % kChunks;
      const bool valid = n_base + row < sk;
      const int64_t j = valid ? n_base + row : 0;
      cp_async_16(sK + TileD::offset(row, ch), valid ? kb + j * p.k.seq_stride + ch * 8 : p.k.ptr, valid);
      cp_async_16(sV + TileD::offset(row, ch), valid ? vb + j * p.v.seq_stride + ch * 8 : p.v.ptr, valid);
    }
  }

  // A query tile's cursor: tile m starts at stacked row m * kBlockM = (head hk * G + h, position i). Tiles are
  // walked in order, so (h, i) is stepped rather than divided out (the launcher keeps G * Sq + kBlockM < 2^31).
  struct Cursor {
    int m, h, i;
  };
  auto bwd_step = [&](Cursor& c) {
    ++c.m;
    c.i += kBlockM;
    for (; c.i >= sq32; c.i -= sq32) ++c.h;
  };
  // Whether tile c has no visible key in this block: causal, and every row's last visible key i + Sk - Sq lies
  // before the block's first key (a tile reaching the next head holds i = Sq - 1: never hidden).
  auto bwd_tile_hidden = [&](const Cursor& c) -> bool {
    if (!p.shape.causal) return false;
    const int r0 = c.m * kBlockM, span = (r0 + kBlockM < rows32 ? kBlockM : rows32 - r0) - 1;
    const int64_t i_max = c.i + span < sq32 ? c.i + span : sq32 - 1;
    return i_max + sk - sq < n_base;
  };
  auto bwd_next_tile = [&](Cursor& c) {
    while (c.m < a.q_tiles && bwd_tile_hidden(c)) bwd_step(c);
  };
  // Q and dO tiles of query tile c (rows past G * Sq zero-filled) into stage s, and the rows' lse, delta and
  // last visible key. This thread copies chunk ch0 of the tile rows row0 + it * kRowStep: from one pointer
  // per tensor stepped by kRowStep positions when the tile lies in one head, else row by row.
  constexpr int kRowStep = kThreads / kChunks, kQIters = kBlockM / kRowStep;
  static_assert(kThreads % kChunks == 0 && kBlockM % kRowStep == 0, "whole rows per pass of the block");
  const int row0 = tid / kChunks, ch0 = tid % kChunks;
  const T* q_head0 = static_cast<const T*>(p.q.ptr) + b * p.q.batch_stride + hk * a.group * p.q.head_stride + ch0 * 8;
  const T* g_head0 = static_cast<const T*>(p.grad_out.ptr) + b * p.grad_out.batch_stride +
                     hk * a.group * p.grad_out.head_stride + ch0 * 8;
  auto bwd_load_q_tile = [&](const Cursor& c, int s) {
    const int r_base = c.m * kBlockM;
    const uint32_t sQ = s_base + Tr::kOffQ + s * Tr::kQ, sDO = s_base + Tr::kOffDO + s * Tr::kQ;
    const bool one_head = c.i + kBlockM <= sq32;  // the same for the whole block
    if (one_head) {
      const T* qs = q_head0 + c.h * p.q.head_stride + (c.i + row0) * p.q.seq_stride;
      const T* gs = g_head0 + c.h * p.grad_out.head_stride + (c.i + row0) * p.grad_out.seq_stride;
#pragma unroll
      for (int it = 0; it < kQIters; ++it) {
        const uint32_t off = TileD::offset(row0 + it * kRowStep, ch0);
        cp_async_16(sQ + off, qs + it * kRowStep * p.q.seq_stride, true);
        cp_async_16(sDO + off, gs + it * kRowStep * p.grad_out.seq_stride, true);
      }
    } else {
      int h = c.h, i = c.i + row0;
      for (; i >= sq32; i -= sq32) ++h;
#pragma unroll
      for (int it = 0; it < kQIters; ++it) {
        const bool valid = r_base + row0 + it * kRowStep < rows32;
        const T* qs = static_cast<const T*>(p.q.ptr);
        const T* gs = static_cast<const T*>(p.grad_out.ptr);
        if (valid) {
          qs = q_head0 + h * p.q.head_stride + i * p.q.seq_stride;
          gs = g_head0 + h * p.grad_out.head_stride + i * p.grad_out.seq_stride;
        }
        const uint32_t off = TileD::offset(row0 + it * kRowStep, ch0);
        cp_async_16(sQ + off, qs, valid);
        cp_async_16(sDO + off, gs, valid);
        if (it + 1 < kQIters) {
          i += kRowStep;
          for (; i >= sq32; i -= sq32) ++h;
        }
      }
    }
    if (tid < kBlockM) {
      const int r = r_base + tid;
      float lse2 = INFINITY, delta = 0.f;
      int64_t lim = -1;
      if (r < rows32) {
        const float l = p.lse[row_base + r];
        lse2 = l == -INFINITY ? INFINITY : l * bwd_log2e;
        delta = p.delta[row_base + r];
        lim = sk - 1;
        if (p.shape.causal) {
          const int64_t c_lim = (one_head ? c.i + tid : r % sq32) + sk - sq;
          lim = c_lim < lim ? c_lim : lim;
        }
        lim -= n_base;
        lim = lim < -1 ? -1 : (lim > kBlockN ? kBlockN : lim);
      }
      s_lse[s * kBlockM + tid] = lse2;
      s_delta[s * kBlockM + tid] = delta;
      s_lim[s * kBlockM + tid] = static_cast<int>(lim);
    }
  };

  float acc_dk[kDW / 8][4], acc_dv[kDW / 8][4];  // C tiles: keys kw*16 + (g, g+8), columns d0 + 8n + (2t, 2t+1)
#pragma unroll
  for (int n = 0; n < kDW / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_dk[n][e] = acc_dv[n][e] = 0.f;
  }

  Cursor cur = {0, 0, 0};
  bwd_next_tile(cur);
  if (cur.m < a.q_tiles) bwd_load_q_tile(cur, 0);
  cp_async_commit();  // group: K, V and the first query tile
  int stage = 0;
  while (cur.m < a.q_tiles) {
    const int64_t m = cur.m;
    bwd_step(cur);
    bwd_next_tile(cur);
    if (cur.m < a.q_tiles) bwd_load_q_tile(cur, stage ^ 1);  // stage ^ 1 was freed by the last barrier
    cp_async_commit();
    cp_async_wait<1>();  // this thread's copies of tile m (and K, V) have landed
    __syncthreads();     // ... and everyone's

    const uint32_t sQ = s_base + Tr::kOffQ + stage * Tr::kQ, sDO = s_base + Tr::kOffDO + stage * Tr::kQ;
    const float* lse2 = s_lse + stage * kBlockM;
    const float* dlt = s_delta + stage * kBlockM;
    const int* lim = s_lim + stage * kBlockM;

    // S^T = K_w Q^T and dP^T = V_w dO^T (16 keys x kBlockM queries each).
    //   A = K_w / V_w (m = key, k = d), stored [key][d] = row-major A: ldmatrix (non-trans), matrix i =
    //     (rows +8 * (i & 1), chunk +(i >> 1)): lane -> row lane & 15, chunk lane >> 4.
    //   B = Q^T / dO^T (k = d, n = query), stored [query][d] = [n][k]: ldmatrix (non-trans), register i =
    //     (n block i >> 1, k half i & 1): lane -> row (lane & 7) + 8 * (lane >> 4), chunk (lane >> 3) & 1.
    float acc_s[kMT][4], acc_dp[kMT][4];  // C: keys kw*16 + (g, g+8), queries 8n + (2t, 2t+1)
#pragma unroll
    for (int n = 0; n < kMT; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_s[n][e] = acc_dp[n][e] = 0.f;
    }
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t ak[4], av[4];
      ldmatrix_x4(ak, sK + lt_a.at(kw, kk));
      ldmatrix_x4(av, sV + lt_a.at(kw, kk));
#pragma unroll
      for (int np = 0; np < kBlockM / 16; ++np) {
        uint32_t bq[4], bo[4];
        ldmatrix_x4(bq, sQ + lt_b.at(np, kk));  // row np*16 + (lane & 7) + 8 (lane >> 4), chunk 2kk + ((lane >> 3) & 1)
        ldmatrix_x4(bo, sDO + lt_b.at(np, kk));
        mma_16816<T>(acc_s[2 * np], ak, bq[0], bq[1]);
        mma_16816<T>(acc_s[2 * np + 1], ak, bq[2], bq[3]);
        mma_16816<T>(acc_dp[2 * np], av, bo[0], bo[1]);
        mma_16816<T>(acc_dp[2 * np + 1], av, bo[2], bo[3]);
      }
    }

    // P^T = exp2(S^T * scale * log2(e) - lse2[query]) where the key is visible (lse2 = +inf: 0), then
    // dS^T = P^T * (dP^T - delta[query]) (kept in acc_dp). Element e of C tile n: key kw*16 + g + 8 * (e >> 1),
    // query 8n + 2t + (e & 1).
#pragma unroll
    for (int n = 0; n < kMT; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int q = 8 * n + 2 * t + (e & 1), key = kw * 16 + g + 8 * (e >> 1);
        const float pr = key <= lim[q] ? exp2_approx(fmaf(acc_s[n][e], a.scale_log2, -lse2[q])) : 0.f;
        acc_s[n][e] = pr;
        acc_dp[n][e] = pr * (acc_dp[n][e] - dlt[q]);
      }
    }

    // dV_w += P^T dO and dK_w += dS^T Q, k = query in steps of 16.
    //   A = P^T / dS^T (m = key, k = query) from two C tiles side by side (mma_sm80.cuh): a0 = tile 2kq {c0,c1},
    //     a1 = tile 2kq {c2,c3}, a2 = tile 2kq+1 {c0,c1}, a3 = tile 2kq+1 {c2,c3}.
    //   B = dO / Q (k = query, n = d), stored [query][d] = [k][n]: ldmatrix .trans, register i = (k half i & 1,
    //     n block i >> 1): lane -> row (lane & 7) + 8 * ((lane >> 3) & 1), chunk lane >> 4.
    // dS^T also goes to shared memory as T ([key][query], swizzled; one warp per key slice writes it): the
    // A registers of dS^T are exactly its pairs, a0 = (key g, queries 16kq + 2t..), a1 = (g + 8, same), a2 =
    // (g, 16kq + 8 + 2t..), a3 = (g + 8, same); query column 8c + 2t sits in chunk c at byte 4t.
#pragma unroll
    for (int kq = 0; kq < kBlockM / 16; ++kq) {
      const uint32_t ap[4] = {pack2<T>(acc_s[2 * kq][0], acc_s[2 * kq][1]),
                              pack2<T>(acc_s[2 * kq][2], acc_s[2 * kq][3]),
                              pack2<T>(acc_s[2 * kq + 1][0], acc_s[2 * kq + 1][1]),
                              pack2<T>(acc_s[2 * kq + 1][2], acc_s[2 * kq + 1][3])};
      const uint32_t ads[4] = {pack2<T>(acc_dp[2 * kq][0], acc_dp[2 * kq][1]),
                               pack2<T>(acc_dp[2 * kq][2], acc_dp[2 * kq][3]),
                               pack2<T>(acc_dp[2 * kq + 1][0], acc_dp[2 * kq + 1][1]),
                               pack2<T>(acc_dp[2 * kq + 1][2], acc_dp[2 * kq + 1][3])};
      if (dsl == 0) {
        const int key = kw * 16 + g;
        unsigned char* ds = bwd_smem + Tr::kOffDS + 4 * t;
        *reinterpret_cast<uint32_t*>(ds + TileS::offset(key, 2 * kq)) = ads[0];
        *reinterpret_cast<uint32_t*>(ds + TileS::offset(key + 8, 2 * kq)) = ads[1];
        *reinterpret_cast<uint32_t*>(ds + TileS::offset(key, 2 * kq + 1)) = ads[2];
        *reinterpret_cast<uint32_t*>(ds + TileS::offset(key + 8, 2 * kq + 1)) = ads[3];
      }
#pragma unroll
      for (int np = 0; np < kDW / 16; ++np) {
        // row kq*16 + (lane & 7) + 8 ((lane >> 3) & 1), chunk d0/8 + 2np + (lane >> 4) (d0/8: a multiple of 8)
        const uint32_t o = lt_bt.at(kq, np) + 2 * d0;
        uint32_t bo[4], bq[4];
        ldmatrix_x4_trans(bo, sDO + o);
        ldmatrix_x4_trans(bq, sQ + o);
        mma_16816<T>(acc_dv[2 * np], ap, bo[0], bo[1]);
        mma_16816<T>(acc_dv[2 * np + 1], ap, bo[2], bo[3]);
        mma_16816<T>(acc_dk[2 * np], ads, bq[0], bq[1]);
        mma_16816<T>(acc_dk[2 * np + 1], ads, bq[2], bq[3]);
      }
    }
    __syncthreads();  // dS^T complete

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
  for (int half = 0; half < 2; ++half) {
    const int64_t j = n_base + kw * 16 + g + 8 * half;
    if (j < sk) {
      const int64_t off = ((b * hk_count + hk) * sk + j) * kD + d0 + 2 * t;
#pragma unroll
      for (int n = 0; n < kDW / 8; ++n) {
        *reinterpret_cast<uint32_t*>(gk + off + 8 * n) =
            pack2<T>(acc_dk[n][2 * half] * scale, acc_dk[n][2 * half + 1] * scale);
        *reinterpret_cast<uint32_t*>(gv + off + 8 * n) = pack2<T>(acc_dv[n][2 * half], acc_dv[n][2 * half + 1]);
      }
    }
  }
#endif  // YIRAGE_SM80_DEVICE
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
