// Harness of the Hopper attention backward (not part of the library): the library's forward and backward entry
// points built into one binary (for sm_90a); on the same random bf16 inputs the backward runs with the mma.sync
// dK/dV kernel (attention_bwd_kernel.cuh, the wide tile) and with the wgmma one (attention_bwd_sm90.cuh, or
// attention_bwd_sm90_d256.cuh for D = 256, with the dQ kernel of attention_bwd_dq_sm90.cuh where the launcher takes
// it); their grad_q / grad_k / grad_v are compared element by element (max
// difference over max magnitude, and elements off by more than 1% of the max magnitude: `bad`), then both are
// timed (median of `iters` calls).
// Build (on a GPU machine): nvcc -std=c++20 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a
//   -I../../csrc/kernels/cuda attention_bwd_sm90_tune.cu -o attention_bwd_sm90_tune
// Usage: attention_bwd_sm90_tune D B Hq Hk Sq Sk causal iters [variants: bits mma.sync 1, sm90 2; default 3: both,
// compared]. TUNE_TRACE=1 in the environment: each stage's name on stderr as it starts (where a run stops).
#include <algorithm>
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

static std::vector<float> host(const bf16* d, int64_t n) {
  std::vector<bf16> h(n);
  CK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (int64_t i = 0; i < n; ++i) f[i] = __bfloat162float(h[i]);
  return f;
}

static bool compare(const char* name, const std::vector<float>& ref, const std::vector<float>& got) {
  double mx = 0, diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) mx = std::max(mx, (double)fabs(ref[i]));
  int64_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = fabs((double)ref[i] - got[i]);
    if (!(e <= 0.01 * mx)) ++bad;
    if (e > diff || e != e) diff = e != e ? INFINITY : e;
  }
  printf(" %s rel %.1e bad %lld", name, mx > 0 ? diff / mx : diff, (long long)bad);
  return bad == 0;
}

