// The activation functions and their derivatives over a vector type V (fp32 lanes, or fp64 lanes with the
// C library's erfc), shared by the activation kernels and the GEMM epilogue; activation.h describes the
// math and its accuracy. No include guard: the *_impl.h files that use it include it once per ISA
// namespace (per_isa.h).

// c[0] t^n + c[1] t^(n-1) + ... + c[n] by Horner (fused multiply-adds, highest degree first).
template <typename V, typename... C>
inline V horner(V t, float top, C... rest) {
  V h = V::set1(top);
  ((h = V::fma(h, t, V::set1(rest))), ...);
  return h;
}

// exp(-y^2/2) in fp32 for 0 <= y <= 13.22 (or NaN): vexp_ftz's algorithm cut to what gelu needs. The argument
// is never positive, and y <= 13.22 keeps n = round(-y^2/2 log2 e) >= -126, where the scale 2^(n-1)
// (vpow2_magic) has a zero exponent field: the result flushes to 0 from y = 13.2 on without a compare. The
// reduction works on s = y^2 itself, g = s + 2 n ln2 = -2f (Cody-Waite in two parts, the first product exact),
// and the polynomial for 2 e^f is written in g (its coefficients times (-1/2)^k, exact): vexp_ftz's degree 6
// (relative error 2e-9) with kDeg 6, a degree-5 minimax one (7e-8), one fma less, for the forward, or vexp_ftz_low's
// degree 4 (5.3e-6) for the bf16 forward. That one reduces in one step with ln2 rounded to fp32 (2 |n| 1.9e-9 <=
// 4.8e-7 off in g: 2.4e-7 relative, under its polynomial's error): the bf16 gelu is bound by the FMA pipes, and the
// step saved with vrcp14 for its reciprocal made it 1.14x (below).
template <int kDeg, typename V>
inline V gauss_clamped(V y) {
  const V s = y * y;
  const V magic = V::set1(12582912.f + 126.f);  // 1.5 * 2^23 + (127 - 1): tm's low bits are n + 126
  const V tm = V::fma(s, V::set1(-0.5f * 1.44269504f), magic);
  const V n = tm - magic;
  V g;
  if constexpr (kDeg == 4) {
    g = V::fma(n, V::set1(2 * 0.6931471805599453f), s);
  } else {
    g = V::fma(n, V::set1(2 * 0.693359375f), s);
    g = V::fma(n, V::set1(2 * -2.12194440e-4f), g);
  }
  V p;
  if constexpr (kDeg == 4) {
    p = horner(g, 0.0625f * 8.25556964e-2f, -0.125f * 3.35070312e-1f, 0.25f * 1.00010228f, -1.f, 2.f);
  } else if constexpr (kDeg == 5) {
    p = horner(g, -0.03125f * 1.657759212e-2f, 0.0625f * 8.382782340e-2f, -0.125f * 3.333542943e-1f,
               0.25f * 9.999784827e-1f, -0.5f * 1.999999285f, 2.000000238f);
  } else {
    p = horner(g, 0.015625f * 2.76873051e-3f, -0.03125f * 1.67483110e-2f, 0.0625f * 8.33360031e-2f,
               -0.125f * 3.33328635e-1f, 0.25f * 9.99999881e-1f, -1.f, 2.f);
  }
  return p * vpow2_magic(tm);
}

// The fits of NormalCdfFitCpu (kernels/activation.h): P(s) near 0, and on the tail H(t) (kLow: L(t)), negated when
// kNeg (exact).
template <typename V>
inline V cdf_near_poly(V s) {
  using F = NormalCdfFitCpu;
  return horner(s, F::p4, F::p3, F::p2, F::p1, F::p0);
}
template <bool kLow, bool kNeg, bool kBf16 = false, typename V>
inline V cdf_tail_poly(V t) {
  using F = NormalCdfFitCpu;
  constexpr float g = kNeg ? -1.f : 1.f;
  if constexpr (kBf16) {
    return horner(t, g * F::b5, g * F::b4, g * F::b3, g * F::b2, g * F::b1, g * F::b0);
  } else if constexpr (kLow) {
    return horner(t, g * F::l7, g * F::l6, g * F::l5, g * F::l4, g * F::l3, g * F::l2, g * F::l1, g * F::l0);
  } else {
    return horner(t, g * F::h6, g * F::h5, g * F::h4, g * F::h3, g * F::h2, g * F::h1, g * F::h0);
  }
}

