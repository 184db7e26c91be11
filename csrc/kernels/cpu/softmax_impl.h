// The softmax / log_softmax loops, written once over a vector type V. No include guard: softmax.cpp
// includes this through per_isa.h, once per ISA. See softmax.h for the algorithm.

template <typename V>
inline typename V::acc_t neg_inf() {
  return -std::numeric_limits<typename V::acc_t>::infinity();
}

// Scalar widening / narrowing between a storage type and the accumulator (fp32, or fp64 for fp64).
template <typename T>
inline float to_acc(T v) { return to_float(v); }
inline double to_acc(double v) { return v; }

template <typename T, typename A>
inline T from_acc(A v) {
  if constexpr (std::is_same_v<T, A>) return v; else return from_float<T>(v);
}

// The last m < W lanes of a row or column block: through a W-lane buffer, element by element.
template <typename V, typename T>
inline void store_tail(const V& v, T* p, int64_t m) {
  typename V::acc_t lanes[V::W];
  v.store(lanes);
  for (int k = 0; k < V::W; ++k)
    if (k < m) p[k] = from_acc<T>(lanes[k]);
}

template <typename V>
inline V log_lanes(V v) {
  typename V::acc_t lanes[V::W];
  v.store(lanes);
  for (int k = 0; k < V::W; ++k) lanes[k] = std::log(lanes[k]);
  return V::load(lanes);
}

// Columns per task when inner > 1: 4, 2 or 1 vectors, the most whose packed scratch (`dim` fp32 values per
// column, twice that in backward: grad_out and out) fits kBlockBytes, so the passes after the first run
// in L2 (512 KiB: half of a 1 MiB L2).
constexpr int64_t kBlockBytes = int64_t{512} << 10;

template <typename V>
inline int64_t block_cols(int64_t dim) {
  const int64_t per_vec = 2 * dim * V::W * int64_t(sizeof(typename V::acc_t));
  int64_t nv = 4;
  while (nv > 1 && nv * per_vec > kBlockBytes) nv /= 2;
  return nv * V::W;
}

template <typename V>
inline SoftmaxTasks tasks_for(int64_t outer, int64_t dim, int64_t inner) {
  if (inner == 1) return {outer, dim};
  const int64_t cols = block_cols<V>(dim);
  return {outer * ((inner + cols - 1) / cols), dim * (cols < inner ? cols : inner)};
}

// ------------------------------------------------------------------------------------------- rows

// Rows are handled in groups whose fp32 copies take about kGroupElems values (16 KiB: L1), at least one
// row: pass 1 packs every row of the group into the copy (padded to whole vectors) and takes its max; the
// later passes read the copies. For short rows the group puts many rows between the scalar writes of a
// row's tail and the vector load that reads them back, so that load does not stall on them.
constexpr int64_t kGroupElems = 4096;

inline int64_t round_up(int64_t n, int64_t w) { return (n + w - 1) / w * w; }

// Software prefetch of the next group's rows, one cache line per step, issued from the compute-bound exp
// pass so the memory-bound packing pass of the next group finds them on the way (the hardware prefetcher
// sees no accesses to that stream while this group is being computed).
struct Prefetch {
  const char* p = nullptr;
  int64_t lines = 0;

  Prefetch() = default;
  // rows [begin, end) of a tensor with `stride` elements between rows of n elements of `elem` bytes
  Prefetch(const void* base, int64_t begin, int64_t end, int64_t stride, int64_t n, int64_t elem) {
    if (end <= begin || stride < 0) return;
    p = static_cast<const char*>(base) + begin * stride * elem;
    lines = ((end - begin - 1) * stride * elem + n * elem + 63) / 64;
  }
  void step() {
    if (lines <= 0) return;
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 3);
#endif
    p += 64;
    --lines;
  }
};

// Copies x[0, n) into `to` as acc_t, padded with `pad` to a whole vector, and returns max(x) (NaN lanes are
// skipped here; they make the sum NaN later).
template <typename V, typename T>
inline typename V::acc_t pack_row_max(const T* x, int64_t n, typename V::acc_t pad, typename V::acc_t* to) {
  using acc_t = typename V::acc_t;
  constexpr int W = V::W;
  const V lo = V::set1(neg_inf<V>());
  V m0 = lo, m1 = lo;
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const V a = V::load(x + i), b = V::load(x + i + W);
    a.store(to + i);
    b.store(to + i + W);
    m0 = vmax(m0, a);
    m1 = vmax(m1, b);
  }
  if (i + W <= n) {
    const V a = V::load(x + i);
    a.store(to + i);
    m0 = vmax(m0, a);
    i += W;
  }
  acc_t mx = vmax(m0, m1).max();
  for (int k = 0; i + k < round_up(n, W); ++k) {
    const acc_t v = i + k < n ? to_acc(x[i + k]) : pad;
    to[i + k] = v;
    if (i + k < n) mx = v > mx ? v : mx;
  }
  return mx;
}

