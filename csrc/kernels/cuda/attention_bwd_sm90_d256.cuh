// The flash attention backward's dK/dV kernel on Hopper warpgroup MMAs for head dim 256 (device code,
// torch-free; CUDA sm_90a only): fp16/bf16. Included by attention_bwd.cu, which runs it instead of
// flash_attention_bwd_dkdv_kernel (attention_bwd_kernel.cuh) on compute capability 9.0 when its sm_90a code was
// built: the same arguments (BwdArgs), the same walk over the query tiles (BwdQueryWalk), the same results
// (grad_k, grad_v; dQ added into dq_accum with fp32 atomics, or with kDq = false left to
// flash_attention_bwd_dq_sm90_kernel, attention_bwd_dq_sm90.cuh, where the launcher can run it: those atomics took
// 40% of this kernel's time, below).
//
// attention_bwd_sm90.cuh (head dims 64 and 128) gives each warpgroup its own keys and every column of their dK
// and dV; at kD = 256 that is 256 accumulator registers per thread. Here the two warpgroups split the columns
// instead, and the products that have the keys as rows are split by operand:
// one block per (64 keys, key/value head, batch) of a producer warpgroup and two math warpgroups (warp
// specialization, as attention_bwd_sm90.cuh: setmaxnreg 40 / 232). The producer copies K and V, then each tile of
// 64 stacked query rows (Q, dO, lse, delta, key limits) into one of two stages with cp.async once both math
// warpgroups have released it (mbarrier empty[s]) and signals full[s]. Math warpgroup w keeps columns
// 128w..128w+127 of the block's dK and dV in fp32 accumulators (m64 x n128 each, 128 registers per thread) over the
// whole walk of the G * Sq stacked query rows. Per tile, once full[s]:
//   warpgroup 0: S^T = K Q^T;  warpgroup 1: dP^T = V dO^T   (m64 x n64, k = 256; wgmma, both operands in shared
//                                                            memory; side by side, waited for)
//   hand-over (fp32, shared memory): warpgroup 0 gives S^T of queries 32..63, warpgroup 1 dP^T - delta of
//   queries 0..31                                            -> named barrier 1 (also: both warpgroups are done
//                                                               with the previous tile's P^T and dS^T)
//   each warpgroup, on its 32 queries: P^T = exp2(S^T * scale * log2(e) - lse * log2(e)), 0 where the key is
//   hidden; dS^T = P^T (dP^T - delta); both to shared memory, rounded to T
//   named barrier 2: P^T and dS^T are there
//   each warpgroup, on its 128 columns:
//     dQ_part = dS K      (m64 (queries) x n128, k = the 64 keys; A = dS MN-major from the dS^T tile, B = K
//                          MN-major)                      -> added into dq_accum, two floats at a time, while
//     dV_w += P^T dO, dK_w += dS^T Q   (m64 (keys) x n128,   dV and dK run
//                          k = 64 queries; A K-major, B MN-major)        -> the stage released (empty[s])
// The five products of a tile are each done once. Shared memory: K, V (32 KB each), two stages of Q and dO
// (32 KB each), P^T and dS^T (8 KB each), the hand-over (16 KB), the rows' arrays, four mbarriers: 226 KB of the
// 227 KB a block may have.
//
// Measured (backward harness benchmarks/cuda/attention_bwd_sm90_tune.cu, H200, bf16 B4 H16 S4096): 213 -> 278
// TFLOP/s against the mma.sync kernel, causal 201 -> 255. The hand-over split of the probabilities (in place of
// warpgroup 0 computing them all while warpgroup 1 waited) gave 264 -> 278. The same kernel without the dQ atomics
// ran at 497 TFLOP/s, but with nothing reading dQ's accumulators the compiler drops the dQ products too, so that
// is the kernel without dQ at all (2026-11-27: the same holds for the 11-26 figure of the kD = 64 / 128 kernel).
// The atomics are 64 keys' worth of dQ per query row and tile, twice
// the traffic per product of the kD = 128 kernel's 128-key blocks (17.2 GB of adds at B4 H16 S4096, about 1.75 TB/s
// at 280 TFLOP/s, under half of the 3.8 TB/s an H200's L2 sums: what costs is the instructions and the waits, not
// the L2's throughput; starting each block's walk at a different query tile changed nothing). Staging dQ in the
// tile's own Q / dO stage once dV and dK are done (its only free shared memory) and adding it by one bulk
// reduction per row, with the next tile's copies moved after the hand-over, was slower (2026-11-27: 280 -> 265
// TFLOP/s, causal 255 -> 245). Warp-specialized (2026-11-27; before, both warpgroups issued the copies between two
// block-wide barriers per tile): 279-280 -> 300-301, causal 254 -> 271-272, S2048 causal 221 -> 233-234
// (benchmarks/results/cuda-attention-bwd-ws-h200-2026-11-27.md). 2026-11-28 (H200, B4 H16 S4096): with the dQ
// products kept but no atomics issued (timing only) 495-499 TFLOP/s against 300-302, causal 442-445 against 273-275:
// the atomics are 40% of the time; adding 16 bytes a thread (float4 atomics after a lane exchange, half the
// instructions) was 3% slower. Hence the separate dQ kernel (cuda-attention-bwd-d256-dq-h200-2026-11-28.md).
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>
#include <type_traits>

