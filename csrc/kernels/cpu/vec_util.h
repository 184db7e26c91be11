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

// sums over load_pair_x lanes of T back to the lanes of load(p), load(p + W): the same sums, bit for bit
template <typename T, typename V>
inline void unpair_x(V& a, V& b) {
  if constexpr (kHasLoad2x<V, T>) V::unpair(a, b);
}
