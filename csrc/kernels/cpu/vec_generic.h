// Needs <cmath> and <cstdint> included before (kernel files include them first).
//
// Vec: W float lanes held in a plain array. Loops over fixed-size arrays auto-vectorize at -O3 with
// whatever the baseline target offers (SSE2 on x86-64, NEON on aarch64), so this is the portable
// variant, not a scalar one. Included by kernel files inside their `generic` namespace.
struct Vec {
  using acc_t = float;
  static constexpr int W = 8;
  float v[W];

  static Vec zero() { Vec r; for (int i = 0; i < W; ++i) r.v[i] = 0.f; return r; }
  static Vec set1(float s) { Vec r; for (int i = 0; i < W; ++i) r.v[i] = s; return r; }
  template <typename T> static Vec load(const T* p) {
    Vec r; for (int i = 0; i < W; ++i) r.v[i] = to_float(p[i]); return r;
  }
  template <typename T> void store(T* p) const {
    for (int i = 0; i < W; ++i) p[i] = from_float<T>(v[i]);
  }
  // a * b + c
  static Vec fma(Vec a, Vec b, Vec c) { for (int i = 0; i < W; ++i) c.v[i] += a.v[i] * b.v[i]; return c; }
  float sum() const { float s = 0.f; for (int i = 0; i < W; ++i) s += v[i]; return s; }
  float max() const { float s = v[0]; for (int i = 1; i < W; ++i) s = v[i] > s ? v[i] : s; return s; }
};
inline Vec operator+(Vec a, Vec b) { for (int i = 0; i < Vec::W; ++i) a.v[i] += b.v[i]; return a; }
inline Vec operator-(Vec a, Vec b) { for (int i = 0; i < Vec::W; ++i) a.v[i] -= b.v[i]; return a; }
inline Vec operator*(Vec a, Vec b) { for (int i = 0; i < Vec::W; ++i) a.v[i] *= b.v[i]; return a; }
inline Vec operator/(Vec a, Vec b) { for (int i = 0; i < Vec::W; ++i) a.v[i] /= b.v[i]; return a; }
// max/min: when a lane of b is NaN the result is NaN (as the x86 instructions with b second)
inline Vec vmax(Vec a, Vec b) { for (int i = 0; i < Vec::W; ++i) a.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i]; return a; }
inline Vec vmin(Vec a, Vec b) { for (int i = 0; i < Vec::W; ++i) a.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i]; return a; }
inline Vec vabs(Vec a) { for (int i = 0; i < Vec::W; ++i) a.v[i] = a.v[i] < 0.f ? -a.v[i] : a.v[i]; return a; }
// a < b ? x : y, per lane (false for NaN)
inline Vec vselect_lt(Vec a, Vec b, Vec x, Vec y) {
  for (int i = 0; i < Vec::W; ++i) y.v[i] = a.v[i] < b.v[i] ? x.v[i] : y.v[i];
  return y;
}
// lanes (0 1)(2 3)... swapped within each pair: {v1, v0, v3, v2, ...} (interleaved complex pairs)
inline Vec vswap_pairs(Vec a) {
  for (int i = 0; i < Vec::W; i += 2) { const float t = a.v[i]; a.v[i] = a.v[i + 1]; a.v[i + 1] = t; }
  return a;
}
// e^x, the algorithm of vexp in vec_avx2.h (see there) written per lane
inline Vec vexp(Vec x) {
  Vec r;
  for (int i = 0; i < Vec::W; ++i) {
    const float xi = x.v[i];
    float t = xi < 88.7228394f ? xi : 88.7228394f;
    t = t > -103.972084f ? t : -103.972084f;
    if (xi != xi) t = xi;
    const float n = (t * 1.44269504f + 12582912.f) - 12582912.f;  // round to nearest
    float f = t - n * 0.693359375f;
    f = f + n * 2.12194440e-4f;
    float q = 1.9875691500e-4f;
    q = q * f + 1.3981999507e-3f;
    q = q * f + 8.3334519073e-3f;
    q = q * f + 4.1665795894e-2f;
    q = q * f + 1.6666665459e-1f;
    q = q * f + 5.0000001201e-1f;
    float e = q * f * f + f + 1.f;
    const int32_t ni = static_cast<int32_t>(n);
    const int32_t k1 = ni >> 1, k2 = ni - k1;
    e = e * bits_to_float(uint32_t(k1 + 127) << 23) * bits_to_float(uint32_t(k2 + 127) << 23);
    if (xi < -103.972084f) e = 0.f;
    if (xi > 88.7228394f) e = bits_to_float(0x7f800000u);
    r.v[i] = e;
  }
  return r;
}
// e^x flushing results below 2^-125 to 0: the algorithm of vexp_ftz in vec_avx2.h written per lane
inline Vec vexp_ftz(Vec x) {
  Vec r;
  for (int i = 0; i < Vec::W; ++i) {
    const float xi = x.v[i];
    const float xc = xi > 88.7228394f ? 88.7228394f : xi;  // NaN stays NaN
    const float t = xc * 1.44269504f + 12583038.f;         // 1.5 * 2^23 + (127 - 1): low bits n + 126
    const float n = t - 12583038.f;
    float f = xc - n * 0.693359375f;
    f = f + n * 2.12194440e-4f;
    float p = 2.76873051e-3f;
    p = p * f + 1.67483110e-2f;
    p = p * f + 8.33360031e-2f;
    p = p * f + 3.33328635e-1f;
    p = p * f + 9.99999881e-1f;
    p = p * f + 2.f;
    p = p * f + 2.f;
    const float e = p * bits_to_float(float_to_bits(t) << 23);
    r.v[i] = xi < -86.98f ? 0.f : e;
  }
  return r;
}
// 2^(n-1) from t = z + (1.5 * 2^23 + 126): see vec_avx2.h.
inline Vec vpow2_magic(Vec t) {
  for (int i = 0; i < Vec::W; ++i) t.v[i] = bits_to_float(float_to_bits(t.v[i]) << 23);
  return t;
}

