// RMSNorm forward on CUDA.
//
// Strategy: one block per row (grid.x = rows, up to 2^31 - 1), fp32 accumulation (fp64 for fp64). Pass 1
// sums squares, a block reduction gives rstd, pass 2 re-reads the row (from L2) and writes
// y = x * rstd * weight. 16-byte vector accesses when the row start, the row stride and the weight allow
// it; element accesses otherwise (any alignment, any row length).
#include "common.cuh"
#include "rms_norm.h"

namespace yirage::kernels::cuda {
namespace {

template <typename T, int V>
__global__ void rms_norm_fwd_kernel(RmsNormForward p) {
  using A = acc_t<T>;
  __shared__ A smem[1024 / kWarpSize];
  const int64_t row = blockIdx.x;
  const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
  T* y = static_cast<T*>(p.out) + row * p.cols;
  const T* w = static_cast<const T*>(p.weight);
  const int64_t nv = p.cols / V;
  A ss = 0;
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    const Vec<T, V> a = load_vec<T, V>(x + i * V);
#pragma unroll
    for (int j = 0; j < V; ++j) { const A f = to_acc(a.v[j]); ss += f * f; }
  }
  for (int64_t i = nv * V + threadIdx.x; i < p.cols; i += blockDim.x) { const A f = to_acc(x[i]); ss += f * f; }
  ss = block_sum(ss, smem);
  const A rstd = A(1) / sqrt(ss / A(p.cols) + A(p.eps));
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    const Vec<T, V> a = load_vec<T, V>(x + i * V);
    Vec<T, V> o;
    if (w) {
      const Vec<T, V> b = load_vec<T, V>(w + i * V);
#pragma unroll
      for (int j = 0; j < V; ++j) o.v[j] = from_acc<T>(to_acc(a.v[j]) * rstd * to_acc(b.v[j]));
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) o.v[j] = from_acc<T>(to_acc(a.v[j]) * rstd);
    }
    store_vec<T, V>(y + i * V, o);
  }
  for (int64_t i = nv * V + threadIdx.x; i < p.cols; i += blockDim.x) {
    const A f = to_acc(x[i]) * rstd;
    y[i] = from_acc<T>(w ? f * to_acc(w[i]) : f);
  }
}

template <typename T>
cudaError_t launch(const RmsNormForward& p, cudaStream_t stream) {
  constexpr int V = kVec<T>;
  const bool vec = p.cols % V == 0 && p.x_stride % V == 0 && aligned(p.x, 16) && aligned(p.out, 16) &&
                   (p.weight == nullptr || aligned(p.weight, 16));
  const int64_t units = vec ? p.cols / V : p.cols;
  int threads = kWarpSize;
  while (threads < 1024 && threads < units) threads *= 2;
  if (vec) {
    rms_norm_fwd_kernel<T, V><<<dim3(unsigned(p.rows)), threads, 0, stream>>>(p);
  } else {
    rms_norm_fwd_kernel<T, 1><<<dim3(unsigned(p.rows)), threads, 0, stream>>>(p);
  }
  return launch_status();
}

}  // namespace

cudaError_t rms_norm_forward(const RmsNormForward& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  if (p.rows > 0x7fffffff) return cudaErrorInvalidValue;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return launch<T>(p, stream));
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
