// Tuning harness of the Hopper attention forward (not part of the library): the wgmma kernel of
// attention_fwd_sm90.cuh against the sm_80-class prefill kernel on the same inputs, both checked against a naive
// fp32 reference and timed back to back. Build for sm_90a (USAGE_GUIDE.md). Usage: attention_sm90_tune D B Hq Hk
// Sq Sk causal iters [variants to run, bits: fa2 1, sm90 2, var 4; default 7]
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "../../csrc/kernels/cuda/attention_fwd.cu"
using namespace yirage::kernels::cuda;
// `sm90`: the shipped configuration for the case (Sm90Prefill and sm90_short_tiles in attention_fwd.cu); `var`: the one -DVAR_BN=... -DVAR_STAGES=...
// -DVAR_OVERLAP=0|1 -DVAR_WG=2|3 (consumer warpgroups) -DVAR_TMA=0|1 (K/V by the tensor memory accelerator) pick for
// D = 64 and 128 (defaults: the shipped one's key tile and stages, overlap on, two warpgroups, cp.async); for
// D = 256 -DVAR_TMA, -DVAR256_BN and -DVAR256_OVERLAP.
template <int D, bool kCausal> using Ship = typename Sm90Prefill<D, kCausal>::type;  // one per mask for D = 128
template <int D> using Sm90Cfg = Ship<D, false>;  // the variants' defaults
#ifndef VAR_BN
#define VAR_BN Sm90Cfg<D>::kBlockN
#endif
#ifndef VAR_STAGES
#define VAR_STAGES Sm90Cfg<D>::kStages
#endif
#ifndef VAR_OVERLAP
#define VAR_OVERLAP 1
#endif
#ifndef VAR_WG
#define VAR_WG 2
#endif
#ifndef VAR_TMA
#define VAR_TMA 0
#endif
template <int D> struct Var { using type = Sm90FwdConfig<D, VAR_BN, VAR_STAGES, VAR_OVERLAP, VAR_WG, VAR_TMA>; };
#ifndef VAR256_BN
#define VAR256_BN Sm90Cfg<256>::kBlockN
#endif
#ifndef VAR256_OVERLAP
#define VAR256_OVERLAP Sm90Cfg<256>::kOverlap
#endif
template <> struct Var<256> {  // for D = 256: the TMA choice, -DVAR256_BN=64|80 and -DVAR256_OVERLAP=0|1
  using type = Sm90FwdConfig<256, VAR256_BN, Sm90Cfg<256>::kStages, VAR256_OVERLAP, 2, VAR_TMA>;
};
template <int D> using VarCfg = typename Var<D>::type;
int64_t yirage::kernels::cuda::attention_backward_smem(int64_t) { return 0; }
#define CK(...) do { cudaError_t e_ = (__VA_ARGS__); if (e_ != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)

__global__ void fill(bf16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65535.f - 0.5f) * 2.f);
  }
}
// one block per (b, hq, i): naive reference in fp32
__global__ void ref(const bf16* q, const bf16* k, const bf16* v, float* out, int Hq, int Hk, int Sq, int Sk, int D, float scale, bool causal) {
  extern __shared__ float sc[];
  int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, hk = h / (Hq / Hk);
  const bf16* qr = q + (((int64_t)b * Hq + h) * Sq + i) * D;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < Sk; j += blockDim.x) {
    const bf16* kr = k + (((int64_t)b * Hk + hk) * Sk + j) * D;
    float s = 0; for (int d = 0; d < D; ++d) s += __bfloat162float(qr[d]) * __bfloat162float(kr[d]);
    s *= scale; if (causal && j > i + Sk - Sq) s = -INFINITY; sc[j] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) { for (int j = 0; j < Sk; ++j) mx = fmaxf(mx, sc[j]); float l = 0; for (int j = 0; j < Sk; ++j) { sc[j] = mx == -INFINITY ? 0.f : expf(sc[j] - mx); l += sc[j]; } sc[Sk] = l; }
  __syncthreads();
  float l = sc[Sk];
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0; for (int j = 0; j < Sk; ++j) o += sc[j] * __bfloat162float(v[(((int64_t)b * Hk + hk) * Sk + j) * D + d]);
    out[(((int64_t)b * Hq + h) * Sq + i) * D + d] = l > 0 ? o / l : 0.f;
  }
}


