// The skinny GEMM of linear: out (M, N) = act(x (M, K) @ w (N, K)^T + bias) for a few rows of x (decode: one
// token to 16), with the bias and the activation applied to the fp32 sums in the kernel's epilogue. At
// these M the product is bound by reading w once; the unfused code (a GEMM, then the activation as a second
// kernel) costs a second launch and pass, and a GEMM library's epilogue has no erf GELU or SiLU.
//
// Scheme: a block owns 16 or 32 output columns (two or four n8 tiles of mma.m16n8k16; SkinnyConfig below) and all
// M <= 16 rows (one m16 tile); its W warps split K in steps of 32, warp w taking steps w, w + W, ... so the block
// walks each weight row front to back. Each lane loads 16 bytes (8 consecutive k) of weight rows 8j + g of the
// block (lane = 4 g + t) and of x rows g and g + 8 straight into registers, no shared memory: within a step of 32,
// lane t holds k = 8t .. 8t + 7, and the two MMAs of the step take (8t, 8t + 1 | 8t + 2, 8t + 3) and (8t + 4,
// 8t + 5 | 8t + 6, 8t + 7) as their fragment's (2t, 2t + 1 | 2t + 8, 2t + 9) — the same permutation of k for x and
// w, so the sum is unchanged. Four or eight steps' loads are issued before their MMAs. The warps' partial tiles
// meet in shared memory (summed in warp order: deterministic), then each thread finishes output elements: + bias,
// pre, activation, one rounding.
#include "compat.cuh"

#include "linear_epilogue.h"

#if YIRAGE_HIP

namespace yirage::kernels::cuda {
// ROCm: mma.sync has no HIP spelling; the glue keeps the BLAS path there.
bool linear_skinny_ok(const LinearSkinny&) { return false; }
cudaError_t linear_skinny(const LinearSkinny&, cudaStream_t) { return cudaErrorNotSupported; }
}  // namespace yirage::kernels::cuda

#else

#include "linear_act.cuh"
#include "mma_sm80.cuh"
#include "norm_common.cuh"  // sm_count, blocks_per_sm, dram_gbs_per_sm

namespace yirage::kernels::cuda {
namespace {

// Launch shapes: WARPS warps split K, NJ n8 tiles of output columns per block (kSkinnyCols = 8 NJ), UNROLL steps of
// 32 k per warp whose loads are issued together. SkinnyNarrowN (16 warps, 16 columns, 4 steps) was chosen on an H100
// (M = 1, 8, 16; N x K = 4096 x 4096, 11008 x 4096, 4096 x 11008, 1024 x 1024) over 4 or 8 warps (too few loads in
// flight at N = 4096: 256 blocks), 32 warps (register cap) and 8 steps (no gain). Its blocks are resident two per
// multiprocessor; a grid of more than one wave of them ends with a partial wave that has few loads in flight (on an
// H200, N = 4352 x K = 4096 took 20.4 us against 15.5 for N = 4096). There the other shapes win (linear_skinny_run).
template <int WARPS, int NJ, int UNROLL>
struct SkinnyConfig {
  static constexpr int kWarps = WARPS, kCols = 8 * NJ, kNJ = NJ, kUnroll = UNROLL;
};
using SkinnyNarrowN = SkinnyConfig<16, 2, 4>;
using SkinnyMidN = SkinnyConfig<8, 4, 4>;
using SkinnyWideN = SkinnyConfig<4, 2, 8>;
constexpr int kSkinnyTiles = 1;  // one m16 tile: M <= 16

template <typename T, typename Cfg>
__global__ void __launch_bounds__(Cfg::kWarps * 32) linear_skinny_kernel(const LinearSkinny p) {
#if YIRAGE_SM80_DEVICE
  constexpr int kSkinnyWarps = Cfg::kWarps, kSkinnyCols = Cfg::kCols, kSkinnyUnroll = Cfg::kUnroll, NJ = Cfg::kNJ;
  __shared__ float part[kSkinnyWarps][kSkinnyTiles * 16][kSkinnyCols + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t n0 = int64_t(blockIdx.x) * kSkinnyCols;
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  const int64_t steps = (p.k + 31) / 32;

  // This lane's weight rows (n0 + 8 j + g) and x rows (16 mt + g, 16 mt + 8 + g), at k = 8t.
  const T* wrow[NJ];
  bool wok[NJ];
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int64_t n = n0 + 8 * j + g;
    wok[j] = n < p.n;
    wrow[j] = w + (wok[j] ? n : 0) * p.ldw + 8 * t;
  }
  const T* xrow[kSkinnyTiles][2];
  bool xok[kSkinnyTiles][2];
#pragma unroll
  for (int mt = 0; mt < kSkinnyTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = 16 * mt + 8 * h + g;
      xok[mt][h] = r < p.m;
      xrow[mt][h] = x + (xok[mt][h] ? r : 0) * p.ldx + 8 * t;
    }
  }