// Phi(x) = P(X <= x) for a standard normal X, and *gauss = exp(-x^2/2) (which the derivative reuses). kLow (results
// rounded to bf16 / fp16): the tail form for every x, no near-zero branch.
template <bool kLow = false, typename V>
inline V normal_cdf(V x, V* gauss) {
  using acc_t = typename V::acc_t;
  if constexpr (sizeof(acc_t) == 8) {  // fp64 (gradcheck): the C library's erfc, lane by lane
    *gauss = vexp_ftz(x * x * V::set1(acc_t(-0.5)));
    acc_t lanes[V::W];
    x.store(lanes);
    for (int i = 0; i < V::W; ++i) lanes[i] = acc_t(0.5) * std::erfc(lanes[i] * acc_t(-0.70710678118654752440));
    return V::load(lanes);
  } else {
    using F = NormalCdfFitCpu;  // kernels/activation.h
    // |x| >= 1: Phi(-|x|) = exp(-x^2/2) * t * H(t), t = 1 / (1 + |x| kT) (erfc's classic substitution), H a
    // minimax fit on |x| in [1, 14]; |x| is clamped to 13.22, where exp(-x^2/2) is already 0 (flushed) while
    // t * H(t) stays finite, so the tail needs no cut-off and stays relative
    const V y = vmin(V::set1(13.22f), vabs(x));  // NaN stays NaN
    *gauss = gauss_clamped<6>(y);
    const V t = V::set1(1.f) / V::fma(y, V::set1(kLow ? F::kTLow : F::kT), V::set1(1.f));
    const V lower = *gauss * t * cdf_tail_poly<kLow, false>(t);              // Phi(-|x|)
    const V tail = vselect_lt(V::zero(), x, V::set1(1.f) - lower, lower);  // Phi(x)
    if constexpr (kLow) return tail;
    // |x| < 1: Phi(x) = 1/2 + x * P(x^2), a minimax fit
    const V near0 = V::fma(cdf_near_poly(y * y), x, V::set1(0.5f));
    return vselect_lt(y, V::set1(F::kSplit), near0, tail);  // NaN: tail, NaN
  }
}

// Each activation: f(x), and f(x) with f'(x) for the backward.
template <typename V>
struct Silu {
  // e^-a through vexp_neg_sat where the ISA has it (AVX2): the same bits as vexp_ftz(0 - a) with 2 fewer
  // instructions, silu_and_mul fp32 1.18x (one thread, in cache). f_low, for results rounded to bf16 / fp16: its
  // lower-degree form, with forward_run's paired stores bf16 1.50x, fp16 1.46x; off the float64 result rounded
  // to the type by one ulp on 3 of 31552 bf16 inputs with |a| < 20 (0 before), 15 of 39422 fp16 (1 before).
  template <bool kLow>
  static V f_impl(V a) {
    using acc_t = typename V::acc_t;
    if constexpr (kLow && requires { vexp_neg_sat_low(a); }) return a / (V::set1(acc_t(1)) + vexp_neg_sat_low(a));
    else if constexpr (requires { vexp_neg_sat(a); }) return a / (V::set1(acc_t(1)) + vexp_neg_sat(a));
    else return a / (V::set1(acc_t(1)) + vexp_ftz(V::zero() - a));
  }
  static V f(V a) { return f_impl<false>(a); }
  static V f_low(V a) { return f_impl<true>(a); }
  // sigmoid s with m = e^-|a| (never overflows): s = 1/(1+m) for a >= 0, m/(1+m) below; s(1-s) = m/(1+m)^2
  static void f_df(V a, V* f, V* df) {
    using acc_t = typename V::acc_t;
    const V one = V::set1(acc_t(1));
    const V m = vexp_ftz(V::zero() - vabs(a));
    const V inv = one / (one + m);
    const V s = vselect_lt(a, V::zero(), m * inv, inv);
    *f = a * s;
    *df = V::fma(a, m * inv * inv, s);  // s + a s (1 - s): NaN at +-inf, as torch
  }
};

