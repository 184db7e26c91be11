// Vec for AVX-512 (F/BW/VL/DQ): 16 float lanes in a __m512. Included inside
// YR_TARGET_BEGIN(YR_AVX512_TARGET). bf16 rounding is done with integer ops so it does not need the
// AVX512-BF16 extension.
struct Vec {
  using acc_t = float;
  static constexpr int W = 16;
  __m512 v;

  static Vec zero() { return {_mm512_setzero_ps()}; }
  static Vec set1(float s) { return {_mm512_set1_ps(s)}; }
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static Vec load(const bf16* p) {
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
  }
  static Vec load(const f16* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store(bf16* p) const {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 isnan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_or_epi32(r, isnan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
  }
  void store(f16* p) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static Vec fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  float sum() const { return _mm512_reduce_add_ps(v); }
  float max() const { return _mm512_reduce_max_ps(v); }
};
inline Vec operator+(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }

inline Vec operator/(Vec a, Vec b) { return {_mm512_div_ps(a.v, b.v)}; }
// max/min: when a lane of b is NaN the result is NaN (the instructions return their second operand)
inline Vec vmax(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
inline Vec vmin(Vec a, Vec b) { return {_mm512_min_ps(a.v, b.v)}; }
inline Vec vabs(Vec a) { return {_mm512_abs_ps(a.v)}; }
// a < b ? x : y, per lane (false for NaN)
inline Vec vselect_lt(Vec a, Vec b, Vec x, Vec y) {
  return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ), y.v, x.v)};
}
// lanes (0 1)(2 3)... swapped within each pair: {v1, v0, v3, v2, ...} (interleaved complex pairs)
inline Vec vswap_pairs(Vec a) { return {_mm512_permute_ps(a.v, 0xB1)}; }

// e^x: the algorithm of vexp in vec_avx2.h.
inline Vec vexp(Vec x) {
  const __m512 hi = _mm512_set1_ps(88.7228394f), lo = _mm512_set1_ps(-103.972084f);
  const __m512 t = _mm512_min_ps(hi, _mm512_max_ps(lo, x.v));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), t);
  f = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), f);
  __m512 q = _mm512_set1_ps(1.9875691500e-4f);
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.3981999507e-3f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(8.3334519073e-3f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(4.1665795894e-2f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.6666665459e-1f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(5.0000001201e-1f));
  __m512 e = _mm512_fmadd_ps(_mm512_mul_ps(q, f), f, _mm512_add_ps(f, _mm512_set1_ps(1.f)));
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i k1 = _mm512_srai_epi32(ni, 1), k2 = _mm512_sub_epi32(ni, k1);
  const __m512i bias = _mm512_set1_epi32(127);
  e = _mm512_mul_ps(e, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23)));
  e = _mm512_mul_ps(e, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23)));
  e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x.v, lo, _CMP_LT_OQ), e, _mm512_setzero_ps());
  e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x.v, hi, _CMP_GT_OQ), e, _mm512_set1_ps(__builtin_inff()));
  return {e};
}

// e^x, flushing results below 2^-125 to 0: the algorithm of vexp_ftz in vec_avx2.h.
inline Vec vexp_ftz(Vec x) {
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(88.7228394f), x.v);
  const __m512 magic = _mm512_set1_ps(12582912.f + 126.f);
  const __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504f), magic);
  const __m512 n = _mm512_sub_ps(t, magic);
  __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  f = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), f);
  __m512 p = _mm512_set1_ps(2.76873051e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.67483110e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(8.33360031e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(3.33328635e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.99999881e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.f));
  const __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23)));
  return {_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x.v, _mm512_set1_ps(-86.98f), _CMP_NLT_UQ), e)};
}

// 2^(n-1) from t = z + (1.5 * 2^23 + 126): see vec_avx2.h.
inline Vec vpow2_magic(Vec t) { return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t.v), 23))}; }
