// Element-wise parts of linear on CUDA.
//
// linear_epilogue: a grid-stride loop over (rows x cols) elements in units of 16-byte vectors (when cols, the
// pointers and bias allow it; single elements otherwise); fp32 math (fp64 for fp64); the activation is applied
// to the unrounded z + bias. Memory-bound: one read of z, one write of out (and of pre).
// linear_act_grad: blocks of 32 x 8 threads; a block owns 32 columns and a contiguous range of rows (the rows
// are split so that the grid has about 2048 blocks); each thread walks its column down every 8th row of the
// range, writing dz and summing it; the 8 partial sums of a column meet in shared memory and the block writes
// one partial per column (no atomics: deterministic). Limits: any rows/cols (grid.x over column groups up to
// 2^31 - 1, grid.y <= 65535 row splits).
#include "common.cuh"
#include "linear_act.cuh"
#include "linear_epilogue.h"

namespace yirage::kernels::cuda {
namespace {

template <typename T, int V>
__global__ void linear_epilogue_kernel(const LinearEpilogue p) {
  using A = acc_t<T>;
  const int64_t units = p.rows * p.cols / V;
  const int64_t cunits = p.cols / V;
  const T* z = static_cast<const T*>(p.z);
  const T* bias = static_cast<const T*>(p.bias);
  T* pre = static_cast<T*>(p.pre);
  T* out = static_cast<T*>(p.out);
  for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = (u % cunits) * V;
    const Vec<T, V> zv = load_vec<T, V>(z + u * V);
    A v[V];
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = to_acc(zv.v[j]);
    if (bias != nullptr) {
      const Vec<T, V> bv = load_vec<T, V>(bias + col);
#pragma unroll
      for (int j = 0; j < V; ++j) v[j] += to_acc(bv.v[j]);
    }
    if (pre != nullptr) {
      Vec<T, V> pv;
#pragma unroll
      for (int j = 0; j < V; ++j) pv.v[j] = from_acc<T>(v[j]);
      store_vec<T, V>(pre + u * V, pv);
    }
    Vec<T, V> ov;
#pragma unroll
    for (int j = 0; j < V; ++j) ov.v[j] = from_acc<T>(linear_act(p.act, v[j]));
    store_vec<T, V>(out + u * V, ov);
  }
}

template <typename T>
cudaError_t linear_epilogue_run(const LinearEpilogue& p, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const int64_t n = p.rows * p.cols;
  if (n == 0) return cudaSuccess;
  const bool vec = p.cols % V == 0 && aligned(p.z, 16) && aligned(p.out, 16) &&
                   (p.pre == nullptr || aligned(p.pre, 16)) && (p.bias == nullptr || aligned(p.bias, 16));
  constexpr int threads = 256;
  const int64_t units = vec ? n / V : n;
  int64_t blocks = (units + threads - 1) / threads;
  if (blocks > (int64_t(1) << 20)) blocks = int64_t(1) << 20;
  const dim3 grid(static_cast<unsigned>(blocks));
  if (vec) { linear_epilogue_kernel<T, V><<<grid, threads, 0, stream>>>(p); }
  else { linear_epilogue_kernel<T, 1><<<grid, threads, 0, stream>>>(p); }
  return launch_status();
}

constexpr int kGradCols = 32, kGradRows = 8;

template <typename T>
__global__ void __launch_bounds__(kGradCols * kGradRows) linear_act_grad_kernel(const LinearActGrad p,
                                                                                int64_t rows_per_split) {
  using A = acc_t<T>;
  __shared__ A part[kGradRows][kGradCols + 1];
  const int tx = threadIdx.x % kGradCols, ty = threadIdx.x / kGradCols;
  const int64_t col = int64_t(blockIdx.x) * kGradCols + tx;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_split;
  const int64_t r1 = min(r0 + rows_per_split, p.rows);
  const T* g = static_cast<const T*>(p.grad_out);
  const T* s = static_cast<const T*>(p.saved);
  T* dz = static_cast<T*>(p.grad_pre);
  A sum = A(0);
  if (col < p.cols) {
    for (int64_t r = r0 + ty; r < r1; r += kGradRows) {
      A d = to_acc(g[r * p.grad_stride + col]);
      if (p.act != Activation::none) d *= linear_act_grad_of(p.act, A(to_acc(s[r * p.saved_stride + col])));
      if (dz != nullptr) {
        const T dr = from_acc<T>(d);
        dz[r * p.cols + col] = dr;
      }
      sum += d;
    }
  }
  if (p.bias_partial == nullptr) return;  // uniform over the block: no barrier is skipped by some threads only
  part[ty][tx] = sum;
  __syncthreads();
  if (ty == 0 && col < p.cols) {
    A t = A(0);
#pragma unroll
    for (int i = 0; i < kGradRows; ++i) t += part[i][tx];
    static_cast<A*>(p.bias_partial)[int64_t(blockIdx.y) * p.cols + col] = t;
  }
}

int64_t linear_act_grad_rows_per_split(int64_t rows, int64_t cols) {
  const int64_t col_blocks = (cols + kGradCols - 1) / kGradCols;
  int64_t splits = 2048 / (col_blocks > 0 ? col_blocks : 1);
  const int64_t max_splits = (rows + 63) / 64;  // at least 64 rows a block
  if (splits > max_splits) splits = max_splits;
  if (splits > 65535) splits = 65535;
  if (splits < 1) splits = 1;
  return (rows + splits - 1) / splits;
}

template <typename T>
cudaError_t linear_act_grad_run(const LinearActGrad& p, cudaStream_t stream) {
  const int64_t per = linear_act_grad_rows_per_split(p.rows, p.cols);
  const int64_t splits = (p.rows + per - 1) / per;
  const dim3 grid(static_cast<unsigned>((p.cols + kGradCols - 1) / kGradCols), static_cast<unsigned>(splits));
  linear_act_grad_kernel<T><<<grid, kGradCols * kGradRows, 0, stream>>>(p, per);
  return launch_status();
}

}  // namespace

cudaError_t linear_epilogue(const LinearEpilogue& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return linear_epilogue_run<T>(p, stream));
  return cudaErrorInvalidValue;
}

int64_t linear_act_grad_splits(int64_t rows, int64_t cols) {
  if (rows <= 0) return 0;
  const int64_t per = linear_act_grad_rows_per_split(rows, cols);
  return (rows + per - 1) / per;
}

cudaError_t linear_act_grad(const LinearActGrad& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  if (p.act != Activation::none && p.saved == nullptr) return cudaErrorInvalidValue;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return linear_act_grad_run<T>(p, stream));
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