// gelu(x) = x Phi(x); in fp32 the tail form is relu(x) - |x| Phi(-|x|) (one fma after the fit, no 1 - Phi and no
// select by sign). f_low / f_df_low: for results rounded to bf16 / fp16, the tail form for every x; f_bf16: with
// the shorter fits that bf16's 8 bits allow (act_f): tail degree 5, exponential degree 4, 3 fmas fewer on the
// longest dependency chains (one thread in cache: gelu bf16 1.17-1.19x on an AVX-512 EPYC, 1.14-1.15x with AVX2;
// benchmarks/results/cpu-avx512-port-epyc-2026-11-26.md), and on AVX-512 t from vrcp14ps (2^-14 relative: Phi off
// by about 1e-4 relative at most) instead of a division, with the one-step reduction of gauss_clamped<4>: gelu and
// gelu_and_mul bf16 1.14-1.15x (one thread in cache, Zen 5); of the 31470 bf16 inputs with |x| < 20 and a result
// of 2^-120 or more, 9 round one ulp off the float64 gelu (1 before; the tests allow 1%). A single exponential of
// -x^2/2 + R(t) (CUDA's normal_cdf_low) has fewer multiplies but one long dependency chain: 0.86x.
template <typename V>
struct Gelu {
  template <bool kLow, bool kBf16 = false>
  static V f_impl(V x) {
    if constexpr (sizeof(typename V::acc_t) == 8) {
      V gauss;
      return x * normal_cdf(x, &gauss);
    } else {
      using F = NormalCdfFitCpu;
      const V y = vmin(V::set1(13.22f), vabs(x));  // as in normal_cdf
      const V d = V::fma(y, V::set1(kBf16 ? F::kTBf16 : kLow ? F::kTLow : F::kT), V::set1(1.f));
      V t;
      if constexpr (kBf16 && requires { vrcp14(d); }) t = vrcp14(d);
      else t = V::set1(1.f) / d;
      const V relu = x - vmin(x, V::zero());  // max(x, 0); NaN at -inf, as x Phi(x) = -inf * 0
      const V gauss = gauss_clamped<kBf16 ? 4 : 5>(y);
      const V tail = V::fma(gauss * (y * t), cdf_tail_poly<kLow, true, kBf16>(t), relu);
      if constexpr (kLow || kBf16) return tail;
      const V near = x * V::fma(cdf_near_poly(y * y), x, V::set1(0.5f));
      return vselect_lt(y, V::set1(F::kSplit), near, tail);  // NaN: tail, NaN
    }
  }
  static V f(V x) { return f_impl<false>(x); }
  static V f_low(V x) { return f_impl<true>(x); }
  static V f_bf16(V x) { return f_impl<true, true>(x); }
  template <bool kLow = false>
  static void f_df(V x, V* f, V* df) {
    using acc_t = typename V::acc_t;
    V gauss;
    const V cdf = normal_cdf<kLow>(x, &gauss);
    *f = x * cdf;
    *df = V::fma(x * gauss, V::set1(acc_t(0.39894228040143267794)), cdf);  // Phi + x phi
  }
  static void f_df_low(V x, V* f, V* df) { f_df<true>(x, f, df); }
};

// x/2 (1 + tanh(u)) = x * sigmoid(A), A = 2u = x (kA + kB x^2), kA = 2 sqrt(2/pi), kB = 0.044715 kA
template <typename V>
struct GeluTanh {
  using acc_t = typename V::acc_t;
  static constexpr acc_t kA = acc_t(1.5957691216057307117), kB = acc_t(0.071354816272336854);
  static V big_a(V x) { return x * V::fma(x * x, V::set1(kB), V::set1(kA)); }
  static V f(V x) {  // vexp_neg_sat as in Silu: the same bits, fp32 1.10x to 1.13x (one thread, in cache)
    const V a = big_a(x);
    if constexpr (requires { vexp_neg_sat(a); }) return x / (V::set1(acc_t(1)) + vexp_neg_sat(a));
    else return x / (V::set1(acc_t(1)) + vexp_ftz(V::zero() - a));
  }
  static void f_df(V x, V* f, V* df) {
    const V one = V::set1(acc_t(1));
    const V a = big_a(x);
    const V m = vexp_ftz(V::zero() - vabs(a));
    const V inv = one / (one + m);
    const V s = vselect_lt(a, V::zero(), m * inv, inv);
    const V da = V::fma(x * x, V::set1(3 * kB), V::set1(kA));  // dA/dx
    *f = x * s;
    *df = V::fma(x * (m * inv * inv), da, s);  // s + x s (1 - s) A': finite until x^2 overflows, as torch
  }
};

// act(x) and act'(x) for a loop whose results are rounded to T: the activation's cheaper form where it has one and T
// is a 16-bit type (f_bf16 for bf16, else f_low; f_df_low).
template <typename Act, typename T, typename V>
inline V act_f(V x) {
  if constexpr (std::is_same_v<T, bf16> && requires { Act::f_bf16(x); }) return Act::f_bf16(x);
  else if constexpr (sizeof(T) == 2 && requires { Act::f_low(x); }) return Act::f_low(x);
  else return Act::f(x);
}
template <typename Act, typename T, typename V>
inline void act_f_df(V x, V* f, V* df) {
  if constexpr (sizeof(T) == 2 && requires { Act::f_df_low(x, f, df); }) Act::f_df_low(x, f, df);
  else Act::f_df(x, f, df);
}
