// The rotary token loops, written once over a vector type V. No include guard: rotary.cpp includes this
// through per_isa.h, once per ISA. See rotary.h for the algorithm.

template <typename A, typename C>
inline A rope_widen(C v) {
  if constexpr (std::is_same_v<C, A>) return v;
  else return A(to_float(v));
}

// m (<= W) elements at p: a full load, or a load_n whose missing lanes are zero.
template <typename V, typename T>
inline V rope_load(const T* p, int64_t m) { return m == V::W ? V::load(p) : load_n<V>(p, m); }

// kStream: full vectors with non-temporal stores (p 64-byte aligned where a vector fills a line: fp32)
template <bool kStream = false, typename V, typename T>
inline void rope_store(const V& v, T* p, int64_t m) {
  if (m != V::W) store_n(v, p, m);
  else if constexpr (kStream) stream_one(v, p);
  else v.store(p);
}

// The token's angles, widened once for all its heads; sign -1 rotates by -theta. neox: c[i], s[i] for
// i < half. gpt-j: c' = (c0 c0 c1 c1 ...), s' = (-s0 s0 -s1 s1 ...) over 2 * half lanes. The buffers are
// padded to whole vectors; the padding is never stored anywhere.
template <typename V, typename C>
inline void rope_angles(const C* cos, const C* sin, int64_t half, bool interleaved, typename V::acc_t sign,
                        typename V::acc_t* c, typename V::acc_t* s) {
  using A = typename V::acc_t;
  if (interleaved) {
    for (int64_t i = 0; i < half; ++i) {
      const A ci = rope_widen<A>(cos[i]), si = sign * rope_widen<A>(sin[i]);
      c[2 * i] = ci;
      c[2 * i + 1] = ci;
      s[2 * i] = -si;
      s[2 * i + 1] = si;
    }
    return;
  }
  const V sv = V::set1(sign);
  for (int64_t i = 0; i < half; i += V::W) {
    const int64_t m = half - i < V::W ? half - i : V::W;
    rope_load<V>(cos + i, m).store(c + i);
    (rope_load<V>(sin + i, m) * sv).store(s + i);
  }
}

// One row, neox pairs (i, i + half): y = rotation of x. kAcc (backward with cos/sin gradients; x is the
// incoming gradient g, xs the forward input): gc += g1*xs1 + g2*xs2 and gs += g2*xs1 - g1*xs2, per i.
template <typename V, bool kAcc, bool kStream = false, typename T>
inline void rope_row_neox(const T* x, const T* xs, T* y, int64_t half, const typename V::acc_t* c,
                          const typename V::acc_t* s, typename V::acc_t* gc, typename V::acc_t* gs) {
  for (int64_t i = 0; i < half; i += V::W) {
    const int64_t m = half - i < V::W ? half - i : V::W;
    const V x1 = rope_load<V>(x + i, m), x2 = rope_load<V>(x + half + i, m);
    const V cv = V::load(c + i), sv = V::load(s + i);
    rope_store<kStream>(x1 * cv - x2 * sv, y + i, m);
    rope_store<kStream>(V::fma(x1, sv, x2 * cv), y + half + i, m);
    if constexpr (kAcc) {  // tail lanes of x1, x2 are zero: they add nothing to the padding
      const V a1 = rope_load<V>(xs + i, m), a2 = rope_load<V>(xs + half + i, m);
      V::fma(x2, a2, V::fma(x1, a1, V::load(gc + i))).store(gc + i);
      (V::fma(x2, a1, V::load(gs + i)) - x1 * a2).store(gs + i);
    }
  }
}

// One row, gpt-j pairs (2i, 2i + 1) over rot = 2 * half lanes: y = x * c' + swap_pairs(x) * s'. kAcc: per
// lane gc += g * xs and gs += g * swap_pairs(xs); the pair sums are taken once per token (rope_tokens).
template <typename V, bool kAcc, bool kStream = false, typename T>
inline void rope_row_gptj(const T* x, const T* xs, T* y, int64_t rot, const typename V::acc_t* c,
                          const typename V::acc_t* s, typename V::acc_t* gc, typename V::acc_t* gs) {
  for (int64_t i = 0; i < rot; i += V::W) {
    const int64_t m = rot - i < V::W ? rot - i : V::W;
    const V xv = rope_load<V>(x + i, m);
    rope_store<kStream>(V::fma(vswap_pairs(xv), V::load(s + i), xv * V::load(c + i)), y + i, m);
    if constexpr (kAcc) {
      const V a = rope_load<V>(xs + i, m);
      V::fma(xv, a, V::load(gc + i)).store(gc + i);
      V::fma(xv, vswap_pairs(a), V::load(gs + i)).store(gs + i);
    }
  }
}