// sum(exp(e - mx)) over np (a multiple of W) packed values; with kStore, e = exp(e - mx) in place. Padding
// lanes hold -inf and add exp(-inf) = 0 (NaN when mx is -inf too: then the row is all -inf, and NaN is the
// answer). One vector per iteration: the exp's constants take most of the 16 AVX2 registers, and
// unrolling spills the sum, whose store-reload latency then bounds the loop.
template <typename V, bool kStore>
inline typename V::acc_t sum_exp(typename V::acc_t* e, int64_t np, typename V::acc_t mx, Prefetch& pf) {
  const V vm = V::set1(mx);
  V s = V::zero();
  for (int64_t i = 0; i < np; i += V::W) {
    pf.step();
    const V a = vexp_ftz(V::load(e + i) - vm);
    if constexpr (kStore) a.store(e + i);
    s = s + a;
  }
  return s.sum();
}

template <typename V, typename T>
Status softmax_rows(const SoftmaxForward& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  constexpr int W = V::W;
  const int64_t n = p.dim, np = round_up(n, W);
  const int64_t group = kGroupElems / np > 1 ? kGroupElems / np : 1;
  std::vector<acc_t> buf(size_t((group < end - begin ? group : end - begin) * np));
  std::vector<acc_t> stats(size_t(2 * group));  // per row: max, then 1/sum (softmax) or log(sum)
  acc_t* mx = stats.data();
  acc_t* k = mx + group;
  for (int64_t r0 = begin; r0 < end; r0 += group) {
    const int64_t rows = group < end - r0 ? group : end - r0;
    for (int64_t r = 0; r < rows; ++r)
      mx[r] = pack_row_max<V>(static_cast<const T*>(p.x) + (r0 + r) * p.x_outer_stride, n, neg_inf<V>(),
                              buf.data() + r * np);
    const int64_t next_end = r0 + rows + group < end ? r0 + rows + group : end;
    Prefetch pf(p.x, r0 + rows, next_end, p.x_outer_stride, n, sizeof(T));
    for (int64_t r = 0; r < rows; ++r) {
      acc_t* e = buf.data() + r * np;
      k[r] = p.log ? std::log(sum_exp<V, false>(e, np, mx[r], pf)) : acc_t(1) / sum_exp<V, true>(e, np, mx[r], pf);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const acc_t* e = buf.data() + r * np;
      T* y = static_cast<T*>(p.out) + (r0 + r) * n;
      const V vm = V::set1(mx[r]), vk = V::set1(k[r]);
      int64_t i = 0;
      if (p.log) {  // (x - max) - log(sum): the subtraction first keeps a large common offset's digits
        for (; i + W <= n; i += W) ((V::load(e + i) - vm) - vk).store(y + i);
        if (i < n) store_tail((V::load(e + i) - vm) - vk, y + i, n - i);
      } else {  // exp(x - max) / sum
        for (; i + W <= n; i += W) (V::load(e + i) * vk).store(y + i);
        if (i < n) store_tail(V::load(e + i) * vk, y + i, n - i);
      }
    }
  }
  return Status::ok;
}

