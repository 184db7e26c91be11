// The GEMM epilogue loops, written once over a vector type V. No include guard: linear_epilogue.cpp
// includes this through per_isa.h, once per ISA. See linear_epilogue.h for the strategy and accuracy.

#include "activation_math_impl.h"

// T: the type the result is rounded to (a 16-bit T takes the activation's cheaper form, act_f)
template <typename V, Activation A, typename T>
inline V activate(V z) {
  if constexpr (A == Activation::none) {
    return z;
  } else if constexpr (A == Activation::relu) {
    return vmax(V::zero(), z);  // NaN stays NaN (vmax returns its second operand then)
  } else if constexpr (A == Activation::gelu) {
    return act_f<Gelu<V>, T>(z);
  } else if constexpr (A == Activation::gelu_tanh) {
    return GeluTanh<V>::f(z);
  } else {
    return Silu<V>::f(z);
  }
}

// act'(z) times g; `s` is what the forward saved: z, or the output for relu
template <typename V, Activation A, typename T>
inline V activation_grad(V g, V s) {
  if constexpr (A == Activation::none) {
    return g;
  } else if constexpr (A == Activation::relu) {
    return vselect_lt(V::zero(), s, g, V::zero());  // out > 0
  } else {
    using Act = std::conditional_t<A == Activation::gelu, Gelu<V>,
                                   std::conditional_t<A == Activation::gelu_tanh, GeluTanh<V>, Silu<V>>>;
    V f, df;
    act_f_df<Act, T>(s, &f, &df);
    return g * df;
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
      activate<V, A, T>(z).store(out + i);
    }
    if (i < n) {
      const int64_t m = n - i;
      V z = in ? load_n<V>(in + i, m) : V::zero();
      if (b) z = z + load_n<V>(b + i, m);
      if (pre) store_n(z, pre + i, m);
      store_n(activate<V, A, T>(z), out + i, m);
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
      const V d = activation_grad<V, A, T>(V::load(g + i), s ? V::load(s + i) : V::zero());
      if (dz) d.store(dz + i);
      if (db) (V::load(db + i) + d).store(db + i);
    }
    if (i < n) {
      const int64_t m = n - i;
      const V d = activation_grad<V, A, T>(load_n<V>(g + i, m), s ? load_n<V>(s + i, m) : V::zero());
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
