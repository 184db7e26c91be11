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

// Median time of f() in microseconds: 5 untimed calls, then `iters` calls, each bracketed by CUDA events on the
// default stream after a memset of the 256 MiB `flush` buffer (L2 flushed, as the benchmark does).
template <typename F>
float median_us(F f, int iters, char* flush) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int i = 0; i < 5; ++i) f();
  for (int i = 0; i < iters; ++i) {
    CK(cudaMemsetAsync(flush, i, 256 << 20));
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
