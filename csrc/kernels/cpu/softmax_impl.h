// The softmax / log_softmax loops, written once over a vector type V. No include guard: softmax.cpp
// includes this through per_isa.h, once per ISA. See softmax.h for the algorithm.

template <typename V>
inline typename V::acc_t neg_inf() {
  return -std::numeric_limits<typename V::acc_t>::infinity();
}

// Lanes [0, m) of p (m < W), the others `pad`.
template <typename V, typename T>
inline V load_pad(const T* p, int64_t m, typename V::acc_t pad) {
  using acc_t = typename V::acc_t;
  acc_t lanes[V::W];
  for (int k = 0; k < V::W; ++k) lanes[k] = acc_t(k);
  return vselect_lt(V::load(lanes), V::set1(acc_t(m)), load_n<V>(p, m), V::set1(pad));
}

template <typename V>
inline V log_lanes(V v) {
  typename V::acc_t lanes[V::W];
  v.store(lanes);
  for (int k = 0; k < V::W; ++k) lanes[k] = std::log(lanes[k]);
  return V::load(lanes);
}

// Columns per task when inner > 1: 4, 2 or 1 vectors, the most whose `dim` rows (input plus the fp32
// exp values, or grad_out plus out in backward) fit the block budget, so the passes after the first hit
// L2 (512 KiB: half of a 1 MiB L2, or most of a 512 KiB one shared with the hardware prefetcher's lines).
template <typename V>
inline int64_t block_cols(int64_t dim, int64_t elem_bytes) {
  constexpr int64_t kBlockBytes = int64_t{512} << 10;
  const int64_t per_vec = dim * V::W * (elem_bytes + int64_t(sizeof(typename V::acc_t)));
  int64_t nv = 4;
  while (nv > 1 && nv * per_vec > kBlockBytes) nv /= 2;
  return nv * V::W;
}

template <typename V>
inline SoftmaxTasks tasks_for(int64_t outer, int64_t dim, int64_t inner, int64_t elem_bytes) {
  if (inner == 1) return {outer, dim};
  const int64_t cols = block_cols<V>(dim, elem_bytes);
  return {outer * ((inner + cols - 1) / cols), dim * (cols < inner ? cols : inner)};
}

// ------------------------------------------------------------------------------------------- rows

template <typename V, typename T>
inline typename V::acc_t row_max(const T* x, int64_t n) {
  constexpr int W = V::W;
  const V lo = V::set1(neg_inf<V>());
  V m0 = lo, m1 = lo, m2 = lo, m3 = lo;
  int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    m0 = vmax(m0, V::load(x + i));
    m1 = vmax(m1, V::load(x + i + W));
    m2 = vmax(m2, V::load(x + i + 2 * W));
    m3 = vmax(m3, V::load(x + i + 3 * W));
  }
  for (; i + W <= n; i += W) m0 = vmax(m0, V::load(x + i));
  if (i < n) m1 = vmax(m1, load_pad<V>(x + i, n - i, neg_inf<V>()));
  return vmax(vmax(m0, m1), vmax(m2, m3)).max();
}

// sum(exp(x - mx)); when e is not null, also e = exp(x - mx). Tail lanes are padded with -inf, so they
// add exp(-inf) = 0 (NaN when mx is -inf too: then the row is all -inf and NaN is the answer).
template <typename V, typename T, typename E>
inline typename V::acc_t row_sum_exp(const T* x, int64_t n, typename V::acc_t mx, E* e) {
  constexpr int W = V::W;
  const V vm = V::set1(mx);
  V s0 = V::zero(), s1 = V::zero();
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const V a = vexp(V::load(x + i) - vm), b = vexp(V::load(x + i + W) - vm);
    if (e) { a.store(e + i); b.store(e + i + W); }
    s0 = s0 + a;
    s1 = s1 + b;
  }
  if (i + W <= n) {
    const V a = vexp(V::load(x + i) - vm);
    if (e) a.store(e + i);
    s0 = s0 + a;
    i += W;
  }
  if (i < n) {
    const V a = vexp(load_pad<V>(x + i, n - i, neg_inf<V>()) - vm);
    if (e) store_n(a, e + i, n - i);
    s1 = s1 + a;
  }
  return (s0 + s1).sum();
}

