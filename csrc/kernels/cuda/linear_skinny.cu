// The skinny GEMM of linear: out (M, N) = act(x (M, K) @ w (N, K)^T + bias) for a few rows of x (decode: one
// token to 16), with the bias and the activation applied to the fp32 sums in the kernel's epilogue. At
// these M the product is bound by reading w once; the unfused code (a GEMM, then the activation as a second
// kernel) costs a second launch and pass, and a GEMM library's epilogue has no erf GELU or SiLU.
//
// Scheme: a block owns 16 output columns (two n8 tiles of mma.m16n8k16) and all M <= 16 rows (one m16 tile);
// its 16 warps split K in steps of 32, warp w taking steps w, w + 16, ... so the block walks each weight row
// front to back. Each lane loads 16 bytes (8 consecutive k) of weight rows g and g + 8 (lane = 4 g + t) and of x
// rows g and g + 8 straight into registers, no shared memory: within a step of 32, lane t holds k = 8t .. 8t + 7,
// and the two MMAs of the step take (8t, 8t + 1 | 8t + 2, 8t + 3) and (8t + 4, 8t + 5 | 8t + 6, 8t + 7) as their
// fragment's (2t, 2t + 1 | 2t + 8, 2t + 9) — the same permutation of k for x and w, so the sum is unchanged.
// Four steps' loads are issued before their MMAs. The warps' partial tiles meet in shared memory (summed in warp
// order: deterministic), then each thread finishes output elements: + bias, pre, activation, one rounding.
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

namespace yirage::kernels::cuda {
namespace {

// Chosen on an H100 (M = 1, 8, 16; N x K = 4096 x 4096, 11008 x 4096, 4096 x 11008, 1024 x 1024): 16 warps
// issuing 4 steps' loads at a time beat 4 or 8 warps (too few loads in flight at N = 4096: 256 blocks), 32 warps
// (register cap) and 8 steps at a time (no gain).
constexpr int kSkinnyWarps = 16;
constexpr int kSkinnyCols = 16;   // output columns per block: two n8 tiles
constexpr int kSkinnyUnroll = 4;  // steps of 32 k per warp whose loads are issued together
constexpr int kSkinnyTiles = 1;   // one m16 tile: M <= 16

template <typename T>
__global__ void __launch_bounds__(kSkinnyWarps * 32) linear_skinny_kernel(const LinearSkinny p) {
#if YIRAGE_SM80_DEVICE
  __shared__ float part[kSkinnyWarps][kSkinnyTiles * 16][kSkinnyCols + 1];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t n0 = int64_t(blockIdx.x) * kSkinnyCols;
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  const int64_t steps = (p.k + 31) / 32;

  // This lane's weight rows (n0 + g, n0 + 8 + g) and x rows (16 mt + g, 16 mt + 8 + g), at k = 8t.
  const T* wrow[2];
  bool wok[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
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

  float acc[kSkinnyTiles][2][4];
#pragma unroll
  for (int mt = 0; mt < kSkinnyTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.f;
    }
  }

  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int64_t s0 = warp; s0 < steps; s0 += kSkinnyWarps * kSkinnyUnroll) {
    uint4 wv[kSkinnyUnroll][2];
    uint4 xv[kSkinnyUnroll][kSkinnyTiles][2];
#pragma unroll
    for (int u = 0; u < kSkinnyUnroll; ++u) {
      const int64_t s = s0 + int64_t(u) * kSkinnyWarps;
      const int64_t k = s * 32;
      const bool kok = s < steps && k + 8 * t < p.k;  // K is a multiple of 8: a 16-byte chunk is all in or out
#pragma unroll
      for (int j = 0; j < 2; ++j) {
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
        for (int j = 0; j < 2; ++j) {
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
    for (int j = 0; j < 2; ++j) {
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

template <typename T>
cudaError_t linear_skinny_run(const LinearSkinny& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.n + kSkinnyCols - 1) / kSkinnyCols));
  linear_skinny_kernel<T><<<grid, kSkinnyWarps * 32, 0, stream>>>(p);
  return launch_status();
}

}  // namespace

bool linear_skinny_ok(const LinearSkinny& p) {
  static_assert(kLinearSkinnyMaxRows <= 16 * kSkinnyTiles, "the kernel holds kSkinnyTiles m16 tiles");
  return (p.dtype == DType::f16 || p.dtype == DType::bf16) && p.m >= 1 && p.m <= kLinearSkinnyMaxRows &&
         p.n >= 1 && (p.n + kSkinnyCols - 1) / kSkinnyCols <= 0x7fffffff && p.k >= 1 && p.k % 8 == 0 &&
         (p.m == 1 || p.ldx % 8 == 0) && (p.n == 1 || p.ldw % 8 == 0) && aligned(p.x, 16) && aligned(p.w, 16);
}

cudaError_t linear_skinny(const LinearSkinny& p, cudaStream_t stream) {
  if (!linear_skinny_ok(p)) return cudaErrorInvalidValue;
  if (p.dtype == DType::bf16) return linear_skinny_run<bf16>(p, stream);
  return linear_skinny_run<f16>(p, stream);
}

}  // namespace yirage::kernels::cuda

#endif  // YIRAGE_HIP
