// Flash attention backward on CUDA tensor cores (FlashAttention-2's algorithm; fp16 / bf16, head dims 64,
// 128 and 256, sm_80 or newer; mma.sync m16n8k16 with fp32 accumulation). Three kernels (on Hopper kernel 2 runs
// on warpgroup MMAs instead, the same algorithm: flash_attention_bwd_sm90_kernel for D = 64 and 128,
// attention_bwd_sm90.cuh, 1.32-1.36x faster at B4 H32 S4096 on an H100; flash_attention_bwd_sm90_d256_kernel for
// D = 256, attention_bwd_sm90_d256.cuh, 1.30x faster at B4 H16 S4096 on an H200). On Hopper at D = 256 a fourth
// kernel computes dQ (flash_attention_bwd_dq_sm90_kernel, attention_bwd_dq_sm90.cuh: S and dP recomputed per query
// tile, grad_q written once) where its blocks fill the GPU; the dK/dV kernel then leaves dQ out, and step 1 does not
// zero dq_accum nor step 3 run (1.20-1.30x the backward with dQ's atomics at B2-B4 H16 S2048-8192 on an H200):
//
// 1. flash_attention_bwd_preprocess_kernel: D / 8 lanes per query row: delta = rowsum(grad_out * out) in fp32
//    (16-byte vector loads), and the rows of the fp32 dq_accum workspace zeroed.
// 2. flash_attention_bwd_dkdv_kernel: one block per (key block of kBlockN keys, key/value head, batch).
//    The block keeps its K and V tiles in shared memory and walks the G * Sq query rows of its key/value head
//    (the G query heads of a GQA group stacked as rows, attention.h) in tiles of kBlockM rows, the next Q and
//    dO tiles copied with cp.async while the current one is used (two stages); tiles that a causal mask hides
//    entirely are skipped. Each warp owns kWarpKeys keys and kD / kDSplit columns of dK and dV (fp32
//    registers, kept across the whole walk). Per query tile, per warp:
//      S^T = K_w Q^T, P^T = exp2(S^T * scale * log2(e) - lse * log2(e)) (0 where masked or lse = -inf),
//      dP^T = V_w dO^T, dS^T = P^T * (dP^T - delta), dV_w += P^T dO, dK_w += dS^T Q;
//    dS^T goes to shared memory (as T) and the block computes dQ_tile = dS K (kBlockM x kD), added into
//    dq_accum with fp32 atomics. When kDSplit warps share a key slice, either each computes its S^T and dP^T
//    over all the tile's queries (kQSplit = 1: redundant MMAs, P^T straight from registers), or they split the
//    queries (kQSplit = kDSplit) and exchange P^T and dS^T through shared memory (FlashAttention-2's layout).
//    The epilogue writes grad_k = scale * dK and grad_v = dV.
// 3. flash_attention_bwd_dq_convert_kernel: grad_q = scale * dq_accum, rounded to T (after the Hopper kernel for
//    D = 64 and 128, whose dq_accum rows hold their 16-byte chunks permuted, read back in that order).
//
// Tiles (kBlockN keys x kBlockM query rows, warps, dynamic shared memory; attention_bwd_tile.cuh). The "wide"
// tiles split each key slice's queries between its warps; a device that does not let a block use that much
// shared memory (sm_86 / sm_89: 99 KB; sm_80 for kD = 256) gets the narrow tile:
//   kD =  64: wide 128 x 128, 8 warps of 32 keys x 32 columns, 163 KB; narrow 128 x 64, 8 warps of 16 keys x
//             64 columns, 81.5 KB
//   kD = 128: wide 128 x 64, 8 warps of 32 keys x 64 columns, 161.5 KB; narrow 64 x 32, 4 warps of 16 keys,
//             72.8 KB
//   kD = 256: wide 64 x 64, 8 warps of 32 keys x 64 columns, 209.5 KB; narrow 64 x 32, 8 warps of 16 keys x
//             128 columns (S^T computed twice per key slice), 136.8 KB
// (ptxas, sm_90a: every kernel at 239-255 registers; the wide kD = 64 and 128 ones spill 36 bytes, reloaded
// from L1 in the loop.) Measured on an H100 (bf16, fwd+bwd, B4 H32 S4096; benchmarks/results): the wide tiles
// took kD = 128 from 214 to 269 TFLOP/s (the dK/dV kernel from 14.4 to 10.7 ms, FlashAttention-2's: 8.7 ms:
// half the dq_accum atomics and fewer shared-memory reads per MMA), kD = 256 (H16) from 159 to 217, kD = 64 from
// 214 to 221. Then (2026-11-25) the wide tiles copy each tile's lse and delta with cp.async and
// issue the next tile's copies after the barrier that opens a tile (kAsyncRows): Nsight Compute had the block
// waiting at its barriers 5x as long as FlashAttention-2's (warps 0-1 fetching lse / delta with plain loads);
// fwd+bwd kD = 128 went from 0.90x to 0.96x of SDPA's flash backend.
// Shared tiles are swizzled (SwizzledTile: 16-byte chunk c of row r at c ^ (r % 8)), so every ldmatrix and
// every 16-byte cp.async of a warp touches eight different bank groups.
//
// Limits: dQ is accumulated with fp32 atomic adds from every key block of a key/value head (atomicAdd; on Hopper
// for D = 64 and 128, the copy engine's bulk reductions), so grad_q is not bitwise deterministic (the order of the
// additions varies from run to run; its last bits may differ), except where the dQ kernel runs (D = 256, Hopper).
// grad_k and grad_v are deterministic. Sequence lengths below 2^31. The dK/dV epilogue stores 4-byte pairs
// straight from the MMA fragments (not staged through shared memory).
#include "compat.cuh"

