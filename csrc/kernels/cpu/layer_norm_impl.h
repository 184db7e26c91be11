// The LayerNorm row loops, written once over a vector type V. No include guard: layer_norm.cpp
// includes this through per_isa.h, once per ISA. See layer_norm.h for the algorithm.

// Zeroes lanes [m, W) of v (the zero-filled tail of a load_n, after a subtraction made them non-zero).
template <typename V>
inline V keep_lanes(V v, int64_t m) {
  typename V::acc_t lanes[V::W];
  v.store(lanes);
  for (int64_t k = m; k < V::W; ++k) lanes[k] = typename V::acc_t(0);
  return V::load(lanes);
}

// The moments of one row in one pass over shifted data: with shift = x[0], d = x - shift (exact in fp32
// for values within a factor of 2 of each other), dmean = mean(d) and var = mean(d^2) - dmean^2. The
// shift usually sits within a few standard deviations of the mean, so the subtraction cancels little (a row
// whose x[0] lies further out takes a second pass over the centred squares), and a large common offset costs
// neither the sums nor the rounded mean their digits: centering is (x - shift) - dmean.
template <typename V>
struct Moments {
  V shift, dmean, rstd;
  V center(V x) const { return (x - shift) - dmean; }
};

// The sums of d = x - shift and d^2 over n elements (one block of a row: row_moments sums rows block by block)
template <typename V, typename T>
inline void shifted_sums(const T* x, int64_t n, V shift, typename V::acc_t& sum, typename V::acc_t& sum_sq) {
  constexpr int W = V::W;
  // two pairs of accumulators: the sums' add/fma latency, not the loads, would bound a single chain
  V s1 = V::zero(), s2 = V::zero(), t1 = V::zero(), t2 = V::zero();
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    V d0, d1;
    load_pair_x(x + i, d0, d1);
    d0 = d0 - shift;
    d1 = d1 - shift;
    s1 = s1 + d0;
    s2 = V::fma(d0, d0, s2);
    t1 = t1 + d1;
    t2 = V::fma(d1, d1, t2);
  }
  // load_pair_x's lanes (bf16: one unpack per vector instead of a widen and a shift) back to those of load(x + i),
  // load(x + i + W): the same sums bit for bit
  unpair_x<T>(s1, t1);
  unpair_x<T>(s2, t2);
  for (; i + W <= n; i += W) { V d = V::load(x + i) - shift; s1 = s1 + d; s2 = V::fma(d, d, s2); }
  if (i < n) { V d = keep_lanes(load_n<V>(x + i, n - i) - shift, n - i); t1 = t1 + d; t2 = V::fma(d, d, t2); }
  sum = (s1 + t1).sum();
  sum_sq = (s2 + t2).sum();
}

// (always inlined: a call, with the three vectors of Moments returned through memory, cost rows of 1024 about 7%)
template <typename V, typename T>
[[gnu::always_inline]] inline Moments<V> row_moments(const T* x, int64_t n, double eps) {
  using acc_t = typename V::acc_t;
  constexpr int W = V::W;
  acc_t first[W];
  load_n<V>(x, 1).store(first);
  const V shift = V::set1(first[0]);
  acc_t s1, s2;  // block by block (vec_util.h, blocked_sum2)
  blocked_sum2(n, s1, s2, [&](int64_t b, int64_t len, acc_t& a1, acc_t& a2) {
    shifted_sums<V>(x + b, len, shift, a1, a2);
  });
  const acc_t dmean = s1 / acc_t(n);
  acc_t var = s2 / acc_t(n) - dmean * dmean;
  if (dmean * dmean > acc_t(16) * var) {
    // x[0] more than 4 standard deviations from the mean (an outlier first element), or the difference rounded
    // to <= 0: mean(d^2) - dmean^2 has lost about log2(1 + dmean^2 / var) bits, and the sums of d the digits
    // of x below x[0]'s ulp. One more pass takes the same sums around the first estimate of the mean, which
    // lies far within a standard deviation of it.
    const V m = V::set1(first[0] + dmean);
    acc_t c1, c2;
    blocked_sum2(n, c1, c2, [&](int64_t b, int64_t len, acc_t& a1, acc_t& a2) {
      V u1 = V::zero(), u2 = V::zero();
      int64_t j = b;
      for (; j + W <= b + len; j += W) { const V d = V::load(x + j) - m; u1 = u1 + d; u2 = V::fma(d, d, u2); }
      if (j < b + len) {
        const V d = keep_lanes(load_n<V>(x + j, b + len - j) - m, b + len - j);
        u1 = u1 + d;
        u2 = V::fma(d, d, u2);
      }
      a1 = u1.sum();
      a2 = u2.sum();
    });
    const acc_t off = c1 / acc_t(n);
    acc_t v2 = c2 / acc_t(n) - off * off;
    v2 = v2 > acc_t(0) ? v2 : acc_t(0);
    return {m, V::set1(off), V::set1(acc_t(1) / std::sqrt(v2 + acc_t(eps)))};
  }
  var = var > acc_t(0) ? var : acc_t(0);
  return {shift, V::set1(dmean), V::set1(acc_t(1) / std::sqrt(var + acc_t(eps)))};
}

