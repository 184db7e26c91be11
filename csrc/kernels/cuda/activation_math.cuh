// The activation math of the CUDA kernels (device code, torch-free): silu, gelu (erf form, with a cheaper fit
// for fp16 / bf16 results) and tanh-gelu, their derivatives, and the hardware exp2 / reciprocal they use; what
// torch computes and how close these come is in activation.cu's header. Included by activation.cu.
#pragma once

#include "activation.h"
#include "common.cuh"

namespace yirage::kernels::cuda {
namespace {

// fp32 e^v and 1/v for the activations: one ex2 (of v log2(e)) and one rcp, against expf's range reduction and an
// IEEE division's refinement and slow path (fp32 gelu was issue-bound on an H200: 0.84x torch at 83% of the copy
// bandwidth). Relative error: e^v about 2 ulp plus |v| 2^-24 from rounding v log2(e) (at most 5e-6 at |v| = 88,
// where results are far below the fp32 tests' absolute tolerance of 1e-5), 1/v 1 ulp; results below 2^-126 flush to 0.
__device__ __forceinline__ float act_exp(float v) { return exp2_ftz(v * 1.4426950408889634f); }
__device__ __forceinline__ double act_exp(double v) { return exp(v); }
__device__ __forceinline__ float act_rcp(float v) { return rcp_ftz(v); }
__device__ __forceinline__ double act_rcp(double v) { return 1.0 / v; }

// c[0] t^n + c[1] t^(n-1) + ... + c[n] by Horner (fused multiply-adds, highest degree first).
template <typename... C>
__device__ __forceinline__ float horner(float t, float top, C... rest) {
  float h = top;
  ((h = fmaf(h, t, rest)), ...);
  return h;
}

// Phi(x) = P(X <= x) for a standard normal X, and *gauss = exp(-x^2/2) (the derivative reuses it). fp32: a
// branch-free form (NormalCdfFit; the CPU kernels' until they took NormalCdfFitCpu): 1/2 + x P(x^2) for
// |x| < 1.3, exp(-x^2/2) t H(t) with t = 1 / (1 + |x| / (2 sqrt 2)) for the tails, both computed and one
// selected, about 30 instructions against erfcf's 60 (with which bf16 gelu was compute-bound: 84% of the issue
// slots at 60% of the copy bandwidth on an H100). Relative accuracy holds on the lower tail, where
// 1 + erf(x / sqrt 2) would cancel. fp64: the C library's erfc.
__device__ __forceinline__ float normal_cdf(float x, float* gauss) {
  using F = NormalCdfFit;  // the coefficients (kernels/activation.h)
  *gauss = act_exp(x * x * -0.5f);
  const float s = x * x;
  const float p = horner(s, F::p5, F::p4, F::p3, F::p2, F::p1, F::p0);
  const float near0 = fmaf(p, x, 0.5f);
  const float y = fabsf(x);
  const float t = act_rcp(fmaf(y, F::kT, 1.f));
  const float h = horner(t, F::h6, F::h5, F::h4, F::h3, F::h2, F::h1, F::h0);
  const float lower = *gauss * t * h;                 // Phi(-|x|)
  const float tail = 0.f < x ? 1.f - lower : lower;  // Phi(x)
  return y < F::kSplit ? near0 : tail;                     // NaN: tail, NaN
}
// The same for results rounded to bf16 / fp16: erfc(|x| / sqrt 2) in erfcc's form (Numerical Recipes),
// t = 1 / (1 + z / 2), erfc(z) = t exp(-z^2 + R(t)), with R a degree-5 polynomial fitted here (least squares
// reweighted toward the minimax one, on t in [0.14, 1], i.e. |x| up to 16; absolute error of R, so relative error of
// erfc, 8.7e-6), where the book's degree-9 fit reaches 1.2e-7 that neither type can hold. R's coefficients are scaled
// by log2(e) (and its constant term lowered by 1 for the factor 1/2) so the exponential is one ex2. Evaluated in fp32
// (ex2 and rcp approximate) gelu's relative error stays below 1.6e-5; rounded, it differs from the correctly rounded
// gelu at 3 of the 32222 bf16 inputs with |gelu(x)| > 1e-37 and 140 of 38780 fp16 ones, by one ulp (torch's CPU gelu
// in these types: 191 and 454). Against the degree-9 fit, bf16 gelu ran 77.5 -> 72.7 us at 16384x4096 on an H200
// (86% -> 92% of a same-size copy: the kernel is issue-bound;
// benchmarks/results/cuda-gelu-low-degree-h200-2026-11-26.md); the fp32 form above costs more still (68% of the copy
// bandwidth on an H100). Results below 2^-126 flush to zero (gelu(x) for x < -13, where torch's erf form gives 0 as
// well).
__device__ __forceinline__ float normal_cdf_low(float x, float* gauss) {
  constexpr float L = 1.4426950408889634f;  // log2(e)
  const float t = rcp_ftz(fmaf(fabsf(x), 0.35355339059327376f, 1.f));  // 1 / (1 + |x| / (2 sqrt 2))
  float r = fmaf(t, 0.22633718689549343f * L, -0.702180245157354f * L);
  r = fmaf(t, r, 0.4669288573358746f * L);
  r = fmaf(t, r, 0.25825367564192336f * L);
  r = fmaf(t, r, 1.0171286870105742f * L);
  r = fmaf(t, r, -1.2664670015193031f * L - 1.f);
  const float xl = x * (-0.5f * L);
  *gauss = exp2_ftz(xl * x);                    // exp(-x^2 / 2); dead code in the forward
  const float lower = t * exp2_ftz(fmaf(xl, x, r));  // Phi(-|x|) = erfc(|x| / sqrt 2) / 2
  return 0.f < x ? 1.f - lower : lower;         // NaN: NaN
}
__device__ __forceinline__ double normal_cdf(double x, double* gauss) {
  *gauss = exp(x * x * -0.5);
  return 0.5 * erfc(x * -0.70710678118654752440);
}
__device__ __forceinline__ float act_abs(float v) { return fabsf(v); }
__device__ __forceinline__ double act_abs(double v) { return fabs(v); }

// kLow: the result is rounded to bf16 / fp16, so gelu may use the cheaper normal_cdf_low.
template <Activation K, bool kLow>
struct ActMath;

template <bool kLow>
struct ActMath<Activation::silu, kLow> {
  template <typename A>
  static __device__ __forceinline__ A f(A a) {
    return a * act_rcp(A(1) + act_exp(-a));
  }
  template <typename A>
  static __device__ __forceinline__ void f_df(A a, A* f, A* df) {
    const A s = act_rcp(A(1) + act_exp(-a));
    *f = a * s;
    *df = s * (A(1) + a * (A(1) - s));
  }
};

template <bool kLow>
struct ActMath<Activation::gelu, kLow> {
  template <typename A>
  static __device__ __forceinline__ A cdf(A x, A* gauss) {
    if constexpr (kLow && sizeof(A) == 4) {
      return normal_cdf_low(x, gauss);
    } else {
      return normal_cdf(x, gauss);
    }
  }
  template <typename A>
  static __device__ __forceinline__ A f(A x) {
    A gauss;
    return x * cdf(x, &gauss);
  }
  template <typename A>
  static __device__ __forceinline__ void f_df(A x, A* f, A* df) {
    A gauss;
    const A c = cdf(x, &gauss);
    *f = x * c;
    *df = c + x * gauss * A(0.39894228040143267794);
  }
};

template <bool kLow>
struct ActMath<Activation::gelu_tanh, kLow> {
  template <typename A>
  static __device__ __forceinline__ A big_a(A x) {
    return x * (A(1.5957691216057307117) + A(0.071354816272336854) * x * x);
  }
  template <typename A>
  static __device__ __forceinline__ A f(A x) {
    return x * act_rcp(A(1) + act_exp(-big_a(x)));
  }
  // with the sign-symmetric sigmoid s (m = e^-|A| never overflows): s(1 - s) = m / (1 + m)^2, and
  // gelu' = s + x s (1 - s) A' (torch's tanh-form derivative rewritten)
  template <typename A>
  static __device__ __forceinline__ void f_df(A x, A* f, A* df) {
    const A a = big_a(x);
    const A m = act_exp(-act_abs(a));
    const A inv = act_rcp(A(1) + m);
    const A s = a < A(0) ? m * inv : inv;
    const A da = A(1.5957691216057307117) + A(3 * 0.071354816272336854) * x * x;
    *f = x * s;
    *df = s + x * (m * inv * inv) * da;
  }
};

}  // namespace
}  // namespace yirage::kernels::cuda