#include "attention_bwd_sm90_config.cuh"  // sm90_bwd_produce_tile
#include "attention_bwd_tile.cuh"
#include "wgmma_sm90.cuh"

namespace yirage::kernels::cuda {
namespace {

struct Sm90BwdD256Config {
  static constexpr int kD = 256;
  static constexpr int kBlockN = 64;  // keys per block
  static constexpr int kBlockM = 64;  // query rows per tile
  static constexpr int kThreads = 384;  // a producer warpgroup, then the two math warpgroups
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = 40;
  static constexpr int kMathRegs = (3 * kLaunchRegs - kProducerRegs) / 2 / 8 * 8;
  static_assert(2 * (kMathRegs - kLaunchRegs) <= kLaunchRegs - kProducerRegs, "register pool");
  // The producer's view of the walk (BwdTraits): 128 threads, lse and delta by cp.async.
  using Walk = BwdTile<kBlockN, kBlockM, 1, 16, 1, true>;
  // Shared memory (bytes from the first 1024-byte boundary): K, V, two stages of Q and dO, P^T, dS^T (kBlockN
  // rows of kBlockM queries, T), the hand-over of half products (fp32, fragment order: two halves of kBlockN x
  // kBlockM / 2), two stages of lse / delta / key limits.
  static constexpr int kKV = kBlockN * kD * 2, kQ = kBlockM * kD * 2, kPT = kBlockN * kBlockM * 2;
  static constexpr int kX = kBlockN * kBlockM * 4, kRow = kBlockM * 4;
  static constexpr int kOffK = 0, kOffV = kKV, kOffQ = 2 * kKV, kOffDO = kOffQ + 2 * kQ, kOffP = kOffDO + 2 * kQ,
                       kOffDS = kOffP + kPT, kOffX = kOffDS + kPT, kOffLse = kOffX + kX,
                       kOffDelta = kOffLse + 2 * kRow, kOffLim = kOffDelta + 2 * kRow, kOffBar = kOffLim + 2 * kRow;
  static constexpr int kSmem = kOffBar + 4 * 8 + 1024;  // mbarriers full[2], empty[2]
  static_assert(kSmem <= 232448, "a block's opt-in shared memory on sm_90");
  static_assert(kOffP % 1024 == 0 && kOffDS % 1024 == 0 && kOffQ % 1024 == 0, "wgmma tiles at 1024-byte boundaries");
  static_assert(BwdTraits<kD, Walk>::kThreads == 128, "the producer warpgroup copies");
};

// kDq = false: no dQ (its products and atomics left out; flash_attention_bwd_dq_sm90_kernel computes it instead).
template <typename T, bool kDq = true>
__global__ void __launch_bounds__(Sm90BwdD256Config::kThreads, 1)
    flash_attention_bwd_sm90_d256_kernel(const BwdArgs a) {
#if !YIRAGE_SM90A_DEVICE
  __trap();
#else
  using namespace sm90;
  using Cfg = Sm90BwdD256Config;
  constexpr int kD = Cfg::kD, kBlockN = Cfg::kBlockN, kBlockM = Cfg::kBlockM;
  constexpr int kNT = kBlockM / 8;  // 8-query column tiles of S^T / dP^T per thread
  const AttentionBackward& p = a.p;

  extern __shared__ __align__(1024) unsigned char bwd256_smem[];
  const uint32_t raw = smem_u32(bwd256_smem);
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* const base_ptr = bwd256_smem + (base - raw);
  const uint32_t sK = base + Cfg::kOffK, sV = base + Cfg::kOffV, sP = base + Cfg::kOffP, sDS = base + Cfg::kOffDS;
  float* const s_lse = reinterpret_cast<float*>(base_ptr + Cfg::kOffLse);      // [2][kBlockM], natural log
  float* const s_delta = reinterpret_cast<float*>(base_ptr + Cfg::kOffDelta);  // [2][kBlockM]
  int* const s_lim = reinterpret_cast<int*>(base_ptr + Cfg::kOffLim);          // [2][kBlockM]: last key - n_base

  const int tid = threadIdx.x, lane = tid & 31, wg = (tid >> 7) - 1, warp_in_wg = (tid >> 5) & 3;
  const int g = lane >> 2, t = lane & 3;
  const int key0 = warp_in_wg * 16 + g;  // this thread's rows of S^T / dP^T / dK / dV: keys key0 and key0 + 8
  const int col0 = wg * 128;             // this warpgroup's columns of dK, dV and dQ
  // The exchange of half products (fp32, fragment order: element pair (nt, h) of column tile nt - lo at
  // [(warp * kNT + 2 (nt - lo) + h) * 32 + lane]): dP^T - delta of tiles 0..3 (from warpgroup 1), then S^T of
  // tiles 4..7 (from warpgroup 0).
  constexpr int kHalf = 4 * kNT * 32;  // float2 per half
  float2* const s_x = reinterpret_cast<float2*>(base_ptr + Cfg::kOffX) + warp_in_wg * kNT * 32 + lane;

  const BwdBlock blk(a, kBlockN);
  const int64_t hk_count = p.shape.heads_k, hk = blk.hk, b = blk.b;
  const int64_t sk = p.shape.seq_k, rows = a.group_rows;
  const int64_t n_base = blk.n_base, row_base = blk.row_base;
  const uint32_t bars = base + Cfg::kOffBar;
  auto full = [&](int st) { return bars + 8 * st; };
  auto empty = [&](int st) { return bars + 16 + 8 * st; };
  if (tid == 0) {
    for (int st = 0; st < 2; ++st) {
      mbar_init(full(st), 256);   // the producer's threads: their copies' arrival, then their own
      mbar_init(empty(st), 256);  // the math threads
    }
  }
  __syncthreads();

  BwdQueryWalk<T, kD, typename Cfg::Walk, PanelTile<kBlockM>> walk(a, b, hk, n_base);  // producer: copies; math: cursor
  walk.next();
  if (tid < 128) {  // the producer warpgroup: K and V, then each tile into stage j % 2 once it is free
    setmaxnreg_dec<Cfg::kProducerRegs>();
    blk.load_kv<T, kD, kBlockN, 128, PanelTile<kBlockN>>(p, sK, sV);  // lands with the first tile's copies
    for (int j = 0; !walk.done(); ++j) {
      sm90_bwd_produce_tile<Cfg>(walk, j, full(j & 1), empty(j & 1), base, s_lse, s_delta, s_lim);
      walk.step();
      walk.next();
    }
    cp_async_wait<0>();  // K and V, when no tile was visible
    return;
  }
  setmaxnreg_inc<Cfg::kMathRegs>();

  float dv[64], dk[64];  // accumulators: keys key0 + 8 (e / 2 % 2), columns col0 + 8 (e / 4) + 2t + (e % 2)
#pragma unroll
  for (int i = 0; i < 64; ++i) dv[i] = dk[i] = 0.f;
  fence_regs(dv);
  fence_regs(dk);

  int j = 0;
  const uint32_t a_rows = wg == 0 ? sK : sV;  // S^T = K Q^T on warpgroup 0, dP^T = V dO^T on warpgroup 1
  const float scale_log2 = a.scale_log2;
  while (!walk.done()) {
    const int64_t m0 = static_cast<int64_t>(walk.m) * kBlockM;
    const int stage = j & 1;
    mbar_wait(full(stage), (j >> 1) & 1);
    fence_proxy_async();

    const uint32_t sQ = base + Cfg::kOffQ + stage * Cfg::kQ, sDO = base + Cfg::kOffDO + stage * Cfg::kQ;
    const float* lse_t = s_lse + stage * kBlockM;
    const float* dlt_t = s_delta + stage * kBlockM;
    const int* lim_t = s_lim + stage * kBlockM;

    // S^T or dP^T: m64 (keys) x n64 (queries), k = kD; A = K or V, B = Q or dO (K-major: 16-element k steps along
    // the 64-column panels).
    float s[kBlockM / 2];
    {
      const uint32_t b_tile = wg == 0 ? sQ : sDO;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const uint32_t panel = kk >> 2, col = (kk & 3) * 32;
        wgmma_ss_step<T, kBlockM>(s, smem_desc(a_rows + panel * kBlockN * 128 + col, 16, 1024),
                                  smem_desc(b_tile + panel * kBlockM * 128 + col, 16, 1024), kk == 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(s);
    }

    // Element e of column tile nt: key key0 + 8 h (h = e / 2 % 2), query 8 nt + 2t + (e % 2). Each warpgroup
    // finishes half of the tile's queries (warpgroup 0 column tiles 0..3, warpgroup 1 tiles 4..7) and hands the
    // other half of its product to the other warpgroup: warpgroup 0 S^T, warpgroup 1 dP^T - delta (fp32).
    auto hand_over = [&](auto lo_c) {
      constexpr int lo = decltype(lo_c)::value;
      float2* const x = s_x + (lo == 0 ? 0 : kHalf);
#pragma unroll
      for (int nt = lo; nt < lo + kNT / 2; ++nt) {
        const float d0 = lo == 0 ? dlt_t[8 * nt + 2 * t] : 0.f, d1 = lo == 0 ? dlt_t[8 * nt + 2 * t + 1] : 0.f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          x[(2 * (nt - lo) + h) * 32] = make_float2(s[nt * 4 + 2 * h] - d0, s[nt * 4 + 2 * h + 1] - d1);
        }
      }
    };
    // P^T and dS^T of column tiles lo..lo + 3, to shared memory (rounded to T): kSInRegs, S^T is in s and
    // dP^T - delta in the exchange; else the other way round. A warp whose 16 keys every query of the tile sees
    // (no causal edge, no key past Sk, no row past G * Sq, no row without keys, whose lse is -inf) skips the
    // select.
    auto finish = [&](auto lo_c, auto masked) {
      constexpr int lo = decltype(lo_c)::value;
      constexpr bool kSInRegs = lo == 0;
      const float2* const x = s_x + (kSInRegs ? 0 : kHalf);
#pragma unroll
      for (int nt = lo; nt < lo + kNT / 2; ++nt) {
        float pr[4], ds[4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 o = x[(2 * (nt - lo) + h) * 32];
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int q = 8 * nt + 2 * t + c, e = nt * 4 + 2 * h + c;
            const float sv = kSInRegs ? s[e] : (c == 0 ? o.x : o.y);
            const float dpm = kSInRegs ? (c == 0 ? o.x : o.y) : s[e] - dlt_t[q];
            float v = exp2_approx(fmaf(sv, scale_log2, -lse_t[q] * kLog2e));
            if constexpr (decltype(masked)::value) v = key0 + 8 * h <= lim_t[q] ? v : 0.f;
            pr[2 * h + c] = v;
            ds[2 * h + c] = v * dpm;
          }
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t off = sw128_offset(key0 + 8 * h, nt, kBlockN) + 4 * t;
          asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sP + off), "r"(pack2<T>(pr[2 * h], pr[2 * h + 1])));
          asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sDS + off), "r"(pack2<T>(ds[2 * h], ds[2 * h + 1])));
        }
      }
    };
    bool all_visible = true;
