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
