// Flash attention backward on CUDA tensor cores (FlashAttention-2's algorithm; fp16 / bf16, head dims 64,
// 128 and 256, sm_80 or newer; mma.sync m16n8k16 with fp32 accumulation). Three kernels:
//
// 1. flash_attention_bwd_preprocess_kernel: one warp per query row: delta = rowsum(grad_out * out) in fp32
//    (16-byte vector loads), and the row of the fp32 dq_accum workspace zeroed.
// 2. flash_attention_bwd_dkdv_kernel: one block per (key block of kBlockN keys, key/value head, batch).
//    The block keeps its K and V tiles in shared memory and walks the G * Sq query rows of its key/value head
//    (the G query heads of a GQA group stacked as rows, attention.h) in tiles of kBlockM rows, the next Q and
//    dO tiles copied with cp.async while the current one is used (two stages); tiles that a causal mask hides
//    entirely are skipped. Each warp owns 16 keys and kD / kDSplit columns of dK and dV (fp32 registers,
//    kept across the whole walk). Per query tile, per warp:
//      S^T = K_w Q^T, P^T = exp2(S^T * scale * log2(e) - lse * log2(e)) (0 where masked or lse = -inf),
//      dV_w += P^T dO, dP^T = V_w dO^T, dS^T = P^T * (dP^T - delta), dK_w += dS^T Q;
//    dS^T goes to shared memory (as T) and the block computes dQ_tile = dS K (kBlockM x kD), added into
//    dq_accum with fp32 atomics. With kDSplit = 2 (kD = 256) two warps share each 16-key slice and both
//    compute its S^T and dP^T over the full head dim (redundant MMAs, but half the dK/dV registers each).
//    The epilogue writes grad_k = scale * dK and grad_v = dV.
// 3. flash_attention_bwd_dq_convert_kernel: grad_q = scale * dq_accum, rounded to T.
//
// Tiles (kBlockN keys x kBlockM query rows, warps, dynamic shared memory):
//   kD =  64: 128 x 64, 8 warps (256 threads), 81.5 KB
//   kD = 128: 64 x 32, 4 warps (128 threads), 72.8 KB
//   kD = 256: 64 x 32, 8 warps (256 threads, kDSplit = 2), 136.8 KB
// (ptxas, sm_90a: 249 / 255 / 255 registers; only kD = 256 spills, 12 bytes. One block of 8 warps per SM for
// kD = 64 and 256, about 2 of 4 warps for kD = 128: latency is hidden by the MMA chains, not occupancy.) Measured
// on an H100 (bf16, B4 H32 S4096): kD = 64 with 128 keys per block ran the backward 9% faster than with 64;
// kD = 128 with 128 keys (113 KB, more than sm_86/89 allow) was no faster than with 64, so it keeps 64.
// Shared tiles are swizzled (SwizzledTile: 16-byte chunk c of row r at c ^ (r % 8)), so every ldmatrix and
// every 16-byte cp.async of a warp touches eight different bank groups.
//
// Limits: dQ is accumulated with fp32 atomicAdd from every key block of a key/value head, so grad_q is not
// bitwise deterministic (the order of the additions varies from run to run; its last bits may differ).
// grad_k and grad_v are deterministic. Sequence lengths below 2^31. The dK/dV epilogue stores 4-byte pairs
// straight from the MMA fragments (not staged through shared memory).
#include "compat.cuh"

#include "attention.h"

#if YIRAGE_HIP

namespace yirage::kernels::cuda {

// ROCm: no tensor-core kernels (the glue takes the portable kernel; attention_native is false).
int64_t attention_backward_smem(int64_t) { return 0; }

cudaError_t attention_backward(const AttentionBackward& p, cudaStream_t stream) {
  (void)p;
  (void)stream;
  return cudaErrorNotSupported;
}

}  // namespace yirage::kernels::cuda

#else  // !YIRAGE_HIP

#include <cstdint>
#include <type_traits>

#include "common.cuh"
#include "mma_sm80.cuh"

