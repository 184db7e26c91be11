// The flash attention forward kernel (device code, torch-free; CUDA only): flash_attention_fwd_kernel (its
// configuration and parameter structs and the split merge: attention_fwd_config.cuh). Included by
// attention_fwd.cu (launch, configurations, split-KV combine) and by the tuning harness in benchmarks/cuda/.
//
// One block per (tile of stacked query rows, key/value head, batch[, key split]). The block's query tile
// stays in shared memory; key/value tiles stream through a cp.async pipeline (kStages - 1 tiles in flight)
// into swizzled shared memory. Each warp owns 16 x kMTiles query rows and kWarpKeys keys of every key tile:
// S = Q K^T on tensor cores, scaled into log2 units, masked (causal, bottom-right; keys past Sk), an online
// softmax whose row maximum and sum stay in registers (the four lanes of a row reduce with two shuffles), P
// rounded to the input dtype and fed straight from the S accumulators into P V. Prefill configurations put all
// warps on the rows (kWarpsN = 1); the decode configuration puts all warps on the keys of one 16-row tile
// (kWarpsN > 1) and combines them in shared memory. With num_splits > 1 each block covers a slice of the key
// tiles and writes an fp32 partial result and its log-sum-exp.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "attention_fwd_config.cuh"
#include "common.cuh"
#include "mma_sm80.cuh"

#include "attention_fwd_timeline.cuh"  // ATTN_STAMP: no code unless a tuning build asks for it

