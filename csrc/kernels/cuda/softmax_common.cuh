// Pieces shared by the softmax / log_softmax forward (softmax.cu) and backward (softmax_bwd.cu) kernels,
// torch-free: exp and log in the accumulation type, the reductions over lane groups, the block sizes, the
// plan that picks a row kernel (warp-level or block-level registers, or global) and the column kernel's
// block shape.
#pragma once

#include <cstdint>

#include "common.cuh"

// Tuning builds: YIRAGE_SOFTMAX_EXP_FTZ 0 takes __expf (row_exp).
#ifndef YIRAGE_SOFTMAX_EXP_FTZ
#define YIRAGE_SOFTMAX_EXP_FTZ 1
#endif

namespace yirage::kernels::cuda::softmax {

__device__ __forceinline__ float sm_exp(float v) { return expf(v); }
__device__ __forceinline__ double sm_exp(double v) { return exp(v); }
__device__ __forceinline__ float sm_log(float v) { return logf(v); }
__device__ __forceinline__ double sm_log(double v) { return log(v); }
// exp for the register kernels of element type T: fp16 / bf16 rows use the hardware exp2 (about 2 ulp of fp32 plus
// |v| * 2^-23 relative, far below their rounding; bf16 log_softmax 16384x4096 on an H100 ran 9% faster than with
// expf), with results below 2^-126 flushed to zero (exp2_ftz: __expf's range check and rescale around the ex2, a
// compare and two predicated multiplies an element in Nsight Compute's counts of the bf16 softmax, of 23; a bf16
// result that small, under 1.2e-38, becomes 0 instead of a subnormal; H200, kernel alone: softmax and log_softmax forwards 1.02-1.08x at every shape, bf16 4096x8192 36.0 ->
// 34.7 us; cuda-norm-bwd-issue-h200-2026-11-27.md); fp32 and fp64 the precise one. kFtz false: __expf (the
// log_softmax backward, where the flushing exp measured 0.96-1.03x).
template <typename T, bool kFtz = true, typename A>
__device__ __forceinline__ A row_exp(A v) {
  if constexpr (sizeof(T) == 2) {
    return kFtz && YIRAGE_SOFTMAX_EXP_FTZ ? exp2_ftz(v * 1.4426950408889634f) : __expf(v);
  } else {
    return sm_exp(v);
  }
}

// log of a row's sum s (>= 1: the max element adds 1) for the register kernels of element type T: fp16 / bf16 rows
// take the hardware log2 (__logf: 3 ulp of fp32) where s >= 2, so that log(s) >= 0.69 and the error is far below
// their rounding; below 2 (a dominant element, whose output -log(s) lies near 0 and needs absolute accuracy:
// __logf's is 2^-21.4 there) and for fp32 / fp64 the precise one. s is the row's: the branch is uniform. bf16
// log_softmax on an H200, kernel alone: 65536x1024 73.5 -> 72.5 us, 16384x4096 74.9 -> 74.1, 32768x512 23.7 -> 23.1,
// 4096x8192 level (__logf without the branch: 72.1, 73.5, 22.9; cuda-log-softmax-log-h200-2026-11-26.md).
template <typename T, typename A>
__device__ __forceinline__ A row_log(A s) {
  if constexpr (sizeof(T) == 2) {
    return s >= A(2) ? __logf(s) : sm_log(s);
  } else {
    return sm_log(s);
  }
}

// Reductions over groups of `lanes` (a power of two <= the warp) consecutive lanes; every lane of the warp
// must call them.
template <typename A>
__device__ __forceinline__ A group_max(A v, int lanes) {
  for (int m = lanes >> 1; m > 0; m >>= 1) v = max(v, shfl_xor(v, m));
  return v;
}
template <typename A>
__device__ __forceinline__ A group_sum(A v, int lanes) {
  for (int m = lanes >> 1; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}

constexpr int kRegThreads = 512;     // block-level register kernel: at most this many threads
constexpr int kWarpRowThreads = 256;  // warp-level register kernel: threads per block
constexpr int kGlobalThreads = 1024;  // global kernel
constexpr int kColThreads = 256;      // column kernel

inline int softmax_pow2_ceil(int64_t n, int cap) {
  int v = 1;
  while (v < cap && v < n) v *= 2;
  return v;
}

// Register kernels for every dtype but fp64 (fp64 is for gradcheck: the global kernel serves it).
template <typename T>
constexpr bool kSoftmaxRegisters = sizeof(T) < 8;

// How a row of nvec vectors is handled: the register kernels (lanes per row or a whole block, vectors per
// thread) or the global kernel.
struct RowPlan {
  enum Kind { warp, block, global } kind = global;
  int n = 0;        // vectors per thread (register kernels)
  int lanes = 0;    // lanes per row (warp kernel)
  int threads = 0;  // block size
};

// Vectors per thread. A row of at most 32 * kWarpMaxN vectors belongs to lanes of one warp; a longer row to a
// block whose threads hold 2 vectors each (up to 512 threads), then 4 or 8 for rows too long for that. Few
// vectors per thread and few registers (about 32: the whole SM's threads resident) measured fastest on an H100
// (bf16 softmax kernel alone, 16384x4096: 8 vectors per thread with 96 registers 72% of the copy bandwidth, 2
// vectors 93%; 65536x1024: 32 lanes x 4 vectors 87%, 64 threads x 2 vectors 99%).
constexpr int kWarpMaxN = 2;
constexpr int kBlockMinN = 2;
constexpr int kMaxN = 8;     // forward: vectors per thread at most (x: 32 registers)
constexpr int kMaxNBwd = 4;  // backward: the same registers for g and out

// The forward's fewest vectors per thread of the block kernel: 4 for rows of 1024 vectors (8192 fp16 / bf16, 4096
// fp32 elements: 256 threads, and the single (max, sum) exchange of 4-vector rows) where 2 gave 512 threads and two
// reductions. H200, kernel alone, rounds in the order 2, 4, 4, 2 (us): bf16 4096x8192 34.5 -> 34.1, 2048x8192 19.3
// -> 19.0, 8192x8192 67.0 -> 66.4; fp16 4096x8192 37.9 -> 33.8; fp32 4096x4096 33.7 -> 32.5, 2048x4096 18.7 ->
// 18.0, log_softmax 8192x4096 66.3 -> 65.1; level at fp32 16384x4096 (129.2 / 129.3) and fp16 log_softmax
// 2048x8192. Shorter rows keep 2: bf16 16384x4096 and 65536x1024 ran 0.3-0.5% slower with 4 a thread
// (benchmarks/results/cuda-softmax-plan-h200-2026-11-28.md). The backward keeps kBlockMinN.
constexpr int64_t kFwdWideRowVecs = 1024;
inline int softmax_fwd_min_n(int64_t nvec) { return nvec >= kFwdWideRowVecs ? 4 : kBlockMinN; }

inline RowPlan softmax_row_plan(int64_t nvec, bool registers, int max_n, int min_n = kBlockMinN) {
  RowPlan r;
  if (!registers) {
    r.threads = kGlobalThreads;
    return r;
  }
  if (nvec <= int64_t(kWarpSize) * kWarpMaxN) {
    r.kind = RowPlan::warp;
    r.n = 1;
    while (int64_t(r.n) * kWarpSize < nvec) r.n *= 2;
    r.lanes = softmax_pow2_ceil((nvec + r.n - 1) / r.n, kWarpSize);
    r.threads = kWarpRowThreads;
    return r;
  }
  for (int n = min_n; n <= max_n; n *= 2) {
    const int64_t threads = ((nvec + n - 1) / n + kWarpSize - 1) / kWarpSize * kWarpSize;
    if (threads <= kRegThreads) {
      r.kind = RowPlan::block;
      r.n = n;
      r.threads = int(threads);
      return r;
    }
  }
  r.threads = kGlobalThreads;
  return r;
}

// Blocks for `rows` rows under plan r; 0 when over the grid limit.
inline unsigned softmax_row_blocks(int64_t rows, const RowPlan& r) {
  const int64_t per = r.kind == RowPlan::warp ? r.threads / r.lanes : 1;
  const int64_t b = (rows + per - 1) / per;
  return b > 0x7fffffff ? 0u : unsigned(b);
}

// The column kernel's block shape (bx inner indices x by splits of the dim, bx * by <= kColThreads) and
// the tiles of bx per outer index.
struct ColPlan {
  dim3 block;
  int64_t tiles = 0;
  unsigned blocks = 0;
};

inline ColPlan softmax_col_plan(int64_t outer, int64_t dim, int64_t inner) {
  const int bx0 = softmax_pow2_ceil(inner, kWarpSize);
  const int by = softmax_pow2_ceil(dim, kColThreads / bx0);
  const int bx = softmax_pow2_ceil(inner, kColThreads / by);
  ColPlan c;
  c.block = dim3(unsigned(bx), unsigned(by));
  c.tiles = (inner + bx - 1) / bx;
  const int64_t blocks = outer * c.tiles;
  c.blocks = blocks > 0x7fffffff ? 0u : unsigned(blocks);
  return c;
}

}  // namespace yirage::kernels::cuda::softmax