  float acc[kSkinnyTiles][NJ][4];
#pragma unroll
  for (int mt = 0; mt < kSkinnyTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.f;
    }
  }

  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int64_t s0 = warp; s0 < steps; s0 += kSkinnyWarps * kSkinnyUnroll) {
    uint4 wv[kSkinnyUnroll][NJ];
    uint4 xv[kSkinnyUnroll][kSkinnyTiles][2];
#pragma unroll
    for (int u = 0; u < kSkinnyUnroll; ++u) {
      const int64_t s = s0 + int64_t(u) * kSkinnyWarps;
      const int64_t k = s * 32;
      const bool kok = s < steps && k + 8 * t < p.k;  // K is a multiple of 8: a 16-byte chunk is all in or out
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        wv[u][j] = kok && wok[j] ? __ldcs(reinterpret_cast<const uint4*>(wrow[j] + k)) : zero;  // read once
      }
#pragma unroll
      for (int mt = 0; mt < kSkinnyTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          xv[u][mt][h] = kok && xok[mt][h] ? __ldg(reinterpret_cast<const uint4*>(xrow[mt][h] + k)) : zero;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kSkinnyUnroll; ++u) {
#pragma unroll
      for (int mt = 0; mt < kSkinnyTiles; ++mt) {
        const uint32_t a_lo[4] = {xv[u][mt][0].x, xv[u][mt][1].x, xv[u][mt][0].y, xv[u][mt][1].y};
        const uint32_t a_hi[4] = {xv[u][mt][0].z, xv[u][mt][1].z, xv[u][mt][0].w, xv[u][mt][1].w};
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          sm80::mma_16816<T>(acc[mt][j], a_lo, wv[u][j].x, wv[u][j].y);
          sm80::mma_16816<T>(acc[mt][j], a_hi, wv[u][j].z, wv[u][j].w);
        }
      }
    }
  }

  // C fragment: (row g, cols 2t, 2t + 1) and (row g + 8, same cols) of each n8 tile.
#pragma unroll
  for (int mt = 0; mt < kSkinnyTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const int r = 16 * mt + g, c = 8 * j + 2 * t;
      part[warp][r][c] = acc[mt][j][0];
      part[warp][r][c + 1] = acc[mt][j][1];
      part[warp][r + 8][c] = acc[mt][j][2];
      part[warp][r + 8][c + 1] = acc[mt][j][3];
    }
  }
  __syncthreads();
  const T* bias = static_cast<const T*>(p.bias);
  T* out = static_cast<T*>(p.out);
  T* pre = static_cast<T*>(p.pre);
  for (int e = threadIdx.x; e < kSkinnyTiles * 16 * kSkinnyCols; e += kSkinnyWarps * 32) {
    const int r = e / kSkinnyCols, c = e % kSkinnyCols;
    const int64_t n = n0 + c;
    if (r >= p.m || n >= p.n) continue;
    float z = 0.f;
#pragma unroll
    for (int i = 0; i < kSkinnyWarps; ++i) z += part[i][r][c];
    if (bias != nullptr) z += to_acc(bias[n]);
    if (pre != nullptr) pre[r * p.n + n] = from_acc<T>(z);
    out[r * p.n + n] = from_acc<T>(linear_act(p.act, z));
  }