namespace yirage::kernels::cuda {
namespace {

using sm80::cp_async_16;
using sm80::cp_async_commit;
using sm80::cp_async_wait;
using sm80::exp2_approx;
using sm80::ldmatrix_x4;
using sm80::ldmatrix_x4_trans;
using sm80::mma_16816;
using sm80::pack2;
using sm80::smem_u32;
using sm80::SwizzledTile;

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

// ---------------------------------------------------------------- 1. delta and dq_accum = 0
// One warp per row (b, h, i) of the (B, Hq, Sq) rows.
template <typename T>
__global__ void __launch_bounds__(256) flash_attention_bwd_preprocess_kernel(const AttentionBackward p,
                                                                              int64_t rows) {
  constexpr int V = kVec<T>;
  const int64_t sq = p.shape.seq_q, hq = p.shape.heads_q;
  const int d = static_cast<int>(p.shape.head_dim);
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarpSize);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
       row < rows; row += warps) {
    const int64_t bh = row / sq, i = row % sq, b = bh / hq, h = bh % hq;
    const T* o = static_cast<const T*>(p.out.ptr) + b * p.out.batch_stride + h * p.out.head_stride +
                 i * p.out.seq_stride;
    const T* go = static_cast<const T*>(p.grad_out.ptr) + b * p.grad_out.batch_stride +
                  h * p.grad_out.head_stride + i * p.grad_out.seq_stride;
    float acc = 0.f;
    for (int c = lane * V; c < d; c += kWarpSize * V) {
      const Vec<T, V> x = load_vec<T, V>(o + c), y = load_vec<T, V>(go + c);
#pragma unroll
      for (int e = 0; e < V; ++e) acc += to_acc(x.v[e]) * to_acc(y.v[e]);
    }
    acc = warp_sum(acc);
    if (lane == 0) p.delta[row] = acc;
    float4* dq = reinterpret_cast<float4*>(p.dq_accum + row * d);
    for (int c = lane; c < d / 4; c += kWarpSize) dq[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

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

  // Whether query tile m has no visible key in this block: causal, and every row's last visible key
  // i + Sk - Sq lies before the block's first key (a tile spanning two heads holds i = Sq - 1: never hidden).
  auto bwd_tile_hidden = [&](int64_t m) -> bool {
    if (!p.shape.causal) return false;
    const int64_t r0 = m * kBlockM, r1 = (r0 + kBlockM < rows ? r0 + kBlockM : rows) - 1;
    const int64_t i_max = (r0 / sq == r1 / sq) ? r1 % sq : sq - 1;
    return i_max + sk - sq < n_base;
  };
  auto bwd_next_tile = [&](int64_t m) -> int64_t {
    while (m < a.q_tiles && bwd_tile_hidden(m)) ++m;
    return m;
  };
  // Q and dO tiles of query tile m (rows past G * Sq zero-filled) into stage s, and the rows' lse, delta and
  // last visible key.
  auto bwd_load_q_tile = [&](int64_t m, int s) {
    const int64_t m_base = m * kBlockM;
    const uint32_t sQ = s_base + Tr::kOffQ + s * Tr::kQ, sDO = s_base + Tr::kOffDO + s * Tr::kQ;
    const T* qp = static_cast<const T*>(p.q.ptr);
    const T* gp = static_cast<const T*>(p.grad_out.ptr);
    for (int c = tid; c < kBlockM * kChunks; c += kThreads) {
      const int row = c / kChunks, ch = c % kChunks;
      const int64_t r = m_base + row;
      const bool valid = r < rows;
      const T* qs = qp;
      const T* gs = gp;
      if (valid) {
        const int64_t h = hk * a.group + r / sq, i = r % sq;
        qs = qp + b * p.q.batch_stride + h * p.q.head_stride + i * p.q.seq_stride + ch * 8;
        gs = gp + b * p.grad_out.batch_stride + h * p.grad_out.head_stride + i * p.grad_out.seq_stride + ch * 8;
      }
      cp_async_16(sQ + TileD::offset(row, ch), qs, valid);
      cp_async_16(sDO + TileD::offset(row, ch), gs, valid);
    }
    if (tid < kBlockM) {
      const int64_t r = m_base + tid;
      float lse2 = INFINITY, delta = 0.f;
      int64_t lim = -1;
      if (r < rows) {
        const float l = p.lse[row_base + r];
        lse2 = l == -INFINITY ? INFINITY : l * bwd_log2e;
        delta = p.delta[row_base + r];
        lim = sk - 1;
        if (p.shape.causal) {
          const int64_t c = r % sq + sk - sq;
          lim = c < lim ? c : lim;
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

  int64_t m = bwd_next_tile(0);
  if (m < a.q_tiles) bwd_load_q_tile(m, 0);
  cp_async_commit();  // group: K, V and the first query tile
  int stage = 0;
  while (m < a.q_tiles) {
    const int64_t m_next = bwd_next_tile(m + 1);
    if (m_next < a.q_tiles) bwd_load_q_tile(m_next, stage ^ 1);  // stage ^ 1 was freed by the last barrier
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
    m = m_next;
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

// ---------------------------------------------------------------- 3. grad_q = scale * dq_accum
template <typename T>
__global__ void __launch_bounds__(256) flash_attention_bwd_dq_convert_kernel(const float* dq, T* out, float scale,
                                                                              int64_t vecs) {
  constexpr int V = kVec<T>;
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vecs;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 x0 = reinterpret_cast<const float4*>(dq)[2 * v];
    const float4 x1 = reinterpret_cast<const float4*>(dq)[2 * v + 1];
    const float x[V] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    Vec<T, V> y;
#pragma unroll
    for (int e = 0; e < V; ++e) y.v[e] = from_acc<T>(x[e] * scale);
    store_vec(out + v * V, y);
  }
}

constexpr int64_t bwd_max_grid = 1 << 20;

template <typename T, int kD, typename Cfg = typename BwdConfig<kD>::type>
cudaError_t bwd_launch(const AttentionBackward& p, cudaStream_t stream) {
  using Tr = BwdTraits<kD, Cfg>;
  const AttentionShape& s = p.shape;
  const int64_t rows = s.batch * s.heads_q * s.seq_q;
  if (rows > 0) {
    const int64_t blocks = (rows + 7) / 8;
    const dim3 grid(unsigned(blocks < bwd_max_grid ? blocks : bwd_max_grid));
    {
      flash_attention_bwd_preprocess_kernel<T><<<grid, 256, 0, stream>>>(p, rows);
    }
    const cudaError_t e = launch_status();
    if (e != cudaSuccess) return e;
  }
  if (s.seq_k > 0 && s.batch > 0 && s.heads_k > 0) {
    BwdArgs a;
    a.p = p;
    a.group = s.heads_q / s.heads_k;
    a.group_rows = a.group * s.seq_q;
    a.q_tiles = (a.group_rows + Tr::kBlockM - 1) / Tr::kBlockM;
    const int64_t key_blocks = (s.seq_k + Tr::kBlockN - 1) / Tr::kBlockN;
    const int64_t blocks = key_blocks * s.heads_k * s.batch;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    a.key_blocks = static_cast<int>(key_blocks);
    a.scale_log2 = s.scale * bwd_log2e;
    const auto kernel = flash_attention_bwd_dkdv_kernel<T, kD, Cfg>;
    // set on every launch: the attribute belongs to the current device
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmem);
    if (e != cudaSuccess) return e;
    {
      kernel<<<dim3(unsigned(blocks)), Tr::kThreads, Tr::kSmem, stream>>>(a);
    }
    e = launch_status();
    if (e != cudaSuccess) return e;
  }
  if (rows > 0) {
    const int64_t vecs = rows * kD / kVec<T>;
    const int64_t blocks = (vecs + 255) / 256;
    const dim3 grid(unsigned(blocks < bwd_max_grid ? blocks : bwd_max_grid));
    {
      flash_attention_bwd_dq_convert_kernel<T><<<grid, 256, 0, stream>>>(p.dq_accum, static_cast<T*>(p.grad_q),
                                                                         s.scale, vecs);
    }
    return launch_status();
  }
  return cudaSuccess;
}

template <typename T>
cudaError_t bwd_dispatch_dim(const AttentionBackward& p, cudaStream_t stream) {
  switch (p.shape.head_dim) {
    case 64: return bwd_launch<T, 64>(p, stream);
    case 128: return bwd_launch<T, 128>(p, stream);
    case 256: return bwd_launch<T, 256>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

int64_t attention_backward_smem(int64_t head_dim) {
  switch (head_dim) {
    case 64: return BwdTraits<64>::kSmem;
    case 128: return BwdTraits<128>::kSmem;
    case 256: return BwdTraits<256>::kSmem;
    default: return 0;
  }
}

cudaError_t attention_backward(const AttentionBackward& p, cudaStream_t stream) {
  const AttentionShape& s = p.shape;
  if (s.heads_k == 0 && s.heads_q == 0) return cudaSuccess;  // nothing to compute
  if (s.batch < 0 || s.heads_q < 0 || s.heads_k <= 0 || s.seq_q < 0 || s.seq_k < 0 || s.heads_q % s.heads_k != 0)
    return cudaErrorInvalidValue;
  if (s.seq_q > 0x7fffffff || s.seq_k > 0x7fffffff) return cudaErrorInvalidValue;
  switch (s.dtype) {
    case DType::bf16: return bwd_dispatch_dim<bf16>(p, stream);
    case DType::f16: return bwd_dispatch_dim<f16>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
