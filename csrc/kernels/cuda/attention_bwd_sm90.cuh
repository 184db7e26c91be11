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
//     (sm90_bwd_produce_tile). Its thread 0 adds each tile's dQ part, once staged (dq_full[b]), into dq_accum with
//     one bulk reduction of the tile (the copy engine's atomic adds) and hands the buffer back once read (dq_empty[b]).
//   warpgroups 1 and 2, the math (setmaxnreg up to kMathRegs): math warpgroup w owns keys 64w..64w+63 and keeps
//     their dK and dV in fp32 accumulators (m64 x kD each) over the whole walk of the G * Sq stacked query rows, in
//     tiles of kBlockM rows. Per tile, once full[s]:
//   S^T = K_w Q^T, dP^T = V_w dO^T      (wgmma, A and B from shared memory; kD = 128: S^T waited for first)
//   P^T = exp2(S^T * scale * log2(e) - lse * log2(e)), 0 where the key is hidden;
//   dV_w += P^T dO                      (wgmma, A from registers, B MN-major; not waited for)
//   dS^T = P^T (dP^T - delta); dK_w += dS^T Q (the same way)
//   named barrier 1: both math warpgroups are done with the previous tile's dQ products (which read dS^T)
//   dS^T (rounded to T) to shared memory; named barrier 2: both warpgroups' dS^T are there
//   dQ_part = dS K                      (wgmma, A = dS read MN-major from the dS^T tile, B = K MN-major), waited
//                                        for with dV / dK; release the stage (empty[s]); stage dQ_part in buffer
//                                        b (two, alternate tiles) once dq_empty[b], then dq_full[b]
// The math warpgroups issue no copy and never wait for a reduction of the tile they just finished.
// dQ: with kBlockM = 128 (kD = 64) math warpgroup w computes query rows 64w..64w+63, every column; with kBlockM = 64
// (kD = 128) every row, columns 64w..64w+63: one m64n64 accumulator over the block's 128 keys either way.
// dq_accum's rows are stored with their 16-byte chunks permuted (chunk c of packed row R at c ^ (R % 8)), the staged
// tile's bank-conflict-free order, so that the tile is one contiguous range; the dQ conversion kernel reads them
// back in that order (attention_bwd.cu).
// kD = 256 would need 256 accumulator registers per thread for dK and dV alone: attention_bwd_sm90_d256.cuh splits
// their columns between the warpgroups instead.
// Measured (backward harness benchmarks/cuda/attention_bwd_sm90_tune.cu, H200, bf16 B4 H32 S4096, TFLOP/s, kD = 128
// / causal / kD = 64 / causal): per-thread fp32 atomics 369 / 328 / 327 / 283; per-row bulk reductions 393 / 341 /
// 333 / 286; per-tile, kD = 128's split waits 418-427 / 362-366 / 370-374 / 313-316; warp-specialized (2026-11-27)
// 443-447 / 376-377 / 382-383 / 325-326. What was tried and dropped, and where the time goes now:
// benchmarks/results/cuda-attention-bwd-ws-h200-2026-11-27.md and the files it names.
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
  static constexpr int kBlockN = 128;                  // keys per block: 64 per math warpgroup
  static constexpr int kBlockM = kD == 64 ? 128 : 64;  // query rows per tile
  static constexpr int kThreads = 384;                 // the producer warpgroup, then two math warpgroups
  // Registers per thread after setmaxnreg: the math warpgroups take what the producer gives back (the CTA's pool,
  // at the launch's even share of 168): 40 / 232. At 24 / 240 the producer spills 500 bytes and the kernel is slower
  // (measured above).
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = 40;
  static constexpr int kMathRegs = (3 * kLaunchRegs - kProducerRegs) / 2 / 8 * 8;
  static_assert(2 * (kMathRegs - kLaunchRegs) <= kLaunchRegs - kProducerRegs, "register pool");
  static_assert(kProducerRegs >= 24 && kProducerRegs % 8 == 0 && kMathRegs <= 256, "setmaxnreg: 24..256, by 8");
  // The producer's view of the walk (BwdTraits): 128 threads, lse and delta by cp.async.
  using Walk = BwdTile<kBlockN, kBlockM, 1, 32, 1, true>;
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
  static constexpr int kOffBar = kOffDq + 2 * kDqBuf;  // mbarriers: full[2], empty[2], dq_full[2], dq_empty[2]
  static constexpr int kSmem = kOffBar + 8 * 8 + 1024;
  static constexpr bool kDqByRows = kBlockM == 128;  // dQ split between the warpgroups by rows, else by columns
  static_assert(kD == 64 || kD == 128, "wgmma n = head dim for dK / dV: 64 or 128 here");
  static_assert(kBlockM == 64 || kBlockM == 128, "wgmma n = query tile for S^T / dP^T: 64 or 128");
  static_assert(BwdTraits<kD, Walk>::kThreads == 128, "the producer warpgroup copies");
  static_assert(kOffDS % 1024 == 0 && kOffQ % 1024 == 0, "wgmma tiles start at 1024-byte boundaries");
  static_assert(kOffDq % 16 == 0 && kDqRow % 16 == 0 && kOffBar % 8 == 0 && kSmem <= 232448,
                "bulk copies: 16-byte aligned rows");
};

