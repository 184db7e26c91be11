// The column path (inner > 1: softmax / log_softmax over a dim other than the last, in column blocks of
// block_cols), written once over a vector type V. No include guard: softmax_impl.h includes this once per
// ISA namespace (per_isa.h), after the shared helpers it uses (neg_inf, to_acc, store_tail, log_lanes,
// block_cols).

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
