// Vec for AVX-512 (F/BW/VL/DQ): 16 float lanes in a __m512. Included inside YR_TARGET_BEGIN(YR_AVX512_TARGET), and
// again inside YR_TARGET_BEGIN(YR_AVX512_BF16_TARGET) with YR_AVX512_BF16_CONVERT defined (the avx512_bf16 variant).
// bf16 rounding: integer ops (bf16_lanes) in the avx512 variant; in avx512_bf16, the AVX512-BF16 conversions
// (vcvtneps2bf16 / vcvtne2ps2bf16: one instruction for one or two vectors, the same rounding, but subnormal inputs
// flushed to zero), with bf16_lanes for vectors that hold a subnormal (a vfpclassps test; the same bits as the avx512
// variant everywhere). One thread in cache on an AVX-512 EPYC (Zen 5), against the avx512 variant, two runs: bf16
// rms_norm 1.13-1.16x, fused_add_rms_norm 1.10-1.23x, layer_norm 1.11-1.12x, softmax 1.03x, log_softmax 1.06-1.07x,
// silu_and_mul 1.27-1.36x, gelu_and_mul 1.11-1.17x, gelu 1.12-1.19x, gelu_tanh 1.26-1.33x. Ported from vec_avx2.h on
// 2026-11-26: load2x / store2x / unpair (the norms' bf16 rows) and the exp variants (exp_poly2, vexp_ftz_low,
// vexp_neg_sat); one thread in cache on an AVX-512 EPYC: bf16 norms 1.07-1.22x, softmax bf16 / fp16 1.17x,
// silu_and_mul 1.10x (fp32) to 1.30x (fp16). vec_avx2.h's store2 (two vectors packed, permuted and stored at once)
// is left out: here it made the element-wise bf16 ops 2-3% slower; they store through store2x (no permute) instead
// (benchmarks/results/cpu-avx512-port-epyc-2026-11-26.md).
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
  // round to nearest even, in the low 16 bits of each 32-bit lane; NaN becomes a quiet NaN with its sign
  static __m512i bf16_lanes(__m512 x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(r, isnan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  }
#if YR_AVX512_BF16_CONVERT
  // lanes holding a subnormal (which the BF16 conversions flush to zero)
  static __mmask16 subnormal(__m512 x) { return _mm512_fpclass_ps_mask(x, 0x20); }
#endif
  void store(bf16* p) const {
#if YR_AVX512_BF16_CONVERT
    if (__builtin_expect(subnormal(v) == 0, 1)) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
      return;
    }
#endif
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bf16_lanes(v)));
  }
  // p[0, 32) widened by one unpack from memory per vector (vec_avx2.h's load2x): a = p[0..3], p[8..11],
  // p[16..19], p[24..27], b = p[4..7], p[12..15], ...: store2x packs them back in place without a permute, unpair
  // puts sums over such lanes back in the order of load(p), load(p + 16)
  static void load2x(const bf16* p, Vec& a, Vec& b) {
    const __m512i w = _mm512_loadu_si512(p);
    a.v = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), w));
    b.v = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), w));
  }
  // the 32 bf16 values store2x writes
  static __m512i pack2x(Vec a, Vec b) {
#if YR_AVX512_BF16_CONVERT
    if (__builtin_expect((subnormal(a.v) | subnormal(b.v)) == 0, 1)) {
      // a's rounded lanes in the low half, b's in the high half, then each 64-bit unit to its place: a's lanes hold
      // p[0..3], p[8..11], ..., b's p[4..7], p[12..15], ...
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b.v, a.v));
      return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7), both);
    }
#endif
    return _mm512_packus_epi32(bf16_lanes(a.v), bf16_lanes(b.v));
  }
  static void store2x(Vec a, Vec b, bf16* p) { _mm512_storeu_si512(p, pack2x(a, b)); }
  // Non-temporal stores of two vectors to p[0, 32) (p 64-byte aligned), the bits store_pair (stream_pair) or
  // store2x (stream_pair_x) would write: for outputs larger than the last-level cache, which then skip the
  // read-for-ownership of a cached store and leave the cache to the inputs (vec_util.h, stream_pair).
  static void stream(Vec a, float* p) { _mm512_stream_ps(p, a.v); }
  static void stream_pair(Vec a, Vec b, float* p) {
    _mm512_stream_ps(p, a.v);
    _mm512_stream_ps(p + 16, b.v);
  }
  static void stream_pair(Vec a, Vec b, bf16* p) {
    __m512i both;
#if YR_AVX512_BF16_CONVERT
    if (__builtin_expect((subnormal(a.v) | subnormal(b.v)) == 0, 1)) {
      both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b.v, a.v));  // a's lanes, then b's: in order
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p), both);
      return;
    }