// Backward rows, one at a time: pass 1 reduces g (log) or g * out (softmax) over the row, pass 2 writes
// dx reading g and out again from L1/L2. No packing here: without an exp per element the extra stores
// would cost more than the tails they simplify; tails are scalar (softmax) or one padded vector (log).
template <typename V, typename T>
Status softmax_backward_rows(const SoftmaxBackward& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  constexpr int W = V::W;
  const int64_t n = p.dim;
  for (int64_t row = begin; row < end; ++row) {
    const T* g = static_cast<const T*>(p.grad_out) + row * p.grad_out_outer_stride;
    const T* o = static_cast<const T*>(p.out) + row * p.out_outer_stride;
    T* dx = static_cast<T*>(p.grad_x) + row * n;
    V s0 = V::zero(), s1 = V::zero();
    int64_t i = 0;
    acc_t s;
    if (p.log) {  // dx = g - exp(out) * sum(g)
      for (; i + 2 * W <= n; i += 2 * W) { s0 = s0 + V::load(g + i); s1 = s1 + V::load(g + i + W); }
      for (; i + W <= n; i += W) s0 = s0 + V::load(g + i);
      s = (s0 + s1).sum();
      for (; i < n; ++i) s += to_acc(g[i]);
      // the exp pass has the compute to hide prefetches of the next row behind
      Prefetch pf_g(p.grad_out, row + 1, row + 2 < end ? row + 2 : end, p.grad_out_outer_stride, n, sizeof(T));
      Prefetch pf_o(p.out, row + 1, row + 2 < end ? row + 2 : end, p.out_outer_stride, n, sizeof(T));
      const V neg_s = V::set1(-s);
      for (i = 0; i + W <= n; i += W) {
        pf_g.step();
        pf_o.step();
        V::fma(vexp_ftz(V::load(o + i)), neg_s, V::load(g + i)).store(dx + i);
      }
      if (i < n) {
        acc_t go[2][W];
        for (int k = 0; k < W; ++k) {
          go[0][k] = i + k < n ? to_acc(g[i + k]) : acc_t(0);
          go[1][k] = i + k < n ? to_acc(o[i + k]) : acc_t(0);
        }
        store_tail(V::fma(vexp_ftz(V::load(go[1])), neg_s, V::load(go[0])), dx + i, n - i);
      }
    } else {  // dx = out * (g - sum(g * out))
      for (; i + 2 * W <= n; i += 2 * W) {
        s0 = V::fma(V::load(g + i), V::load(o + i), s0);
        s1 = V::fma(V::load(g + i + W), V::load(o + i + W), s1);
      }
      for (; i + W <= n; i += W) s0 = V::fma(V::load(g + i), V::load(o + i), s0);
      s = (s0 + s1).sum();
      for (; i < n; ++i) s += to_acc(g[i]) * to_acc(o[i]);
      const V vs = V::set1(s);
      for (i = 0; i + W <= n; i += W) (V::load(o + i) * (V::load(g + i) - vs)).store(dx + i);
      for (; i < n; ++i) dx[i] = from_acc<T>(to_acc(o[i]) * (to_acc(g[i]) - s));
    }
  }
  return Status::ok;
}

// ---------------------------------------------------------------------------------------- columns

// The strided rows of a column block are separate cache lines, often in separate pages, where the hardware
// prefetchers do not follow: pass 1 prefetches the block's row kAhead rows ahead.
constexpr int64_t kAhead = 16;

inline void prefetch_span(const void* p, int64_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
  const char* c = static_cast<const char*>(p);
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(c + b, 0, 3);
  __builtin_prefetch(c + bytes - 1, 0, 3);
#else
  (void)p;
  (void)bytes;
#endif
}

// Packs vector j of NV at row pointer p into `to` (fp32, W lanes); with TAIL the last vector holds only
// m < W lanes (the others packed as zero: columns of their own, computed and never stored).
template <typename V, int NV, bool TAIL, typename T>
inline void pack(const T* p, int j, int64_t m, typename V::acc_t* to) {
  using acc_t = typename V::acc_t;
  if (TAIL && j == NV - 1) {
    for (int k = 0; k < V::W; ++k) to[k] = k < m ? to_acc(p[j * V::W + k]) : acc_t(0);
  } else {
    V::load(p + j * V::W).store(to);
  }
}

