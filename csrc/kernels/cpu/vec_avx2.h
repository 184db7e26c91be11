// Vec for AVX2 + FMA + F16C: 8 float lanes in a __m256. Included inside YR_TARGET_BEGIN(YR_AVX2_TARGET).
struct Vec {
  using acc_t = float;
  static constexpr int W = 8;
  __m256 v;

  static Vec zero() { return {_mm256_setzero_ps()}; }
  static Vec set1(float s) { return {_mm256_set1_ps(s)}; }
  static Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static Vec load(const bf16* p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16))};
  }
  static Vec load(const f16* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
  }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  // round to nearest even, in the low 16 bits of each 32-bit lane; NaN becomes a quiet NaN with its sign
  static __m256i bf16_lanes(__m256 x) {
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, nan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
  }
  void store(bf16* p) const {
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_lanes(v), bf16_lanes(v)), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  // a to p[0, 8), b to p[8, 16) (store_pair): one pack, permute and store for both, about 1.5 fewer
  // instructions per vector than two stores (the same bits: checked over all 2^32 floats)
  static void store2(Vec a, Vec b, bf16* p) {
    __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_lanes(a.v), bf16_lanes(b.v)), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packed);
  }
  // p[0, 16) widened by one unpack from memory per vector instead of a widen and a shift, in the lane order
  // that store2x packs back in place without store2's permute: a = p[0..3], p[8..11], b = p[4..7], p[12..15]
  // (load_pair_x; unpair puts sums over such lanes back in the order of load(p), load(p + 8))
  static void load2x(const bf16* p, Vec& a, Vec& b) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    a.v = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), w));
    b.v = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), w));
  }
  static void store2x(Vec a, Vec b, bf16* p) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_packus_epi32(bf16_lanes(a.v), bf16_lanes(b.v)));
  }
  static void unpair(Vec& a, Vec& b) {
    const __m256 lo = _mm256_permute2f128_ps(a.v, b.v, 0x20);
    b.v = _mm256_permute2f128_ps(a.v, b.v, 0x31);
    a.v = lo;
  }
  void store(f16* p) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  float sum() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  float max() const {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
inline Vec operator+(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }

inline Vec operator/(Vec a, Vec b) { return {_mm256_div_ps(a.v, b.v)}; }
// max/min: when a lane of b is NaN the result is NaN (the instructions return their second operand)
inline Vec vmax(Vec a, Vec b) { return {_mm256_max_ps(a.v, b.v)}; }
inline Vec vmin(Vec a, Vec b) { return {_mm256_min_ps(a.v, b.v)}; }
inline Vec vabs(Vec a) { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)}; }
// a < b ? x : y, per lane (false for NaN)
inline Vec vselect_lt(Vec a, Vec b, Vec x, Vec y) {
  return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ))};
}
// lanes (0 1)(2 3)... swapped within each pair: {v1, v0, v3, v2, ...} (interleaved complex pairs)
inline Vec vswap_pairs(Vec a) { return {_mm256_permute_ps(a.v, 0xB1)}; }

// e^x in fp32 to about 2 ulp (Cephes expf: x = n ln2 + f, |f| <= ln2/2, a degree-7 polynomial for e^f,
// then the exponent added in two halves so 2^n never overflows the float format on its own). Exact
// edges: x > 88.72 gives inf, x < -103.97 (and -inf) gives 0, results below 2^-126 are subnormal, NaN
// stays NaN.
inline Vec vexp(Vec x) {
  const __m256 hi = _mm256_set1_ps(88.7228394f), lo = _mm256_set1_ps(-103.972084f);
  const __m256 t = _mm256_min_ps(hi, _mm256_max_ps(lo, x.v));  // NaN passes through (second operand)
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), t);
  f = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), f);
  __m256 q = _mm256_set1_ps(1.9875691500e-4f);
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(1.3981999507e-3f));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(8.3334519073e-3f));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(4.1665795894e-2f));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(1.6666665459e-1f));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(5.0000001201e-1f));
  __m256 e = _mm256_fmadd_ps(_mm256_mul_ps(q, f), f, _mm256_add_ps(f, _mm256_set1_ps(1.f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i k1 = _mm256_srai_epi32(ni, 1), k2 = _mm256_sub_epi32(ni, k1);
  const __m256i bias = _mm256_set1_epi32(127);
  e = _mm256_mul_ps(e, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23)));
  e = _mm256_mul_ps(e, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23)));
  e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(x.v, lo, _CMP_LT_OQ));
  e = _mm256_blendv_ps(e, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x.v, hi, _CMP_GT_OQ));
  return {e};
}