#endif
    both = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(bf16_lanes(a.v))),
                              _mm512_cvtepi32_epi16(bf16_lanes(b.v)), 1);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), both);
  }
  static void stream_pair_x(Vec a, Vec b, bf16* p) { _mm512_stream_si512(reinterpret_cast<__m512i*>(p), pack2x(a, b)); }
  static void stream_pair(Vec a, Vec b, f16* p) {
    constexpr int r = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512i both =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(a.v, r)), _mm512_cvtps_ph(b.v, r), 1);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), both);
  }
  static void unpair(Vec& a, Vec& b) {
    // 128-bit blocks: a = (p0 p2 p4 p6), b = (p1 p3 p5 p7) in units of 4 elements -> (p0 p1 p2 p3), (p4 p5 p6 p7)
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i hi = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    const __m512 l = _mm512_permutex2var_ps(a.v, lo, b.v);
    b.v = _mm512_permutex2var_ps(a.v, hi, b.v);
    a.v = l;
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
// 1/a to within 2^-14 relative (vrcp14ps: one instruction against vdivps's long, less pipelined one); for results
// that keep fewer bits (bf16)
inline Vec vrcp14(Vec a) { return {_mm512_rcp14_ps(a.v)}; }
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

// vec_avx2.h's exp_poly2 on 512 bits: 2 e^f by degree 6 or (kLow, for results rounded to 16 bits) degree 4, in f
// or (kNeg) in g = -f.
template <bool kLow, bool kNeg = false>
inline __m512 exp_poly2(__m512 f) {
  constexpr float s = kNeg ? -1.f : 1.f;
  __m512 p;
  if constexpr (kLow) {
    p = _mm512_set1_ps(8.25556964e-2f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(s * 3.35070312e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.00010228f));
  } else {
    p = _mm512_set1_ps(2.76873051e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(s * 1.67483110e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(8.33360031e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(s * 3.33328635e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.99999881e-1f));
  }
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(s * 2.f));
  return _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.f));
}

// e^x, flushing results below 2^-125 to 0: the algorithm of vexp_ftz in vec_avx2.h (kLow: its vexp_ftz_low).
template <bool kLow>
inline Vec vexp_ftz_impl(Vec x) {
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(88.7228394f), x.v);
  const __m512 magic = _mm512_set1_ps(12582912.f + 126.f);
  const __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504f), magic);
  const __m512 n = _mm512_sub_ps(t, magic);
  __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  f = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), f);
  const __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23));
  const __m512 e = _mm512_mul_ps(exp_poly2<kLow>(f), scale);
  return {_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x.v, _mm512_set1_ps(-86.98f), _CMP_NLT_UQ), e)};
}
inline Vec vexp_ftz(Vec x) { return vexp_ftz_impl<false>(x); }
inline Vec vexp_ftz_low(Vec x) { return vexp_ftz_impl<true>(x); }

// e^-a for a / (1 + e^-a) (silu, gelu tanh): vec_avx2.h's vexp_neg_sat (the same bits as vexp_ftz(0 - a) in those
// quotients, 2 instructions fewer).
template <bool kLow>
inline Vec vexp_neg_sat_impl(Vec a) {
  const __m512 ac = _mm512_min_ps(_mm512_set1_ps(86.98f), _mm512_max_ps(_mm512_set1_ps(-88.7228394f), a.v));
  const __m512 magic = _mm512_set1_ps(12582912.f + 126.f);
  const __m512 t = _mm512_fmadd_ps(ac, _mm512_set1_ps(-1.44269504f), magic);
  const __m512 n = _mm512_sub_ps(t, magic);
  __m512 g = _mm512_fmadd_ps(n, _mm512_set1_ps(0.693359375f), ac);  // g = -f
  g = _mm512_fnmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), g);
  const __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23));
  return {_mm512_mul_ps(exp_poly2<kLow, true>(g), scale)};
}
inline Vec vexp_neg_sat(Vec a) { return vexp_neg_sat_impl<false>(a); }
inline Vec vexp_neg_sat_low(Vec a) { return vexp_neg_sat_impl<true>(a); }

// 2^(n-1) from t = z + (1.5 * 2^23 + 126): see vec_avx2.h.
inline Vec vpow2_magic(Vec t) { return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t.v), 23))}; }
