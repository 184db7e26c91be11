// Tuning harness of the CUDA attention backward (not part of the library): the library's forward and backward
// entry points built into one binary (variants of the backward kernels are chosen by -D macros at build time),
// run on random bf16 inputs; prints checksums of grad_q / grad_k / grad_v (to compare variants: grad_k and
// grad_v are deterministic, grad_q up to the order of its fp32 atomics) and the backward's time.
// Usage: attention_bwd_tune B Hq Hk S D causal iters
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "../../csrc/kernels/cuda/attention_fwd.cu"
#include "../../csrc/kernels/cuda/attention_bwd.cu"
using namespace yirage::kernels::cuda;
#define CK(...) do { cudaError_t e_ = (__VA_ARGS__); if (e_ != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)

__global__ void fill(bf16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65535.f - 0.5f) * 2.f);
  }
}

static void sums(const char* name, const bf16* d, int64_t n) {
  std::vector<bf16> h(n);
  CK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
  double s = 0, a = 0;
  for (int64_t i = 0; i < n; ++i) { const double x = __bfloat162float(h[i]); s += x; a += fabs(x); }
  printf(" %s sum %.6e abs %.6e", name, s, a);
}

int main(int argc, char** argv) {
  if (argc < 8) { printf("usage: attention_bwd_tune B Hq Hk S D causal iters\n"); return 2; }
  const int B = atoi(argv[1]), Hq = atoi(argv[2]), Hk = atoi(argv[3]), S = atoi(argv[4]), D = atoi(argv[5]);
  const bool causal = atoi(argv[6]); const int iters = atoi(argv[7]);
  const int64_t nq = (int64_t)B * Hq * S * D, nk = (int64_t)B * Hk * S * D, rows = (int64_t)B * Hq * S;
  bf16 *q, *k, *v, *o, *go, *gq, *gk, *gv; float *lse, *dqa, *delta;
  CK(cudaMalloc(&q, nq * 2)); CK(cudaMalloc(&k, nk * 2)); CK(cudaMalloc(&v, nk * 2)); CK(cudaMalloc(&o, nq * 2));
  CK(cudaMalloc(&go, nq * 2)); CK(cudaMalloc(&gq, nq * 2)); CK(cudaMalloc(&gk, nk * 2)); CK(cudaMalloc(&gv, nk * 2));
  CK(cudaMalloc(&lse, rows * 4)); CK(cudaMalloc(&dqa, nq * 4)); CK(cudaMalloc(&delta, rows * 4));
  fill<<<1024, 256>>>(q, nq, 1); fill<<<1024, 256>>>(k, nk, 2); fill<<<1024, 256>>>(v, nk, 3); fill<<<1024, 256>>>(go, nq, 4);
  AttentionShape sh{B, Hq, Hk, S, S, D, 1.f / sqrtf((float)D), causal, DType::bf16};
  const AttentionOperand Q{q, (int64_t)Hq * S * D, (int64_t)S * D, D}, K{k, (int64_t)Hk * S * D, (int64_t)S * D, D},
      V{v, (int64_t)Hk * S * D, (int64_t)S * D, D}, O{o, (int64_t)Hq * S * D, (int64_t)S * D, D},
      GO{go, (int64_t)Hq * S * D, (int64_t)S * D, D};
  AttentionForward f;
  f.shape = sh; f.q = Q; f.k = K; f.v = V; f.out = o; f.lse = lse; f.num_splits = 1;
  CK(attention_forward(f, 0));
  AttentionBackward b;
  b.shape = sh; b.q = Q; b.k = K; b.v = V; b.out = O; b.grad_out = GO; b.lse = lse;
  b.grad_q = gq; b.grad_k = gk; b.grad_v = gv; b.dq_accum = dqa; b.delta = delta;
  CK(attention_backward(b, 0)); CK(cudaDeviceSynchronize());
  printf("B%d Hq%d Hk%d S%d D%d causal%d |", B, Hq, Hk, S, D, (int)causal);
  sums("dq", gq, nq); sums("dk", gk, nk); sums("dv", gv, nk);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 2; ++i) CK(attention_backward(b, 0));
  std::vector<float> t(iters);
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(e0); attention_backward(b, 0); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
    cudaEventElapsedTime(&t[i], e0, e1);
  }
  std::sort(t.begin(), t.end());
  const float ms = t[iters / 2];
  const double flops = 2.5 * 4.0 * B * Hq * (double)S * S * D * (causal ? 0.5 : 1.0);
  printf(" | bwd %.3f ms (min %.3f) %.1f TFLOP/s\n", ms, t[0], flops / ms / 1e9);
  return 0;
}
