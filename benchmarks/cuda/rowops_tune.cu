// Tuning harness of the CUDA row kernels (not part of the library): one of softmax / log_softmax, rms_norm
// (plain or fused with the residual add), layer_norm forward, or the backward of softmax / log_softmax,
// rms_norm, layer_norm (with the weight and bias gradients), built from this tree's kernel sources, checked
// against an fp32 reference (max relative error of the output, and of the parameter gradients) and timed
// against a device-to-device copy of the same tensor (CUDA events, median, L2 flushed by a 256 MiB read
// before each repeat). "% of copy" counts ideal passes over rows x cols: 2 for a forward, 4 for the fused
// rms_norm, 3 for a backward.
//   nvcc -std=c++20 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -Icsrc \
//        -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ \
//        -D__CUDA_NO_HALF2_OPERATORS__ -DOP_SOFTMAX [-DHT=float] benchmarks/cuda/rowops_tune.cu -o rowops_tune
//   (the -D__CUDA_NO_* flags are torch's: they change register allocation). OP_SOFTMAX, OP_RMS, OP_LN,
//   OP_SM_BWD, OP_RMS_BWD, OP_LN_BWD; element type bf16 unless -DHT=float or -DHT=f16.
//   rowops_tune rows cols [flag] [iters]   flag: log_softmax for the softmax ops, the residual add for OP_RMS
//   Norm backward staging (norm_bwd_common.cuh): -DYIRAGE_NORM_BWD_STAGES=1..3 (rms_norm), -DYIRAGE_NORM_BWD_STAGES_LN.
//   The norm backwards also print their grid (the partial rows of each parameter gradient) and whether five more
//   calls reproduce the parameter gradients bit for bit ("det").
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include "tune_common.cuh"
#if defined(OP_RMS_BWD)
#include "../../csrc/kernels/cuda/rms_norm_bwd.cu"
#elif defined(OP_LN_BWD)
#include "../../csrc/kernels/cuda/layer_norm_bwd.cu"
#elif defined(OP_SM_BWD)
#include "../../csrc/kernels/cuda/softmax_bwd.cu"
#elif defined(OP_SOFTMAX)
#include "../../csrc/kernels/cuda/softmax.cu"
#elif defined(OP_RMS)
#include "../../csrc/kernels/cuda/rms_norm.cu"
#else
#include "../../csrc/kernels/cuda/layer_norm.cu"
#endif
using namespace yirage::kernels::cuda;
using yirage::kernels::DType;
#ifndef HT
#define HT bf16
#endif
using T = HT;
// the element type's DType (-DHT=float, f16 or bf16)
constexpr DType kDt = sizeof(T) == 4 ? DType::f32 : std::is_same_v<T, f16> ? DType::f16 : DType::bf16;

