// The flash attention forward's configuration and parameter structs, and the split-KV merge that the decode
// configurations' blocks run at the end of the kernel (device code, torch-free; CUDA only). Included by
// attention_fwd_kernel.cuh.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cmath>
#include <cstdint>

#include "common.cuh"

namespace yirage::kernels::cuda {
namespace {

template <int kD_, int kWarpsM_, int kMTiles_, int kWarpsN_, int kBlockN_, int kStages_ = 2>
struct FwdConfig {
  static constexpr int kD = kD_, kWarpsM = kWarpsM_, kMTiles = kMTiles_, kWarpsN = kWarpsN_;
  static constexpr int kBlockN = kBlockN_, kStages = kStages_;
  static constexpr int kWarpRows = 16 * kMTiles;       // query rows per warp
  static constexpr int kBlockM = kWarpRows * kWarpsM;  // query rows per block
  static constexpr int kWarpKeys = kBlockN / kWarpsN;  // keys per warp in each key tile
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kChunks = kD / 8;  // 16-byte chunks per row
  static constexpr int kTileQ = kBlockM * kD * 2;
  static constexpr int kTileKV = kBlockN * kD * 2;
  static constexpr int kSmemMain = kTileQ + 2 * kStages * kTileKV;
  static constexpr int kOStride = kD + 8;  // floats per row of the epilogue's tile (conflict-free float2 stores)
  static constexpr int kSmemEpilogue = (kWarpsN * kBlockM * kOStride + 2 * kWarpsN * kBlockM) * 4;
  static constexpr int kSmem = kSmemMain > kSmemEpilogue ? kSmemMain : kSmemEpilogue;
  static_assert(kWarpKeys % 16 == 0 && kWarpKeys * kWarpsN == kBlockN, "each warp takes whole 16-key steps");
  static_assert(kD % 64 == 0, "swizzled rows need a multiple of 64 elements");
  static_assert(kStages >= 2, "at least one tile in flight while one is computed on");
};

struct FwdParams {
  const void* q;
  const void* k;
  const void* v;
  int64_t q_b, q_h, q_s, k_b, k_h, k_s, v_b, v_h, v_s;
  void* out;
  float* lse;
  float* split_out;
  float* split_lse;
  unsigned* split_count;  // nullptr: a separate kernel merges the splits; see AttentionForward::split_count
  int64_t rows;      // R = G * Sq stacked query rows per key/value head
  int64_t rows_all;  // B * Hq * Sq
  int heads_k, group, seq_q, seq_k, num_splits, batch_offset;
  float scale_log2;  // scale * log2(e)
  bool causal;
};

// Whether the blocks merge the key splits themselves: decode configurations (kWarpsN > 1; in the prefill ones
// the merge's code costs the main loop registers: ptxas spilled 52-84 bytes instead of 8), and where the split
// weights of a tile's rows fit the kernel's shared memory.
template <typename Cfg>
constexpr bool split_merge_fits(int num_splits) {
  return Cfg::kWarpsN > 1 && (static_cast<int64_t>(Cfg::kBlockM) * num_splits + Cfg::kBlockM) * 4 <= Cfg::kSmem;
}

// Merges the num_splits partial results of `rows` consecutive rows from grow0 (the rows of one query tile):
// out = sum_s exp(lse_s - lse) out_s, lse = log sum_s exp(lse_s). The partials were written by other blocks:
// they are read through L2 (__ldcg), never from this SM's L1. A warp per row turns the split lse into weights
// (shared memory); then each thread takes 4 columns of a row and reads the splits kBatch at a time (independent
// loads in flight: L2 latency, not bandwidth, bounds this step). D = 64 and 128 take split_merge_batched (below)
// instead: one round trip in place of four, the merge 3.0 -> 2.5-2.7 us of the merging block (B1 Hq32 Hk8 Sk32768
// D128, 16 splits) and decode calls 0.2-0.4 us faster through the op (H200); the D = 256 decode (two chunks a
// thread) ran 18.1 -> 18.6 us with it at one sequence of 4096 keys and keeps this one
// (benchmarks/results/cuda-attention-decode-merge-h200-2026-11-27.md).
template <typename T, typename Cfg>
__device__ __forceinline__ void split_merge(const FwdParams& p, int64_t grow0, int rows, float* s_w) {
  constexpr int kD = Cfg::kD, kWarps = Cfg::kThreads / 32, kC4 = kD / 4, kBatch = 8;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, S = p.num_splits;
  float* s_inv = s_w + Cfg::kBlockM * S;  // [rows]: 1 / sum of the weights (0: no key seen)
  for (int r = warp; r < rows; r += kWarps) {
    const float* l_row = p.split_lse + grow0 + r;
    float mx = -INFINITY;
    for (int s = lane; s < S; s += 32) mx = fmaxf(mx, __ldcg(l_row + s * p.rows_all));
    mx = warp_max(mx);
    float l = 0.f;
    for (int s = lane; s < S; s += 32) {
      const float x = __ldcg(l_row + s * p.rows_all);
      const float w = x == -INFINITY ? 0.f : __expf(x - mx);
      s_w[r * S + s] = w;
      l += w;
    }
    l = warp_sum(l);
    if (lane == 0) {
      s_inv[r] = l > 0.f ? 1.f / l : 0.f;
      if (p.lse != nullptr) p.lse[grow0 + r] = l > 0.f ? mx + __logf(l) : -INFINITY;
    }
  }
  __syncthreads();
  const int64_t split_step = p.rows_all * kC4;  // float4s from one split's row to the next's
  for (int c = tid; c < rows * kC4; c += Cfg::kThreads) {
    const int r = c / kC4, c4 = c % kC4;
    const float4* src = reinterpret_cast<const float4*>(p.split_out + (grow0 + r) * kD) + c4;
    const float* w = s_w + r * S;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < S; s0 += kBatch) {
      float4 v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        v[j] = s0 + j < S ? __ldcg(src + (s0 + j) * split_step) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const float ws = s0 + j < S ? w[s0 + j] : 0.f;
        if (ws != 0.f) {
          acc.x += ws * v[j].x; acc.y += ws * v[j].y; acc.z += ws * v[j].z; acc.w += ws * v[j].w;
        }
      }
    }
    const float inv = s_inv[r];
    Vec<T, 4> o;
    o.v[0] = from_acc<T>(acc.x * inv);
    o.v[1] = from_acc<T>(acc.y * inv);
    o.v[2] = from_acc<T>(acc.z * inv);
    o.v[3] = from_acc<T>(acc.w * inv);
    *reinterpret_cast<Vec<T, 4>*>(static_cast<T*>(p.out) + (grow0 + r) * kD + 4 * c4) = o;
  }
}

