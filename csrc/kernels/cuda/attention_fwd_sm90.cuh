// The flash attention forward on Hopper warpgroup MMAs (device code, torch-free; CUDA sm_90a only): prefill
// without key splits, fp16/bf16, head dims 64, 128 and 256. Included by attention_fwd.cu and by the tuning harness
// in benchmarks/cuda/. Same parameters and results as flash_attention_fwd_kernel (attention_fwd_kernel.cuh).
//
// One block of two warpgroups per (128-row tile of stacked query rows, key/value head, batch); warpgroup w owns
// rows 64w..64w+63. The query tile stays in shared memory; key and value tiles (64 or 128 keys) stream through two
// stages of swizzled shared memory (wgmma_sm90.cuh's layout), filled by cp.async from every thread, the key
// tile and the value tile in separate commit groups:
//   B1: K_j has landed; every warpgroup is done with S_{j-1}  -> copies of K_{j+1} start
//   S_j = Q K_j^T        (wgmma, A and B from shared memory; then wait: S_j and P_{j-1} V_{j-1} complete)
//   B2: V_j has landed; every warpgroup is done with P_{j-1} V_{j-1} -> copies of V_{j+1} start
//   online softmax of S_j in registers (the FlashAttention-2 arithmetic, in log2 units), P_j rounded to T
//   O += P_j V_j         (wgmma, A = P_j from registers, B = V_j from shared memory, MN-major; not waited for)
// The output goes out through the query tile's shared memory (16-byte stores), with the log-sum-exp.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "attention_fwd_config.cuh"
#include "common.cuh"
#include "mma_sm80.cuh"
#include "wgmma_sm90.cuh"

