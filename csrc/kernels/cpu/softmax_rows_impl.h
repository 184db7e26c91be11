// The row path (inner == 1: softmax / log_softmax over the last dim), written once over a vector type V.
// No include guard: softmax_impl.h includes this once per ISA namespace (per_isa.h), after the shared
// helpers it uses (neg_inf, to_acc, from_acc, store_tail).

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
// answer). One vector per iteration with AVX2: the exp's constants take most of its 16 registers, and
// unrolling spills the sum, whose store-reload latency then bounds the loop. AVX-512 (32 registers): two vectors
// and two sums a step, fp32 1.04-1.05x (one thread in cache, Zen 5; a different summation order: 3595 of 65536
// log_softmax results one ulp off the one-sum loop, softmax up to 3), 16-bit 1.01-1.03x; four: no faster. For a
// 16-bit T, vexp_for's lower-degree exp (relative error 5.3e-6; the sum stays fp32): 2 of about 25 instructions per vector, AVX2
// bf16 rows of 1024 / 4096 1.10x to 1.16x (one thread, in cache); results off by one ulp where they were not:
// 58 (bf16) and 466 (fp16) of 542020 softmax values, 0 and 11 log_softmax (rows of 1 to 4096, masked and
// special rows; the largest error against float64 unchanged).
template <typename V, typename T, bool kStore>
inline typename V::acc_t sum_exp(typename V::acc_t* e, int64_t np, typename V::acc_t mx, Prefetch& pf) {
  const V vm = V::set1(mx);
  V s = V::zero();
  int64_t i = 0;
  if constexpr (V::W == 16) {
    V s1 = V::zero();
    for (; i + 2 * V::W <= np; i += 2 * V::W) {
      pf.step();
      // as many lines as the step reads (fp32: two; one line a step prefetched half of the next row of 4096):
      // 4096x4096 fp32 3.07-3.38 -> 2.45-2.50 ms, softmax and log_softmax, three runs each in turns (copy 47 GB/s)
      if constexpr (2 * V::W * sizeof(T) > 64) pf.step();
      const V a = vexp_for<T>(V::load(e + i) - vm);
      const V b = vexp_for<T>(V::load(e + i + V::W) - vm);
      if constexpr (kStore) {
        a.store(e + i);
        b.store(e + i + V::W);
      }
      s = s + a;
      s1 = s1 + b;
    }
    s = s + s1;
  }
  for (; i < np; i += V::W) {
    pf.step();
    const V a = vexp_for<T>(V::load(e + i) - vm);
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
      k[r] = p.log ? std::log(sum_exp<V, T, false>(e, np, mx[r], pf))
                   : acc_t(1) / sum_exp<V, T, true>(e, np, mx[r], pf);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const acc_t* e = buf.data() + r * np;
      T* y = static_cast<T*>(p.out) + (r0 + r) * n;
      const V vm = V::set1(mx[r]), vk = V::set1(k[r]);
      int64_t i = 0;
      // two vectors per step, through store_pair (AVX2 bf16 packs both at once): fp32 0.99x to 1.10x (noise
      // phases), with the exp above bf16 1.13x to 1.25x, fp16 1.07x to 1.30x (rows of 1024 / 4096, one thread);
      // non-temporal (stream_pair) for outputs beyond the last-level cache (rows starting on a 64-byte boundary)
      const auto pairs = [&](auto store2) {
        if (p.log) {  // (x - max) - log(sum): the subtraction first keeps a large common offset's digits
          for (; i + 2 * W <= n; i += 2 * W) store2((V::load(e + i) - vm) - vk, (V::load(e + i + W) - vm) - vk, y + i);
        } else {  // exp(x - max) / sum
          for (; i + 2 * W <= n; i += 2 * W) store2(V::load(e + i) * vk, V::load(e + i + W) * vk, y + i);
        }
      };
      if (p.stream_out && reinterpret_cast<uintptr_t>(y) % 64 == 0) {
        pairs([](const V& a, const V& b, T* q) { stream_pair(a, b, q); });
      } else {
        pairs([](const V& a, const V& b, T* q) { store_pair(a, b, q); });
      }
      if (p.log) {
        for (; i + W <= n; i += W) ((V::load(e + i) - vm) - vk).store(y + i);
        if (i < n) store_tail((V::load(e + i) - vm) - vk, y + i, n - i);
      } else {
        for (; i + W <= n; i += W) (V::load(e + i) * vk).store(y + i);
        if (i < n) store_tail(V::load(e + i) * vk, y + i, n - i);
      }
    }
  }
  if (p.stream_out) stream_fence();
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