// vexp_ftz's polynomial for 2 e^f, |f| <= ln2/2: degree 6 (relative error 2e-9) or, kLow, degree 4 (5.3e-6,
// 2 fmas fewer: for results rounded to bf16 / fp16). kNeg: the same polynomial written in g = -f (odd
// coefficients negated), whose steps are the exact negations of those in f: the same result, for callers
// that have -f at hand.
template <bool kLow, bool kNeg = false>
inline __m256 exp_poly2(__m256 f) {
  constexpr float s = kNeg ? -1.f : 1.f;
  __m256 p;
  if constexpr (kLow) {
    p = _mm256_set1_ps(8.25556964e-2f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(s * 3.35070312e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.00010228f));
  } else {
    p = _mm256_set1_ps(2.76873051e-3f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(s * 1.67483110e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(8.33360031e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(s * 3.33328635e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.99999881e-1f));
  }
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(s * 2.f));
  return _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.f));
}

// e^x to about 1 ulp with about half of vexp's instructions, for hot loops (softmax): results below
// 2^-125 flush to 0 (x < -86.98, -inf included; no subnormal results), x > 88.7228 gives inf, NaN stays
// NaN. x = n ln2 + f (n = round(x / ln2) read from the low bits of a 1.5 * 2^23 rounding sum,
// |f| <= ln2/2), a degree-6 minimax polynomial for 2 e^f (relative error 2e-9), times 2^(n-1) built
// from those same bits: the halved scale keeps 2^(n-1) finite up to x = 88.7228. kLow: exp_poly2's degree 4.
template <bool kLow>
inline Vec vexp_ftz_impl(Vec x) {
  const __m256 lo = _mm256_set1_ps(-86.98f);
  const __m256 xc = _mm256_min_ps(_mm256_set1_ps(88.7228394f), x.v);  // NaN passes (second operand)
  const __m256 magic = _mm256_set1_ps(12582912.f + 126.f);            // 1.5 * 2^23 + (127 - 1)
  const __m256 t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504f), magic);
  const __m256 n = _mm256_sub_ps(t, magic);
  __m256 f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  f = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), f);
  const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23));
  const __m256 e = _mm256_mul_ps(exp_poly2<kLow>(f), scale);
  return {_mm256_andnot_ps(_mm256_cmp_ps(x.v, lo, _CMP_LT_OQ), e)};
}
inline Vec vexp_ftz(Vec x) { return vexp_ftz_impl<false>(x); }
// for results rounded to 16 bits (vexp_for): relative error 5.3e-6 instead of 2e-9
inline Vec vexp_ftz_low(Vec x) { return vexp_ftz_impl<true>(x); }

// e^-a for a / (1 + e^-a) (silu, gelu tanh): vexp_ftz(-a) with the negation folded into the constants and the
// flush replaced by a clamp, a in [-88.7228, 86.98]: above 86.98 it gives about 2^-125.5 instead of 0, which
// 1 + e^-a absorbs the same, so the quotients are the same bits as with vexp_ftz(0 - a) (checked over 1.4M
// inputs with inf, NaN, +-1e30 and random bit patterns); 2 instructions fewer. NaN passes (second operands).
template <bool kLow>
inline Vec vexp_neg_sat_impl(Vec a) {
  const __m256 ac = _mm256_min_ps(_mm256_set1_ps(86.98f), _mm256_max_ps(_mm256_set1_ps(-88.7228394f), a.v));
  const __m256 magic = _mm256_set1_ps(12582912.f + 126.f);
  const __m256 t = _mm256_fmadd_ps(ac, _mm256_set1_ps(-1.44269504f), magic);
  const __m256 n = _mm256_sub_ps(t, magic);
  __m256 g = _mm256_fmadd_ps(n, _mm256_set1_ps(0.693359375f), ac);  // g = -f
  g = _mm256_fnmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), g);
  const __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23));
  return {_mm256_mul_ps(exp_poly2<kLow, true>(g), scale)};
}
inline Vec vexp_neg_sat(Vec a) { return vexp_neg_sat_impl<false>(a); }
inline Vec vexp_neg_sat_low(Vec a) { return vexp_neg_sat_impl<true>(a); }

// 2^(n-1) from t = z + (1.5 * 2^23 + 126) with n = round(z) in [-126, 129] (vexp_ftz's scale): t's low bits,
// n + 126, moved to the exponent field; n = -126 gives exactly 0.
inline Vec vpow2_magic(Vec t) { return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t.v), 23))}; }
