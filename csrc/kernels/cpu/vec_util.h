// Helpers over any Vec type, for the tails of rows (n < W elements). No include guard: kernel files
// include this once per ISA, inside that ISA's namespace, after the matching vec_*.h.

template <typename V, typename T>
inline V load_n(const T* p, int64_t n) {  // n < W elements, rest zero
  T buf[V::W] = {};
  std::memcpy(buf, p, size_t(n) * sizeof(T));
  return V::load(buf);
}

template <typename V, typename T>
inline void store_n(const V& v, T* p, int64_t n) {
  T buf[V::W];
  v.store(buf);
  std::memcpy(p, buf, size_t(n) * sizeof(T));
}

// Sums over rows longer than kSumBlock elements go block by block: each block's vector lanes reduced to a scalar,
// the block totals added in double. One set of fp32 lanes over a whole row collects n / (2W) terms each, and their
// rounding error grows with n (layer_norm fp32, rows of 1M: 1.1-4.1e-5 off the float64 reference, rows of 2M:
// 0.5-2.2e-4, against the tests' 1e-5; 1-2e-6 blocked). Rows up to kSumBlock (every hidden size in use) are summed
// as before, bit for bit. kSumBlock is a multiple of every 2W, so blocks start on whole pairs of vectors.
constexpr int64_t kSumBlock = 8192;

// f(begin, len) sums elements [begin, begin + len) of a row of n; the whole row's sum. The blocks' loop is a
// function of its own, so that a row of one block inlines exactly as before (a loop around the only call site
// measured 2-4% slower on rows of 1024).
template <typename F>
[[gnu::noinline]] auto blocked_sum_long(int64_t n, F f) {
  using S = decltype(f(int64_t(0), n));
  double s = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) s += double(f(b, n - b < kSumBlock ? n - b : kSumBlock));
  return S(s);
}
template <typename F>
inline auto blocked_sum(int64_t n, F f) {
  if (n <= kSumBlock) [[likely]] return f(int64_t(0), n);
  return blocked_sum_long(n, f);
}

// the same for two sums at once: f(begin, len, s0, s1) sets the block's two sums
template <typename S, typename F>
[[gnu::noinline]] void blocked_sum2_long(int64_t n, S& s0, S& s1, F f) {
  double t0 = 0, t1 = 0;
  for (int64_t b = 0; b < n; b += kSumBlock) {
    S a0, a1;
    f(b, n - b < kSumBlock ? n - b : kSumBlock, a0, a1);
    t0 += double(a0);
    t1 += double(a1);
  }
  s0 = S(t0);
  s1 = S(t1);
}
template <typename S, typename F>
inline void blocked_sum2(int64_t n, S& s0, S& s1, F f) {
  if (n <= kSumBlock) [[likely]] f(int64_t(0), n, s0, s1);
  else blocked_sum2_long(n, s0, s1, f);
}

// e^x for a loop whose results are rounded to T: the ISA's vexp_ftz_low (a lower-degree polynomial) where it has
// one and T is a 16-bit type, else vexp_ftz.
template <typename T, typename V>
inline V vexp_for(V x) {
  if constexpr (sizeof(T) == 2 && requires { vexp_ftz_low(x); }) return vexp_ftz_low(x); else return vexp_ftz(x);
}

// a to p[0, W), b to p[W, 2W): through V::store2 where the ISA has one for T (AVX2 bf16: one pack for both)
template <typename V, typename T>
inline void store_pair(const V& a, const V& b, T* p) {
  if constexpr (requires { V::store2(a, b, p); }) V::store2(a, b, p); else { a.store(p); b.store(p + V::W); }
}

template <typename V, typename T>
constexpr bool kHasLoad2x = requires(const T* p, V& a) { V::load2x(p, a, a); };

// p[0, 2W) as two vectors for element-wise loops: through V::load2x where the ISA has one for T (AVX2 bf16:
// the lanes in an order of its own, which store_pair_x writes back in place), else load(p), load(p + W)
template <typename V, typename T>
inline void load_pair_x(const T* p, V& a, V& b) {
  if constexpr (kHasLoad2x<V, T>) V::load2x(p, a, b); else { a = V::load(p); b = V::load(p + V::W); }
}

// a, b of load_pair_x lanes to p[0, 2W)
template <typename V, typename T>
inline void store_pair_x(const V& a, const V& b, T* p) {
  if constexpr (kHasLoad2x<V, T>) V::store2x(a, b, p); else store_pair(a, b, p);
}

// store_pair / store_pair_x with non-temporal stores where the ISA has them (AVX-512: V::stream_pair,
// V::stream_pair_x), else the cached stores; p must be 64-byte aligned. For outputs larger than the
// last-level cache (the glue decides: see cpu_stream_outputs in common/cpu_launch.h); a task that used them ends
// with stream_fence().
template <typename V, typename T>
inline void stream_pair(const V& a, const V& b, T* p) {
  if constexpr (requires { V::stream_pair(a, b, p); }) V::stream_pair(a, b, p); else store_pair(a, b, p);
}
template <typename V, typename T>
inline void stream_pair_x(const V& a, const V& b, T* p) {
  if constexpr (kHasLoad2x<V, T>) {
    if constexpr (requires { V::stream_pair_x(a, b, p); }) V::stream_pair_x(a, b, p); else V::store2x(a, b, p);
  } else {
    stream_pair(a, b, p);
  }
}
// One fp32 vector, non-temporal where the ISA has it (p 64-byte aligned), else a.store(p).
template <typename V, typename T>
inline void stream_one(const V& a, T* p) {
  if constexpr (requires { V::stream(a, p); }) V::stream(a, p); else a.store(p);
}
// Orders earlier non-temporal stores before anything after it (they bypass the cache's ordering).
inline void stream_fence() {
#if YR_HAVE_X86_VARIANTS
  _mm_sfence();
#endif
}

// sums over load_pair_x lanes of T back to the lanes of load(p), load(p + W): the same sums, bit for bit
template <typename T, typename V>
inline void unpair_x(V& a, V& b) {
  if constexpr (kHasLoad2x<V, T>) V::unpair(a, b);
}