namespace yirage::kernels::cuda {
namespace {

using namespace sm80;

template <typename T, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads) flash_attention_fwd_kernel(const FwdParams p) {
#if !YIRAGE_SM80_DEVICE
  __trap();
#else
  constexpr int kD = Cfg::kD, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kMTiles = Cfg::kMTiles;
  constexpr int kWarpKeys = Cfg::kWarpKeys, kChunks = Cfg::kChunks, kThreads = Cfg::kThreads;
  constexpr int kNT = kWarpKeys / 8;  // 8-key MMA tiles per warp
  constexpr int kDT = kD / 8;         // 8-column output tiles
  using Tile = SwizzledTile<kD>;
  extern __shared__ __align__(128) unsigned char smem[];

  ATTN_STAMP(0);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp % Cfg::kWarpsM, warp_n = warp / Cfg::kWarpsM;
  // Row indices: 32-bit in the decode configurations (attention_forward keeps R + kBlockM under 2^31; fewer
  // instructions: H200, D = 128, 1 x 1024 keys 8.1 -> 7.8 us); 64-bit in the prefill ones, where ptxas spilled
  // 60-100 bytes with 32-bit ones (8 with 64-bit) and B4 H32 S4096 ran 6% slower.
  using Row = std::conditional_t<(Cfg::kWarpsN > 1), int, int64_t>;
  // causal: the longest rows (the last tiles) first, so the short ones fill the tail. (The Hopper kernels' order, heads
  // in groups, attention_tile_order.cuh, was slower here: H200, kernel alone, D128 B4 H32 S2048 / S4096 0.95x /
  // 0.97x, GQA (Hk 8) S2048 0.94x, B2 S8192 0.96x, D64 0.99x; D256 1.05x.)
  const Row tile = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int hk = blockIdx.y;
  const int b = p.batch_offset + blockIdx.z / p.num_splits, split = blockIdx.z % p.num_splits;
  const Row R = static_cast<Row>(p.rows), m0 = tile * kBlockM;
  const Row row_end = std::min<Row>(m0 + kBlockM, R);
  const int sq = p.seq_q, sk = p.seq_k;

  // The query positions the tile spans (stacked rows of one head are consecutive positions).
  int i_min = 0, i_max = sq - 1;
  if (m0 / sq == (row_end - 1) / sq) {
    i_min = static_cast<int>(m0 % sq);
    i_max = static_cast<int>((row_end - 1) % sq);
  }
  int key_end = sk;  // keys at or past key_end are hidden from every row of the tile
  if (p.causal) key_end = std::max(0, std::min(sk, i_max + sk - sq + 1));
  const int n_blocks = (key_end + kBlockN - 1) / kBlockN;
  const int per_split = (n_blocks + p.num_splits - 1) / p.num_splits;
  const int nb_begin = std::min(n_blocks, split * per_split);
  const int nb_end = std::min(n_blocks, nb_begin + per_split);
  // keys a tile may show without a mask: below Sk and visible from the tile's first position
  const int unmasked_end = p.causal ? std::min(sk, i_min + sk - sq + 1) : sk;

  const T* qg = static_cast<const T*>(p.q) + b * p.q_b + static_cast<int64_t>(hk) * p.group * p.q_h;
  const T* kg = static_cast<const T*>(p.k) + b * p.k_b + hk * p.k_h;
  const T* vg = static_cast<const T*>(p.v) + b * p.v_b + hk * p.v_h;
  const uint32_t s_q = smem_u32(smem);
  const uint32_t s_k = s_q + Cfg::kTileQ;
  const uint32_t s_v = s_k + Cfg::kStages * Cfg::kTileKV;

  for (int c = tid; c < kBlockM * kChunks; c += kThreads) {
    const int row = c / kChunks, ch = c % kChunks;
    const Row r = m0 + row;
    const bool valid = r < R;
    const T* src = valid ? qg + (r / sq) * p.q_h + (r % sq) * p.q_s + ch * 8 : static_cast<const T*>(p.q);
    cp_async_16(s_q + Tile::offset(row, ch), src, valid);
  }
  // Key/value tiles: this thread copies chunk ch0 of rows row0 + i * kRowStep (i < kKVIters) of every tile, so
  // its shared-memory offsets and global pointers are set up once; the pointers then advance a tile per call
  // (tiles are loaded in order). Only a tile that runs past Sk checks its rows.
  constexpr int kRowStep = kThreads / kChunks, kKVIters = kBlockN / kRowStep;
  static_assert(kThreads % kChunks == 0 && kBlockN % kRowStep == 0, "whole rows per pass of the block");
  const int row0 = tid / kChunks, ch0 = tid % kChunks;
  const T* k_next = kg + (static_cast<int64_t>(nb_begin) * kBlockN + row0) * p.k_s + ch0 * 8;
  const T* v_next = vg + (static_cast<int64_t>(nb_begin) * kBlockN + row0) * p.v_s + ch0 * 8;
  const int64_t k_step = kRowStep * p.k_s, v_step = kRowStep * p.v_s;
  auto load_kv = [&](int stage, int nb) {
    const uint32_t st = stage * Cfg::kTileKV;
    const int rows_left = sk - nb * kBlockN - row0;  // rows row0 + i * kRowStep < rows_left hold keys
    if (rows_left > (kKVIters - 1) * kRowStep) {
#pragma unroll
      for (int i = 0; i < kKVIters; ++i) {
        const uint32_t off = st + Tile::offset(row0 + i * kRowStep, ch0);
        cp_async_16(s_k + off, k_next + i * k_step, true);
        cp_async_16(s_v + off, v_next + i * v_step, true);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kKVIters; ++i) {
        const uint32_t off = st + Tile::offset(row0 + i * kRowStep, ch0);
        const bool valid = i * kRowStep < rows_left;  // zero rows past the end: 0 * V stays 0 under a masked probability
        cp_async_16(s_k + off, valid ? k_next + i * k_step : static_cast<const T*>(p.k), valid);
        cp_async_16(s_v + off, valid ? v_next + i * v_step : static_cast<const T*>(p.v), valid);
      }
    }
    k_next += kKVIters * k_step;
    v_next += kKVIters * v_step;
  };

  // The two rows (g and g + 8 of each 16-row MMA tile) this lane holds: the last key each sees (-1: none).
  int last_key[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const Row r = m0 + warp_m * Cfg::kWarpRows + mt * 16 + (lane >> 2) + h * 8;
      const int i = static_cast<int>(r % sq);
      last_key[mt][h] = r >= R ? -1 : (p.causal ? std::min(sk - 1, i + sk - sq) : sk - 1);
    }
  }

  float acc[kMTiles][kDT][4];
  float row_max[kMTiles][2], row_sum[kMTiles][2], row_scale[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) acc[mt][dt][0] = acc[mt][dt][1] = acc[mt][dt][2] = acc[mt][dt][3] = 0.f;
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }

  // kStages - 1 key/value tiles in flight ahead of the one computed on (one commit group per tile; the
  // query tile rides with the first).
