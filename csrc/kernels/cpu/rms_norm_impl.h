// The RMSNorm row loops, written once over a vector type V (W lanes of V::acc_t). No include guard:
// rms_norm.cpp includes this through per_isa.h, once per ISA. See rms_norm.h for the algorithm.

// sum of squares of one row (of a block of one: sum_squares below)
template <typename V, typename T>
inline typename V::acc_t sum_squares_block(const T* x, int64_t n) {
  constexpr int W = V::W;
  V a0 = V::zero(), a1 = V::zero();
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    V v0, v1;
    load_pair_x(x + i, v0, v1);
    a0 = V::fma(v0, v0, a0);
    a1 = V::fma(v1, v1, a1);
  }
  // the lanes of load(x + i), load(x + i + W) again, so the same sums bit for bit (two lane permutes a row)
  unpair_x<T>(a0, a1);
  for (; i + W <= n; i += W) { V v = V::load(x + i); a0 = V::fma(v, v, a0); }
  if (i < n) { V v = load_n<V>(x + i, n - i); a1 = V::fma(v, v, a1); }
  return (a0 + a1).sum();
}

// sum of squares of one row, block by block (vec_util.h, blocked_sum)
template <typename V, typename T>
inline typename V::acc_t sum_squares(const T* x, int64_t n) {
  return blocked_sum(n, [&](int64_t b, int64_t len) { return sum_squares_block<V>(x + b, len); });
}

// h = x + r rounded to T, written out; returns the sum of squares of the rounded h, summed as sum_squares(h) sums
// it (two accumulators over load_pair_x's lanes, then unpair_x): the same value bit for bit. The bf16 loops of this
// file go two vectors at a time through load_pair_x / store_pair_x (one unpack per vector loaded instead of a widen
// and a shift, one pack per two stored with no permute): the same bits, and in one thread in cache (rows of
// 1024 / 4096) bf16 rms_norm with weight 1.27-1.33x, fused_add_rms_norm 1.40-1.45x. The rounded pair is read back
// the way it was stored (bf16: one 64-byte load of the 64 bytes just written), not as two halves into one
// accumulator as before: one thread in cache, bf16 rows of 1024 1.20x, rows of 4096 2.8x (the old reads took 18 us
// for 16 rows where h lay at some offsets from x and r, 6.8 at others; the new ones 6.2-6.3 at both), fp16 1.08-1.13x.
template <typename V, typename T>
inline typename V::acc_t add_sum_squares_block(const T* x, const T* r, T* h, int64_t n) {
  constexpr int W = V::W;
  V a0 = V::zero(), a1 = V::zero();
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    V x0, x1, r0, r1;
    load_pair_x(x + i, x0, x1);
    load_pair_x(r + i, r0, r1);
    V v0 = x0 + r0, v1 = x1 + r1;
    store_pair_x(v0, v1, h + i);
    if constexpr (!std::is_same_v<T, typename V::acc_t>) load_pair_x(h + i, v0, v1);  // (fp32: h is x + r)
    a0 = V::fma(v0, v0, a0);
    a1 = V::fma(v1, v1, a1);
  }
  unpair_x<T>(a0, a1);
  for (; i + W <= n; i += W) {
    (V::load(x + i) + V::load(r + i)).store(h + i);
    V v = V::load(h + i);
    a0 = V::fma(v, v, a0);
  }
  if (i < n) {
    store_n(load_n<V>(x + i, n - i) + load_n<V>(r + i, n - i), h + i, n - i);
    V v = load_n<V>(h + i, n - i);
    a1 = V::fma(v, v, a1);
  }
  return (a0 + a1).sum();
}

// h = x + r and the sum of squares of the rounded h over one row, block by block (vec_util.h, blocked_sum)
template <typename V, typename T>
inline typename V::acc_t add_sum_squares(const T* x, const T* r, T* h, int64_t n) {
  return blocked_sum(n, [&](int64_t b, int64_t len) { return add_sum_squares_block<V>(x + b, r + b, h + b, len); });
}

// y = src * rstd (* w); `stream`: y (64-byte aligned) written with non-temporal stores
template <typename V, typename T, bool kWeight>
inline void scale_row(const T* src, const T* w, typename V::acc_t rstd, T* y, int64_t n, bool stream) {
  constexpr int W = V::W;
  const V s = V::set1(rstd);
  int64_t i = 0;
  const auto pairs = [&](auto store2) {
    for (; i + 2 * W <= n; i += 2 * W) {
      V v0, v1;
      load_pair_x(src + i, v0, v1);
      v0 = v0 * s;
      v1 = v1 * s;
      if (kWeight) {
        V w0, w1;
        load_pair_x(w + i, w0, w1);
        v0 = v0 * w0;
        v1 = v1 * w1;
      }
      store2(v0, v1, y + i);
    }
  };
  if (stream) {
    pairs([](const V& a, const V& b, T* q) { stream_pair_x(a, b, q); });
  } else {
    pairs([](const V& a, const V& b, T* q) { store_pair_x(a, b, q); });
  }
  for (; i + W <= n; i += W) {
    V v = V::load(src + i) * s;
    if (kWeight) v = v * V::load(w + i);
    v.store(y + i);
  }
  if (i < n) {
    V v = load_n<V>(src + i, n - i) * s;
    if (kWeight) v = v * load_n<V>(w + i, n - i);
    store_n(v, y + i, n - i);
  }
}

