// The GEMM epilogue loops, written once over a vector type V. No include guard: linear_epilogue.cpp
// includes this through per_isa.h, once per ISA. See linear_epilogue.h for the strategy and accuracy.

template <typename V>
inline constexpr bool kF64Lanes = sizeof(typename V::acc_t) == 8;

// 1 / (1 + e^-x): 0 at -inf, 1 at +inf, NaN stays NaN
template <typename V>
inline V sigmoid(V x) {
  const V one = V::set1(1);
  return one / (one + vexp(V::zero() - x));
}

// The normal CDF Phi(z) = erfc(-z / sqrt 2) / 2, and e^(-z^2/2) (the density without its 1/sqrt(2 pi)).
template <typename V>
struct NormalCdf {
  V cdf, gauss;
};

template <typename V>
inline NormalCdf<V> normal_cdf(V z) {
  using acc_t = typename V::acc_t;
  const V gauss = vexp(V::zero() - V::set1(acc_t(0.5)) * z * z);
  if constexpr (kF64Lanes<V>) {
    acc_t lanes[V::W];
    z.store(lanes);
    for (int i = 0; i < V::W; ++i) lanes[i] = 0.5 * std::erfc(-lanes[i] * 0.70710678118654752440);
    return {V::load(lanes), gauss};
  } else {
    // erfc(x) for x = |z| / sqrt 2 >= 0: t * poly(t) * e^(-x^2), t = 1 / (1 + p x) (A&S 7.1.26)
    const V x = vabs(z) * V::set1(0.70710678118654752440f);
    const V t = V::set1(1.f) / V::fma(V::set1(0.3275911f), x, V::set1(1.f));
    V r = V::fma(V::set1(1.061405429f), t, V::set1(-1.453152027f));
    r = V::fma(r, t, V::set1(1.421413741f));
    r = V::fma(r, t, V::set1(-0.284496736f));
    r = V::fma(r, t, V::set1(0.254829592f));
    const V half_erfc = r * t * gauss * V::set1(0.5f);  // Phi(-|z|)
    return {vselect_lt(z, V::zero(), half_erfc, V::set1(1.f) - half_erfc), gauss};
  }
}

// sqrt(2/pi) (z + 0.044715 z^3), the argument of gelu_tanh's tanh
template <typename V>
inline V gelu_tanh_arg(V z) {
  using acc_t = typename V::acc_t;
  const V z2 = z * z;
  return V::set1(acc_t(0.79788456080286535588)) * V::fma(V::set1(acc_t(0.044715)) * z2, z, z);
}

template <typename V, Activation A>
inline V activate(V z) {
  using acc_t = typename V::acc_t;
  if constexpr (A == Activation::none) {
    return z;
  } else if constexpr (A == Activation::relu) {
    return vmax(V::zero(), z);  // NaN stays NaN (vmax returns its second operand then)
  } else if constexpr (A == Activation::gelu) {
    return z * normal_cdf(z).cdf;
  } else if constexpr (A == Activation::gelu_tanh) {
    return z * sigmoid(V::set1(acc_t(2)) * gelu_tanh_arg(z));  // 0.5 (1 + tanh u) = sigmoid(2u)
  } else {
    return z * sigmoid(z);
  }
}

// act'(z) times g; `s` is what the forward saved: z, or the output for relu
template <typename V, Activation A>
inline V activation_grad(V g, V s) {
  using acc_t = typename V::acc_t;
  if constexpr (A == Activation::none) {
    return g;
  } else if constexpr (A == Activation::relu) {
    return vselect_lt(V::zero(), s, g, V::zero());  // out > 0
  } else if constexpr (A == Activation::gelu) {
    // Phi(z) + z phi(z)
    const NormalCdf<V> n = normal_cdf(s);
    return g * V::fma(s * V::set1(acc_t(0.39894228040143267794)), n.gauss, n.cdf);
  } else if constexpr (A == Activation::gelu_tanh) {
    // d/dz z sigmoid(2u) = sg + 2 z sg (1 - sg) u'(z), u' = sqrt(2/pi) (1 + 3 * 0.044715 z^2)
    const V sg = sigmoid(V::set1(acc_t(2)) * gelu_tanh_arg(s));
    const V du = V::set1(acc_t(0.79788456080286535588)) * V::fma(V::set1(acc_t(3 * 0.044715)), s * s, V::set1(1));
    return g * V::fma(V::set1(acc_t(2)) * s * sg * (V::set1(1) - sg), du, sg);
  } else {
    // sigmoid(z) (1 + z (1 - sigmoid(z)))
    const V sg = sigmoid(s);
    return g * (sg * V::fma(s, V::set1(1) - sg, V::set1(1)));
  }
}

