// The flash attention backward's dK/dV kernel on Hopper warpgroup MMAs (device code, torch-free; CUDA sm_90a
// only): fp16/bf16, head dims 64 and 128. Included by attention_bwd.cu, which runs it instead of
// flash_attention_bwd_dkdv_kernel (attention_bwd_kernel.cuh) on compute capability 9.0 when its sm_90a code was
// built: the same arguments (BwdArgs), the same walk over the query tiles (BwdQueryWalk, with this kernel's
// shared-memory layout), the same results (grad_k, grad_v; dQ added into dq_accum, here by bulk reductions).
//
// One block of two warpgroups per (128 keys, key/value head, batch); warpgroup w owns keys 64w..64w+63 and keeps
// their dK and dV in fp32 accumulators (m64 x kD each) over the whole walk of the G * Sq stacked query rows, in
// tiles of kBlockM rows: two stages of Q, dO (wgmma_sm90.cuh's 128-byte swizzled layout) and of the rows' lse,
// delta and last visible key, copied with cp.async. Per tile:
//   B1: the tile has landed; every warpgroup is done with the previous one  -> copies of the next tile start;
//       the previous tile's dQ, staged in shared memory, goes to dq_accum: one bulk reduction of the whole tile
//       (the copy engine adds its kBlockM x kD floats atomically)
//   S^T = K_w Q^T, dP^T = V_w dO^T      (wgmma, A and B from shared memory; kD = 128: S^T waited for first)
//   P^T = exp2(S^T * scale * log2(e) - lse * log2(e)), 0 where the key is hidden;
//   dV_w += P^T dO                      (wgmma, A from registers, B MN-major; not waited for)
//   dS^T = P^T (dP^T - delta); dK_w += dS^T Q (the same way)
//   dS^T (rounded to T) to shared memory
//   B2: both warpgroups' dS^T are there
//   dQ_part = dS K                      (wgmma, A = dS read MN-major from the dS^T tile, B = K MN-major; waited
//                                        for), staged in shared memory (two buffers, alternate tiles)
// dQ: with kBlockM = 128 (kD = 64) warpgroup w computes query rows 64w..64w+63, every column; with kBlockM = 64
// (kD = 128) every row, columns 64w..64w+63: one m64n64 accumulator over the block's 128 keys either way.
// dq_accum's rows are stored with their 16-byte chunks permuted (chunk c of packed row R at c ^ (R % 8)), the staged
// tile's bank-conflict-free order, so that the tile is one contiguous range; the dQ conversion kernel reads them
// back in that order (attention_bwd.cu).
// kD = 256 would need 256 accumulator registers per thread for dK and dV alone: attention_bwd_sm90_d256.cuh splits
// their columns between the warpgroups instead.
// Measured (backward harness, H200, bf16 B4 H32 S4096, TFLOP/s): each thread's fp32 atomics -> one bulk reduction
// per row: kD = 128 369 -> 393, causal 328 -> 341; kD = 64 327 -> 333, causal 283 -> 286. One reduction per tile
// (2026-11-27): kD = 128 409 (causal 355), kD = 64 368-369 (causal 314); with the split waits kD = 128 421-427
// (causal 365-366; at kD = 64 1-2% slower than without). Without the reduction (timing only; dQ still computed and
// staged) kD = 128 runs at 476-482 (causal 411), kD = 64 at 396-399 (causal 337); an H200's L2 sums about 3.8 TB/s
// of fp32 reductions, the kernel needs 1.2-1.4. Halving dQ's traffic instead, by summing the dQ parts of two
// adjacent key blocks (a cluster of two blocks, through distributed shared memory) before the atomics, was slower
// (369 -> 344): a cluster barrier per tile.
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>
#include <type_traits>

#include "attention_bwd_tile.cuh"
#include "wgmma_sm90.cuh"