template <typename V, typename T>
Status softmax_rows(const SoftmaxForward& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  constexpr int W = V::W;
  constexpr bool kDirect = std::is_same_v<T, acc_t>;  // exp values go to the output row itself
  const int64_t n = p.dim;
  std::vector<acc_t> scratch(kDirect || p.log ? 0 : size_t(n));
  for (int64_t row = begin; row < end; ++row) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_outer_stride;
    T* y = static_cast<T*>(p.out) + row * n;
    const acc_t mx = row_max<V>(x, n);
    if (p.log) {
      // (x - max) - log(sum): the subtraction first keeps a large common offset's digits
      const acc_t lse = std::log(row_sum_exp<V>(x, n, mx, static_cast<acc_t*>(nullptr)));
      const V vm = V::set1(mx), vl = V::set1(lse);
      int64_t i = 0;
      for (; i + W <= n; i += W) ((V::load(x + i) - vm) - vl).store(y + i);
      if (i < n) store_n((load_n<V>(x + i, n - i) - vm) - vl, y + i, n - i);
      continue;
    }
    acc_t* e;
    if constexpr (kDirect) e = y; else e = scratch.data();
    const V inv = V::set1(acc_t(1) / row_sum_exp<V>(x, n, mx, e));
    int64_t i = 0;
    for (; i + W <= n; i += W) (V::load(e + i) * inv).store(y + i);
    if (i < n) store_n(load_n<V>(e + i, n - i) * inv, y + i, n - i);
  }
  return Status::ok;
}

template <typename V, typename T>
Status softmax_backward_rows(const SoftmaxBackward& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  constexpr int W = V::W;
  const int64_t n = p.dim;
  for (int64_t row = begin; row < end; ++row) {
    const T* g = static_cast<const T*>(p.grad_out) + row * p.grad_out_outer_stride;
    const T* o = static_cast<const T*>(p.out) + row * p.out_outer_stride;
    T* dx = static_cast<T*>(p.grad_x) + row * n;
    // log: s = sum(g); softmax: s = sum(g * out). Tail lanes load as zero and add nothing.
    V s0 = V::zero(), s1 = V::zero();
    int64_t i = 0;
    if (p.log) {
      for (; i + 2 * W <= n; i += 2 * W) { s0 = s0 + V::load(g + i); s1 = s1 + V::load(g + i + W); }
      for (; i + W <= n; i += W) s0 = s0 + V::load(g + i);
      if (i < n) s1 = s1 + load_n<V>(g + i, n - i);
    } else {
      for (; i + 2 * W <= n; i += 2 * W) {
        s0 = V::fma(V::load(g + i), V::load(o + i), s0);
        s1 = V::fma(V::load(g + i + W), V::load(o + i + W), s1);
      }
      for (; i + W <= n; i += W) s0 = V::fma(V::load(g + i), V::load(o + i), s0);
      if (i < n) s1 = V::fma(load_n<V>(g + i, n - i), load_n<V>(o + i, n - i), s1);
    }
    const acc_t s = (s0 + s1).sum();
    if (p.log) {
      const V neg_s = V::set1(-s);  // dx = g - exp(out) * s
      for (i = 0; i + W <= n; i += W) V::fma(vexp(V::load(o + i)), neg_s, V::load(g + i)).store(dx + i);
      if (i < n) store_n(V::fma(vexp(load_n<V>(o + i, n - i)), neg_s, load_n<V>(g + i, n - i)), dx + i, n - i);
    } else {
      const V vs = V::set1(s);  // dx = out * (g - s)
      for (i = 0; i + W <= n; i += W) (V::load(o + i) * (V::load(g + i) - vs)).store(dx + i);
      if (i < n) store_n(load_n<V>(o + i, n - i) * (load_n<V>(g + i, n - i) - vs), dx + i, n - i);
    }
  }
  return Status::ok;
}

// ---------------------------------------------------------------------------------------- columns

// Vector j of NV at p; with TAIL the last one holds only m < W lanes (loaded as zero beyond: those lanes
// are columns of their own, computed and never stored).
template <typename V, int NV, bool TAIL, typename T>
inline V ldj(const T* p, int j, int64_t m) {
  if (TAIL && j == NV - 1) return load_n<V>(p + j * V::W, m);
  return V::load(p + j * V::W);
}

template <typename V, int NV, bool TAIL, typename T>
inline void stj(const V& v, T* p, int j, int64_t m) {
  if (TAIL && j == NV - 1) store_n(v, p + j * V::W, m);
  else v.store(p + j * V::W);
}