template <int D>
int run(int B, int Hq, int Hk, int Sq, int Sk, bool causal, int iters, int mask) {
  const bool trace = getenv("TUNE_TRACE") != nullptr;
  auto stage = [&](const char* what) { if (trace) fprintf(stderr, "[%s] ", what); };
  const int64_t nq = (int64_t)B * Hq * Sq * D, nk = (int64_t)B * Hk * Sk * D, rows = (int64_t)B * Hq * Sq;
  bf16 *q, *k, *v, *o, *go, *gq, *gk, *gv; float *lse, *dqa, *delta;
  CK(cudaMalloc(&q, nq * 2)); CK(cudaMalloc(&k, nk * 2)); CK(cudaMalloc(&v, nk * 2)); CK(cudaMalloc(&o, nq * 2));
  CK(cudaMalloc(&go, nq * 2)); CK(cudaMalloc(&gq, nq * 2)); CK(cudaMalloc(&gk, nk * 2)); CK(cudaMalloc(&gv, nk * 2));
  CK(cudaMalloc(&lse, rows * 4)); CK(cudaMalloc(&dqa, nq * 4)); CK(cudaMalloc(&delta, rows * 4));
  fill<<<1024, 256>>>(q, nq, 1); fill<<<1024, 256>>>(k, nk, 2); fill<<<1024, 256>>>(v, nk, 3); fill<<<1024, 256>>>(go, nq, 4);
  AttentionShape sh{B, Hq, Hk, Sq, Sk, D, 1.f / sqrtf((float)D), causal, DType::bf16};
  const AttentionOperand Q{q, (int64_t)Hq * Sq * D, (int64_t)Sq * D, D}, K{k, (int64_t)Hk * Sk * D, (int64_t)Sk * D, D},
      V{v, (int64_t)Hk * Sk * D, (int64_t)Sk * D, D}, O{o, (int64_t)Hq * Sq * D, (int64_t)Sq * D, D},
      GO{go, (int64_t)Hq * Sq * D, (int64_t)Sq * D, D};
  AttentionForward f;
  f.shape = sh; f.q = Q; f.k = K; f.v = V; f.out = o; f.lse = lse; f.num_splits = 1;
  stage("forward");
  CK(attention_forward(f, 0));
  CK(cudaDeviceSynchronize());  // (untimed) a forward that never ends stops the trace at [forward]
  AttentionBackward b;
  b.shape = sh; b.q = Q; b.k = K; b.v = V; b.out = O; b.grad_out = GO; b.lse = lse;
  b.grad_q = gq; b.grad_k = gk; b.grad_v = gv; b.dq_accum = dqa; b.delta = delta;
  using Wide = typename BwdConfig<D>::wide;
  auto launch = [&](bool sm90) { return sm90 ? bwd_launch<bf16, D, Wide, true>(b, 0) : bwd_launch<bf16, D, Wide, false>(b, 0); };
  std::vector<float> ref[3];
  bool ok = true;
  float ms[2] = {NAN, NAN};
  for (int which = 0; which < 2; ++which) {
    if (!(mask & (1 << which))) continue;
    stage(which ? "sm90" : "mma.sync");
    CK(cudaMemset(gq, 0xff, nq * 2)); CK(cudaMemset(gk, 0xff, nk * 2)); CK(cudaMemset(gv, 0xff, nk * 2));  // NaN
    CK(launch(which == 1)); CK(cudaDeviceSynchronize());
    std::vector<float> got[3] = {host(gq, nq), host(gk, nk), host(gv, nk)};
    if (which == 0) {
      for (int i = 0; i < 3; ++i) ref[i] = got[i];
    } else if (mask & 1) {
      printf("D%d B%d Hq%d Hk%d Sq%d Sk%d causal%d | sm90 vs mma.sync:", D, B, Hq, Hk, Sq, Sk, (int)causal);
      ok &= compare("dq", ref[0], got[0]); ok &= compare("dk", ref[1], got[1]); ok &= compare("dv", ref[2], got[2]);
    }
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    stage("timing");
    for (int i = 0; i < 2; ++i) CK(launch(which == 1));
    std::vector<float> t(iters);
    for (int i = 0; i < iters; ++i) {
      cudaEventRecord(e0); launch(which == 1); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
      cudaEventElapsedTime(&t[i], e0, e1);
    }
    std::sort(t.begin(), t.end());
    ms[which] = t[iters / 2];
  }
  const double flops = 2.5 * 4.0 * B * Hq * (double)Sq * Sk * D * (causal ? 0.5 : 1.0);
  printf(" | mma.sync %.3f ms %.1f TFLOP/s, sm90 %.3f ms %.1f TFLOP/s%s\n", ms[0], flops / ms[0] / 1e9, ms[1],
         flops / ms[1] / 1e9, ok ? "" : "  MISMATCH");
  cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(go); cudaFree(gq); cudaFree(gk); cudaFree(gv);
  cudaFree(lse); cudaFree(dqa); cudaFree(delta);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc < 9) {
    printf("usage: attention_bwd_sm90_tune D B Hq Hk Sq Sk causal iters [variants: mma.sync 1, sm90 2]\n");
    return 2;
  }
  const int D = atoi(argv[1]), B = atoi(argv[2]), Hq = atoi(argv[3]), Hk = atoi(argv[4]), Sq = atoi(argv[5]), Sk = atoi(argv[6]);
  const bool causal = atoi(argv[7]); const int iters = atoi(argv[8]), mask = argc > 9 ? atoi(argv[9]) : 3;
  return D == 64 ? run<64>(B, Hq, Hk, Sq, Sk, causal, iters, mask)
                 : D == 128 ? run<128>(B, Hq, Hk, Sq, Sk, causal, iters, mask)
                            : run<256>(B, Hq, Hk, Sq, Sk, causal, iters, mask);
}
