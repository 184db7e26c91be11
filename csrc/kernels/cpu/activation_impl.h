// The activation loops, written once over a vector type V. No include guard: activation.cpp includes
// this through per_isa.h, once per ISA. See activation.h for the strategy and the math.

// Phi(x) = P(X <= x) for a standard normal X, and *gauss = exp(-x^2/2) (which the derivative reuses).
template <typename V>
inline V normal_cdf(V x, V* gauss) {
  using acc_t = typename V::acc_t;
  *gauss = vexp(x * x * V::set1(acc_t(-0.5)));
  if constexpr (sizeof(acc_t) == 8) {  // fp64 (gradcheck): the C library's erfc, lane by lane
    acc_t lanes[V::W];
    x.store(lanes);
    for (int i = 0; i < V::W; ++i) lanes[i] = acc_t(0.5) * std::erfc(lanes[i] * acc_t(-0.70710678118654752440));
    return V::load(lanes);
  } else {
    // |x| < 1.3: Phi(x) = 1/2 + x * P(x^2), a minimax fit (relative error of P below 2e-8)
    const V s = x * x;
    V p = V::set1(-6.632304576e-06f);
    p = V::fma(p, s, V::set1(1.103859613e-04f));
    p = V::fma(p, s, V::set1(-1.182997017e-03f));
    p = V::fma(p, s, V::set1(9.971847758e-03f));
    p = V::fma(p, s, V::set1(-6.649012864e-02f));
    p = V::fma(p, s, V::set1(3.989422619e-01f));
    const V near0 = V::fma(p, x, V::set1(0.5f));
    // |x| >= 1.3: Phi(-|x|) = exp(-x^2/2) * t * H(t), t = 1 / (1 + |x| / (2 sqrt 2)) (erfc's classic
    // substitution), H a minimax fit on |x| in [1.3, 14] (relative error below 3e-7); beyond, exp(-x^2/2)
    // underflows to 0 while t * H(t) stays finite (t -> 0), so the tail needs no cut-off and stays relative
    const V y = vabs(x);
    const V t = V::set1(1.f) / V::fma(y, V::set1(3.535533845e-01f), V::set1(1.f));
    V h = V::set1(2.382886410e-02f);
    h = V::fma(h, t, V::set1(-1.253476292e-01f));
    h = V::fma(h, t, V::set1(1.392106265e-01f));
    h = V::fma(h, t, V::set1(4.839326814e-02f));
    h = V::fma(h, t, V::set1(1.323946267e-01f));
    h = V::fma(h, t, V::set1(1.399874091e-01f));
    h = V::fma(h, t, V::set1(1.410983205e-01f));
    const V lower = *gauss * t * h;                                        // Phi(-|x|)
    const V tail = vselect_lt(V::zero(), x, V::set1(1.f) - lower, lower);  // Phi(x)
    return vselect_lt(y, V::set1(1.3f), near0, tail);                      // NaN: tail, NaN
  }
}