template <int D>
int run(int B, int Hq, int Hk, int Sq, int Sk, bool causal, int iters, int mask) {
  int64_t nq = (int64_t)B * Hq * Sq * D, nk = (int64_t)B * Hk * Sk * D;
  bf16 *q, *k, *v, *o; float *lse, *lse2;
  CK(cudaMalloc(&q, nq * 2)); CK(cudaMalloc(&k, nk * 2)); CK(cudaMalloc(&v, nk * 2)); CK(cudaMalloc(&o, nq * 2));
  CK(cudaMalloc(&lse, (int64_t)B * Hq * Sq * 4)); CK(cudaMalloc(&lse2, (int64_t)B * Hq * Sq * 4));
  fill<<<1024, 256>>>(q, nq, 1); fill<<<1024, 256>>>(k, nk, 2); fill<<<1024, 256>>>(v, nk, 3);
  AttentionForward a;
  a.shape = {B, Hq, Hk, Sq, Sk, D, 1.f / sqrtf((float)D), causal, DType::bf16};
  a.q = {q, (int64_t)Hq * Sq * D, (int64_t)Sq * D, D}; a.k = {k, (int64_t)Hk * Sk * D, (int64_t)Sk * D, D}; a.v = {v, (int64_t)Hk * Sk * D, (int64_t)Sk * D, D};
  a.out = o; a.lse = lse;
  using Fa2 = typename Prefill<D>::type;
  const bool check = (int64_t)B * Hq * Sq <= 65536 && Sk <= 8192;
  float* r = nullptr;
  if (check) {
    CK(cudaMalloc(&r, nq * 4));
    ref<<<dim3(Sq, Hq, B), 128, (Sk + 1) * 4>>>(q, k, v, r, Hq, Hk, Sq, Sk, D, a.shape.scale, causal);
    CK(cudaDeviceSynchronize());
  }
  std::vector<float> hl1((int64_t)B * Hq * Sq), hl2((int64_t)B * Hq * Sq);
  const char* names[3] = {"fa2 ", "sm90", "var "};
  const bool ship_causal = D == 128 ? sm90_short_tiles(causal, Sk) : causal;  // the configuration forward_for takes
  for (int which = 0; which < 3; ++which) {
    if (!(mask >> which & 1)) continue;
    a.lse = which ? lse2 : lse;
    auto launch = [&]() {
      switch (which) {
        case 0: return launch_forward<bf16, Fa2>(a, 0);
        case 1: return ship_causal ? launch_forward_sm90<bf16, Ship<D, true>>(a, 0) : launch_forward_sm90<bf16, Ship<D, false>>(a, 0);
        default: return launch_forward_sm90<bf16, VarCfg<D>>(a, 0);
      }
    };
    CK(cudaMemset(o, 0xff, nq * 2));  // poison: NaN bf16
    CK(launch()); CK(cudaDeviceSynchronize());
    double err = 0; int64_t bad = 0;
    if (check) {
      std::vector<float> hr(nq); std::vector<bf16> ho(nq);
      CK(cudaMemcpy(hr.data(), r, nq * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(ho.data(), o, nq * 2, cudaMemcpyDeviceToHost));
      for (int64_t i = 0; i < nq; ++i) {
        const double e = fabs(hr[i] - __bfloat162float(ho[i]));
        if (!(e <= 0.02)) { if (bad < 4) printf("  %s mismatch at %lld (row %lld col %lld): ref %f got %f\n", names[which], (long long)i, (long long)(i / D), (long long)(i % D), hr[i], __bfloat162float(ho[i])); ++bad; }
        if (e > err || e != e) err = e != e ? INFINITY : e;
      }
    }
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int i = 0; i < 3; ++i) CK(launch());
    cudaEventRecord(e0);
    for (int i = 0; i < iters; ++i) launch();
    cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
    float ms; cudaEventElapsedTime(&ms, e0, e1); ms /= iters;
    double flops = 4.0 * B * Hq * (double)Sq * Sk * D * (causal ? 0.5 : 1.0);
    const int bn = which == 0 ? Fa2::kBlockN : which == 1 ? (ship_causal ? Ship<D, true>::kBlockN : Ship<D, false>::kBlockN) : VarCfg<D>::kBlockN;
    const int stages = which == 0 ? 0 : which == 1 ? (ship_causal ? Ship<D, true>::kStages : Ship<D, false>::kStages) : VarCfg<D>::kStages;
    const int overlap = which == 0 ? 0 : which == 1 ? (ship_causal ? Ship<D, true>::kOverlap : Ship<D, false>::kOverlap) : VarCfg<D>::kOverlap;
    printf("%s BN%d stages%d overlap%d D%d B%d Hq%d Hk%d Sq%d Sk%d causal%d | %.4f ms %.1f TFLOP/s | maxerr %s%.2e bad %lld\n", names[which], bn, stages, overlap, D, B, Hq, Hk, Sq, Sk,
           (int)causal, ms, flops / ms / 1e9, check ? "" : "(unchecked) ", err, (long long)bad);
    if (which > 0 && (mask & 1)) {
      CK(cudaMemcpy(hl1.data(), lse, hl1.size() * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hl2.data(), lse2, hl2.size() * 4, cudaMemcpyDeviceToHost));
      double lerr = 0;
      for (size_t i = 0; i < hl1.size(); ++i) lerr = fmax(lerr, fabs((double)hl1[i] - hl2[i]));
      printf("     lse max |fa2 - %s| %.2e\n", names[which], lerr);
    }
  }
  cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(lse); cudaFree(lse2); if (r) cudaFree(r);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 9) { printf("usage: attention_sm90_tune D B Hq Hk Sq Sk causal iters [variants: bits fa2 1, sm90 2, var 4]\n"); return 2; }
  int D = atoi(argv[1]), B = atoi(argv[2]), Hq = atoi(argv[3]), Hk = atoi(argv[4]), Sq = atoi(argv[5]), Sk = atoi(argv[6]);
  bool causal = atoi(argv[7]); int iters = atoi(argv[8]); int mask = argc > 9 ? atoi(argv[9]) : 7;
  return D == 64 ? run<64>(B, Hq, Hk, Sq, Sk, causal, iters, mask) : D == 256 ? run<256>(B, Hq, Hk, Sq, Sk, causal, iters, mask) : run<128>(B, Hq, Hk, Sq, Sk, causal, iters, mask);
}
