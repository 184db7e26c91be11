// Device pieces of the normalization backwards (rms_norm_bwd.cu, layer_norm_bwd.cu), torch-free; the pieces the
// forwards share with them are in norm_common.cuh, the launch plan in norm_bwd_plan.cuh.
//
// - Weight / bias gradients: every block writes one accumulation-type row of partial sums to a workspace
//   ([partials, cols]); colsum_kernel() then reduces it column-wise in a fixed order (deterministic, no
//   atomics), both gradients of layer_norm in one launch. The register paths merge a block's row groups with
//   write_partial(); the long-row paths keep their partial rows in registers where a row allows
//   (general_acc_vectors).
// - The register paths' rows staged through shared memory with cp.async (RowStager) or loaded into registers
//   (load_row).
#pragma once

#include <cstdint>

#include "norm_common.cuh"

namespace yirage::kernels::cuda::norm {

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

// ---- Rows staged through shared memory (the backward register paths)
// A thread copies 16 bytes global -> shared with cp.async (sm_80+: the copy is in flight while the thread goes
// on, and needs no register); on HIP and older GPUs the copy is a plain load and store, complete at once.
__device__ __forceinline__ void copy16_async(void* dst, const void* src) {
#if !YIRAGE_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
               "l"(src)
               : "memory");
#else
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#endif
}
__device__ __forceinline__ void copy_commit() {
#if !YIRAGE_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// Waits until at most `pending` (0, 1 or 2) of this thread's committed groups are still in flight.
__device__ __forceinline__ void copy_wait(int pending) {
#if !YIRAGE_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (pending >= 2) asm volatile("cp.async.wait_group 2;\n" ::: "memory");
  else if (pending == 1) asm volatile("cp.async.wait_group 1;\n" ::: "memory");
  else asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

// The x and grad_out vectors of a backward's row groups (NV per thread, the register path's layout) streamed
// through `stages` (>= 1) slots of shared memory: with 2 or more the next rows' copies are in flight while
// this row is computed, without the registers a prefetch into registers costs, and each phase of the row's
// arithmetic reads its vectors from the slot again instead of holding them in registers across the
// reductions' barriers. Each thread copies and later reads only its own slots (laid out
// [slot][NV][x, g][blockDim.x], 16-byte units): no barrier is needed for them.
template <typename T, int NV>
struct RowStager {
  static constexpr int V = kVec<T>;
  Vec<T, V>* mine;   // this thread's unit of slot 0, vector 0, x
  int stages;
  uint32_t smine;    // the same unit's shared-window address (cp.async's operand), converted once
  uint32_t unit;     // bytes between the units of one thread: blockDim.x * 16

  // (The address arithmetic of the copies was recomputed for each of them, the window conversion included: the
  // staged 2-vector backward kernels are issue-bound, cuda-norm-bwd-issue-h200-2026-11-27.md.)
  __device__ __forceinline__ RowStager(Vec<T, V>* buf, int s)
      : mine(buf + threadIdx.x), stages(s), smine(0), unit(uint32_t(blockDim.x * sizeof(Vec<T, V>))) {
#if !YIRAGE_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    smine = static_cast<uint32_t>(__cvta_generic_to_shared(mine));
#endif
  }

  static constexpr size_t bytes(int stages, int block) { return size_t(stages) * NV * 2 * block * sizeof(Vec<T, V>); }

  static __device__ __forceinline__ int unit_index(int slot, int k, int which) { return (slot * NV + k) * 2 + which; }
  __device__ __forceinline__ Vec<T, V>* at(int slot, int k, int which) const {
    return mine + unit_index(slot, k, which) * blockDim.x;
  }
  // Queues the copies of one row (none when !live) as one group; nvec: the row's vectors (at most 512 * NV).
  __device__ __forceinline__ void issue(int slot, const T* x, const T* g, bool live, int nvec, int tpr,
                                        int lane) const {
    if (live) {
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = k * tpr + lane;
        if (j < nvec) {
#if !YIRAGE_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
          const uint32_t s0 = smine + uint32_t(unit_index(slot, k, 0)) * unit;
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s0), "l"(x + j * V) : "memory");
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s0 + unit), "l"(g + j * V) : "memory");
#else
          copy16_async(at(slot, k, 0), x + j * V);
          copy16_async(at(slot, k, 1), g + j * V);
#endif
        }
      }
    }
    copy_commit();
  }
  // Waits for the oldest queued row (in `slot`).
  __device__ __forceinline__ void wait() const { copy_wait(stages - 1); }
  // Vector k of the row in `slot`: x (which = 0) or grad_out (1).
  __device__ __forceinline__ Vec<T, V> get(int slot, int k, int which) const { return *at(slot, k, which); }
};

