// Tuning harness of the CUDA attention forward (not part of the library; attention_tune.sh drives it): one
// configuration of attention_fwd.cu, given by -D macros, checked against a
// naive fp32 reference and timed. Usage: attention_tune B Hq Hk Sq Sk causal splits(0=auto) iters
// Timing: back-to-back calls (the mean; K / V that fit the L2 are read from it), or with FLUSH=1 in the environment
// the median of calls each after a read of a 256 MiB buffer (the L2 cold, as the benchmark times the op). With FLUSH=1:
// NOMERGE=1 times the split kernel alone (partial rows written, never merged), READREF=1 a plain read of as many
// bytes as K and V; a build with -DYIRAGE_ATTN_TIMELINE=1 also prints, for four flushed calls, each block's start,
// first tile, key loop, epilogue and merge times from the kernel's global-timer stamps.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "tune_common.cuh"
#include "../../csrc/kernels/cuda/attention_fwd.cu"
using namespace yirage::kernels::cuda;
int64_t yirage::kernels::cuda::attention_backward_smem(int64_t) { return 0; }
#ifndef CFG_D
#define CFG_D 128
#define CFG_WM 4
#define CFG_MT 2
#define CFG_WN 1
#define CFG_BN 64
#define CFG_ST 2
#endif
using Cfg = FwdConfig<CFG_D, CFG_WM, CFG_MT, CFG_WN, CFG_BN, CFG_ST>;

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

