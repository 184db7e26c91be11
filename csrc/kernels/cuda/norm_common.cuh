// Pieces shared by the normalization kernels (rms_norm.cu, rms_norm_bwd.cu, layer_norm.cu,
// layer_norm_bwd.cu), torch-free.
//
// - Row groups: a row is handled by `tpr` threads (a power of two, 1 .. 512) of a block that holds
//   blockDim.x / tpr rows. group_sum() reduces K values over the group: xor shuffles inside the warp
//   (groups never straddle a warp when tpr <= warp size), then, when a row spans several warps, one
//   value per warp through shared memory. Every thread of the block must call it (it has barriers when
//   tpr > warp size), so row loops are block-uniform and out-of-range rows are masked, never skipped.
// - block_sum_k(): the same for a whole block (one row per block, the long-row paths).
// - Weight / bias gradients: every block writes one accumulation-type row of partial sums to a workspace
//   ([partials, cols]); colsum_kernel() then reduces it column-wise in a fixed order (deterministic, no
//   atomics).
#pragma once

#include <cstdint>

#include "common.cuh"

namespace yirage::kernels::cuda::norm {

// Sum of K values over a group of `tpr` consecutive threads (power of two); every thread of the group
// gets the sums. `smem` holds blockDim.x / kWarpSize * K values (only used when tpr > kWarpSize).
template <int K, typename A>
__device__ __forceinline__ void group_sum(A (&v)[K], int tpr, A* smem) {
  const int width = tpr < kWarpSize ? tpr : kWarpSize;
  for (int m = width / 2; m > 0; m /= 2) {
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] += shfl_xor(v[k], m);
  }
  if (tpr > kWarpSize) {
    const int wpr = tpr / kWarpSize;              // warps per row
    const int warp = threadIdx.x / kWarpSize;     // warp in the block
    const int first = warp / wpr * wpr;           // first warp of this row
    if (threadIdx.x % kWarpSize == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) smem[warp * K + k] = v[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = A(0);
    for (int w = 0; w < wpr; ++w) {
#pragma unroll
      for (int k = 0; k < K; ++k) v[k] += smem[(first + w) * K + k];
    }
    __syncthreads();
  }
}

// Writes this block's partial row of one parameter gradient (acc[NV][V] per thread) into `ws`, merging
// the block's row groups in shared memory (`merge`: cols floats), in group order, when it holds several rows
// (rpb > 1: it has barriers, and the caller syncs before reusing `merge`). Called by the whole block.
template <int NV, int V>
__device__ __forceinline__ void write_partial(const float (&acc)[NV][V], float* ws, float* merge, int64_t cols,
                                                 int64_t nvec, int tpr, int rpb, int lane, int sub) {
  if (rpb == 1) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t j = int64_t(k) * tpr + lane;
      if (j < nvec) {
#pragma unroll
        for (int e = 0; e < V; e += 4) {
          Vec<float, 4> q;
#pragma unroll
          for (int u = 0; u < 4; ++u) q.v[u] = acc[k][e + u];
          store_vec<float, 4>(ws + j * V + e, q);
        }
      }
    }
    return;
  }
  for (int r = 0; r < rpb; ++r) {
    if (sub == r) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int64_t j = int64_t(k) * tpr + lane;
        if (j < nvec) {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            float* m = merge + j * V + e;
            *m = r == 0 ? acc[k][e] : *m + acc[k][e];
          }
        }
      }
    }
    __syncthreads();
  }
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) ws[i] = merge[i];
}

// Sum of K values over the whole block; every thread gets the sums. `smem`: 1024 / kWarpSize * K values.
template <int K, typename A>
__device__ __forceinline__ void block_sum_k(A (&v)[K], A* smem) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = warp_sum(v[k]);
  if (warps == 1) return;
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) smem[warp * K + k] = v[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = A(0);
  for (int w = 0; w < warps; ++w) {
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] += smem[w * K + k];
  }
  __syncthreads();
}

// out[c] = sum over r of part[r * cols + c], in row order per thread slice and a fixed slice order.
// Block (32, 16): threadIdx.x picks the column, threadIdx.y a slice of the partial rows.
constexpr int kColsumX = 32, kColsumY = 16;

template <typename T, typename A>
__global__ void __launch_bounds__(kColsumX * kColsumY)
    colsum_kernel(const A* __restrict__ part, int64_t parts, int64_t cols, T* __restrict__ out) {
  __shared__ A smem[kColsumY][kColsumX];
  const int64_t c = int64_t(blockIdx.x) * kColsumX + threadIdx.x;
  A s = 0;
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < parts; r += kColsumY) s += part[r * cols + c];
  }
  smem[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    A t = 0;
#pragma unroll
    for (int y = 0; y < kColsumY; ++y) t += smem[y][threadIdx.x];
    out[c] = from_acc<T>(t);
  }
}

template <typename T, typename A>
inline cudaError_t colsum(const A* part, int64_t parts, int64_t cols, T* out, cudaStream_t stream) {
  const int64_t blocks = (cols + kColsumX - 1) / kColsumX;
  colsum_kernel<T, A><<<dim3(unsigned(blocks)), dim3(kColsumX, kColsumY), 0, stream>>>(part, parts, cols, out);
  return launch_status();
}

inline int next_pow2(int64_t v) {
  int p = 1;
  while (p < v && p < (1 << 30)) p *= 2;
  return p;
}

// Streaming multiprocessors of the current device (1 if the query fails).
inline int sm_count() {
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 1;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) return 1;
  return n;
}

// Blocks of `kernel` that fit on one SM at `block` threads (at least 1).
template <typename K>
inline int blocks_per_sm(K kernel, int block, size_t smem) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, block, smem) != cudaSuccess || n <= 0) {
    (void)cudaGetLastError();  // clear the query's error so the next launch_status() is not polluted
    return 1;
  }
  return n;
}

// The register-resident path: a row of `nvec` 16-byte vectors over `tpr` threads with `nv` vectors each.
struct RowPlan {
  bool regs = false;  // false: one block per row, looping over global memory
  int nv = 0;         // vectors per thread (1, 2, 4 or 8)
  int tpr = 0;        // threads per row (power of two <= 512)
  int block = 0;      // threads per block (max(tpr, 256))
};

// Rows up to 512 * max_nv vectors (max_nv 8: 32K bf16/f16 elements, 16K fp32) stay in registers; each
// thread holds about 4 vectors (32 bf16 / 16 fp32 elements), a row gets as many threads as that needs.
// `target`: the vectors per thread aimed at (fewer for kernels with more registers per element).
inline RowPlan plan_rows(int64_t nvec, int max_nv = 8, int target = 4) {
  RowPlan r;
  if (nvec <= 0 || nvec > int64_t(512) * max_nv) return r;
  int tpr = next_pow2((nvec + target - 1) / target);
  if (tpr > 512) tpr = 512;
  const int64_t need = (nvec + tpr - 1) / tpr;
  r.nv = need <= 1 ? 1 : need <= 2 ? 2 : need <= 4 ? 4 : 8;
  r.tpr = tpr;
  r.block = tpr > 256 ? tpr : 256;
  r.regs = true;
  return r;
}

// Threads per block of the long-row (global memory) path for `units` accesses per row.
inline int general_block(int64_t units) {
  int t = kWarpSize;
  while (t < 1024 && int64_t(t) * 4 < units) t *= 2;
  return t;
}

constexpr int64_t kMaxGrid = 0x7fffffff;

}  // namespace yirage::kernels::cuda::norm