// Loads this thread's vectors of a row's x and grad_out into registers (the unstaged register paths), every load
// issued before any arithmetic (fp32 rms_norm backward at 16384x4096 on an H100: 79% -> 95% of the copy bandwidth
// against loading and reducing vector by vector).
template <typename T, int N>
__device__ __forceinline__ void load_row(Vec<T, kVec<T>> (&xr)[N], Vec<T, kVec<T>> (&gr)[N], const T* x, const T* g,
                                         bool live, int64_t nvec, int tpr, int lane) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t j = int64_t(k) * tpr + lane;
    if (live && j < nvec) {
      xr[k] = load_vec<T, kVec<T>>(x + j * kVec<T>);
      gr[k] = load_vec<T, kVec<T>>(g + j * kVec<T>);
    }
  }
}

// Whether the backward register paths stage T's rows through shared memory (fp16 / bf16). fp32 rows load
// straight into registers: staged, the bf16 rms_norm backward went from 79% to 84% of the copy bandwidth at
// 16384x4096 on an H100 and from 69% to 80% at 4096x8192, but fp32 fell from 96% to 89%.
template <typename T>
constexpr bool kStageRows = sizeof(T) == 2;

// Row slots of the backward register paths' staging (tuning builds may set 1 .. 3); fewer when they do not
// fit the device's shared memory. rms_norm: 2, the next row in flight during this one (bf16 4096x8192 on an
// H100: 69 -> 79% of the copy bandwidth; 3 slots: 77%; on an H200 1 and 3 slots were 1-16% slower than 2 at seven
// shapes, cuda-layer-norm-bwd-plan-2026-11-26.md). layer_norm: 0, its plan's choice (layer_norm_bwd.cu).
#ifndef YIRAGE_NORM_BWD_STAGES
#define YIRAGE_NORM_BWD_STAGES 2
#endif
#ifndef YIRAGE_NORM_BWD_STAGES_LN
#define YIRAGE_NORM_BWD_STAGES_LN 0
#endif

// The column sums of the weight / bias gradients' partial rows: out_g[c] = sum over r of part[(g * parts + r) * cols
// + c] for the gradients g = blockIdx.y (1 or 2, their partial rows one block after the other). Y slices of a
// block take rows y, y + Y, ... of X * W columns (W per thread: 16-byte loads where the rows allow); the slices are
// combined in a fixed order, by a tree when there are more than 16 (deterministic, no atomics).
template <typename T, typename A, int W, int X, int Y>
__global__ void __launch_bounds__(X * Y)
    colsum_kernel(const A* __restrict__ part, int64_t parts, int64_t cols, T* __restrict__ out0, T* __restrict__ out1) {
  __shared__ Vec<A, W> red[Y][X];
  pdl_wait();  // launched early (launch_dependent): the partial rows are complete from here
  const A* pg = part + int64_t(blockIdx.y) * parts * cols;
  T* out = blockIdx.y == 0 ? out0 : out1;
  const int64_t c = (int64_t(blockIdx.x) * X + threadIdx.x) * W;  // W divides cols
  Vec<A, W> s;
#pragma unroll
  for (int e = 0; e < W; ++e) s.v[e] = A(0);
  if (c < cols) {
    if constexpr (W > 1) {
#pragma unroll 4
      for (int64_t r = threadIdx.y; r < parts; r += Y) {
        const Vec<A, W> v = load_vec<A, W>(pg + r * cols + c);
#pragma unroll
        for (int e = 0; e < W; ++e) s.v[e] += v.v[e];
      }
    } else {
      for (int64_t r = threadIdx.y; r < parts; r += Y) s.v[0] += pg[r * cols + c];
    }
  }
  red[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if constexpr (Y > 16) {  // a tree over the slices
#pragma unroll
    for (int m = Y / 2; m > 0; m /= 2) {
      if (int(threadIdx.y) < m) {
#pragma unroll
        for (int e = 0; e < W; ++e) red[threadIdx.y][threadIdx.x].v[e] += red[threadIdx.y + m][threadIdx.x].v[e];
      }
      __syncthreads();
    }
  } else if (threadIdx.y == 0) {  // slice 0 adds the others in order (one barrier)
#pragma unroll
    for (int y = 1; y < Y; ++y) {
#pragma unroll
      for (int e = 0; e < W; ++e) red[0][threadIdx.x].v[e] += red[y][threadIdx.x].v[e];
    }
  }
  if (threadIdx.y == 0 && c < cols) {
#pragma unroll
    for (int e = 0; e < W; ++e) out[c + e] = from_acc<T>(red[0][threadIdx.x].v[e]);
  }
}

// Launches kernel<<<grid, block, 0, stream>>>(args...) as a programmatic dependent launch of the kernel before it
// on the stream where the device supports it (compute capability 9.0 and up; the kernel calls pdl_wait() before
// reading that kernel's results): its blocks are scheduled while that kernel's last blocks finish, instead of
// after, and its launch latency overlaps them. Elsewhere, and on ROCm, a plain launch.
template <typename... P, typename... Args>
inline cudaError_t launch_dependent(void (*kernel)(P...), dim3 grid, dim3 block, cudaStream_t stream,
                                    Args... args) {
#if !YIRAGE_HIP
  if (device_attribute(cudaDevAttrComputeCapabilityMajor, -6, 0) >= 9) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...);
  }