namespace yirage::kernels::cuda {
namespace {

template <int kD_>
struct Sm90BwdConfig {
  static constexpr int kD = kD_;
  static constexpr int kBlockN = 128;                  // keys per block: 64 per warpgroup
  static constexpr int kBlockM = kD == 64 ? 128 : 64;  // query rows per tile
  static constexpr int kThreads = 256;
  // The walk's view of the tile (BwdTraits): 256 threads, lse and delta by cp.async.
  using Walk = BwdTile<kBlockN, kBlockM, 1, 16, 1, true>;
  // Shared memory (bytes from the first 1024-byte boundary): K, V, two stages of Q and dO, dS^T (kBlockN rows
  // of kBlockM queries), two stages of lse / delta / key limits.
  static constexpr int kKV = kBlockN * kD * 2, kQ = kBlockM * kD * 2, kDS = kBlockN * kBlockM * 2;
  static constexpr int kRow = kBlockM * 4;
  static constexpr int kOffK = 0, kOffV = kKV, kOffQ = 2 * kKV, kOffDO = kOffQ + 2 * kQ, kOffDS = kOffDO + 2 * kQ,
                       kOffLse = kOffDS + kDS, kOffDelta = kOffLse + 2 * kRow, kOffLim = kOffDelta + 2 * kRow;
  // dQ parts, staged for the bulk reductions: two buffers of kBlockM rows of kD floats in dq_accum's layout (16-byte
  // chunk c of packed row R at chunk c ^ (R % 8): the float2 stores of a warp's eight rows fall in different banks),
  // so that a tile goes out in one reduction.
  static constexpr int kDqRow = kD * 4, kDqBuf = kBlockM * kDqRow;
  // kD = 128: S^T and dP^T waited for one after the other (P^T computed and dV's products issued while dP^T is on the
  // tensor cores); kD = 64: both at once (the split was 1-2% slower there).
  static constexpr bool kSplitWaits = kD == 128;
  static constexpr int kOffDq = kOffLim + 2 * kRow;
  static constexpr int kSmem = kOffDq + 2 * kDqBuf + 1024;
  static constexpr bool kDqByRows = kBlockM == 128;  // dQ split between the warpgroups by rows, else by columns
  static_assert(kD == 64 || kD == 128, "wgmma n = head dim for dK / dV: 64 or 128 here");
  static_assert(kBlockM == 64 || kBlockM == 128, "wgmma n = query tile for S^T / dP^T: 64 or 128");
  static_assert(BwdTraits<kD, Walk>::kThreads == kThreads, "the walk copies with every thread");
  static_assert(kOffDS % 1024 == 0 && kOffQ % 1024 == 0, "wgmma tiles start at 1024-byte boundaries");
  static_assert(kOffDq % 16 == 0 && kDqRow % 16 == 0 && kSmem <= 232448, "bulk copies: 16-byte aligned rows");
};

template <typename T, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1) flash_attention_bwd_sm90_kernel(const BwdArgs a) {
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

  const int tid = threadIdx.x, lane = tid & 31, wg = tid >> 7, warp_in_wg = (tid >> 5) & 3;
  const int g = lane >> 2, t = lane & 3;
  const int key0 = wg * 64 + warp_in_wg * 16 + g;  // this thread's keys in the block: key0 and key0 + 8

  const BwdBlock blk(a, kBlockN);
  const int64_t hk_count = p.shape.heads_k, hk = blk.hk, b = blk.b;
  const int64_t sk = p.shape.seq_k, rows = a.group_rows;
  const int64_t n_base = blk.n_base, row_base = blk.row_base;  // row_base: packed row 0 of the head in (B, Hq, Sq)
  blk.load_kv<T, kD, kBlockN, Cfg::kThreads, PanelTile<kBlockN>>(p, sK, sV);

  BwdQueryWalk<T, kD, typename Cfg::Walk, PanelTile<kBlockM>> walk(a, b, hk, n_base);
  auto load = [&](int s) {
    walk.load(base + Cfg::kOffQ + s * Cfg::kQ, base + Cfg::kOffDO + s * Cfg::kQ, s_lse + s * kBlockM,
              s_delta + s * kBlockM, s_lim + s * kBlockM);
  };

  float dv[kD / 2], dk[kD / 2];  // accumulators: keys key0 + 8 (e / 2), columns 8j + 2t + (e % 2)
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) dv[i] = dk[i] = 0.f;
  fence_regs(dv);
  fence_regs(dk);