// Calls f.run<NV, TAIL>(c, m) over the columns [0, width) of a block: chunks of 4, 2 and 1 full vectors,
// then one partial vector of m lanes.
template <typename V, typename F>
inline void for_col_chunks(int64_t width, const F& f) {
  constexpr int W = V::W;
  int64_t c = 0;
  for (; c + 4 * W <= width; c += 4 * W) f.template run<4, false>(c, W);
  if (c + 2 * W <= width) { f.template run<2, false>(c, W); c += 2 * W; }
  if (c + W <= width) { f.template run<1, false>(c, W); c += W; }
  if (c < width) f.template run<1, true>(c, width - c);
}

// One (outer index, column block) of the forward: x + d * xs is row d of the block (d < n), y + d * ys its
// output row; scratch holds n rows of 4 W fp32 exp values when T is narrower than the accumulator.
template <typename V, typename T>
struct SoftmaxColumns {
  using acc_t = typename V::acc_t;
  const T* x;
  int64_t xs;
  T* y;
  int64_t ys;
  acc_t* scratch;
  int64_t n;
  bool log;

  template <int NV, bool TAIL>
  void run(int64_t c, int64_t m) const {
    constexpr int W = V::W;
    const T* xc = x + c;
    T* yc = y + c;
    V mx[NV], s[NV];
    for (int j = 0; j < NV; ++j) { mx[j] = V::set1(neg_inf<V>()); s[j] = V::zero(); }
    for (int64_t d = 0; d < n; ++d)
      for (int j = 0; j < NV; ++j) mx[j] = vmax(mx[j], ldj<V, NV, TAIL>(xc + d * xs, j, m));
    if (log) {
      for (int64_t d = 0; d < n; ++d)
        for (int j = 0; j < NV; ++j) s[j] = s[j] + vexp(ldj<V, NV, TAIL>(xc + d * xs, j, m) - mx[j]);
      for (int j = 0; j < NV; ++j) s[j] = log_lanes(s[j]);
      for (int64_t d = 0; d < n; ++d)
        for (int j = 0; j < NV; ++j)
          stj<V, NV, TAIL>((ldj<V, NV, TAIL>(xc + d * xs, j, m) - mx[j]) - s[j], yc + d * ys, j, m);
      return;
    }
    acc_t* e;
    int64_t es;
    if constexpr (std::is_same_v<T, acc_t>) { e = yc; es = ys; } else { e = scratch; es = NV * W; }
    for (int64_t d = 0; d < n; ++d)
      for (int j = 0; j < NV; ++j) {
        const V a = vexp(ldj<V, NV, TAIL>(xc + d * xs, j, m) - mx[j]);
        stj<V, NV, TAIL>(a, e + d * es, j, m);
        s[j] = s[j] + a;
      }
    for (int j = 0; j < NV; ++j) s[j] = V::set1(acc_t(1)) / s[j];
    for (int64_t d = 0; d < n; ++d)
      for (int j = 0; j < NV; ++j) stj<V, NV, TAIL>(ldj<V, NV, TAIL>(e + d * es, j, m) * s[j], yc + d * ys, j, m);
  }
};

template <typename V, typename T>
struct SoftmaxBackwardColumns {
  using acc_t = typename V::acc_t;
  const T* g;
  int64_t gs;
  const T* o;
  int64_t os;
  T* dx;
  int64_t dxs;
  int64_t n;
  bool log;

  template <int NV, bool TAIL>
  void run(int64_t c, int64_t m) const {
    const T* gc = g + c;
    const T* oc = o + c;
    T* dc = dx + c;
    V s[NV];
    for (int j = 0; j < NV; ++j) s[j] = V::zero();
    if (log) {
      for (int64_t d = 0; d < n; ++d)
        for (int j = 0; j < NV; ++j) s[j] = s[j] + ldj<V, NV, TAIL>(gc + d * gs, j, m);
      for (int j = 0; j < NV; ++j) s[j] = V::zero() - s[j];
      for (int64_t d = 0; d < n; ++d)
        for (int j = 0; j < NV; ++j)
          stj<V, NV, TAIL>(V::fma(vexp(ldj<V, NV, TAIL>(oc + d * os, j, m)), s[j], ldj<V, NV, TAIL>(gc + d * gs, j, m)),
                           dc + d * dxs, j, m);
      return;
    }
    for (int64_t d = 0; d < n; ++d)
      for (int j = 0; j < NV; ++j)
        s[j] = V::fma(ldj<V, NV, TAIL>(gc + d * gs, j, m), ldj<V, NV, TAIL>(oc + d * os, j, m), s[j]);
    for (int64_t d = 0; d < n; ++d)
      for (int j = 0; j < NV; ++j)
        stj<V, NV, TAIL>(ldj<V, NV, TAIL>(oc + d * os, j, m) * (ldj<V, NV, TAIL>(gc + d * gs, j, m) - s[j]),
                         dc + d * dxs, j, m);
  }
};