__global__ void fill(T* p, int64_t n, uint32_t seed, float amp) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = from_acc<T>(((h & 0xffff) / 65535.f - 0.5f) * 2.f * amp + (seed == 7 ? 1.f : 0.f));
  }
}
// reference: one block per row, fp32, returns max abs err vs y
__global__ void ref(const T* x0, const T* w, const T* b, const T* y, int64_t cols, int mode, float* err, const T* res, T* hbuf) {
  __shared__ float red[1024];
  const T* xr = x0 + blockIdx.x * cols; const T* yr = y + blockIdx.x * cols;
  if (res) {  // fused add: the reference normalizes h = round(x + residual)
    T* hr = hbuf + blockIdx.x * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) hr[j] = from_acc<T>(to_acc(xr[j]) + to_acc(res[blockIdx.x * cols + j]));
    __syncthreads();
    xr = hr;
  }
  float a = -INFINITY, s = 0, s2 = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) { float v = to_acc(xr[j]); a = fmaxf(a, v); s += v; s2 += v * v; }
  red[threadIdx.x] = a; __syncthreads();
  for (int m = blockDim.x / 2; m; m /= 2) { if (threadIdx.x < m) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + m]); __syncthreads(); }
  float mx = red[0]; __syncthreads();
  red[threadIdx.x] = s; __syncthreads();
  for (int m = blockDim.x / 2; m; m /= 2) { if (threadIdx.x < m) red[threadIdx.x] += red[threadIdx.x + m]; __syncthreads(); }
  float sum = red[0]; __syncthreads();
  red[threadIdx.x] = s2; __syncthreads();
  for (int m = blockDim.x / 2; m; m /= 2) { if (threadIdx.x < m) red[threadIdx.x] += red[threadIdx.x + m]; __syncthreads(); }
  float sum2 = red[0]; __syncthreads();
  float se = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) se += expf(to_acc(xr[j]) - mx);
  red[threadIdx.x] = se; __syncthreads();
  for (int m = blockDim.x / 2; m; m /= 2) { if (threadIdx.x < m) red[threadIdx.x] += red[threadIdx.x + m]; __syncthreads(); }
  se = red[0]; __syncthreads();
  float mean = sum / cols, var = fmaxf(sum2 / cols - mean * mean, 0.f);
  float e = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float v = to_acc(xr[j]), r;
    if (mode == 0) r = expf(v - mx) / se;
    else if (mode == 1) r = v - mx - logf(se);
    else if (mode == 2) r = v * rsqrtf(sum2 / cols + 1e-6f) * to_acc(w[j]);
    else r = (v - mean) * rsqrtf(var + 1e-5f) * to_acc(w[j]) + to_acc(b[j]);
    float d = fabsf(r - to_acc(yr[j])) / fmaxf(fabsf(r), 1e-3f);
    e = fmaxf(e, d);
  }
  red[threadIdx.x] = e; __syncthreads();
  for (int m = blockDim.x / 2; m; m /= 2) { if (threadIdx.x < m) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + m]); __syncthreads(); }
  if (threadIdx.x == 0) atomicMax((int*)err, __float_as_int(red[0]));
}

__device__ float bsum(float v, float* red) {
  red[threadIdx.x] = v; __syncthreads();
  for (int m = blockDim.x / 2; m; m /= 2) { if (threadIdx.x < m) red[threadIdx.x] += red[threadIdx.x + m]; __syncthreads(); }
  float r = red[0]; __syncthreads(); return r;
}
// backward reference: mode 4 rms, 5 ln, 6 softmax (x = forward output), 7 log_softmax; rel err of dx into err,
// per-row stats (rstd, mean) into st
__global__ void ref_bwd(const T* x, const T* g, const T* w, const T* dx, int64_t cols, int mode, float* st, float* err) {
  __shared__ float red[256];
  const T* xr = x + blockIdx.x * cols; const T* gr = g + blockIdx.x * cols; const T* dr = dx + blockIdx.x * cols;
  float s1 = 0, s2 = 0, s3 = 0, s4 = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float xv = to_acc(xr[j]), gv = to_acc(gr[j]), wv = to_acc(w[j]);
    s1 += xv; s2 += xv * xv; s3 += gv * wv * xv; s4 += gv * wv;
    if (mode == 6) s3 += gv * xv - gv * wv * xv;
    if (mode == 7) s4 += gv - gv * wv;
  }
  s1 = bsum(s1, red); s2 = bsum(s2, red); s3 = bsum(s3, red); s4 = bsum(s4, red);
  float mean = s1 / cols, rstd;
  if (mode == 4) rstd = rsqrtf(s2 / cols + 1e-6f);
  else { float var = fmaxf(s2 / cols - mean * mean, 0.f); rstd = rsqrtf(var + 1e-5f); }
  // ln: mean(g w xhat) = rstd * (s3 - mean * s4) / cols
  const float c_ln = rstd * (s3 - mean * s4) / cols, m_gw = s4 / cols;
  float e = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    float xv = to_acc(xr[j]), gv = to_acc(gr[j]), wv = to_acc(w[j]), r;
    if (mode == 4) r = gv * wv * rstd - xv * rstd * rstd * rstd * s3 / cols;
    else if (mode == 5) { float xh = (xv - mean) * rstd; r = rstd * (gv * wv - m_gw - xh * c_ln); }
    else if (mode == 6) r = xv * (gv - s3);
    else r = gv - expf(xv) * s4;
    float d = fabsf(r - to_acc(dr[j])) / fmaxf(fabsf(r), 1e-2f);
    e = fmaxf(e, d);
  }
  red[threadIdx.x] = e; __syncthreads();
  for (int m = blockDim.x / 2; m; m /= 2) { if (threadIdx.x < m) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + m]); __syncthreads(); }
  if (threadIdx.x == 0) { atomicMax((int*)err, __float_as_int(red[0])); st[2 * blockIdx.x] = rstd; st[2 * blockIdx.x + 1] = mean; }
}
// weight-gradient reference (and bias for ln), rel err into err
__global__ void ref_dw(const T* x, const T* g, const T* dw, const T* db, int64_t rows, int64_t cols, int mode, const float* st, float* err) {
  int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float a = 0, b = 0;
  for (int64_t r = 0; r < rows; ++r) {
    float xv = to_acc(x[r * cols + c]), gv = to_acc(g[r * cols + c]);
    a += gv * (mode == 4 ? xv * st[2 * r] : (xv - st[2 * r + 1]) * st[2 * r]); b += gv;
  }
  float e = fabsf(a - to_acc(dw[c])) / fmaxf(fabsf(a), 1.f);
  if (db) e = fmaxf(e, fabsf(b - to_acc(db[c])) / fmaxf(fabsf(b), 1.f));
  atomicMax((int*)err, __float_as_int(e));
}