#pragma unroll
  for (int i = 0; i < Cfg::kStages - 1; ++i) {
    if (nb_begin + i < nb_end) load_kv(i, nb_begin + i);
    cp_async_commit();
  }
  for (int nb = nb_begin; nb < nb_end; ++nb) {
    const int stage = (nb - nb_begin) % Cfg::kStages;
    cp_async_wait<Cfg::kStages - 2>();  // tile nb landed (this thread's copies) ...
    __syncthreads();  // ... everyone's, and every warp is done with the stage computed on last iteration
    if (nb == nb_begin) ATTN_STAMP(1);
    if (nb + Cfg::kStages - 1 < nb_end) load_kv((stage + Cfg::kStages - 1) % Cfg::kStages, nb + Cfg::kStages - 1);
    cp_async_commit();

    // S = Q K^T for this warp's rows and keys. A: Q rows (ldmatrix x4: matrices (rows 0-7 | 8-15) x
    // (k 0-7 | 8-15) -> a0..a3). B: K rows are the n index, stored [key][d] = B^T row-major, so the plain
    // ldmatrix gives b0/b1 of two 8-key tiles: matrices (keys 0-7, d 0-7), (keys 0-7, d 8-15),
    // (keys 8-15, d 0-7), (keys 8-15, d 8-15).
    float s[kMTiles][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
    const uint32_t k_tile = s_k + stage * Cfg::kTileKV, v_tile = s_v + stage * Cfg::kTileKV;
    const int key0 = warp_n * kWarpKeys;  // this warp's first key within the tile
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const int row = warp_m * Cfg::kWarpRows + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4(a[mt], s_q + Tile::offset(row, kk * 2 + (lane >> 4)));
      }
#pragma unroll
      for (int n2 = 0; n2 < kWarpKeys / 16; ++n2) {
        uint32_t bk[4];
        ldmatrix_x4(bk, k_tile + Tile::offset(key0 + n2 * 16 + (lane & 7) + (lane >> 4) * 8, kk * 2 + ((lane >> 3) & 1)));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(s[mt][2 * n2], a[mt], bk[0], bk[1]);
          mma_16816<T>(s[mt][2 * n2 + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    // Online softmax in log2 units. A positive scale is applied inside the exponential (max over the raw
    // scores, then exp2(s * scale_log2 - max * scale_log2) as one FFMA); any other scale is applied first (the
    // max must be taken over the scaled scores when the scale is negative). Masked scores become -inf.
    const int n0 = nb * kBlockN + key0;
    const bool masked = nb * kBlockN + kBlockN > unmasked_end;
    const bool lazy_scale = p.scale_log2 > 0.f;
    const float exp_scale = lazy_scale ? p.scale_log2 : 1.f;
    bool rescale = false;  // whether any row's running maximum moved
    if (!lazy_scale) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] *= p.scale_log2;
    }
    if (masked) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (n0 + nt * 8 + (lane & 3) * 2 + (e & 1) > last_key[mt][e >> 1]) s[mt][nt][e] = -INFINITY;
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        mx = fmaxf(mx, shfl_xor(mx, 1));
        mx = fmaxf(mx, shfl_xor(mx, 2));
        const float mx_new = fmaxf(row_max[mt][h], mx * exp_scale);
        const float base = mx_new == -INFINITY ? 0.f : mx_new;  // a row with no visible key yet: exp2(-inf) = 0
        const float alpha = exp2_approx(row_max[mt][h] - base);
        rescale |= alpha != 1.f;
        row_max[mt][h] = mx_new;
        row_scale[mt][h] = alpha;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const float p0 = exp2_approx(fmaf(s[mt][nt][2 * h], exp_scale, -base));
          const float p1 = exp2_approx(fmaf(s[mt][nt][2 * h + 1], exp_scale, -base));
          s[mt][nt][2 * h] = p0;
          s[mt][nt][2 * h + 1] = p1;
          sum += p0 + p1;
        }
        row_sum[mt][h] = row_sum[mt][h] * alpha + sum;
      }
    }
    // Rescale the output accumulators only when some row of the warp needs it: once the running maxima
    // settle (after the first key tiles, typically) the multiplications are skipped.
    if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt) {
          acc[mt][dt][0] *= row_scale[mt][0];
          acc[mt][dt][1] *= row_scale[mt][0];
          acc[mt][dt][2] *= row_scale[mt][1];
          acc[mt][dt][3] *= row_scale[mt][1];
        }
      }
    }

    // O += P V. A: P from two adjacent 8-key S tiles. B: V stored [key][d] is k x n row-major, so the
    // transposing ldmatrix gives b0/b1 of two 8-column tiles: matrices (keys 0-7, d 0-7), (keys 8-15, d 0-7),
    // (keys 0-7, d 8-15), (keys 8-15, d 8-15).