  walk.next();
  if (!walk.done()) load(0);
  cp_async_commit();  // group: K, V and the first query tile
  int stage = 0;
  const uint32_t k_wg = sK + wg * 64 * 128, v_wg = sV + wg * 64 * 128;  // this warpgroup's 64 rows of each panel
  const float scale_log2 = a.scale_log2;
  // dQ of a tile: staged in shared memory (buffer dq_buf), added into dq_accum by one bulk reduction that thread 0
  // issues after the next B1; dq_prev: the first row of the tile staged last (-1: none yet).
  int dq_buf = 0;
  int64_t dq_prev = -1;
  auto reduce_staged = [&]() {  // after a barrier that follows the staging stores (and their proxy fence)
    if (tid == 0) {
      if (dq_prev >= 0) {
        const int64_t n = rows - dq_prev < kBlockM ? rows - dq_prev : kBlockM;
        bulk_reduce_add_f32(p.dq_accum + (row_base + dq_prev) * kD, base + Cfg::kOffDq + (dq_buf ^ 1) * Cfg::kDqBuf,
                            static_cast<uint32_t>(n * kD * 4));
      }
      bulk_commit();  // a group on every tile, empty or not, so that wait_read<1> below means "two tiles ago"
    }
  };
  while (!walk.done()) {
    const int64_t m0 = static_cast<int64_t>(walk.m) * kBlockM;
    cp_async_wait<0>();
    fence_proxy_async();
    __syncthreads();  // B1
    reduce_staged();
    walk.step();
    walk.next();
    if (!walk.done()) load(stage ^ 1);
    cp_async_commit();

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
    for (int j = lane; j < kBlockM; j += 32) all_visible &= lim_t[j] >= wg * 64 + warp_in_wg * 16 + 15;
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
    if (tid == 0) bulk_wait_read<1>();  // the reduction of two tiles ago has read buffer dq_buf
    __syncthreads();  // B2

    // dQ_part = dS K: m64 (queries) x 64 (columns), k = the block's keys; A = dS, MN-major in the dS^T tile
    // (its 64-query panels kBlockN * 128 bytes apart); B = K, MN-major (64-column panels as far apart).
    float dqa[32];
    const uint32_t ds_a = sDS + (Cfg::kDqByRows ? wg * kBlockN * 128 : 0);
    const uint32_t k_b = sK + (Cfg::kDqByRows ? 0 : wg * kBlockN * 128);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      const uint64_t da = smem_desc(ds_a + kk * 16 * 128, kBlockN * 128, 1024);
      const uint64_t db = smem_desc(k_b + kk * 16 * 128, kBlockN * 128, 1024);
      wgmma_ss_step<T, 64, 1, 1>(dqa, da, db, kk == 0);
    }
    wgmma_commit();
    wgmma_wait<0>();  // dQ, and dV / dK of this tile
    fence_regs(dqa);
    fence_regs(dv);
    fence_regs(dk);

    const int q_row = (Cfg::kDqByRows ? wg * 64 : 0) + warp_in_wg * 16 + g;
    const int q_col = (Cfg::kDqByRows ? 0 : wg * 64) + 2 * t;
    {  // dQ's rows in dq_accum's order (kDqRow): chunk c of tile row r at c ^ ((first packed row + r) % 8)
      unsigned char* const staged = base_ptr + Cfg::kOffDq + dq_buf * Cfg::kDqBuf;
      const int rb = static_cast<int>((row_base + m0) & 7), c0 = q_col >> 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = q_row + 8 * h, rs = (row + rb) & 7;
        unsigned char* const rp = staged + row * Cfg::kDqRow + 8 * (t & 1);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          *reinterpret_cast<float2*>(rp + (((c0 + 2 * j) ^ rs) << 4)) =
              make_float2(dqa[4 * j + 2 * h], dqa[4 * j + 2 * h + 1]);
        }
      }
    }
    dq_prev = m0;
    dq_buf ^= 1;
    stage ^= 1;
  }
  cp_async_wait<0>();  // no copy left in flight at exit (when no query tile was visible)
  fence_proxy_async();
  __syncthreads();
  reduce_staged();  // the last tile's dQ
  if (tid == 0) bulk_wait<0>();

  // grad_k = scale * dK, grad_v = dV: (B, Hk, Sk, D) contiguous, rows past Sk not written.
  const float scale = p.shape.scale;
  T* gk = static_cast<T*>(p.grad_k);
  T* gv = static_cast<T*>(p.grad_v);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t j = n_base + key0 + 8 * h;
    if (j < sk) {
      const int64_t off = ((b * hk_count + hk) * sk + j) * kD + 2 * t;
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