// y = center(x) * rstd (* w) (+ b) over one row; pairs of vectors (load_pair_x / store_pair_x: bf16 loaded and
// stored in a lane order of their own, the same bits with fewer instructions; with row_moments' pairs, bf16
// layer_norm 1.30-1.35x in one thread in cache, rows of 1024 / 4096), whole vectors, then one masked tail
template <typename V, bool kWeight, bool kBias, typename T>
inline void ln_affine_row(const T* x, const T* w, const T* b, const Moments<V>& mo, T* y, int64_t n, bool stream) {
  constexpr int W = V::W;
  auto one = [&](V xv, V wv, V bv) {
    V v = mo.center(xv) * mo.rstd;
    if constexpr (kWeight && kBias) return V::fma(v, wv, bv);
    else if constexpr (kWeight) return v * wv;
    else if constexpr (kBias) return v + bv;
    else return v;
  };
  int64_t i = 0;
  const auto pairs = [&](auto store2) {
    for (; i + 2 * W <= n; i += 2 * W) {
      V x0, x1, w0 = V::zero(), w1 = V::zero(), b0 = V::zero(), b1 = V::zero();
      load_pair_x(x + i, x0, x1);
      if constexpr (kWeight) load_pair_x(w + i, w0, w1);
      if constexpr (kBias) load_pair_x(b + i, b0, b1);
      store2(one(x0, w0, b0), one(x1, w1, b1), y + i);
    }
  };
  if (stream) {  // non-temporal: the caller checked y's alignment
    pairs([](const V& a, const V& c, T* q) { stream_pair_x(a, c, q); });
  } else {
    pairs([](const V& a, const V& c, T* q) { store_pair_x(a, c, q); });
  }
  for (; i + W <= n; i += W) {
    one(V::load(x + i), kWeight ? V::load(w + i) : V::zero(), kBias ? V::load(b + i) : V::zero()).store(y + i);
  }
  if (i < n) {
    const int64_t m = n - i;
    store_n(one(load_n<V>(x + i, m), kWeight ? load_n<V>(w + i, m) : V::zero(), kBias ? load_n<V>(b + i, m) : V::zero()),
            y + i, m);
  }
}

template <typename V, typename T>
Status ln_forward_rows(const LayerNormForward& p, int64_t begin, int64_t end) {
  const int64_t n = p.cols;
  const T* w = static_cast<const T*>(p.weight);
  const T* b = static_cast<const T*>(p.bias);
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    T* y = static_cast<T*>(p.out) + row * n;
    const Moments<V> mo = row_moments<V>(x, n, p.eps);
    const bool stream = p.stream_out && reinterpret_cast<uintptr_t>(y) % 64 == 0;
    if (w && b) {
      ln_affine_row<V, true, true>(x, w, b, mo, y, n, stream);
    } else if (w) {
      ln_affine_row<V, true, false>(x, w, b, mo, y, n, stream);
    } else if (b) {
      ln_affine_row<V, false, true>(x, w, b, mo, y, n, stream);
    } else {
      ln_affine_row<V, false, false>(x, w, b, mo, y, n, stream);
    }
  }
  if (p.stream_out) stream_fence();
  return Status::ok;
}