template <typename V, typename T>
Status forward_rows(const RmsNormForward& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  const int64_t n = p.cols;
  const T* w = static_cast<const T*>(p.weight);
  for (int64_t row = begin; row < end; ++row) {
    const T* src = static_cast<const T*>(p.x) + row * p.x_stride;
    acc_t ss;
    if (p.residual != nullptr) {
      T* h = static_cast<T*>(p.residual_out) + row * n;
      ss = add_sum_squares<V>(src, static_cast<const T*>(p.residual) + row * p.residual_stride, h, n);
      src = h;
    } else {
      ss = sum_squares<V>(src, n);
    }
    const acc_t rstd = acc_t(1) / std::sqrt(ss / acc_t(n) + acc_t(p.eps));
    T* y = static_cast<T*>(p.out) + row * n;
    // y only: fused_add_rms_norm's h is read back right away, from the cache
    const bool stream = p.stream_out && reinterpret_cast<uintptr_t>(y) % 64 == 0;
    if (w != nullptr) scale_row<V, T, true>(src, w, rstd, y, n, stream);
    else scale_row<V, T, false>(src, w, rstd, y, n, stream);
  }
  if (p.stream_out) stream_fence();
  return Status::ok;
}

template <typename V, typename T>
Status backward_rows(const RmsNormBackward& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  constexpr int W = V::W;
  const int64_t n = p.cols;
  const T* w = static_cast<const T*>(p.weight);
  acc_t* dw = static_cast<acc_t*>(p.weight_grad_acc);
  acc_t wbuf[W], dwbuf[W];
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    const T* g = static_cast<const T*>(p.grad_out) + row * p.grad_out_stride;
    const T* ga = p.grad_add ? static_cast<const T*>(p.grad_add) + row * p.grad_add_stride : nullptr;
    T* dx = static_cast<T*>(p.grad_x) + row * n;
    const acc_t rstd = acc_t(1) / std::sqrt(sum_squares<V>(x, n) / acc_t(n) + acc_t(p.eps));

    // dot = sum(g * w * x), block by block (vec_util.h, blocked_sum)
    const acc_t dot = blocked_sum(n, [&](int64_t b, int64_t len) {
      V d = V::zero();
      int64_t i = b;
      for (; i + W <= b + len; i += W) {
        V gw = V::load(g + i);
        if (w) gw = gw * V::load(w + i);
        d = V::fma(gw, V::load(x + i), d);
      }
      if (i < b + len) {
        const int64_t m = b + len - i;
        V gw = load_n<V>(g + i, m);
        if (w) gw = gw * load_n<V>(w + i, m);
        d = V::fma(gw, load_n<V>(x + i, m), d);
      }
      return d.sum();
    });
    // dx = rstd * g * w - x * rstd^3 * dot / n   (+ grad_add);   dw += g * x * rstd
    const V vr = V::set1(rstd);
    const V vc = V::set1(rstd * rstd * rstd * dot / acc_t(n));
    for (int64_t i = 0; i < n; i += W) {
      const int64_t m = n - i < W ? n - i : W;
      const bool full = m == W;
      V gv = full ? V::load(g + i) : load_n<V>(g + i, m);
      V xv = full ? V::load(x + i) : load_n<V>(x + i, m);
      V gw = gv;
      if (w) gw = gw * (full ? V::load(w + i) : load_n<V>(w + i, m));
      V d = gw * vr - xv * vc;
      if (ga) d = d + (full ? V::load(ga + i) : load_n<V>(ga + i, m));
      if (full) d.store(dx + i); else store_n(d, dx + i, m);
      if (dw) {
        if (full) {
          V::fma(gv * xv, vr, V::load(dw + i)).store(dw + i);
        } else {
          std::memcpy(wbuf, dw + i, size_t(m) * sizeof(acc_t));
          V::fma(gv * xv, vr, V::load(wbuf)).store(dwbuf);
          std::memcpy(dw + i, dwbuf, size_t(m) * sizeof(acc_t));
        }
      }
    }
  }
  return Status::ok;
}

// The dtype switch of this ISA for the half and single types (fp64 goes to the generic double path).
inline Status forward_dispatch(const RmsNormForward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return forward_rows<Vec, float>(p, begin, end);
    case DType::f16: return forward_rows<Vec, f16>(p, begin, end);
    case DType::bf16: return forward_rows<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}

inline Status backward_dispatch(const RmsNormBackward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return backward_rows<Vec, float>(p, begin, end);
    case DType::f16: return backward_rows<Vec, f16>(p, begin, end);
    case DType::bf16: return backward_rows<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}