#include "attention.h"

#if YIRAGE_HIP

namespace yirage::kernels::cuda {

// ROCm: no tensor-core kernels (the glue takes the portable kernel; attention_native is false).
int64_t attention_backward_smem(int64_t) { return 0; }
bool attention_backward_needs_dq_accum(const AttentionBackward&) { return true; }

cudaError_t attention_backward(const AttentionBackward& p, cudaStream_t stream) {
  (void)p;
  (void)stream;
  return cudaErrorNotSupported;
}

}  // namespace yirage::kernels::cuda

#else  // !YIRAGE_HIP

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "attention_bwd_kernel.cuh"
#include "attention_bwd_sm90.cuh"
#include "attention_bwd_dq_sm90.cuh"
#include "attention_bwd_sm90_d256.cuh"
#include "attention_tma_map.h"
#include "launch_facts.cuh"

namespace yirage::kernels::cuda {
namespace {

// ---------------------------------------------------------------- 1. delta and dq_accum = 0
// kD / 8 lanes per row (a 16-byte vector each of out and grad_out), kRows rows of one (batch, head) per block; then
// the block's rows of dq_accum (one contiguous range) zeroed with 16-byte stores. Grid: (row tiles, heads, batches),
// y and z walked in steps of their sizes. B4 H32 S4096 on an H200 (2026-11-28): D = 128 135-137 us, D = 64 71-73 us,
// about the copy rate on the bytes moved (cuDNN's pass: 131 / 66 us). One warp per row, as before, left lanes past
// D / 8 idle and divided 64-bit row indices per row (172 / 163 us); two or four rows per lane group, their loads
// issued together (fewer, longer blocks), took 141 / 175 us at D = 128.
template <typename T, int kD>
struct BwdPreprocess {
  static constexpr int kV = kVec<T>, kLanes = kD / kV, kRows = 256 / kLanes;
  static_assert(kD % kV == 0 && kLanes <= kWarpSize && 256 % kLanes == 0, "whole rows per block");
};
template <typename T, int kD>
__global__ void __launch_bounds__(256) flash_attention_bwd_preprocess_kernel(const AttentionBackward p,
                                                                              bool zero_dq) {
  using S = BwdPreprocess<T, kD>;
  constexpr int V = S::kV;
  const int64_t sq = p.shape.seq_q, hq = p.shape.heads_q;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * S::kRows, i = i0 + threadIdx.x / S::kLanes;
  const int c = (threadIdx.x % S::kLanes) * V;
  const int64_t n = sq - i0 < S::kRows ? sq - i0 : S::kRows;  // rows of this block
  for (int64_t b = blockIdx.z; b < p.shape.batch; b += gridDim.z) {
    for (int64_t h = blockIdx.y; h < hq; h += gridDim.y) {
      float acc = 0.f;
      if (i < sq) {
        const T* o = static_cast<const T*>(p.out.ptr) + b * p.out.batch_stride + h * p.out.head_stride;
        const T* go = static_cast<const T*>(p.grad_out.ptr) + b * p.grad_out.batch_stride +
                      h * p.grad_out.head_stride;
        const Vec<T, V> x = load_vec<T, V>(o + i * p.out.seq_stride + c);
        const Vec<T, V> y = load_vec<T, V>(go + i * p.grad_out.seq_stride + c);
#pragma unroll
        for (int e = 0; e < V; ++e) acc += to_acc(x.v[e]) * to_acc(y.v[e]);
      }
#pragma unroll
      for (int m = S::kLanes / 2; m > 0; m /= 2) acc += shfl_xor(acc, m);
      const int64_t row0 = (b * hq + h) * sq + i0;  // the block's first row of (B, Hq, Sq)
      if (i < sq && c == 0) p.delta[row0 + (i - i0)] = acc;
      if (!zero_dq) continue;
      float4* dq = reinterpret_cast<float4*>(p.dq_accum + row0 * kD);
      for (int64_t v = threadIdx.x; v < n * (kD / 4); v += blockDim.x) dq[v] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
}

// ---------------------------------------------------------------- 3. grad_q = scale * dq_accum
// kSwizzled: dq_accum holds 16-byte chunk c of row R at chunk c ^ 2 (R % 4) of that row (the Hopper kernel's layout for
// D = 64 and 128: its staged tile goes out in one bulk reduction).
template <typename T, int kD, bool kSwizzled>
__global__ void __launch_bounds__(256) flash_attention_bwd_dq_convert_kernel(const float* dq, T* out, float scale,
                                                                              int64_t vecs) {
  constexpr int V = kVec<T>;
  static_assert(V == 8, "two 16-byte chunks of dq_accum per vector");
  for (int64_t v = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < vecs;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t c0 = 2 * v, c1 = 2 * v + 1;  // float4 chunks
    if constexpr (kSwizzled) {
      const int64_t row = v / (kD / 8), s = 2 * (row & 3);
      const int64_t c = 2 * (v % (kD / 8)), rb = row * (kD / 4);
      c0 = rb + (c ^ s);
      c1 = rb + ((c + 1) ^ s);
    }
    const float4 x0 = reinterpret_cast<const float4*>(dq)[c0];
    const float4 x1 = reinterpret_cast<const float4*>(dq)[c1];
    const float x[V] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    Vec<T, V> y;
#pragma unroll
    for (int e = 0; e < V; ++e) y.v[e] = from_acc<T>(x[e] * scale);
    store_vec(out + v * V, y);
  }
}

constexpr int64_t bwd_max_grid = 1 << 20;

// The dK/dV kernel and its launch shape: the mma.sync kernel with tile Cfg, or (Sm90 = true) the Hopper one
// (attention_bwd_sm90.cuh).
template <typename T, int kD, typename Cfg, bool kSm90>
struct DkdvKernel {
  using Tr = BwdTraits<kD, Cfg>;
  static constexpr int kBlockM = Tr::kBlockM, kBlockN = Tr::kBlockN, kThreads = Tr::kThreads, kSmem = Tr::kSmem;
  static const void* kernel() { return reinterpret_cast<const void*>(&flash_attention_bwd_dkdv_kernel<T, kD, Cfg>); }
  static void launch(unsigned blocks, const BwdArgs& a, cudaStream_t stream) {
    flash_attention_bwd_dkdv_kernel<T, kD, Cfg><<<dim3(blocks), kThreads, kSmem, stream>>>(a);
  }
};
// Tensor maps of Q and dO (boxes of `rows` rows) for TMA copies of query tiles of `rows` stacked rows, where no such
// tile spans two query heads (one query head per key/value head, or Sq a multiple of the tile): whether made.
template <typename T>
bool q_do_tensor_maps(const AttentionBackward& p, int rows, CUtensorMap* tm_q, CUtensorMap* tm_do) {
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
  const AttentionShape& s = p.shape;
  return (s.heads_q == s.heads_k || s.seq_q % rows == 0) &&
         tensor_map(tm_q, p.q, s, s.seq_q, s.heads_q, kBf16, rows) &&
         tensor_map(tm_do, p.grad_out, s, s.seq_q, s.heads_q, kBf16, rows);
}

template <typename T, int kD>
struct Sm90DkdvKernel {  // kD = 64, 128
  using C = Sm90BwdConfig<kD>;
  static const void* kernel() { return reinterpret_cast<const void*>(&flash_attention_bwd_sm90_kernel<T, C>); }
  // Q and dO by the tensor memory accelerator where no query tile spans two query heads and the maps can be made,
  // else by the producer warpgroup's cp.async copies.
  static void launch(unsigned blocks, const BwdArgs& a, cudaStream_t stream) {
    CUtensorMap tm_q{}, tm_do{};
    const bool q_tma = q_do_tensor_maps<T>(a.p, C::kBlockM, &tm_q, &tm_do);
    flash_attention_bwd_sm90_kernel<T, C><<<dim3(blocks), C::kThreads, C::kSmem, stream>>>(a, q_tma, tm_q, tm_do);
  }
};
template <typename T>
struct Sm90DkdvKernel<T, 256> {
  using C = Sm90BwdD256Config;
  static const void* kernel() { return reinterpret_cast<const void*>(&flash_attention_bwd_sm90_d256_kernel<T>); }
  static void launch(unsigned blocks, const BwdArgs& a, cudaStream_t stream) {
    flash_attention_bwd_sm90_d256_kernel<T><<<dim3(blocks), C::kThreads, C::kSmem, stream>>>(a);
  }
};

// D = 256 on Hopper: whether the dK/dV kernel runs without dQ and flash_attention_bwd_dq_sm90_kernel writes grad_q
// (attention_bwd_dq_sm90.cuh): where the dQ kernel's blocks (one per 128 stacked query rows, each walking every key
// tile) fill at least half of the GPU or walk at most 16 key tiles (else, e.g. Sq = 1 against 4K keys: 8 blocks of
// 65 tiles, 3.4x slower), and the tensor maps of K and V can be made. False: the dK/dV kernel with dQ's atomics.
template <typename T>
bool sm90_d256_split(const AttentionBackward& p, CUtensorMap* tm_k, CUtensorMap* tm_v) {
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
  const AttentionShape& s = p.shape;
  if (s.batch <= 0 || s.heads_q <= 0 || s.heads_k <= 0 || s.seq_q <= 0 || s.seq_k <= 0) return false;
  const int64_t dq_blocks = (s.heads_q / s.heads_k * s.seq_q + 127) / 128 * s.heads_k * s.batch;
  if (dq_blocks * 2 < sm_count() && s.seq_k > 16 * Sm90BwdDqConfig::kBlockN) return false;
  return tensor_map(tm_k, p.k, s, s.seq_k, s.heads_k, kBf16, Sm90BwdDqConfig::kBlockN) &&
         tensor_map(tm_v, p.v, s, s.seq_k, s.heads_k, kBf16, Sm90BwdDqConfig::kBlockN);
}
template <typename T>
cudaError_t sm90_d256_dq_launch(const BwdArgs& a, const CUtensorMap& tm_k, const CUtensorMap& tm_v,
                                cudaStream_t stream) {
  using C = Sm90BwdDqConfig;
  CUtensorMap tm_q{}, tm_do{};  // Q and dO by TMA where no tile spans two query heads
  const bool q_tma = q_do_tensor_maps<T>(a.p, C::kBlockM, &tm_q, &tm_do);
  const void* kernel = reinterpret_cast<const void*>(&flash_attention_bwd_dq_sm90_kernel<T>);
  static std::atomic<uint64_t> smem_raised{0};
  cudaError_t e = raise_smem_once(smem_raised, kernel, C::kSmem);
  if (e != cudaSuccess) return e;
  const AttentionShape& s = a.p.shape;
  const int64_t tiles = (a.group_rows + C::kBlockM - 1) / C::kBlockM;
  constexpr int64_t kMaxZ = 65535;  // gridDim.z
  for (int64_t b0 = 0; b0 < s.batch; b0 += kMaxZ) {
    const dim3 grid(unsigned(tiles), unsigned(s.heads_k), unsigned(std::min<int64_t>(kMaxZ, s.batch - b0)));
    {
      flash_attention_bwd_dq_sm90_kernel<T><<<grid, C::kThreads, C::kSmem, stream>>>(a, int(b0), q_tma, tm_k, tm_v,
                                                                                     tm_q, tm_do);
    }
    e = launch_status();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}
template <typename T, int kD, typename Cfg>
struct DkdvKernel<T, kD, Cfg, true> : Sm90DkdvKernel<T, kD> {
  using C = typename Sm90DkdvKernel<T, kD>::C;
  static constexpr int kBlockM = C::kBlockM, kBlockN = C::kBlockN, kThreads = C::kThreads, kSmem = C::kSmem;
};

template <typename T, int kD, typename Cfg = typename BwdConfig<kD>::type, bool kSm90 = false>
cudaError_t bwd_launch(const AttentionBackward& p, cudaStream_t stream) {
  using K = DkdvKernel<T, kD, Cfg, kSm90>;
  const AttentionShape& s = p.shape;
  const int64_t rows = s.batch * s.heads_q * s.seq_q;
  CUtensorMap tm_k{}, tm_v{};
  bool split_dq = false;  // dQ by its own kernel (D = 256 on Hopper)
  if constexpr (kSm90 && kD == 256) split_dq = sm90_d256_split<T>(p, &tm_k, &tm_v);
  if (!split_dq && rows > 0 && p.dq_accum == nullptr) return cudaErrorInvalidValue;  // (the workspace is needed)
  if (rows > 0) {
    const int64_t tiles = (s.seq_q + BwdPreprocess<T, kD>::kRows - 1) / BwdPreprocess<T, kD>::kRows;
    if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
    const dim3 grid(unsigned(tiles), unsigned(std::min<int64_t>(s.heads_q, 65535)),
                    unsigned(std::min<int64_t>(s.batch, 65535)));
    flash_attention_bwd_preprocess_kernel<T, kD><<<grid, 256, 0, stream>>>(p, !split_dq);
    const cudaError_t e = launch_status();
    if (e != cudaSuccess) return e;
  }
  if (s.seq_k > 0 && s.batch > 0 && s.heads_k > 0) {
    BwdArgs a;
    a.p = p;
    a.group = s.heads_q / s.heads_k;
    a.group_rows = a.group * s.seq_q;
    if (a.group_rows > 0x7fffffff - K::kBlockM) return cudaErrorInvalidValue;  // the kernel's 32-bit row indices
    a.q_tiles = (a.group_rows + K::kBlockM - 1) / K::kBlockM;
    const int64_t key_blocks = (s.seq_k + K::kBlockN - 1) / K::kBlockN;
    const int64_t blocks = key_blocks * s.heads_k * s.batch;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    a.key_blocks = static_cast<int>(key_blocks);
    a.scale_log2 = s.scale * kLog2e;
    static std::atomic<uint64_t> smem_raised{0};  // the attribute belongs to the device: once per device
    cudaError_t e = raise_smem_once(smem_raised, reinterpret_cast<const void*>(K::kernel()), K::kSmem);
    if (e != cudaSuccess) return e;
    if constexpr (kSm90 && kD == 256) {
      if (split_dq) {
        const void* dkdv = reinterpret_cast<const void*>(&flash_attention_bwd_sm90_d256_kernel<T, false>);
        static std::atomic<uint64_t> dkdv_raised{0};
        e = raise_smem_once(dkdv_raised, dkdv, K::kSmem);
        if (e != cudaSuccess) return e;
        flash_attention_bwd_sm90_d256_kernel<T, false><<<dim3(unsigned(blocks)), K::kThreads, K::kSmem, stream>>>(a);
        e = launch_status();
        if (e != cudaSuccess) return e;
        return sm90_d256_dq_launch<T>(a, tm_k, tm_v, stream);
      }
    }
    K::launch(unsigned(blocks), a, stream);
    e = launch_status();
    if (e != cudaSuccess) return e;
  }
  if (rows > 0) {
    const int64_t vecs = rows * kD / kVec<T>;
    const int64_t blocks = (vecs + 255) / 256;
    const dim3 grid(unsigned(blocks < bwd_max_grid ? blocks : bwd_max_grid));
    {
      constexpr bool kSwz = kSm90 && kD != 256;  // the layout of flash_attention_bwd_sm90_kernel
      flash_attention_bwd_dq_convert_kernel<T, kD, kSwz><<<grid, 256, 0, stream>>>(
          p.dq_accum, static_cast<T*>(p.grad_q), s.scale, vecs);
    }
    return launch_status();
  }
  return cudaSuccess;
}

// Whether the current device runs the Hopper dK/dV kernel (sm90::kernel_ready).
bool sm90_backward_ready() {
  static std::atomic<signed char> state[sm90::kMaxReadyDevices] = {};
  return sm90::kernel_ready(DkdvKernel<bf16, 128, BwdConfig<128>::wide, true>::kernel(), state);
}

// On Hopper the wgmma kernel; else the wide tile where the device lets a block use its shared
// memory, the narrow one otherwise.
template <typename T, int kD>
cudaError_t bwd_launch_fit(const AttentionBackward& p, int max_smem, cudaStream_t stream) {
  using Wide = typename BwdConfig<kD>::wide;
  if (max_smem >= DkdvKernel<T, kD, Wide, true>::kSmem && sm90_backward_ready()) {
    return bwd_launch<T, kD, Wide, true>(p, stream);
  }
  if (max_smem >= BwdTraits<kD, Wide>::kSmem) return bwd_launch<T, kD, Wide>(p, stream);
  return bwd_launch<T, kD>(p, stream);
}

template <typename T>
cudaError_t bwd_dispatch_dim(const AttentionBackward& p, int max_smem, cudaStream_t stream) {
  switch (p.shape.head_dim) {
    case 64: return bwd_launch_fit<T, 64>(p, max_smem, stream);
    case 128: return bwd_launch_fit<T, 128>(p, max_smem, stream);
    case 256: return bwd_launch_fit<T, 256>(p, max_smem, stream);
    default: return cudaErrorInvalidValue;
  }
}

// The current device's opt-in shared memory per block (asked once per device: launch_facts.cuh), which picks the
// tiles; YIRAGE_CUDA_ATTENTION_TILES=narrow: 0, the narrow tiles on any device (they are what sm_86 / sm_89 run).
int bwd_max_smem() {
  const char* tiles = std::getenv("YIRAGE_CUDA_ATTENTION_TILES");
  return tiles != nullptr && std::strcmp(tiles, "narrow") == 0 ? 0 : smem_optin();
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

bool attention_backward_needs_dq_accum(const AttentionBackward& p) {
  if (p.shape.head_dim != 256 || (p.shape.dtype != DType::bf16 && p.shape.dtype != DType::f16)) return true;
  using Wide = BwdConfig<256>::wide;
  if (bwd_max_smem() < DkdvKernel<bf16, 256, Wide, true>::kSmem || !sm90_backward_ready()) return true;
  CUtensorMap tm_k{}, tm_v{};
  const bool split = p.shape.dtype == DType::bf16 ? sm90_d256_split<bf16>(p, &tm_k, &tm_v)
                                                  : sm90_d256_split<f16>(p, &tm_k, &tm_v);
  return !split;
}

cudaError_t attention_backward(const AttentionBackward& p, cudaStream_t stream) {
  const AttentionShape& s = p.shape;
  if (s.heads_k == 0 && s.heads_q == 0) return cudaSuccess;  // nothing to compute
  if (s.batch < 0 || s.heads_q < 0 || s.heads_k <= 0 || s.seq_q < 0 || s.seq_k < 0 || s.heads_q % s.heads_k != 0)
    return cudaErrorInvalidValue;
  if (s.seq_q > 0x7fffffff || s.seq_k > 0x7fffffff) return cudaErrorInvalidValue;
  const int max_smem = bwd_max_smem();
  switch (s.dtype) {
    case DType::bf16: return bwd_dispatch_dim<bf16>(p, max_smem, stream);
    case DType::f16: return bwd_dispatch_dim<f16>(p, max_smem, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