template <typename V, typename T>
Status softmax_columns(const SoftmaxForward& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  const int64_t cols = block_cols<V>(p.dim, sizeof(T)), blocks = (p.inner + cols - 1) / cols;
  std::vector<acc_t> scratch(std::is_same_v<T, acc_t> || p.log ? 0 : size_t(p.dim * 4 * V::W));
  for (int64_t t = begin; t < end; ++t) {
    const int64_t o = t / blocks, c0 = (t % blocks) * cols;
    const int64_t width = cols < p.inner - c0 ? cols : p.inner - c0;
    const SoftmaxColumns<V, T> f{static_cast<const T*>(p.x) + o * p.x_outer_stride + c0, p.x_dim_stride,
                                 static_cast<T*>(p.out) + o * p.dim * p.inner + c0, p.inner, scratch.data(),
                                 p.dim, p.log};
    for_col_chunks<V>(width, f);
  }
  return Status::ok;
}

template <typename V, typename T>
Status softmax_backward_columns(const SoftmaxBackward& p, int64_t begin, int64_t end) {
  const int64_t cols = block_cols<V>(p.dim, sizeof(T)), blocks = (p.inner + cols - 1) / cols;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t o = t / blocks, c0 = (t % blocks) * cols;
    const int64_t width = cols < p.inner - c0 ? cols : p.inner - c0;
    const SoftmaxBackwardColumns<V, T> f{
        static_cast<const T*>(p.grad_out) + o * p.grad_out_outer_stride + c0, p.grad_out_dim_stride,
        static_cast<const T*>(p.out) + o * p.out_outer_stride + c0, p.out_dim_stride,
        static_cast<T*>(p.grad_x) + o * p.dim * p.inner + c0, p.inner, p.dim, p.log};
    for_col_chunks<V>(width, f);
  }
  return Status::ok;
}

// --------------------------------------------------------------------------------------- dispatch

inline bool valid_shape(int64_t outer, int64_t dim, int64_t inner, int64_t unit_stride) {
  return outer >= 0 && dim >= 0 && inner >= 1 && (inner > 1 || dim <= 1 || unit_stride == 1);
}

template <typename V, typename T>
Status softmax_forward_typed(const SoftmaxForward& p, int64_t begin, int64_t end) {
  if (!valid_shape(p.outer, p.dim, p.inner, p.x_dim_stride)) return Status::invalid_argument;
  return p.inner == 1 ? softmax_rows<V, T>(p, begin, end) : softmax_columns<V, T>(p, begin, end);
}

template <typename V, typename T>
Status softmax_backward_typed(const SoftmaxBackward& p, int64_t begin, int64_t end) {
  if (!valid_shape(p.outer, p.dim, p.inner, p.grad_out_dim_stride) ||
      !valid_shape(p.outer, p.dim, p.inner, p.out_dim_stride))
    return Status::invalid_argument;
  return p.inner == 1 ? softmax_backward_rows<V, T>(p, begin, end) : softmax_backward_columns<V, T>(p, begin, end);
}

inline Status softmax_forward_dispatch(const SoftmaxForward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return softmax_forward_typed<Vec, float>(p, begin, end);
    case DType::f16: return softmax_forward_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return softmax_forward_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}

inline Status softmax_backward_dispatch(const SoftmaxBackward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return softmax_backward_typed<Vec, float>(p, begin, end);
    case DType::f16: return softmax_backward_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return softmax_backward_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}

inline SoftmaxTasks softmax_tasks_dispatch(int64_t outer, int64_t dim, int64_t inner, int64_t elem_bytes) {
  return tasks_for<Vec>(outer, dim, inner, elem_bytes);
}
