// Host helpers of the row and activation tuning harnesses (rowops_tune.cu, activation_tune.cu): the CUDA error
// check and the timing loop.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CK(...)                                                          \
  do {                                                                   \
    cudaError_t e_ = (__VA_ARGS__);                                      \
    if (e_ != cudaSuccess) {                                             \
      printf("CUDA error %s at %d\n", cudaGetErrorString(e_), __LINE__); \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

// Reads the 256 MiB `flush` buffer (each thread sums 16-byte words; a sum that is never 1 keeps the reads), leaving
// the L2 cold and clean, as the benchmark's flush_l2 does since 2026-11-27 (a memset left dirty lines that the timed
// call then wrote back: 4-9 us a call on an H200).
__global__ void flush_read_kernel(const int4* p, int64_t n, int* sink) {
  int acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 1) *sink = acc;
}
inline void flush_l2(char* flush) {
  flush_read_kernel<<<1024, 512>>>(reinterpret_cast<const int4*>(flush), (int64_t(256) << 20) / 16,
                                   reinterpret_cast<int*>(flush));
}

// Median time of f() in microseconds: 5 untimed calls, then `iters` calls, each bracketed by CUDA events on the
// default stream after a read of the 256 MiB `flush` buffer (L2 flushed, as the benchmark does; YIRAGE_FLUSH_MEMSET
// defined: a memset, as before 2026-11-27).
template <typename F>
float median_us(F f, int iters, char* flush) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int i = 0; i < 5; ++i) f();
  for (int i = 0; i < iters; ++i) {
#ifdef YIRAGE_FLUSH_MEMSET
    CK(cudaMemsetAsync(flush, i, 256 << 20));
#else
    flush_l2(flush);
#endif
    CK(cudaEventRecord(e0));
    f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.f);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
