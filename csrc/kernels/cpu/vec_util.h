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
