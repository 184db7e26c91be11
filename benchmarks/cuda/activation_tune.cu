// Timing harness of the CUDA activation forward (not part of the library): silu_and_mul / gelu_and_mul (gated) or
// silu / gelu, built from this tree's activation.cu, checked against an fp32 reference (max relative error,
// floored at 1e-2 in the denominator) and timed against a device-to-device copy of the same bytes (CUDA events,
// median, L2 flushed by a 256 MiB read before each repeat, tune_common.cuh).
//   nvcc -std=c++20 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -Icsrc \
//        -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ \
//        -D__CUDA_NO_HALF2_OPERATORS__ [-DHT=float|f16] benchmarks/cuda/activation_tune.cu -o activation_tune
//   activation_tune rows cols gated(0|1) silu|gelu [iters] [bwd]   (element type bf16 unless -DHT=...)
// bwd: the non-gated backward (gelu only) instead, grad_x = grad_out * gelu'(x), timed against a copy of its bytes
// (x and grad_out read, grad_x written).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include "tune_common.cuh"
#include "kernels/cuda/activation.cu"
using namespace yirage::kernels::cuda;
using yirage::kernels::DType; using yirage::kernels::Activation;
#ifndef HT
#define HT bf16
#endif
using T = HT;
constexpr DType kDt = sizeof(T) == 4 ? DType::f32 : std::is_same_v<T, f16> ? DType::f16 : DType::bf16;
__global__ void fill(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = from_acc<T>(((h & 0xffff) / 65535.f - 0.5f) * 8.f);
  }
}
__global__ void ref(const T* x, const T* y, int64_t rows, int64_t cols, int gated, int silu, float* err) {
  float e = 0;
  const int64_t xs = gated ? 2 * cols : cols;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * cols;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / cols, c = i % cols;
    float a = to_acc(x[r * xs + c]);
    float f = silu ? a / (1.f + expf(-a)) : 0.5f * a * erfcf(-a * 0.70710678f);
    if (gated) f *= to_acc(x[r * xs + cols + c]);
    e = fmaxf(e, fabsf(f - to_acc(y[i])) / fmaxf(fabsf(f), 1e-2f));
  }
  atomicMax((int*)err, __float_as_int(e));
}
__global__ void ref_bwd(const T* x, const T* g, const T* dx, int64_t n, float* err) {
  float e = 0;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float a = to_acc(x[i]);
    const float d = 0.5f * erfcf(-a * 0.70710678f) + a * expf(-0.5f * a * a) * 0.3989422804f;
    const float f = to_acc(g[i]) * d;
    e = fmaxf(e, fabsf(f - to_acc(dx[i])) / fmaxf(fabsf(f), 1e-2f));
  }
  atomicMax((int*)err, __float_as_int(e));
}
int bwd_main(int64_t rows, int64_t cols, int iters) {
  const int64_t n = rows * cols;
  T *x, *g, *dx, *big; char* flush; float* err;
  CK(cudaMalloc(&x, n * sizeof(T))); CK(cudaMalloc(&g, n * sizeof(T))); CK(cudaMalloc(&dx, n * sizeof(T)));
  CK(cudaMalloc(&big, 3 * n * sizeof(T))); CK(cudaMalloc(&flush, 256 << 20)); CK(cudaMalloc(&err, 4));
  fill<<<1024, 256>>>(x, n, 1); fill<<<1024, 256>>>(g, n, 2);
  ActivationBackward p; p.grad_out = g; p.grad_out_stride = cols; p.x = x; p.x_stride = cols; p.grad_x = dx;
  p.rows = rows; p.cols = cols; p.act = Activation::gelu; p.gated = false; p.dtype = kDt;
  auto run = [&] { CK(activation_backward(p, 0)); };
  CK(cudaMemset(dx, 0xff, n * sizeof(T))); run(); CK(cudaDeviceSynchronize());
  CK(cudaMemset(err, 0, 4)); ref_bwd<<<1024, 256>>>(x, g, dx, n, err);
  float herr; CK(cudaMemcpy(&herr, err, 4, cudaMemcpyDeviceToHost));
  const float tk = median_us(run, iters, flush);
  const int64_t half = 3 * n / 2;
  const float tc = median_us([&] { CK(cudaMemcpyAsync(big + half, big, half * sizeof(T), cudaMemcpyDeviceToDevice)); },
                             iters, flush);
  printf("%lldx%lld gelu_bwd kernel %.1f us copy %.1f us %.1f%% of copy maxrel %.2e\n", (long long)rows,
         (long long)cols, tk, tc, 100.f * tc / tk, herr);
  return 0;
}
int main(int argc, char** argv) {
  const int64_t rows = atoll(argv[1]), cols = atoll(argv[2]);
  const int gated = atoi(argv[3]); const int silu = strcmp(argv[4], "silu") == 0;
  const int iters = argc > 5 ? atoi(argv[5]) : 50;
  if (argc > 6 && strcmp(argv[6], "bwd") == 0) return bwd_main(rows, cols, iters);
  const int64_t nx = rows * cols * (gated ? 2 : 1), ny = rows * cols;
  T *x, *y; char* flush; float* err;
  CK(cudaMalloc(&x, nx * sizeof(T)));
  CK(cudaMalloc(&y, ny * sizeof(T)));
  CK(cudaMalloc(&flush, 256 << 20));
  CK(cudaMalloc(&err, 4));
  T* big; CK(cudaMalloc(&big, (nx + ny) * sizeof(T)));
  fill<<<1024, 256>>>(x, nx, 1);
  ActivationForward p; p.x = x; p.x_stride = gated ? 2 * cols : cols; p.out = y; p.rows = rows; p.cols = cols;
  p.act = silu ? Activation::silu : Activation::gelu; p.gated = gated; p.dtype = kDt;
  auto run = [&] { CK(activation_forward(p, 0)); };
  auto time = [&](auto f) { return median_us(f, iters, flush); };
  CK(cudaMemset(y, 0xff, ny * sizeof(T))); run(); CK(cudaDeviceSynchronize());
  CK(cudaMemset(err, 0, 4)); ref<<<1024, 256>>>(x, y, rows, cols, gated, silu, err);
  float herr; CK(cudaMemcpy(&herr, err, 4, cudaMemcpyDeviceToHost));
  const float tk = time(run);
  // copy of the same bytes: (nx + ny) / 2 elements read and written
  const int64_t half = (nx + ny) / 2;
  const float tc =
      time([&] { CK(cudaMemcpyAsync(big + half, big, half * sizeof(T), cudaMemcpyDeviceToDevice)); });
  printf("%lldx%lld gated%d %s kernel %.1f us copy %.1f us %.1f%% of copy maxrel %.2e\n", (long long)rows,
         (long long)cols, gated, argv[4], tk, tc, 100.f * tc / tk, herr);
}