// Each activation: f(x), and f(x) with f'(x) for the backward.
template <typename V>
struct Silu {
  static V f(V a) {
    using acc_t = typename V::acc_t;
    return a / (V::set1(acc_t(1)) + vexp(V::zero() - a));
  }
  // sigmoid s with m = e^-|a| (never overflows): s = 1/(1+m) for a >= 0, m/(1+m) below; s(1-s) = m/(1+m)^2
  static void f_df(V a, V* f, V* df) {
    using acc_t = typename V::acc_t;
    const V one = V::set1(acc_t(1));
    const V m = vexp(V::zero() - vabs(a));
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
  static V f(V x) { return x / (V::set1(acc_t(1)) + vexp(V::zero() - big_a(x))); }
  static void f_df(V x, V* f, V* df) {
    const V one = V::set1(acc_t(1));
    const V a = big_a(x);
    const V m = vexp(V::zero() - vabs(a));
    const V inv = one / (one + m);
    const V s = vselect_lt(a, V::zero(), m * inv, inv);
    const V da = V::fma(x * x, V::set1(3 * kB), V::set1(kA));  // dA/dx
    *f = x * s;
    *df = V::fma(x * (m * inv * inv), da, s);  // s + x s (1 - s) A': finite until x^2 overflows, as torch
  }
};

// One contiguous run of `len` outputs: y = act(a) (* b when gated). `flatten` inlines the whole activation
// (vexp included) into the loop, so its constants stay in registers: about 30% fewer cycles for gelu.
template <typename V, typename Act, bool kGated, typename T>
[[gnu::flatten]] inline void forward_run(const T* a, const T* b, T* y, int64_t len) {
  constexpr int W = V::W;
  int64_t i = 0;
  for (; i + W <= len; i += W) {
    V v = Act::f(V::load(a + i));
    if constexpr (kGated) v = v * V::load(b + i);
    v.store(y + i);
  }
  if (i < len) {
    V v = Act::f(load_n<V>(a + i, len - i));
    if constexpr (kGated) v = v * load_n<V>(b + i, len - i);
    store_n(v, y + i, len - i);
  }
}

// One run of `len` gradients: da = g * act'(a) (* b when gated), and when gated db = g * act(a).
template <typename V, typename Act, bool kGated, typename T>
[[gnu::flatten]] inline void backward_run(const T* g, const T* a, const T* b, T* da, T* db, int64_t len) {
  constexpr int W = V::W;
  for (int64_t i = 0; i < len; i += W) {
    const int64_t m = len - i < W ? len - i : W;
    const bool full = m == W;
    V f, df;
    Act::f_df(full ? V::load(a + i) : load_n<V>(a + i, m), &f, &df);
    const V gv = full ? V::load(g + i) : load_n<V>(g + i, m);
    V dav = gv * df;
    if constexpr (kGated) {
      dav = dav * (full ? V::load(b + i) : load_n<V>(b + i, m));
      const V dbv = gv * f;
      if (full) dbv.store(db + i); else store_n(dbv, db + i, m);
    }
    if (full) dav.store(da + i); else store_n(dav, da + i, m);
  }
}

// Flat output elements [begin, end), walked row segment by row segment.
template <typename V, typename T, typename Act, bool kGated>
Status forward_range(const ActivationForward& p, int64_t begin, int64_t end) {
  const int64_t n = p.cols;
  int64_t row = begin / n, col = begin - row * n;
  while (begin < end) {
    const int64_t len = n - col < end - begin ? n - col : end - begin;
    const T* a = static_cast<const T*>(p.x) + row * p.x_stride + col;
    forward_run<V, Act, kGated>(a, a + n, static_cast<T*>(p.out) + begin, len);
    begin += len;
    ++row;
    col = 0;
  }
  return Status::ok;
}

template <typename V, typename T, typename Act, bool kGated>
Status backward_range(const ActivationBackward& p, int64_t begin, int64_t end) {
  const int64_t n = p.cols;
  int64_t row = begin / n, col = begin - row * n;
  while (begin < end) {
    const int64_t len = n - col < end - begin ? n - col : end - begin;
    const T* g = static_cast<const T*>(p.grad_out) + row * p.grad_out_stride + col;
    const T* a = static_cast<const T*>(p.x) + row * p.x_stride + col;
    T* da = static_cast<T*>(p.grad_x) + (kGated ? row * 2 * n + col : begin);
    backward_run<V, Act, kGated>(g, a, a + n, da, da + n, len);
    begin += len;
    ++row;
    col = 0;
  }
  return Status::ok;
}

template <typename V, typename T>
Status act_forward_typed(const ActivationForward& p, int64_t begin, int64_t end) {
  switch (p.act) {
    case Activation::silu:
      return p.gated ? forward_range<V, T, Silu<V>, true>(p, begin, end)
                     : forward_range<V, T, Silu<V>, false>(p, begin, end);
    case Activation::gelu:
      return p.gated ? forward_range<V, T, Gelu<V>, true>(p, begin, end)
                     : forward_range<V, T, Gelu<V>, false>(p, begin, end);
    case Activation::gelu_tanh:
      return p.gated ? forward_range<V, T, GeluTanh<V>, true>(p, begin, end)
                     : forward_range<V, T, GeluTanh<V>, false>(p, begin, end);
  }
  return Status::invalid_argument;
}

template <typename V, typename T>
Status act_backward_typed(const ActivationBackward& p, int64_t begin, int64_t end) {
  switch (p.act) {
    case Activation::silu:
      return p.gated ? backward_range<V, T, Silu<V>, true>(p, begin, end)
                     : backward_range<V, T, Silu<V>, false>(p, begin, end);
    case Activation::gelu:
      return p.gated ? backward_range<V, T, Gelu<V>, true>(p, begin, end)
                     : backward_range<V, T, Gelu<V>, false>(p, begin, end);
    case Activation::gelu_tanh:
      return p.gated ? backward_range<V, T, GeluTanh<V>, true>(p, begin, end)
                     : backward_range<V, T, GeluTanh<V>, false>(p, begin, end);
  }
  return Status::invalid_argument;
}

inline Status act_forward_dispatch(const ActivationForward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return act_forward_typed<Vec, float>(p, begin, end);
    case DType::f16: return act_forward_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return act_forward_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}

inline Status act_backward_dispatch(const ActivationBackward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return act_backward_typed<Vec, float>(p, begin, end);
    case DType::f16: return act_backward_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return act_backward_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}