int main(int argc, char** argv) {
  const int64_t rows = atoll(argv[1]), cols = atoll(argv[2]);
  const int log = argc > 3 ? atoi(argv[3]) : 0;
  const int iters = argc > 4 ? atoi(argv[4]) : 40;
  const int64_t n = rows * cols;
  T *x, *y, *w, *b, *g, *dw, *db; char* flush; float* err; float* st;
  [[maybe_unused]] void* ws = nullptr;
  CK(cudaMalloc(&g, n * sizeof(T))); CK(cudaMalloc(&dw, cols * sizeof(T))); CK(cudaMalloc(&db, cols * sizeof(T)));
  CK(cudaMalloc(&st, rows * 8));
  T *hout, *href; CK(cudaMalloc(&hout, n * sizeof(T))); CK(cudaMalloc(&href, n * sizeof(T)));
  CK(cudaMalloc(&x, n * sizeof(T))); CK(cudaMalloc(&y, n * sizeof(T))); CK(cudaMalloc(&w, cols * sizeof(T))); CK(cudaMalloc(&b, cols * sizeof(T)));
  CK(cudaMalloc(&flush, 256 << 20)); CK(cudaMalloc(&err, 4));
  fill<<<1024, 256>>>(x, n, 1, 4.f); fill<<<1024, 256>>>(g, n, 5, 1.f); fill<<<64, 256>>>(w, cols, 7, 0.5f); fill<<<64, 256>>>(b, cols, 3, 0.5f);
  int mode;
  [[maybe_unused]] long long plan_grid = -1;
  auto run = [&]() {
#if defined(OP_RMS_BWD)
    RmsNormBackward p; p.grad_out = g; p.grad_out_stride = cols; p.x = x; p.x_stride = cols; p.weight = w; p.grad_x = y;
    p.grad_weight = dw; p.rows = rows; p.cols = cols; p.eps = 1e-6; p.dtype = kDt; mode = 4;
    if (!ws) CK(cudaMalloc(&ws, rms_norm_backward_workspace(p) * 4));
    p.workspace = ws;
    if (plan_grid < 0) plan_grid = bwd_plan<T>(p).grid;
    CK(rms_norm_backward(p, 0));
#elif defined(OP_LN_BWD)
    LayerNormBackward p; p.grad_out = g; p.grad_out_stride = cols; p.x = x; p.x_stride = cols; p.weight = w; p.grad_x = y;
    p.grad_weight = dw; p.grad_bias = db; p.rows = rows; p.cols = cols; p.eps = 1e-5; p.dtype = kDt; mode = 5;
    if (!ws) CK(cudaMalloc(&ws, layer_norm_backward_workspace(p) * 4));
    p.workspace = ws;
    if (plan_grid < 0) { bool two; plan_grid = bwd_plan<T>(p, &two).grid; }
    CK(layer_norm_backward(p, 0));
#elif defined(OP_SM_BWD)
    SoftmaxBackward p; p.grad_out = g; p.grad_out_outer_stride = cols; p.grad_out_dim_stride = 1; p.out = x; p.out_outer_stride = cols;
    p.out_dim_stride = 1; p.grad_x = y; p.outer = rows; p.dim = cols; p.inner = 1; p.log = log;
    p.dtype = kDt; mode = log ? 7 : 6;
    CK(softmax_backward(p, 0));
#elif defined(OP_SOFTMAX)
    SoftmaxForward p; p.x = x; p.x_outer_stride = cols; p.x_dim_stride = 1; p.out = y; p.outer = rows; p.dim = cols; p.inner = 1;
    p.log = log; p.dtype = kDt; mode = log ? 1 : 0;
    CK(softmax_forward(p, 0));
#elif defined(OP_RMS)
    RmsNormForward p; p.x = x; p.x_stride = cols; p.weight = w; p.out = y;
    if (log) { p.residual = g; p.residual_stride = cols; p.residual_out = hout; } p.rows = rows; p.cols = cols; p.eps = 1e-6; p.dtype = kDt; mode = 2;
    CK(rms_norm_forward(p, 0));
#else
    LayerNormForward p; p.x = x; p.x_stride = cols; p.weight = w; p.bias = b; p.out = y; p.rows = rows; p.cols = cols; p.eps = 1e-5; p.dtype = kDt; mode = 3;
    CK(layer_norm_forward(p, 0));
#endif
  };
  auto time = [&](auto f) { return median_us(f, iters, flush); };
  CK(cudaMemset(y, 0xff, n * sizeof(T)));
  CK(cudaMemset(dw, 0xff, cols * sizeof(T))); CK(cudaMemset(db, 0xff, cols * sizeof(T)));
  run(); CK(cudaDeviceSynchronize());
  CK(cudaMemset(err, 0, 4));
  float herr, herr2 = 0;
  if (mode >= 4) {
    // softmax backward: w stands in for the forward output in the reference (x is that output; pass x as w)
    ref_bwd<<<rows, 256>>>(x, g, mode >= 6 ? x : w, y, cols, mode, st, err);
    CK(cudaMemcpy(&herr, err, 4, cudaMemcpyDeviceToHost));
    if (mode <= 5) {
      CK(cudaMemset(err, 0, 4));
      ref_dw<<<(cols + 255) / 256, 256>>>(x, g, dw, mode == 5 ? db : nullptr, rows, cols, mode, st, err);
      CK(cudaMemcpy(&herr2, err, 4, cudaMemcpyDeviceToHost));
    }
  } else {
#if defined(OP_RMS)
    ref<<<rows, 256>>>(x, w, b, y, cols, mode, err, log ? g : nullptr, href);
#else
    ref<<<rows, 256>>>(x, w, b, y, cols, mode, err, nullptr, href);
#endif
    CK(cudaMemcpy(&herr, err, 4, cudaMemcpyDeviceToHost));
  }
  [[maybe_unused]] bool det = true;
#if defined(OP_RMS_BWD) || defined(OP_LN_BWD)
  {  // the parameter gradients of five more calls, bit for bit
    std::vector<T> h0(2 * cols), h1(2 * cols);
    CK(cudaMemcpy(h0.data(), dw, cols * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h0.data() + cols, db, cols * sizeof(T), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 5; ++i) {
      CK(cudaMemset(dw, 0xff, cols * sizeof(T))); CK(cudaMemset(db, 0xff, cols * sizeof(T)));
      run();
      CK(cudaMemcpy(h1.data(), dw, cols * sizeof(T), cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(h1.data() + cols, db, cols * sizeof(T), cudaMemcpyDeviceToHost));
      det = det && memcmp(h0.data(), h1.data(), 2 * cols * sizeof(T)) == 0;
    }
  }
#endif
  const float tk = time(run);
  const float tc = time([&] { CK(cudaMemcpyAsync(y, x, n * sizeof(T), cudaMemcpyDeviceToDevice)); });
#if defined(OP_RMS)
  const float passes = log ? 4.f : 2.f;
#else
  const float passes = mode >= 4 ? 3.f : 2.f;
#endif  // ideal passes over rows x cols
  printf("%lldx%lld mode%d kernel %.1f us copy %.1f us  %.1f%% of copy  maxrel %.2e dw %.2e", (long long)rows, (long long)cols, mode, tk, tc,
         100.f * tc * passes / 2.f / tk, herr, herr2);
#if defined(OP_RMS_BWD) || defined(OP_LN_BWD)
  printf("  grid %lld det %s", plan_grid, det ? "ok" : "FAIL");
#endif
  printf("\n");
  return 0;
}