template <typename V, typename T>
Status ln_backward_rows(const LayerNormBackward& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  constexpr int W = V::W;
  const int64_t n = p.cols;
  const T* w = static_cast<const T*>(p.weight);
  acc_t* dw = static_cast<acc_t*>(p.weight_grad_acc);
  acc_t* db = static_cast<acc_t*>(p.bias_grad_acc);
  acc_t buf[W];
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    const T* g = static_cast<const T*>(p.grad_out) + row * p.grad_out_stride;
    T* dx = static_cast<T*>(p.grad_x) + row * n;
    const Moments<V> mo = row_moments<V>(x, n, p.eps);
    // sums of g*w and g*w*xhat (tail lanes load as zero g, so they add nothing), block by block (vec_util.h)
    acc_t sum_g, sum_gx;
    blocked_sum2(n, sum_g, sum_gx, [&](int64_t b, int64_t len, acc_t& a1, acc_t& a2) {
      V sg = V::zero(), sgx = V::zero();
      for (int64_t i = b; i < b + len; i += W) {
        const int64_t m = b + len - i < W ? b + len - i : W;
        const bool full = m == W;
        V gw = full ? V::load(g + i) : load_n<V>(g + i, m);
        if (w) gw = gw * (full ? V::load(w + i) : load_n<V>(w + i, m));
        const V xh = mo.center(full ? V::load(x + i) : load_n<V>(x + i, m)) * mo.rstd;
        sg = sg + gw;
        sgx = V::fma(gw, xh, sgx);
      }
      a1 = sg.sum();
      a2 = sgx.sum();
    });
    const V c1 = V::set1(sum_g / acc_t(n)), c2 = V::set1(sum_gx / acc_t(n));
    for (int64_t i = 0; i < n; i += W) {
      const int64_t m = n - i < W ? n - i : W;
      const bool full = m == W;
      const V gv = full ? V::load(g + i) : load_n<V>(g + i, m);
      V gw = gv;
      if (w) gw = gw * (full ? V::load(w + i) : load_n<V>(w + i, m));
      const V xh = mo.center(full ? V::load(x + i) : load_n<V>(x + i, m)) * mo.rstd;
      const V d = (gw - c1 - xh * c2) * mo.rstd;
      if (full) d.store(dx + i); else store_n(d, dx + i, m);
      // tail lanes of gv are zero, so the partial sums below add nothing there
      if (dw) {
        if (full) V::fma(gv, xh, V::load(dw + i)).store(dw + i);
        else { std::memcpy(buf, dw + i, size_t(m) * sizeof(acc_t)); V::fma(gv, xh, V::load(buf)).store(buf);
               std::memcpy(dw + i, buf, size_t(m) * sizeof(acc_t)); }
      }
      if (db) {
        if (full) (V::load(db + i) + gv).store(db + i);
        else { std::memcpy(buf, db + i, size_t(m) * sizeof(acc_t)); (V::load(buf) + gv).store(buf);
               std::memcpy(db + i, buf, size_t(m) * sizeof(acc_t)); }
      }
    }
  }
  return Status::ok;
}

inline Status ln_forward_dispatch(const LayerNormForward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return ln_forward_rows<Vec, float>(p, begin, end);
    case DType::f16: return ln_forward_rows<Vec, f16>(p, begin, end);
    case DType::bf16: return ln_forward_rows<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}

inline Status ln_backward_dispatch(const LayerNormBackward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return ln_backward_rows<Vec, float>(p, begin, end);
    case DType::f16: return ln_backward_rows<Vec, f16>(p, begin, end);
    case DType::bf16: return ln_backward_rows<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}