#else
  __trap();  // never launched below sm_80 (the glue checks the architecture)
#endif
}

template <typename T, typename Cfg>
cudaError_t linear_skinny_launch(const LinearSkinny& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.n + Cfg::kCols - 1) / Cfg::kCols));
  linear_skinny_kernel<T, Cfg><<<grid, Cfg::kWarps * 32, 0, stream>>>(p);
  return launch_status();
}

// Blocks of SkinnyNarrowN where they all fit in one wave, else of SkinnyMidN (32 columns) where those do, else
// SkinnyWideN. H200, bf16, M = 1 / 16, K = 4096 unless given, kernel alone (benchmarks/cuda/linear_skinny_tune.cu), us:
// SkinnyMidN at N = 4352 19.5 against 20.4, 6144 21.7 / 22.1, 11008 30.0 / 33.2, N x K = 6144 x 1024 9.9 / 11.3,
// 8192 x 14336 70.7 / 69.5 (the one loss); SkinnyWideN at N = 14336 38.2 / 41.9 and 28672 70.1 / 73.3. On an H100
// (less DRAM bandwidth per SM: 25 against 36 GB/s) the partial wave costs less and the other shapes did not pay
// (1 x 28672 x 4096 93.8 against 91.7, 11008 40.1 / 39.9; 16 x 14336 x 4096 51.4 / 52.1): SkinnyNarrowN there, and
// wherever a device has under 30 GB/s per SM (benchmarks/results/cuda-linear-skinny-waves-h200-2026-11-27.md).
template <typename T>
cudaError_t linear_skinny_run(const LinearSkinny& p, cudaStream_t stream) {
  if (norm::dram_gbs_per_sm() < 30.0) return linear_skinny_launch<T, SkinnyNarrowN>(p, stream);
  const int64_t sms = norm::sm_count();
  const auto fits = [&](auto kernel, int warps, int cols) {
    return (p.n + cols - 1) / cols <= sms * norm::blocks_per_sm(kernel, warps * 32, 0);
  };
  if (fits(linear_skinny_kernel<T, SkinnyNarrowN>, SkinnyNarrowN::kWarps, SkinnyNarrowN::kCols)) {
    return linear_skinny_launch<T, SkinnyNarrowN>(p, stream);
  }
  if (fits(linear_skinny_kernel<T, SkinnyMidN>, SkinnyMidN::kWarps, SkinnyMidN::kCols)) {
    return linear_skinny_launch<T, SkinnyMidN>(p, stream);
  }
  return linear_skinny_launch<T, SkinnyWideN>(p, stream);
}

}  // namespace

bool linear_skinny_ok(const LinearSkinny& p) {
  static_assert(kLinearSkinnyMaxRows <= 16 * kSkinnyTiles, "the kernel holds kSkinnyTiles m16 tiles");
  return (p.dtype == DType::f16 || p.dtype == DType::bf16) && p.m >= 1 && p.m <= kLinearSkinnyMaxRows &&
         p.n >= 1 && (p.n + SkinnyNarrowN::kCols - 1) / SkinnyNarrowN::kCols <= 0x7fffffff && p.k >= 1 &&
         p.k % 8 == 0 &&
         (p.m == 1 || p.ldx % 8 == 0) && (p.n == 1 || p.ldw % 8 == 0) && aligned(p.x, 16) && aligned(p.w, 16);
}

cudaError_t linear_skinny(const LinearSkinny& p, cudaStream_t stream) {
  if (!linear_skinny_ok(p)) return cudaErrorInvalidValue;
  if (p.dtype == DType::bf16) return linear_skinny_run<bf16>(p, stream);
  return linear_skinny_run<f16>(p, stream);
}

}  // namespace yirage::kernels::cuda

#endif  // YIRAGE_HIP
