// The activation functions and their derivatives over a vector type V (fp32 lanes, or fp64 lanes with the
// C library's erfc), shared by the activation kernels and the GEMM epilogue; activation.h describes the
// math and its accuracy. No include guard: the *_impl.h files that use it include it once per ISA
// namespace (per_isa.h).

// Phi(x) = P(X <= x) for a standard normal X, and *gauss = exp(-x^2/2) (which the derivative reuses).
template <typename V>
inline V normal_cdf(V x, V* gauss) {
  using acc_t = typename V::acc_t;
  *gauss = vexp_ftz(x * x * V::set1(acc_t(-0.5)));
  if constexpr (sizeof(acc_t) == 8) {  // fp64 (gradcheck): the C library's erfc, lane by lane
    acc_t lanes[V::W];
    x.store(lanes);
    for (int i = 0; i < V::W; ++i) lanes[i] = acc_t(0.5) * std::erfc(lanes[i] * acc_t(-0.70710678118654752440));
    return V::load(lanes);
  } else {
    using F = NormalCdfFit;  // kernels/activation.h
    // |x| < 1.3: Phi(x) = 1/2 + x * P(x^2), a minimax fit (relative error of P below 2e-8)
    const V s = x * x;
    V p = V::set1(F::p5);
    p = V::fma(p, s, V::set1(F::p4));
    p = V::fma(p, s, V::set1(F::p3));
    p = V::fma(p, s, V::set1(F::p2));
    p = V::fma(p, s, V::set1(F::p1));
    p = V::fma(p, s, V::set1(F::p0));
    const V near0 = V::fma(p, x, V::set1(0.5f));
    // |x| >= 1.3: Phi(-|x|) = exp(-x^2/2) * t * H(t), t = 1 / (1 + |x| / (2 sqrt 2)) (erfc's classic
    // substitution), H a minimax fit on |x| in [1.3, 14] (relative error below 3e-7); beyond, exp(-x^2/2)
    // underflows to 0 while t * H(t) stays finite (t -> 0), so the tail needs no cut-off and stays relative
    const V y = vabs(x);
    const V t = V::set1(1.f) / V::fma(y, V::set1(F::kT), V::set1(1.f));
    V h = V::set1(F::h6);
    h = V::fma(h, t, V::set1(F::h5));
    h = V::fma(h, t, V::set1(F::h4));
    h = V::fma(h, t, V::set1(F::h3));
    h = V::fma(h, t, V::set1(F::h2));
    h = V::fma(h, t, V::set1(F::h1));
    h = V::fma(h, t, V::set1(F::h0));
    const V lower = *gauss * t * h;                                        // Phi(-|x|)
    const V tail = vselect_lt(V::zero(), x, V::set1(1.f) - lower, lower);  // Phi(x)
    return vselect_lt(y, V::set1(F::kSplit), near0, tail);                      // NaN: tail, NaN
  }
}

// Each activation: f(x), and f(x) with f'(x) for the backward.
template <typename V>
struct Silu {
  static V f(V a) {
    using acc_t = typename V::acc_t;
    return a / (V::set1(acc_t(1)) + vexp_ftz(V::zero() - a));
  }
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

template <typename V>
struct Gelu {
  static V f(V x) {
    V gauss;
    return x * normal_cdf(x, &gauss);
  }
  static void f_df(V x, V* f, V* df) {
    using acc_t = typename V::acc_t;
    V gauss;
    const V cdf = normal_cdf(x, &gauss);
    *f = x * cdf;
    *df = V::fma(x * gauss, V::set1(acc_t(0.39894228040143267794)), cdf);  // Phi + x phi
  }
};

// x/2 (1 + tanh(u)) = x * sigmoid(A), A = 2u = x (kA + kB x^2), kA = 2 sqrt(2/pi), kB = 0.044715 kA
template <typename V>
struct GeluTanh {
  using acc_t = typename V::acc_t;
  static constexpr acc_t kA = acc_t(1.5957691216057307117), kB = acc_t(0.071354816272336854);
  static V big_a(V x) { return x * V::fma(x * x, V::set1(kB), V::set1(kA)); }
  static V f(V x) { return x / (V::set1(acc_t(1)) + vexp_ftz(V::zero() - big_a(x))); }
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