#pragma unroll
    for (int j = 0; j < kWarpKeys / 16; ++j) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        a[mt][0] = pack2<T>(s[mt][2 * j][0], s[mt][2 * j][1]);
        a[mt][1] = pack2<T>(s[mt][2 * j][2], s[mt][2 * j][3]);
        a[mt][2] = pack2<T>(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
        a[mt][3] = pack2<T>(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
      }
#pragma unroll
      for (int d2 = 0; d2 < kD / 16; ++d2) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, v_tile + Tile::offset(key0 + j * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, d2 * 2 + (lane >> 4)));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(acc[mt][2 * d2], a[mt], bv[0], bv[1]);
          mma_16816<T>(acc[mt][2 * d2 + 1], a[mt], bv[2], bv[3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();
  ATTN_STAMP(2);

  // Epilogue: each warp's unnormalized output, row maximum and row sum go to shared memory (fp32); the
  // block then merges the kWarpsN key slices of every row and writes it out.
  constexpr int kOS = Cfg::kOStride;
  float* s_o = reinterpret_cast<float*>(smem);
  float* s_m = s_o + Cfg::kWarpsN * kBlockM * kOS;
  float* s_l = s_m + Cfg::kWarpsN * kBlockM;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[mt][h];
      l += shfl_xor(l, 1);
      l += shfl_xor(l, 2);
      const int row = warp_m * Cfg::kWarpRows + mt * 16 + (lane >> 2) + h * 8;
      float* o_row = s_o + (warp_n * kBlockM + row) * kOS + (lane & 3) * 2;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        *reinterpret_cast<float2*>(o_row + dt * 8) = make_float2(acc[mt][dt][2 * h], acc[mt][dt][2 * h + 1]);
      }
      if ((lane & 3) == 0) {
        s_m[warp_n * kBlockM + row] = row_max[mt][h];
        s_l[warp_n * kBlockM + row] = l;
      }
    }
  }
  __syncthreads();

  const int64_t out_row0 = (static_cast<int64_t>(b) * p.heads_k + hk) * R;  // stacked rows are contiguous
  for (int c = tid; c < kBlockM * (kD / 8); c += kThreads) {
    const int row = c / (kD / 8), c8 = c % (kD / 8);
    const Row r = m0 + row;
    if (r >= R) continue;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < Cfg::kWarpsN; ++w) m = fmaxf(m, s_m[w * kBlockM + row]);
    float o[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    float l = 0.f;
#pragma unroll
    for (int w = 0; w < Cfg::kWarpsN; ++w) {
      const float mw = s_m[w * kBlockM + row];
      const float wt = mw == -INFINITY ? 0.f : exp2_approx(mw - m);
      l += wt * s_l[w * kBlockM + row];
      const float4* src = reinterpret_cast<const float4*>(s_o + (w * kBlockM + row) * kOS + c8 * 8);
      const float4 x0 = src[0], x1 = src[1];
      o[0] += wt * x0.x; o[1] += wt * x0.y; o[2] += wt * x0.z; o[3] += wt * x0.w;
      o[4] += wt * x1.x; o[5] += wt * x1.y; o[6] += wt * x1.z; o[7] += wt * x1.w;
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;  // no visible key: zeros
    const float lse = l > 0.f ? (m + __log2f(l)) * kLn2 : -INFINITY;
    const int64_t grow = out_row0 + r;
    if (p.num_splits == 1) {
      Vec<T, 8> v;
#pragma unroll
      for (int e = 0; e < 8; ++e) v.v[e] = from_acc<T>(o[e] * inv);
      *reinterpret_cast<Vec<T, 8>*>(static_cast<T*>(p.out) + grow * kD + c8 * 8) = v;
      if (c8 == 0 && p.lse != nullptr) p.lse[grow] = lse;
    } else {
      float4* dst = reinterpret_cast<float4*>(p.split_out + (split * p.rows_all + grow) * kD + c8 * 8);
      dst[0] = make_float4(o[0] * inv, o[1] * inv, o[2] * inv, o[3] * inv);
      dst[1] = make_float4(o[4] * inv, o[5] * inv, o[6] * inv, o[7] * inv);
      if (c8 == 0) p.split_lse[split * p.rows_all + grow] = lse;
    }
  }
  if constexpr (Cfg::kWarpsN > 1) {
  if (p.num_splits > 1 && p.split_count != nullptr) {
    // The block that finishes its tile's splits last merges them (CUDA's threadFenceReduction pattern): every
    // thread's partial rows are made visible device-wide, then one thread counts the block in; the counter
    // goes back to 0 for the next call on the stream (or the next replay of a CUDA graph).
    __shared__ int s_last;
    ATTN_STAMP(3);
    __threadfence();
    __syncthreads();  // also: the epilogue's shared tile is free
    if (tid == 0) {
      unsigned* count = p.split_count + (static_cast<int64_t>(b) * p.heads_k + hk) * gridDim.x + blockIdx.x;
      s_last = atomicAdd(count, 1u) + 1u == static_cast<unsigned>(p.num_splits);
      if (s_last) *count = 0u;
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    // D <= 128: one merge round trip (split_merge_batched); D = 256 keeps the shared-memory weights (its two
    // chunks a thread ran slower batched; and one kernel with both merges spilled in the D = 128 main loop)
    if constexpr (kD <= 128) {
      split_merge_batched<T, Cfg>(p, out_row0 + m0, static_cast<int>(row_end - m0));
    } else {
      split_merge<T, Cfg>(p, out_row0 + m0, static_cast<int>(row_end - m0), reinterpret_cast<float*>(smem));
    }
#if YIRAGE_ATTN_TIMELINE
    __syncthreads();
    ATTN_STAMP(4);
#endif
  }
  }
#endif
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