namespace yirage::kernels::cuda {
namespace {

template <int kD_, int kBlockN_ = 128, int kMinBlocks_ = 1>
struct Sm90FwdConfig {
  static constexpr int kD = kD_;
  static constexpr int kWarpGroups = 2;
  static constexpr int kBlockM = 64 * kWarpGroups;  // query rows per block
  static constexpr int kBlockN = kBlockN_;          // keys per tile
  static constexpr int kMinBlocks = kMinBlocks_;    // resident blocks per SM the registers are capped for
  static constexpr int kThreads = 128 * kWarpGroups;
  static constexpr int kChunks = kD / 8;  // 16-byte chunks per row
  static constexpr int kTileQ = kBlockM * kD * 2;
  static constexpr int kTileKV = kBlockN * kD * 2;
  static constexpr int kStages = 2;
  // + 1 KB: the tiles start at the first 1024-byte boundary of the dynamic shared memory
  static constexpr int kSmem = kTileQ + 2 * kStages * kTileKV + 1024;
  static_assert(kD == 64 || kD == 128 || kD == 256, "wgmma n = head dim for P V: 64, 128 or 256");
  static_assert(kBlockN == 64 || kBlockN == 128, "wgmma n = key tile for Q K^T: 64 or 128 here");
};

template <typename T, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) flash_attention_fwd_sm90_kernel(const FwdParams p) {
#if !YIRAGE_SM90A_DEVICE
  __trap();
#else
  using namespace sm80;
  using namespace sm90;
  constexpr int kD = Cfg::kD, kBlockM = Cfg::kBlockM, kBlockN = Cfg::kBlockN, kChunks = Cfg::kChunks;
  constexpr int kThreads = Cfg::kThreads;
  constexpr int kNT = kBlockN / 8;  // 8-key column tiles of S per thread
  constexpr int kDT = kD / 8;       // 8-column tiles of O per thread
  extern __shared__ __align__(1024) unsigned char smem_raw[];

  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, warp_in_wg = (tid >> 5) & 3;
  const int64_t tile = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // causal: longest rows first
  const int hk = blockIdx.y;
  const int b = p.batch_offset + blockIdx.z;
  const int64_t R = p.rows, m0 = tile * kBlockM;
  const int64_t row_end = std::min<int64_t>(m0 + kBlockM, R);
  const int sq = p.seq_q, sk = p.seq_k;

  int i_min = 0, i_max = sq - 1;  // the query positions the tile spans
  if (m0 / sq == (row_end - 1) / sq) {
    i_min = static_cast<int>(m0 % sq);
    i_max = static_cast<int>((row_end - 1) % sq);
  }
  int key_end = sk;  // keys at or past key_end are hidden from every row of the tile
  if (p.causal) key_end = std::max(0, std::min(sk, i_max + sk - sq + 1));
  const int n_blocks = (key_end + kBlockN - 1) / kBlockN;
  const int unmasked_end = p.causal ? std::min(sk, i_min + sk - sq + 1) : sk;

  const T* qg = static_cast<const T*>(p.q) + b * p.q_b + static_cast<int64_t>(hk) * p.group * p.q_h;
  const T* kg = static_cast<const T*>(p.k) + b * p.k_b + hk * p.k_h;
  const T* vg = static_cast<const T*>(p.v) + b * p.v_b + hk * p.v_h;
  const uint32_t s_q = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t s_k = s_q + Cfg::kTileQ;
  const uint32_t s_v = s_k + Cfg::kStages * Cfg::kTileKV;

  for (int c = tid; c < kBlockM * kChunks; c += kThreads) {
    const int row = c / kChunks, ch = c % kChunks;
    const int64_t r = m0 + row;
    const bool valid = r < R;
    const T* src = valid ? qg + (r / sq) * p.q_h + (r % sq) * p.q_s + ch * 8 : static_cast<const T*>(p.q);
    cp_async_16(s_q + sw128_offset(row, ch, kBlockM), src, valid);
  }
  // Key/value copies: chunk ch0 of rows row0 + i * kRowStep of every tile (offsets fixed, pointers advancing).
  constexpr int kRowStep = kThreads / kChunks, kKVIters = kBlockN / kRowStep;
  static_assert(kThreads % kChunks == 0 && kBlockN % kRowStep == 0 && kRowStep % 8 == 0, "whole rows per pass");
  const int row0 = tid / kChunks, ch0 = tid % kChunks;
  const uint32_t kv_off = sw128_offset(row0, ch0, kBlockN);  // + i * kRowStep * 128 for pass i
  const T* k_next = kg + static_cast<int64_t>(row0) * p.k_s + ch0 * 8;
  const T* v_next = vg + static_cast<int64_t>(row0) * p.v_s + ch0 * 8;
  const int64_t k_step = kRowStep * p.k_s, v_step = kRowStep * p.v_s;
  auto load_rows = [&](uint32_t dst, const T*& next, int64_t step, const T* base, int nb) {
    const int rows_left = sk - nb * kBlockN - row0;
#pragma unroll
    for (int i = 0; i < kKVIters; ++i) {
      const bool valid = i * kRowStep < rows_left;  // rows past Sk are zeros (0 * V stays 0 under p = 0)
      cp_async_16(dst + kv_off + i * kRowStep * 128, valid ? next + i * step : base, valid);
    }
    next += kKVIters * step;
  };

  // This thread's two rows (g and g + 8 of its warp's 16): the last key each sees (-1: none).
  const int row_in_tile = wg * 64 + warp_in_wg * 16 + (lane >> 2);
  int last_key[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t r = m0 + row_in_tile + h * 8;
    const int i = static_cast<int>(r % sq);
    last_key[h] = r >= R ? -1 : (p.causal ? std::min(sk - 1, i + sk - sq) : sk - 1);
  }

  float o[kD / 2];
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] = 0.f;
  fence_regs(o);  // (without it ptxas serializes the wgmmas: C7515)
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

  if (n_blocks > 0) load_rows(s_k, k_next, k_step, static_cast<const T*>(p.k), 0);
  cp_async_commit();  // group: Q, K_0
  if (n_blocks > 0) load_rows(s_v, v_next, v_step, static_cast<const T*>(p.v), 0);
  cp_async_commit();  // group: V_0