#pragma unroll
    for (int jj = lane; jj < kBlockM; jj += 32) all_visible &= lim_t[jj] >= warp_in_wg * 16 + 15;
    all_visible = __all_sync(0xffffffffu, all_visible);
    if (wg == 0) {
      hand_over(std::integral_constant<int, kNT / 2>{});
    } else {
      hand_over(std::integral_constant<int, 0>{});
    }
    named_sync(1, 256);  // both halves handed over (and both warpgroups done with the previous tile's P^T / dS^T)
    if (wg == 0) {
      if (all_visible) {
        finish(std::integral_constant<int, 0>{}, std::false_type{});
      } else {
        finish(std::integral_constant<int, 0>{}, std::true_type{});
      }
    } else {
      if (all_visible) {
        finish(std::integral_constant<int, kNT / 2>{}, std::false_type{});
      } else {
        finish(std::integral_constant<int, kNT / 2>{}, std::true_type{});
      }
    }
    fence_proxy_async();
    named_sync(2, 256);  // P^T and dS^T are there

    // dQ_part = dS K on this warpgroup's columns: A = dS, MN-major in the dS^T tile (one 64-query panel); B = K,
    // MN-major (its 64-column panels kBlockN * 128 bytes apart).
    float dqa[64];
    wgmma_fence();
    if constexpr (kDq) {
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        const uint64_t da = smem_desc(sDS + kk * 16 * 128, kBlockN * 128, 1024);
        const uint64_t db = smem_desc(sK + (col0 / 64) * kBlockN * 128 + kk * 16 * 128, kBlockN * 128, 1024);
        wgmma_ss_step<T, 128, 1, 1>(dqa, da, db, kk == 0);
      }
      wgmma_commit();
    }
    // dV_w += P^T dO, dK_w += dS^T Q: A = P^T / dS^T K-major (16-query k steps along the rows), B = dO / Q
    // MN-major (16-row k steps, the warpgroup's two 64-column panels kBlockM * 128 bytes apart).