template <typename V, bool kAcc, bool kStream = false, typename T>
inline void rope_row(const T* x, const T* xs, T* y, const RotaryParams& p, const typename V::acc_t* c,
                     const typename V::acc_t* s, typename V::acc_t* gc, typename V::acc_t* gs) {
  const int64_t rot = 2 * p.half;
  if (p.interleaved) rope_row_gptj<V, kAcc, kStream>(x, xs, y, rot, c, s, gc, gs);
  else rope_row_neox<V, kAcc, kStream>(x, xs, y, p.half, c, s, gc, gs);
  if (p.head_dim > rot) std::memcpy(y + rot, x + rot, size_t(p.head_dim - rot) * sizeof(T));
}

// Tokens [begin, end). scratch: 4 buffers of `padded` accumulators (angles c, s; gradient sums gc, gs).
template <typename V, typename T, typename C>
Status rope_tokens(const RotaryParams& p, int64_t begin, int64_t end, bool backward, typename V::acc_t* scratch,
                   int64_t padded) {
  using A = typename V::acc_t;
  const int64_t half = p.half, d = p.head_dim;
  A* c = scratch;
  A* s = c + padded;
  A* gc = s + padded;
  A* gs = gc + padded;
  const bool acc = backward && p.grad_cos != nullptr;
  // non-temporal stores of whole fp32 vectors (a cache line each) where every one starts a line: the outputs'
  // rows (head_dim) and the neox halves whole lines, the outputs 64-byte aligned; a copied tail stays cached
  const int64_t span = (p.interleaved ? 2 * half : half) * int64_t(sizeof(T));
  const bool stream = !backward && p.stream_out && sizeof(T) * V::W == 64 && span % 64 == 0 &&
                      (d * int64_t(sizeof(T))) % 64 == 0 && reinterpret_cast<uintptr_t>(p.q.out) % 64 == 0 &&
                      reinterpret_cast<uintptr_t>(p.k.out) % 64 == 0;
  const C* cos = static_cast<const C*>(p.cos);
  const C* sin = static_cast<const C*>(p.sin);
  for (int64_t t = begin; t < end; ++t) {
    const int64_t b = t / p.seq, si = t - b * p.seq;
    rope_angles<V>(cos + b * p.cos_stride_b + si * p.cos_stride_s, sin + b * p.sin_stride_b + si * p.sin_stride_s,
                   half, p.interleaved, backward ? A(-1) : A(1), c, s);
    if (acc) for (int64_t i = 0; i < 2 * padded; ++i) gc[i] = A(0);
    for (const RotaryInput* in : {&p.q, &p.k}) {
      if (in->x == nullptr) continue;
      const T* x = static_cast<const T*>(in->x) + b * in->stride_b + si * in->stride_s;
      T* y = static_cast<T*>(in->out) + t * in->heads * d;
      if (acc) {
        const T* xs = static_cast<const T*>(in->saved) + b * in->saved_stride_b + si * in->saved_stride_s;
        for (int64_t h = 0; h < in->heads; ++h)
          rope_row<V, true>(x + h * in->stride_h, xs + h * in->saved_stride_h, y + h * d, p, c, s, gc, gs);
      } else if (stream) {
        for (int64_t h = 0; h < in->heads; ++h)
          rope_row<V, false, true>(x + h * in->stride_h, static_cast<const T*>(nullptr), y + h * d, p, c, s, gc, gs);
      } else {
        for (int64_t h = 0; h < in->heads; ++h)
          rope_row<V, false>(x + h * in->stride_h, static_cast<const T*>(nullptr), y + h * d, p, c, s, gc, gs);
      }
    }
    if (acc) {
      A* gcos = static_cast<A*>(p.grad_cos) + t * half;
      A* gsin = static_cast<A*>(p.grad_sin) + t * half;
      for (int64_t i = 0; i < half; ++i) {
        gcos[i] = p.interleaved ? gc[2 * i] + gc[2 * i + 1] : gc[i];
        gsin[i] = p.interleaved ? gs[2 * i + 1] - gs[2 * i] : gs[i];
      }
    }
  }
  if (stream) stream_fence();
  return Status::ok;
}

inline Status rope_dispatch(const RotaryParams& p, int64_t begin, int64_t end, bool backward, float* scratch,
                            int64_t padded) {
  const bool wide = p.cos_dtype == DType::f32;  // f32 tables with f16/bf16 inputs
  switch (p.dtype) {
    case DType::f32:
      if (wide) return rope_tokens<Vec, float, float>(p, begin, end, backward, scratch, padded);
      break;
    case DType::f16:
      if (p.cos_dtype == DType::f16) return rope_tokens<Vec, f16, f16>(p, begin, end, backward, scratch, padded);
      if (wide) return rope_tokens<Vec, f16, float>(p, begin, end, backward, scratch, padded);
      break;
    case DType::bf16:
      if (p.cos_dtype == DType::bf16) return rope_tokens<Vec, bf16, bf16>(p, begin, end, backward, scratch, padded);
      if (wide) return rope_tokens<Vec, bf16, float>(p, begin, end, backward, scratch, padded);
      break;
    default:
      break;
  }
  return Status::unsupported_dtype;
}
