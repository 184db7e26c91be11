// Timing harness of the skinny GEMM of linear (not part of the library): out (M, N) = act(x (M, K) @ w (N, K)^T +
// bias) for up to 16 rows of x, the kernel of linear_skinny.cu in its three launch shapes (SkinnyNarrowN,
// SkinnyMidN, SkinnyWideN) and a fourth one from -DVAR_WARPS / -DVAR_NJ / -DVAR_UNROLL, each checked against an
// fp32 reference and timed against cuBLAS (the product alone, no bias or activation), a kernel that only reads the
// weight (16-byte streaming loads: the roof of this product) and a device-to-device copy of it (CUDA events, median,
// L2 flushed by a 256 MiB read before each repeat; all of them in turns, `rounds` times). "shipped" is the
// library's choice.
//   nvcc -std=c++20 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -Icsrc \
//        -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ \
//        -D__CUDA_NO_HALF2_OPERATORS__ [-DVAR_WARPS=8 -DVAR_NJ=2 -DVAR_UNROLL=4] \
//        benchmarks/cuda/linear_skinny_tune.cu -lcublas -o linear_skinny_tune
//   linear_skinny_tune M N K [iters [rounds]]   (bf16, bias, erf gelu)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "tune_common.cuh"
#if __has_include(<cublas_v2.h>)
#include <cublas_v2.h>
#define HAVE_CUBLAS 1
#else
#define HAVE_CUBLAS 0  // (a toolkit without cuBLAS: its column reads 0)
#endif
#include "kernels/cuda/linear_skinny.cu"
using namespace yirage::kernels::cuda;
using yirage::kernels::Activation;
using yirage::kernels::DType;
using T = bf16;
#ifndef VAR_WARPS
#define VAR_WARPS 8
#endif
#ifndef VAR_NJ
#define VAR_NJ 2
#endif
#ifndef VAR_UNROLL
#define VAR_UNROLL 4
#endif
using Var = SkinnyConfig<VAR_WARPS, VAR_NJ, VAR_UNROLL>;

// Reads n 16-byte units once (streaming loads), as the product reads its weight.
__global__ void read_only(const uint4* p, int64_t n, unsigned* sink) {
  unsigned s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    s ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (s == 0x12345679u) *sink = s;
}

__global__ void fill(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995;
    h ^= h >> 15;
    p[i] = from_acc<T>(((h & 0xffff) / 65535.f - 0.5f) * 2.f);
  }
}

// Naive fp32 reference; the largest relative error of out (floored at 1e-2 in the denominator).
__global__ void check(const T* x, const T* w, const T* b, const T* out, int64_t m, int64_t n, int64_t k, float* err) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= m * n) return;
  const int64_t r = i / n, c = i % n;
  float z = to_acc(b[c]);
  for (int64_t q = 0; q < k; ++q) z += to_acc(x[r * k + q]) * to_acc(w[c * k + q]);
  const float f = 0.5f * z * (1.f + erff(z * 0.70710678f));
  const float e = fabsf(f - to_acc(out[i])) / fmaxf(fabsf(f), 1e-2f);
  atomicMax(reinterpret_cast<int*>(err), __float_as_int(e));
}