  const uint32_t q_wg = s_q + wg * 64 * 128;  // this warpgroup's 64 rows of every panel
  const bool lazy_scale = p.scale_log2 > 0.f;
  const float exp_scale = lazy_scale ? p.scale_log2 : 1.f;
  for (int nb = 0; nb < n_blocks; ++nb) {
    const int stage = nb & 1;
    const uint32_t k_tile = s_k + stage * Cfg::kTileKV, v_tile = s_v + stage * Cfg::kTileKV;
    cp_async_wait<1>();  // K_nb (this thread's copies; V_nb may still be in flight)
    fence_proxy_async();
    __syncthreads();  // B1
    if (nb + 1 < n_blocks) load_rows(s_k + (stage ^ 1) * Cfg::kTileKV, k_next, k_step, static_cast<const T*>(p.k), nb + 1);
    cp_async_commit();

    float s[kBlockN / 2];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t panel = (kk >> 2), col = (kk & 3) * 32;
      const uint64_t da = smem_desc(q_wg + panel * kBlockM * 128 + col, 16, 1024);
      const uint64_t db = smem_desc(k_tile + panel * kBlockN * 128 + col, 16, 1024);
      wgmma_ss_step<T, kBlockN>(s, da, db, kk == 0);
    }
    wgmma_commit();
    wgmma_wait<0>();  // S_nb, and P_{nb-1} V_{nb-1}
    fence_regs(s);
    fence_regs(o);

    cp_async_wait<1>();  // V_nb
    fence_proxy_async();
    __syncthreads();  // B2
    if (nb + 1 < n_blocks) load_rows(s_v + (stage ^ 1) * Cfg::kTileKV, v_next, v_step, static_cast<const T*>(p.v), nb + 1);
    cp_async_commit();

    // Online softmax (as in flash_attention_fwd_kernel): masked scores -inf, a positive scale applied inside
    // the exponential, the output rescaled.
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
    float scale_row[2];
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
    // Always rescaled: a branch around it makes ptxas serialize the wgmmas (its copies merging the two
    // versions of the accumulators land inside the P V pipeline stage).
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
      o[dt * 4 + 0] *= scale_row[0];
      o[dt * 4 + 1] *= scale_row[0];
      o[dt * 4 + 2] *= scale_row[1];
      o[dt * 4 + 3] *= scale_row[1];
    }
    uint32_t pa[kBlockN / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      pa[kk][0] = pack2<T>(s[(2 * kk) * 4 + 0], s[(2 * kk) * 4 + 1]);
      pa[kk][1] = pack2<T>(s[(2 * kk) * 4 + 2], s[(2 * kk) * 4 + 3]);
      pa[kk][2] = pack2<T>(s[(2 * kk + 1) * 4 + 0], s[(2 * kk + 1) * 4 + 1]);
      pa[kk][3] = pack2<T>(s[(2 * kk + 1) * 4 + 2], s[(2 * kk + 1) * 4 + 3]);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint64_t db = smem_desc(v_tile + kk * 16 * 128, kBlockN * 128, 1024);
      wgmma_rs_acc<T, kD, 1>(o, pa[kk], db);
    }
    wgmma_commit();
  }
  wgmma_wait<0>();
  fence_regs(o);
  cp_async_wait<0>();
  __syncthreads();  // with no key tile, the query tile's copies were never waited for

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
    const int64_t r = m0 + row;
    if ((lane & 3) == 0 && r < R && p.lse != nullptr) {
      p.lse[out_row0 + r] = l > 0.f ? (row_max[h] + __log2f(l)) * kLn2 : -INFINITY;
    }
  }
  __syncthreads();
  for (int c = tid; c < kBlockM * kChunks; c += kThreads) {
    const int row = c / kChunks, ch = c % kChunks;
    const int64_t r = m0 + row;
    if (r >= R) continue;
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(s_q + sw128_offset(row, ch, kBlockM)));
    *reinterpret_cast<uint4*>(static_cast<T*>(p.out) + (out_row0 + r) * kD + ch * 8) = v;
  }
#endif
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