int main(int argc, char** argv) {
  int B = atoi(argv[1]), Hq = atoi(argv[2]), Hk = atoi(argv[3]), Sq = atoi(argv[4]), Sk = atoi(argv[5]);
  bool causal = atoi(argv[6]); int splits = atoi(argv[7]); int iters = atoi(argv[8]);
  const int D = CFG_D;
  int64_t nq = (int64_t)B * Hq * Sq * D, nk = (int64_t)B * Hk * Sk * D;
  bf16 *q, *k, *v, *o; float *lse, *so = nullptr, *sl = nullptr;
  CK(cudaMalloc(&q, nq * 2)); CK(cudaMalloc(&k, nk * 2)); CK(cudaMalloc(&v, nk * 2)); CK(cudaMalloc(&o, nq * 2));
  CK(cudaMalloc(&lse, (int64_t)B * Hq * Sq * 4));
  fill<<<1024, 256>>>(q, nq, 1); fill<<<1024, 256>>>(k, nk, 2); fill<<<1024, 256>>>(v, nk, 3);
  AttentionForward a;
  a.shape = {B, Hq, Hk, Sq, Sk, D, 1.f / sqrtf((float)D), causal, DType::bf16};
  a.q = {q, (int64_t)Hq * Sq * D, (int64_t)Sq * D, D}; a.k = {k, (int64_t)Hk * Sk * D, (int64_t)Sk * D, D}; a.v = {v, (int64_t)Hk * Sk * D, (int64_t)Sk * D, D};
  a.out = o; a.lse = lse;
  int dev_sms; CK(cudaDeviceGetAttribute(&dev_sms, cudaDevAttrMultiProcessorCount, 0));
  a.num_splits = splits > 0 ? splits : attention_forward_splits(a.shape, dev_sms);
  if (a.num_splits > 1) { CK(cudaMalloc(&so, (int64_t)a.num_splits * B * Hq * Sq * D * 4)); CK(cudaMalloc(&sl, (int64_t)a.num_splits * B * Hq * Sq * 4)); a.split_out = so; a.split_lse = sl; }
  // FUSED=0: the separate combine kernel; MEMSET=1: the counters zeroed before every call (else once)
  const bool fused = !getenv("FUSED") || atoi(getenv("FUSED")) != 0, memset_each = getenv("MEMSET") && atoi(getenv("MEMSET")) != 0;
  unsigned* cnt = nullptr; const int64_t ncnt = (int64_t)B * Hq * Sq;
  if (a.num_splits > 1 && fused) { CK(cudaMalloc(&cnt, ncnt * 4)); CK(cudaMemset(cnt, 0, ncnt * 4)); a.split_count = cnt; }
  auto launch = [&]() { if (memset_each && cnt) cudaMemsetAsync(cnt, 0, ncnt * 4, 0); return launch_forward<bf16, Cfg>(a, 0); };
  CK(launch()); CK(cudaDeviceSynchronize());
  double err = 0; bool checked = false;
  if ((int64_t)B * Hq * Sq <= 65536 && Sk <= 8192) {
    float* r; CK(cudaMalloc(&r, nq * 4));
    ref<<<dim3(Sq, Hq, B), 128, (Sk + 1) * 4>>>(q, k, v, r, Hq, Hk, Sq, Sk, D, a.shape.scale, causal);
    CK(cudaDeviceSynchronize());
    std::vector<float> hr(nq); std::vector<bf16> ho(nq);
    CK(cudaMemcpy(hr.data(), r, nq * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(ho.data(), o, nq * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < nq; ++i) err = fmax(err, fabs(hr[i] - __bfloat162float(ho[i])));
    checked = true; cudaFree(r);
  }
  const bool flushed = getenv("FLUSH") && atoi(getenv("FLUSH")) != 0;
  // NOMERGE=1 (with FLUSH): the kernel alone writing its splits, no merge at all (what the merge costs);
  // READREF=1 (with FLUSH): a plain read of as many bytes as K and V (what a read of that size costs)
  const bool nomerge = getenv("NOMERGE") && atoi(getenv("NOMERGE")) != 0;
  const bool readref = getenv("READREF") && atoi(getenv("READREF")) != 0;
  auto launch_nomerge = [&]() {
    FwdParams fp = forward_params(a);
    fp.num_splits = a.num_splits; fp.split_out = so; fp.split_lse = sl; fp.split_count = nullptr; fp.batch_offset = 0;
    const dim3 grid((fp.rows + Cfg::kBlockM - 1) / Cfg::kBlockM, Hk, B * a.num_splits);
    flash_attention_fwd_kernel<bf16, Cfg><<<grid, Cfg::kThreads, Cfg::kSmem>>>(fp);
    return cudaGetLastError();
  };
  float ms;
  if (flushed) {
    char* fb; CK(cudaMalloc(&fb, size_t(256) << 20)); CK(cudaMemset(fb, 0, size_t(256) << 20));
    if (readref) {
      char* rb; CK(cudaMalloc(&rb, 2 * nk * 2)); CK(cudaMemset(rb, 0, 2 * nk * 2));
      ms = median_us([&] { flush_read_kernel<<<dev_sms * 4, 512>>>(reinterpret_cast<const int4*>(rb), 2 * nk * 2 / 16, reinterpret_cast<int*>(fb)); }, iters, fb) / 1000.f;
      cudaFree(rb);
    } else if (nomerge) {
      ms = median_us([&] { CK(launch_nomerge()); }, iters, fb) / 1000.f;
    } else {
      ms = median_us([&] { CK(launch()); }, iters, fb) / 1000.f;
    }
    cudaFree(fb);
  } else {
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int i = 0; i < 3; ++i) CK(launch());
    cudaEventRecord(e0);
    for (int i = 0; i < iters; ++i) launch();
    cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
    cudaEventElapsedTime(&ms, e0, e1); ms /= iters;
  }
#if YIRAGE_ATTN_TIMELINE
  if (flushed) {  // per-block stamps of a few flushed calls: start, first tile landed, loop done, split written, merged
    const dim3 grid((forward_params(a).rows + Cfg::kBlockM - 1) / Cfg::kBlockM, Hk, B * a.num_splits);
    const int64_t nb = int64_t(grid.x) * grid.y * grid.z;
    unsigned long long* tl; CK(cudaMalloc(&tl, nb * 5 * 8));
    CK(cudaMemcpyToSymbol(g_attn_timeline, &tl, sizeof(tl)));
    char* fb; CK(cudaMalloc(&fb, size_t(256) << 20)); CK(cudaMemset(fb, 0, size_t(256) << 20));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int rep = 0; rep < 4; ++rep) {
      CK(cudaMemset(tl, 0, nb * 5 * 8));
      flush_l2(fb);
      cudaEventRecord(e0); CK(launch()); cudaEventRecord(e1); CK(cudaEventSynchronize(e1));
      float ev; cudaEventElapsedTime(&ev, e0, e1);
      std::vector<unsigned long long> h(nb * 5); CK(cudaMemcpy(h.data(), tl, nb * 5 * 8, cudaMemcpyDeviceToHost));
      unsigned long long t0 = ~0ull, tend = 0; std::vector<double> st, first, loop, epi, ends, merge;
      for (int64_t i = 0; i < nb; ++i) t0 = std::min(t0, h[i * 5]);
      for (int64_t i = 0; i < nb; ++i) {
        const unsigned long long* r = &h[i * 5];
        st.push_back((r[0] - t0) / 1e3); first.push_back((r[1] - r[0]) / 1e3); loop.push_back((r[2] - r[1]) / 1e3);
        const unsigned long long fin = r[4] ? r[4] : (r[3] ? r[3] : r[2]);
        if (r[3]) epi.push_back((r[3] - r[2]) / 1e3);
        ends.push_back((fin - t0) / 1e3); tend = std::max(tend, fin);
        if (r[4]) merge.push_back((r[4] - r[3]) / 1e3);
      }
      auto q = [](std::vector<double> v, double f) { if (v.empty()) return -1.0; std::sort(v.begin(), v.end()); return v[size_t(f * (v.size() - 1))]; };
      printf("timeline rep%d: event %.1f us, span %.1f | start max %.2f | first tile med %.2f max %.2f | loop min %.1f med %.1f max %.1f | epilogue med %.2f | end min %.1f med %.1f max %.1f | merge med %.2f max %.2f (%zu)\n",
             rep, ev * 1e3, (tend - t0) / 1e3, q(st, 1), q(first, .5), q(first, 1), q(loop, 0), q(loop, .5), q(loop, 1), q(epi, .5), q(ends, 0), q(ends, .5), q(ends, 1), q(merge, .5), q(merge, 1), merge.size());
    }
    unsigned long long* nul = nullptr; CK(cudaMemcpyToSymbol(g_attn_timeline, &nul, sizeof(nul)));
  }
#endif
  double flops = 4.0 * B * Hq * (double)Sq * Sk * D * (causal ? 0.5 : 1.0);
  double kv_bytes = 2.0 * nk * 2;
  printf("%s%s%s%s cfg D%d WM%d MT%d WN%d BN%d ST%d smem %d | B%d Hq%d Hk%d Sq%d Sk%d causal%d splits%d | %.4f ms %.1f TFLOP/s %.0f GB/s(kv) | maxerr %s %.2e\n",
         flushed ? "flushed " : "", readref ? "READREF " : nomerge ? "NOMERGE " : "", cnt ? "fused" : "combine", memset_each ? "+memset" : "", CFG_D, CFG_WM, CFG_MT, CFG_WN, CFG_BN, CFG_ST, Cfg::kSmem, B, Hq, Hk, Sq, Sk, (int)causal, a.num_splits, ms,
         flops / ms / 1e9, kv_bytes / ms / 1e6, checked ? "" : "(unchecked)", err);
  return 0;
}