int main(int argc, char** argv) {
  if (argc < 4) {
    printf("usage: %s M N K [iters [rounds]]\n", argv[0]);
    return 1;
  }
  const int64_t m = atoll(argv[1]), n = atoll(argv[2]), k = atoll(argv[3]);
  const int iters = argc > 4 ? atoi(argv[4]) : 50, rounds = argc > 5 ? atoi(argv[5]) : 3;
  T *x, *w, *b, *out, *wcopy;
  char* flush;
  float* err;
  unsigned* sink;
  CK(cudaMalloc(&x, m * k * sizeof(T)));
  CK(cudaMalloc(&w, n * k * sizeof(T)));
  CK(cudaMalloc(&wcopy, n * k * sizeof(T)));
  CK(cudaMalloc(&b, n * sizeof(T)));
  CK(cudaMalloc(&out, m * n * sizeof(T)));
  CK(cudaMalloc(&flush, 256 << 20));
  CK(cudaMalloc(&err, sizeof(float)));
  CK(cudaMalloc(&sink, sizeof(unsigned)));
  fill<<<1024, 256>>>(x, m * k, 1);
  fill<<<1024, 256>>>(w, n * k, 2);
  fill<<<64, 256>>>(b, n, 3);
  LinearSkinny p;
  p.x = x;
  p.ldx = k;
  p.w = w;
  p.ldw = k;
  p.bias = b;
  p.out = out;
  p.m = m;
  p.n = n;
  p.k = k;
  p.act = Activation::gelu;
  p.dtype = DType::bf16;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (m > 16) {
    printf("M must be at most 16\n");
    return 1;
  }
  auto shipped = [&] { CK(linear_skinny(p, 0)); };
  auto narrow = [&] { CK((linear_skinny_launch<T, SkinnyNarrowN>(p, 0))); };
  auto mid = [&] { CK((linear_skinny_launch<T, SkinnyMidN>(p, 0))); };
  auto wide = [&] { CK((linear_skinny_launch<T, SkinnyWideN>(p, 0))); };
  auto var = [&] { CK((linear_skinny_launch<T, Var>(p, 0))); };
  const int64_t units = n * k * int64_t(sizeof(T)) / 16;
#if HAVE_CUBLAS
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  T* cout_;
  CK(cudaMalloc(&cout_, m * n * sizeof(T)));
  const float one = 1.f, zero = 0.f;
  auto cublas = [&] {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &one, w, CUDA_R_16BF, int(k), x, CUDA_R_16BF,
                 int(k), &zero, cout_, CUDA_R_16BF, int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
#else
  auto cublas = [&] {};
#endif
  auto reader = [&] { read_only<<<sms * 4, 512>>>(reinterpret_cast<const uint4*>(w), units, sink); };
  auto copier = [&] { CK(cudaMemcpyAsync(wcopy, w, n * k * sizeof(T), cudaMemcpyDeviceToDevice)); };
  const char* names[4] = {"narrow", "mid", "wide", "var"};
  for (int v = 0; v < 4; ++v) {
    CK(cudaMemset(out, 0, m * n * sizeof(T)));
    CK(cudaMemset(err, 0, sizeof(float)));
    v == 0 ? narrow() : v == 1 ? mid() : v == 2 ? wide() : var();
    check<<<unsigned((m * n + 255) / 256), 256>>>(x, w, b, out, m, n, k, err);
    float e;
    CK(cudaMemcpy(&e, err, sizeof(float), cudaMemcpyDeviceToHost));
    printf("%s: max rel err %.2e%s\n", names[v], e, e > 2e-2f ? "  FAIL" : "");
  }
  const double wbytes = double(n) * k * sizeof(T);
  printf("M %lld N %lld K %lld (%d SMs), var = %d warps, %d columns, %d steps; weight %.1f MB\n", (long long)m,
         (long long)n, (long long)k, sms, VAR_WARPS, 8 * VAR_NJ, VAR_UNROLL, wbytes / 1e6);
  for (int r = 0; r < rounds; ++r) {
    const float ts = median_us(shipped, iters, flush), tn = median_us(narrow, iters, flush);
    const float tm = median_us(mid, iters, flush), tw = median_us(wide, iters, flush);
    const float tv = median_us(var, iters, flush);
    const float tb = HAVE_CUBLAS ? median_us(cublas, iters, flush) : 0.f;
    const float tr = median_us(reader, iters, flush), tc = median_us(copier, iters, flush);
    printf("round %d: shipped %.2f  narrow %.2f  mid %.2f  wide %.2f  var %.2f  cublas(no act) %.2f  read %.2f  "
           "copy %.2f us; shipped at %.0f%% of read\n", r, ts, tn, tm, tw, tv, tb, tr, tc, 100.f * tr / ts);
  }
  return 0;
}