#pragma unroll
    for (int kk = 0; kk < kBlockM / 16; ++kk) {
      const uint32_t b_off = (col0 / 64) * kBlockM * 128 + kk * 16 * 128;
      wgmma_ss_n128<T, 1>(dv, smem_desc(sP + kk * 32, 16, 1024), smem_desc(sDO + b_off, kBlockM * 128, 1024), 1);
      wgmma_ss_n128<T, 1>(dk, smem_desc(sDS + kk * 32, 16, 1024), smem_desc(sQ + b_off, kBlockM * 128, 1024), 1);
    }
    wgmma_commit();
    if constexpr (kDq) {
      wgmma_wait<1>();  // dQ
      fence_regs(dqa);
    }
#pragma unroll
    for (int h = 0; h < (kDq ? 2 : 0); ++h) {
      const int64_t r = m0 + key0 + 8 * h;  // dQ rows are queries, in the accumulator's row layout
      if (r < rows) {
        float* dst = p.dq_accum + (row_base + r) * kD + col0 + 2 * t;
#pragma unroll
        for (int jc = 0; jc < 16; ++jc) {
          atomicAdd(reinterpret_cast<float2*>(dst + 8 * jc),
                    make_float2(dqa[4 * jc + 2 * h], dqa[4 * jc + 2 * h + 1]));
        }
      }
    }
    wgmma_wait<0>();  // dV, dK
    fence_regs(dv);
    fence_regs(dk);
    mbar_arrive(empty(stage));  // this thread is done with the stage
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
    const int64_t j = n_base + key0 + 8 * h;
    if (j < sk) {
      const int64_t off = ((b * hk_count + hk) * sk + j) * kD + col0 + 2 * t;
#pragma unroll
      for (int dt = 0; dt < 16; ++dt) {
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