// VecD: the fp64 variant (gradcheck and reference-grade CPU work), 4 double lanes in an array.
struct VecD {
  using acc_t = double;
  static constexpr int W = 4;
  double v[W];

  static VecD zero() { VecD r; for (int i = 0; i < W; ++i) r.v[i] = 0.0; return r; }
  static VecD set1(double s) { VecD r; for (int i = 0; i < W; ++i) r.v[i] = s; return r; }
  static VecD load(const double* p) { VecD r; for (int i = 0; i < W; ++i) r.v[i] = p[i]; return r; }
  void store(double* p) const { for (int i = 0; i < W; ++i) p[i] = v[i]; }
  static VecD fma(VecD a, VecD b, VecD c) { for (int i = 0; i < W; ++i) c.v[i] += a.v[i] * b.v[i]; return c; }
  double sum() const { double s = 0.0; for (int i = 0; i < W; ++i) s += v[i]; return s; }
  double max() const { double s = v[0]; for (int i = 1; i < W; ++i) s = v[i] > s ? v[i] : s; return s; }
};
inline VecD operator+(VecD a, VecD b) { for (int i = 0; i < VecD::W; ++i) a.v[i] += b.v[i]; return a; }
inline VecD operator-(VecD a, VecD b) { for (int i = 0; i < VecD::W; ++i) a.v[i] -= b.v[i]; return a; }
inline VecD operator*(VecD a, VecD b) { for (int i = 0; i < VecD::W; ++i) a.v[i] *= b.v[i]; return a; }
inline VecD operator/(VecD a, VecD b) { for (int i = 0; i < VecD::W; ++i) a.v[i] /= b.v[i]; return a; }
inline VecD vmax(VecD a, VecD b) { for (int i = 0; i < VecD::W; ++i) a.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i]; return a; }
inline VecD vmin(VecD a, VecD b) { for (int i = 0; i < VecD::W; ++i) a.v[i] = a.v[i] < b.v[i] ? a.v[i] : b.v[i]; return a; }
inline VecD vabs(VecD a) { for (int i = 0; i < VecD::W; ++i) a.v[i] = std::fabs(a.v[i]); return a; }
inline VecD vselect_lt(VecD a, VecD b, VecD x, VecD y) {
  for (int i = 0; i < VecD::W; ++i) y.v[i] = a.v[i] < b.v[i] ? x.v[i] : y.v[i];
  return y;
}
inline VecD vswap_pairs(VecD a) {
  for (int i = 0; i < VecD::W; i += 2) { const double t = a.v[i]; a.v[i] = a.v[i + 1]; a.v[i + 1] = t; }
  return a;
}
inline VecD vexp(VecD x) { for (int i = 0; i < VecD::W; ++i) x.v[i] = std::exp(x.v[i]); return x; }
// fp64 has no reason to flush: std::exp, as vexp
inline VecD vexp_ftz(VecD x) { return vexp(x); }