// A producer warpgroup's thread (this kernel's and attention_bwd_sm90_d256.cuh's): the walk's current tile, its
// j-th, into stage s = j % 2 (Cfg's Q / dO tiles at base, lse / delta / key limits) once both math warpgroups have
// released the stage (mbarrier empty, a fresh one passing at once); then full: this thread's copies arrive when they
// land, then the thread itself, releasing its plain stores of the key limits.
template <typename Cfg, typename Walk>
__device__ __forceinline__ void sm90_bwd_produce_tile(const Walk& walk, int j, uint32_t full, uint32_t empty,
                                                      uint32_t base, float* lse, float* delta, int* lim) {
  const int s = j & 1;
  sm90::mbar_wait(empty, ((j >> 1) & 1) ^ 1);
  walk.load(base + Cfg::kOffQ + s * Cfg::kQ, base + Cfg::kOffDO + s * Cfg::kQ, lse + s * Cfg::kBlockM,
            delta + s * Cfg::kBlockM, lim + s * Cfg::kBlockM);
  sm90::mbar_arrive_cp_async(full);
  sm90::mbar_arrive(full);
}

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
      mbar_init(dq_full(s), 256);
      mbar_init(dq_empty(s), 1);
    }
  }
  __syncthreads();

  if (tid < 128) {  // the producer warpgroup
    setmaxnreg_dec<Cfg::kProducerRegs>();
    BwdQueryWalk<T, kD, typename Cfg::Walk, PanelTile<kBlockM>> walk(a, b, hk, n_base);
    blk.load_kv<T, kD, kBlockN, 128, PanelTile<kBlockN>>(p, sK, sV);  // lands with the first tile's copies
    // Thread 0: tile j's dQ (first row m0), staged in buffer j % 2, into dq_accum; then buffer (j - 1) % 2, which
    // the reduction of tile j - 1 read, back to the math warpgroups.
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
    walk.next();
    int j = 0;
    int64_t prev_m0 = 0;
    while (!walk.done()) {
      sm90_bwd_produce_tile<Cfg>(walk, j, full(j & 1), empty(j & 1), base, s_lse, s_delta, s_lim);
      if (tid == 0 && j > 0) reduce(j - 1, prev_m0);
      prev_m0 = static_cast<int64_t>(walk.m) * kBlockM;
      walk.step();
      walk.next();
      ++j;
    }
    if (tid == 0 && j > 0) {
      reduce(j - 1, prev_m0);
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
  const int q_row = (Cfg::kDqByRows ? wg * 64 : 0) + warp_in_wg * 16 + g;
  const int q_col = (Cfg::kDqByRows ? 0 : wg * 64) + 2 * t;
  float dqa[32];  // dQ_part of a tile: m64 x 64 (rows q_row, q_row + 8; columns q_col + 8 j + (0, 1))
  // Tile jj's dQ part (first row m0) into buffer jj % 2 once the reduction two tiles back has read it; then tell
  // the producer's thread 0.
  auto stage_dq = [&](int jj, int64_t m0) {
    const int buf = jj & 1;
    mbar_wait(dq_empty(buf), ((jj >> 1) & 1) ^ 1);
    unsigned char* const staged = base_ptr + Cfg::kOffDq + buf * Cfg::kDqBuf;
    const int rb = static_cast<int>((row_base + m0) & 7), c0 = q_col >> 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = q_row + 8 * h, rs = (row + rb) & 7;
      unsigned char* const rp = staged + row * Cfg::kDqRow + 8 * (t & 1);
#pragma unroll
      for (int jc = 0; jc < 8; ++jc) {
        *reinterpret_cast<float2*>(rp + (((c0 + 2 * jc) ^ rs) << 4)) =
            make_float2(dqa[4 * jc + 2 * h], dqa[4 * jc + 2 * h + 1]);
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

    if (j > 0) named_sync(1, 256);  // both math warpgroups are done with the previous tile's dQ products
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
    named_sync(2, 256);  // both warpgroups' dS^T are there

    // dQ_part = dS K: m64 (queries) x 64 (columns), k = the block's keys; A = dS, MN-major in the dS^T tile
    // (its 64-query panels kBlockN * 128 bytes apart); B = K, MN-major (64-column panels as far apart).
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
    mbar_arrive(empty(stage));  // this thread is done with the stage
    stage_dq(j, m0);
    walk.step();
    walk.next();
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