#endif
  kernel<<<grid, block, 0, stream>>>(static_cast<P>(args)...);
  return launch_status();
}

// Column sums of one or two gradients' partial rows (out1 null: one) in one launch. Two gradients of 16-byte rows:
// 8 threads x 16 bytes across (128-byte row segments) and 64 slices of rows, so that a 1024-column gradient still
// makes 32 blocks and a thread sums about parts / 64 rows; otherwise 32 columns x 16 slices, an element per thread.
// H200, bf16, whole backward: layer_norm 1.5-4 us faster with its two sums in one 16-byte launch (4096x8192 92.1 ->
// 90.5 us, 65536x1024 146.4 -> 142.2); rms_norm's one sum 0.5-1.5 us slower that way and with a tree over 16
// slices, so one gradient keeps the element-wise launch and its serial sum of the slices
// (benchmarks/results/cuda-norm-bwd-h200-2026-11-26.md).
// Summing the partial rows in the backward kernel itself instead (a cooperative launch, a grid barrier once the
// rows are written, then each block a share of 128-byte column tiles in a fixed order: no second launch) was slower
// at every shape on an H200, kernel alone (2026-11-27): rms_norm bf16 4096x8192 67.6-68.8 -> 72.8-73.1 us,
// 16384x4096 121.6-122.2 -> 138.8-139.8; layer_norm bf16 4096x8192 74.5-74.6 -> 76.1-76.3; fp32 level to 4 us
// slower. The in-kernel sums cost what this launch costs (its launch latency is already hidden behind the backward's
// tail), and the barrier added 1-1.5 us, 12-14 us where the grid holds four blocks per SM (rms_norm bf16 16384x4096
// and 65536x1024; benchmarks/results/cuda-norm-bwd-fused-colsum-h200-2026-11-27.md).
template <typename T, typename A>
inline cudaError_t colsum(const A* part, int64_t parts, int64_t cols, T* out0, T* out1, cudaStream_t stream) {
  constexpr int W = 16 / sizeof(A);
  const unsigned grads = out1 != nullptr ? 2 : 1;
  if (grads == 2 && cols % W == 0 && aligned(part, 16)) {
    constexpr int X = 8, Y = 64;
    const dim3 grid(unsigned((cols / W + X - 1) / X), grads);
    return launch_dependent(colsum_kernel<T, A, W, X, Y>, grid, dim3(X, Y), stream, part, parts, cols, out0, out1);
  }
  constexpr int X = 32, Y = 16;
  const dim3 grid(unsigned((cols + X - 1) / X), grads);
  return launch_dependent(colsum_kernel<T, A, 1, X, Y>, grid, dim3(X, Y), stream, part, parts, cols, out0, out1);
}

// Vectors per thread whose partial parameter-gradient sums a long-row backward over V-element vectors of
// accumulation type A keeps in registers across rows, when a row has at most that many per thread (0: never).
// fp32 rows of 16-byte vectors (up to 16K columns with 1024 threads) and rows of single elements (up to 4096): at
// most 32 accumulators for layer_norm's two gradients. Wider vectors of 16-bit types and fp64 would spill (ptxas
// 13.0, 64 registers: rms_norm bf16 268 bytes); their long rows accumulate in the workspace.
template <typename A, int V>
constexpr int general_acc_vectors() {
  return V == 1 || (V == 4 && sizeof(A) == 4) ? 4 : 0;
}

}  // namespace yirage::kernels::cuda::norm