template <typename V, typename T, typename In, Activation A>
Status epilogue_rows(const LinearEpilogue& p, int64_t begin, int64_t end) {
  constexpr int W = V::W;
  const int64_t n = p.cols;
  const T* b = static_cast<const T*>(p.bias);
  for (int64_t row = begin; row < end; ++row) {
    const In* in = p.in ? static_cast<const In*>(p.in) + row * p.in_stride : nullptr;
    T* out = static_cast<T*>(p.out) + row * p.out_stride;
    T* pre = p.pre ? static_cast<T*>(p.pre) + row * p.out_stride : nullptr;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      V z = in ? V::load(in + i) : V::zero();
      if (b) z = z + V::load(b + i);
      if (pre) z.store(pre + i);
      activate<V, A>(z).store(out + i);
    }
    if (i < n) {
      const int64_t m = n - i;
      V z = in ? load_n<V>(in + i, m) : V::zero();
      if (b) z = z + load_n<V>(b + i, m);
      if (pre) store_n(z, pre + i, m);
      store_n(activate<V, A>(z), out + i, m);
    }
  }
  return Status::ok;
}

template <typename V, typename T, Activation A>
Status act_grad_rows(const LinearActGrad& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  constexpr int W = V::W;
  const int64_t n = p.cols;
  acc_t* db = static_cast<acc_t*>(p.bias_grad_acc);
  for (int64_t row = begin; row < end; ++row) {
    const T* g = static_cast<const T*>(p.grad_out) + row * p.grad_stride;
    const T* s = A == Activation::none ? nullptr : static_cast<const T*>(p.saved) + row * p.saved_stride;
    T* dz = p.grad_pre ? static_cast<T*>(p.grad_pre) + row * n : nullptr;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      const V d = activation_grad<V, A>(V::load(g + i), s ? V::load(s + i) : V::zero());
      if (dz) d.store(dz + i);
      if (db) (V::load(db + i) + d).store(db + i);
    }
    if (i < n) {
      const int64_t m = n - i;
      const V d = activation_grad<V, A>(load_n<V>(g + i, m), s ? load_n<V>(s + i, m) : V::zero());
      if (dz) store_n(d, dz + i, m);
      if (db) store_n(load_n<V>(db + i, m) + d, db + i, m);
    }
  }
  return Status::ok;
}

// The activation becomes a template argument, so each loop is compiled without a per-element switch.
template <typename V, typename T, typename In>
Status epilogue_act(const LinearEpilogue& p, int64_t begin, int64_t end) {
  switch (p.act) {
    case Activation::none: return epilogue_rows<V, T, In, Activation::none>(p, begin, end);
    case Activation::relu: return epilogue_rows<V, T, In, Activation::relu>(p, begin, end);
    case Activation::gelu: return epilogue_rows<V, T, In, Activation::gelu>(p, begin, end);
    case Activation::gelu_tanh: return epilogue_rows<V, T, In, Activation::gelu_tanh>(p, begin, end);
    case Activation::silu: return epilogue_rows<V, T, In, Activation::silu>(p, begin, end);
  }
  return Status::invalid_argument;
}

// The GEMM result is the output dtype (in place) or fp32 scratch.
template <typename V, typename T>
Status epilogue_typed(const LinearEpilogue& p, int64_t begin, int64_t end) {
  if (p.in_dtype == p.dtype) return epilogue_act<V, T, T>(p, begin, end);
  if (p.in_dtype == DType::f32) return epilogue_act<V, T, float>(p, begin, end);
  return Status::unsupported_dtype;
}

template <typename V, typename T>
Status act_grad_typed(const LinearActGrad& p, int64_t begin, int64_t end) {
  switch (p.act) {
    case Activation::none: return act_grad_rows<V, T, Activation::none>(p, begin, end);
    case Activation::relu: return act_grad_rows<V, T, Activation::relu>(p, begin, end);
    case Activation::gelu: return act_grad_rows<V, T, Activation::gelu>(p, begin, end);
    case Activation::gelu_tanh: return act_grad_rows<V, T, Activation::gelu_tanh>(p, begin, end);
    case Activation::silu: return act_grad_rows<V, T, Activation::silu>(p, begin, end);
  }
  return Status::invalid_argument;
}

inline Status epilogue_dispatch(const LinearEpilogue& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return epilogue_typed<Vec, float>(p, begin, end);
    case DType::f16: return epilogue_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return epilogue_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}

inline Status act_grad_dispatch(const LinearActGrad& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return act_grad_typed<Vec, float>(p, begin, end);
    case DType::f16: return act_grad_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return act_grad_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}