// split_merge for D = 64 and 128: a thread takes a 4-column chunk of a row (one chunk a thread where rows * kD / 4
// <= threads: D = 128 decode with up to 4 stacked rows, D = 64 with up to 8) and issues the loads of kBatch splits'
// lse and columns at once (a row's lse are read by each of its threads: the same L2 lines) and weighs them itself, one L2 round
// trip for up to kBatch splits where split_merge's weights, then columns 8 splits at a time, take four. More splits
// merge batch by batch, the running sums rescaled to each batch's maximum. Measured: split_merge's comment.
template <typename T, typename Cfg>
__device__ __forceinline__ void split_merge_batched(const FwdParams& p, int64_t grow0, int rows) {
  constexpr int kD = Cfg::kD, kC4 = kD / 4, kBatch = 16;
  const int S = p.num_splits;
  const int64_t split_step = p.rows_all * kC4;  // float4s from one split's row to the next's
  for (int c = threadIdx.x; c < rows * kC4; c += Cfg::kThreads) {
    const int r = c / kC4, c4 = c % kC4;
    const float4* src = reinterpret_cast<const float4*>(p.split_out + (grow0 + r) * kD) + c4;
    const float* l_row = p.split_lse + grow0 + r;
    float mx = -INFINITY, l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < S; s0 += kBatch) {
      float lv[kBatch];
      float4 v[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const bool in = s0 + j < S;
        lv[j] = in ? __ldcg(l_row + (s0 + j) * p.rows_all) : -INFINITY;
        v[j] = in ? __ldcg(src + (s0 + j) * split_step) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
      float m = mx;
#pragma unroll
      for (int j = 0; j < kBatch; ++j) m = fmaxf(m, lv[j]);
      if (m == -INFINITY) continue;  // no split so far saw a key
      const float keep = mx == -INFINITY ? 0.f : __expf(mx - m);  // the earlier batches' sums, rescaled
      l *= keep;
      acc.x *= keep; acc.y *= keep; acc.z *= keep; acc.w *= keep;
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const float w = lv[j] == -INFINITY ? 0.f : __expf(lv[j] - m);
        if (w != 0.f) {
          l += w;
          acc.x += w * v[j].x; acc.y += w * v[j].y; acc.z += w * v[j].z; acc.w += w * v[j].w;
        }
      }
      mx = m;
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;  // no key seen: zeros
    Vec<T, 4> o;
    o.v[0] = from_acc<T>(acc.x * inv);
    o.v[1] = from_acc<T>(acc.y * inv);
    o.v[2] = from_acc<T>(acc.z * inv);
    o.v[3] = from_acc<T>(acc.w * inv);
    *reinterpret_cast<Vec<T, 4>*>(static_cast<T*>(p.out) + (grow0 + r) * kD + 4 * c4) = o;
    if (c4 == 0 && p.lse != nullptr) p.lse[grow0 + r] = l > 0.f ? mx + __logf(l) : -INFINITY;
  }
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