template <typename V, int NV, bool TAIL, typename T>
inline void stj(const V& v, T* p, int j, int64_t m) {
  if (TAIL && j == NV - 1) store_tail(v, p + j * V::W, m);
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

// One (outer index, column block) of the forward, NV vectors wide: x + d * xs is row d of the block (d < n),
// y + d * ys its output row. Pass 1 packs the block into `scratch` as fp32 runs, one per vector:
// (j, d, lane), and takes the column maxima. The strided rows are read from memory once; the power-of-2
// strides that would make them collide in the caches do not matter to the later passes, which read the
// packed copy. Pass 2 turns each run into exp(x - max) in place (or sums it, for log), one column vector
// at a time so only one sum is live next to the exp constants; pass 3 scales and writes the rows.
template <typename V, typename T>
struct SoftmaxColumns {
  using acc_t = typename V::acc_t;
  const T* x;
  int64_t xs;
  T* y;
  int64_t ys;
  acc_t* scratch;  // n * NV * W
  int64_t n;
  bool log;

  template <int NV, bool TAIL>
  void run(int64_t c, int64_t m) const {
    constexpr int W = V::W;
    const T* xc = x + c;
    T* yc = y + c;
    V mx[NV], k[NV];
    for (int j = 0; j < NV; ++j) mx[j] = V::set1(neg_inf<V>());
    const int64_t span = int64_t((NV - 1) * W + m) * int64_t(sizeof(T));
    for (int64_t d = 0; d < n; ++d) {
      if (d + kAhead < n) prefetch_span(xc + (d + kAhead) * xs, span);
      for (int j = 0; j < NV; ++j) pack<V, NV, TAIL>(xc + d * xs, j, m, scratch + (j * n + d) * W);
    }
    for (int j = 0; j < NV; ++j) {
      acc_t* run = scratch + j * n * W;
      V s = V::zero();
      for (int64_t d = 0; d < n; ++d) mx[j] = vmax(mx[j], V::load(run + d * W));
      if (log) {
        for (int64_t d = 0; d < n; ++d) s = s + vexp_ftz(V::load(run + d * W) - mx[j]);
        k[j] = log_lanes(s);  // out = (x - max) - log(sum)
      } else {
        for (int64_t d = 0; d < n; ++d) {
          const V e = vexp_ftz(V::load(run + d * W) - mx[j]);
          e.store(run + d * W);
          s = s + e;
        }
        k[j] = V::set1(acc_t(1)) / s;  // out = e / sum
      }
    }
    for (int64_t d = 0; d < n; ++d)
      for (int j = 0; j < NV; ++j) {
        const V v = V::load(scratch + (j * n + d) * W);
        stj<V, NV, TAIL>(log ? (v - mx[j]) - k[j] : v * k[j], yc + d * ys, j, m);
      }
  }
};

// The backward over one column block: pass 1 packs g and out into `scratch` as in SoftmaxColumns and sums
// them (g, or g * out, per column); pass 2 writes grad_x from the packed copies.
template <typename V, typename T>
struct SoftmaxBackwardColumns {
  using acc_t = typename V::acc_t;
  const T* g;
  int64_t gs;
  const T* o;
  int64_t os;
  T* dx;
  int64_t dxs;
  acc_t* scratch;  // 2 * n * NV * W
  int64_t n;
  bool log;

  template <int NV, bool TAIL>
  void run(int64_t c, int64_t m) const {
    constexpr int W = V::W;
    const T* gc = g + c;
    const T* oc = o + c;
    T* dc = dx + c;
    acc_t* pg = scratch;
    acc_t* po = scratch + NV * n * W;
    const int64_t span = int64_t((NV - 1) * W + m) * int64_t(sizeof(T));
    for (int64_t d = 0; d < n; ++d) {
      if (d + kAhead < n) {
        prefetch_span(gc + (d + kAhead) * gs, span);
        prefetch_span(oc + (d + kAhead) * os, span);
      }
      for (int j = 0; j < NV; ++j) {
        pack<V, NV, TAIL>(gc + d * gs, j, m, pg + (j * n + d) * W);
        pack<V, NV, TAIL>(oc + d * os, j, m, po + (j * n + d) * W);
      }
    }
    V s[NV];
    for (int j = 0; j < NV; ++j) {
      const acc_t* rg = pg + j * n * W;
      const acc_t* ro = po + j * n * W;
      V a = V::zero();
      if (log) for (int64_t d = 0; d < n; ++d) a = a + V::load(rg + d * W);
      else for (int64_t d = 0; d < n; ++d) a = V::fma(V::load(rg + d * W), V::load(ro + d * W), a);
      s[j] = log ? V::zero() - a : a;
    }
    for (int64_t d = 0; d < n; ++d)
      for (int j = 0; j < NV; ++j) {
        const int64_t at = (j * n + d) * W;
        const V gv = V::load(pg + at), ov = V::load(po + at);
        // log: dx = g - exp(out) * sum(g); softmax: dx = out * (g - sum(g * out))
        stj<V, NV, TAIL>(log ? V::fma(vexp_ftz(ov), s[j], gv) : ov * (gv - s[j]), dc + d * dxs, j, m);
      }
  }
};

template <typename V, typename T>
Status softmax_columns(const SoftmaxForward& p, int64_t begin, int64_t end) {
  using acc_t = typename V::acc_t;
  const int64_t cols = block_cols<V>(p.dim), blocks = (p.inner + cols - 1) / cols;
  std::vector<acc_t> scratch(size_t(p.dim * cols));
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
  using acc_t = typename V::acc_t;
  const int64_t cols = block_cols<V>(p.dim), blocks = (p.inner + cols - 1) / cols;
  std::vector<acc_t> scratch(size_t(2 * p.dim * cols));
  for (int64_t t = begin; t < end; ++t) {
    const int64_t o = t / blocks, c0 = (t % blocks) * cols;
    const int64_t width = cols < p.inner - c0 ? cols : p.inner - c0;
    const SoftmaxBackwardColumns<V, T> f{
        static_cast<const T*>(p.grad_out) + o * p.grad_out_outer_stride + c0, p.grad_out_dim_stride,
        static_cast<const T*>(p.out) + o * p.out_outer_stride + c0, p.out_dim_stride,
        static_cast<T*>(p.grad_x) + o * p.dim * p.inner + c0, p.inner, scratch.data(), p.dim, p.log};
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

inline SoftmaxTasks softmax_tasks_dispatch(int64_t outer, int64_t dim, int64_t inner) {
  return tasks_for<Vec>(outer, dim, inner);
}
