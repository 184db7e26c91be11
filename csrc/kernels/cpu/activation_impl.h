// The activation loops, written once over a vector type V. No include guard: activation.cpp includes
// this through per_isa.h, once per ISA. See activation.h for the strategy and the math.

#include "activation_math_impl.h"

// YR_GELU_BF16_SEGMENTS=0 (tuning builds): the bf16 gelu without its segment path below
#ifndef YR_GELU_BF16_SEGMENTS
#define YR_GELU_BF16_SEGMENTS 1
#endif

#if defined(YR_AVX512_VARIANT)
// gelu for results rounded to bf16 on AVX-512, |x| < 8: relu(x) - |x| Q(|x|), Q(y) = Phi(-y), with Q a quartic in each
// of 32 segments of [0, 8) (width 1/4; u = 4y - floor(4y) in [0, 1)), its coefficients picked per lane by vpermt2ps
// from two registers each; relative error of Q at most 4.3e-4 (on the last segment, where gelu is under 1e-14; fitted
// to Phi(-y) in double by benchmarks/cpu/fit_gelu_segments.py, which prints these arrays; evaluated in fp32), against
// bf16's 2^-9 half ulp. About 13 floating-point operations and 5 permutes a vector where Gelu::f_bf16 takes about 24;
// groups with any |x| >= 8 (or inf / NaN) take f_bf16 (act_f_in). One thread in cache 1.31-1.37x; through the op,
// bf16 4096x4096 on two threads, 1.31-1.36x (gelu) (benchmarks/results/cpu-gelu-bf16-segments-epyc-2026-11-27.md).
alignas(64) constexpr float kGeluSegC4[32] = {
    -2.418178155e-05f, -6.483138714e-05f, -8.684840577e-05f, -8.619179425e-05f,
    -6.688562280e-05f, -3.815221862e-05f, -9.915748706e-06f, 1.090118076e-05f,
    2.183919969e-05f, 2.416958705e-05f, 2.103238330e-05f, 1.565497405e-05f,
    1.031430747e-05f, 6.122501873e-06f, 3.308705800e-06f, 1.638949698e-06f,
    7.476163546e-07f, 3.151121177e-07f, 1.230344395e-07f, 4.458777880e-08f,
    1.502129798e-08f, 4.710279278e-09f, 1.376198266e-09f, 3.749584809e-10f,
    9.533828588e-11f, 2.263607184e-11f, 5.021279399e-12f, 1.041134301e-12f,
    2.018609482e-13f, 3.661036657e-14f, 6.212943469e-15f, 9.868533111e-16f,
};
alignas(64) constexpr float kGeluSegC3[32] = {
    1.060165814e-03f, 9.598049801e-04f, 6.937853759e-04f, 3.391225182e-04f,
    -1.118951150e-05f, -2.813532192e-04f, -4.337686987e-04f, -4.714315583e-04f,
    -4.252537619e-04f, -3.356768866e-04f, -2.375461481e-04f, -1.527157292e-04f,
    -8.991860523e-05f, -4.874989827e-05f, -2.442781442e-05f, -1.134412014e-05f,
    -4.892486231e-06f, -1.962713895e-06f, -7.333395615e-07f, -2.554583318e-07f,
    -8.303636889e-08f, -2.520315334e-08f, -7.147209935e-09f, -1.894663093e-09f,
    -4.697091605e-10f, -1.089407523e-10f, -2.364600876e-11f, -4.804587284e-12f,
    -9.141031031e-13f, -1.628819556e-13f, -2.718796359e-14f, -4.251916083e-15f,
};
alignas(64) constexpr float kGeluSegC2[32] = {
    -7.683617696e-06f, 3.015237628e-03f, 5.498969462e-03f, 7.059550844e-03f,
    7.565819658e-03f, 7.139856927e-03f, 6.075605284e-03f, 4.721202422e-03f,
    3.375646658e-03f, 2.231594641e-03f, 1.368576312e-03f, 7.804497727e-04f,
    4.145725106e-04f, 2.054045763e-04f, 9.502105968e-05f, 4.107550558e-05f,
    1.660288581e-05f, 6.278474757e-06f, 2.222218882e-06f, 7.364485555e-07f,
    2.285897978e-07f, 6.647310613e-08f, 1.811379668e-08f, 4.626298455e-09f,
    1.107627212e-09f, 2.486311157e-10f, 5.233321762e-11f, 1.033025488e-11f,
    1.912504009e-12f, 3.321180679e-13f, 5.410264725e-14f, 8.268253669e-15f,
};
alignas(64) constexpr float kGeluSegC1[32] = {
    -9.973458946e-02f, -9.666632116e-02f, -8.801608533e-02f, -7.528458536e-02f,
    -6.049324572e-02f, -4.566294700e-02f, -3.237998486e-02f, -2.156971022e-02f,
    -1.349789649e-02f, -7.934893481e-03f, -4.381960724e-03f, -2.273249440e-03f,
    -1.107837074e-03f, -5.071701598e-04f, -2.181118471e-04f, -8.811530279e-05f,
    -3.344017750e-05f, -1.192146647e-05f, -3.992392067e-06f, -1.255965572e-06f,
    -3.711605245e-07f, -1.030347860e-07f, -2.686844347e-08f, -6.581671208e-09f,
    -1.514479320e-09f, -3.273576132e-10f, -6.646790063e-11f, -1.267740340e-11f,
    -2.271307708e-12f, -3.822499229e-13f, -6.042867216e-14f, -8.973490760e-15f,
};
alignas(64) constexpr float kGeluSegC0[32] = {
    4.999999702e-01f, 4.012936652e-01f, 3.085375428e-01f, 2.266273648e-01f,
    1.586552709e-01f, 1.056497917e-01f, 6.680721045e-02f, 4.005916417e-02f,
    2.275013551e-02f, 1.222447213e-02f, 6.209662650e-03f, 2.979760058e-03f,
    1.349895145e-03f, 5.770229036e-04f, 2.326277026e-04f, 8.841649105e-05f,
    3.167082832e-05f, 1.068832898e-05f, 3.397587307e-06f, 1.017048817e-06f,
    2.866387945e-07f, 7.604521102e-08f, 1.898816038e-08f, 4.461757186e-09f,
    9.864731254e-10f, 2.051969289e-10f, 4.015296776e-11f, 7.390686153e-12f,
    1.279485198e-12f, 2.083221291e-13f, 3.189734311e-14f, 4.592661344e-15f,
};
// Whether every lane of x has |x| < 8 (not inf / NaN): the lanes gelu_bf16_segments serves.
inline bool gelu_bf16_near(Vec x) {
  return _mm512_cmp_ps_mask(_mm512_abs_ps(x.v), _mm512_set1_ps(8.f), _CMP_LT_OQ) == 0xffff;
}
// gelu(x) for |x| < 8 in every lane (gelu_bf16_near).
inline Vec gelu_bf16_segments(Vec x) {
  const __m512 y = _mm512_abs_ps(x.v);
  const __m512 v = _mm512_mul_ps(y, _mm512_set1_ps(4.f));
  const __m512 jf = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512i j = _mm512_cvttps_epi32(jf);
  const __m512 u = _mm512_sub_ps(v, jf);
  const auto coef = [&](const float* c) {
    return _mm512_permutex2var_ps(_mm512_load_ps(c), j, _mm512_load_ps(c + 16));
  };
  __m512 q = _mm512_fmadd_ps(coef(kGeluSegC4), u, coef(kGeluSegC3));
  q = _mm512_fmadd_ps(q, u, coef(kGeluSegC2));
  q = _mm512_fmadd_ps(q, u, coef(kGeluSegC1));
  q = _mm512_fmadd_ps(q, u, coef(kGeluSegC0));
  const __m512 relu = _mm512_sub_ps(x.v, _mm512_min_ps(x.v, _mm512_setzero_ps()));  // -0 stays -0
  return {_mm512_fnmadd_ps(y, q, relu)};
}
#endif

// act(x) for the activation ops' loops: act_f, but the bf16 gelu on AVX-512 by segments where every lane has |x| < 8
// (one test for a group of vectors, so that both paths keep the group's operations interleaved: with a test a
// vector, inputs mostly past 4 ran 9% slower than before, benchmarks/results/cpu-gelu-bf16-segments-epyc-2026-11-27.md).
template <typename Act, typename T, typename V>
constexpr bool gelu_bf16_by_segments() {
#if defined(YR_AVX512_VARIANT)
  if constexpr (YR_GELU_BF16_SEGMENTS != 0 && std::is_same_v<T, bf16> && std::is_same_v<V, Vec>) {
    return std::is_same_v<Act, Gelu<V>>;
  }
#endif
  return false;
}
template <typename Act, typename T, typename V, typename... Vs>
inline void act_f_in(V (&out)[sizeof...(Vs)], Vs... x) {
#if defined(YR_AVX512_VARIANT)
  if constexpr (gelu_bf16_by_segments<Act, T, V>()) {
    if ((gelu_bf16_near(x) && ...)) {
      int k = 0;
      ((out[k++] = gelu_bf16_segments(x)), ...);
      return;
    }
  }
#endif
  int k = 0;
  ((out[k++] = act_f<Act, T>(x)), ...);
}

// Software prefetch this far ahead of the loads (bytes) in forward_run: the gated ops read two streams per row
// (a and b, half a row apart) and wrote the output with the compute and the memory traffic barely overlapped. On a
// 2-core AVX-512 EPYC, fp32 4096x4096, one build after another in the same quarter hour (copy 41-44 GB/s):
// gelu_and_mul 2.94-3.04 ms without, 2.06-2.10 at 1 KiB ahead, 1.90 at 2 KiB, 2.10-2.13 at 4 KiB; silu_and_mul
// 2.27-2.30 -> 1.82-1.85 at 2 KiB; gelu level. bf16 (the four-vector loop, two lines a stream): gelu_and_mul
// 1.055 -> 0.94-0.96 ms, silu_and_mul 0.82-0.84 -> 0.69-0.70, gelu level.
constexpr int64_t kActPrefetchBytes = 2048;

// One contiguous run of `len` outputs: y = act(a) (* b when gated). `flatten` inlines the whole activation
// (vexp included) into the loop, so its constants stay in registers: about 30% fewer cycles for gelu.
// `stream`: y (64-byte aligned) written with non-temporal stores, but the tail (fewer than W elements).
template <typename V, typename Act, bool kGated, typename T>
[[gnu::flatten]] inline void forward_run(const T* a, const T* b, T* y, int64_t len, bool stream) {
  constexpr int W = V::W;
  int64_t i = 0;
  // 16-bit T: four vectors, then two, at a time, through load_pair_x / store_pair_x: bf16 (AVX2, AVX-512) widened by
  // one unpack a vector and packed back by one pack, in a lane order of their own that the element-wise math does
  // not see; elsewhere plain loads and store_pair. Against one vector at a time (bf16 stores, one thread in cache,
  // AVX2 EPYC): gelu 1.08x, gelu_tanh 1.17x, gelu_and_mul 1.09x to 1.18x, silu_and_mul 1.13x to 1.17x; four vectors
  // against two, where the activations' polynomial chains leave latency to hide: bf16 1.02-1.11x (AVX-512 EPYC, two
  // builds) and 1.05-1.06x (AVX2), fp16 1.00-1.06x; fp32 level with four, so it keeps one (the same results
  // everywhere; benchmarks/results/cpu-avx512-port-epyc-2026-11-26.md).
  if constexpr (sizeof(T) == 2) {
    // the four loads before any of the math: two calls of a two-vector step in a row ran 2-3% slower than two
    // vectors at a time
    for (; i + 4 * W <= len; i += 4 * W) {
      constexpr int64_t ahead = kActPrefetchBytes / sizeof(T), line = 64 / sizeof(T);  // two lines a stream
      __builtin_prefetch(a + i + ahead, 0, 3);
      __builtin_prefetch(a + i + ahead + line, 0, 3);
      if constexpr (kGated) {
        __builtin_prefetch(b + i + ahead, 0, 3);
        __builtin_prefetch(b + i + ahead + line, 0, 3);
      }
      V a0, a1, a2, a3;
      load_pair_x(a + i, a0, a1);
      load_pair_x(a + i + 2 * W, a2, a3);
      V r[4];
      act_f_in<Act, T>(r, a0, a1, a2, a3);
      V v0 = r[0], v1 = r[1], v2 = r[2], v3 = r[3];
      if constexpr (kGated) {
        V b0, b1, b2, b3;
        load_pair_x(b + i, b0, b1);
        load_pair_x(b + i + 2 * W, b2, b3);
        v0 = v0 * b0;
        v1 = v1 * b1;
        v2 = v2 * b2;
        v3 = v3 * b3;
      }
      if (stream) {
        stream_pair_x(v0, v1, y + i);
        stream_pair_x(v2, v3, y + i + 2 * W);
      } else {
        store_pair_x(v0, v1, y + i);
        store_pair_x(v2, v3, y + i + 2 * W);
      }
    }
    for (; i + 2 * W <= len; i += 2 * W) {
      V a0, a1;
      load_pair_x(a + i, a0, a1);
      V r[2];
      act_f_in<Act, T>(r, a0, a1);
      V v0 = r[0], v1 = r[1];
      if constexpr (kGated) {
        V b0, b1;
        load_pair_x(b + i, b0, b1);
        v0 = v0 * b0;
        v1 = v1 * b1;
      }
      if (stream) stream_pair_x(v0, v1, y + i); else store_pair_x(v0, v1, y + i);
    }
  }
  for (; i + W <= len; i += W) {
    __builtin_prefetch(a + i + kActPrefetchBytes / sizeof(T), 0, 3);  // one line a vector (fp32)
    if constexpr (kGated) __builtin_prefetch(b + i + kActPrefetchBytes / sizeof(T), 0, 3);
    V r[1];
    act_f_in<Act, T>(r, V::load(a + i));
    V v = r[0];
    if constexpr (kGated) v = v * V::load(b + i);
    if (sizeof(T) == sizeof(typename V::acc_t) && stream) stream_one(v, y + i); else v.store(y + i);
  }
  if (i < len) {
    V r[1];
    act_f_in<Act, T>(r, load_n<V>(a + i, len - i));
    V v = r[0];
    if constexpr (kGated) v = v * load_n<V>(b + i, len - i);
    store_n(v, y + i, len - i);
  }
}

// One run of `len` gradients: da = g * act'(a) (* b when gated), and when gated db = g * act(a).
template <typename V, typename Act, bool kGated, typename T>
[[gnu::flatten]] inline void backward_run(const T* g, const T* a, const T* b, T* da, T* db, int64_t len) {
  constexpr int W = V::W;
  for (int64_t i = 0; i < len; i += W) {
    const int64_t m = len - i < W ? len - i : W;
    const bool full = m == W;
    V f, df;
    act_f_df<Act, T>(full ? V::load(a + i) : load_n<V>(a + i, m), &f, &df);
    const V gv = full ? V::load(g + i) : load_n<V>(g + i, m);
    V dav = gv * df;
    if constexpr (kGated) {
      dav = dav * (full ? V::load(b + i) : load_n<V>(b + i, m));
      const V dbv = gv * f;
      if (full) dbv.store(db + i); else store_n(dbv, db + i, m);
    }
    if (full) dav.store(da + i); else store_n(dav, da + i, m);
  }
}

// Flat output elements [begin, end), walked row segment by row segment.
template <typename V, typename T, typename Act, bool kGated>
Status forward_range(const ActivationForward& p, int64_t begin, int64_t end) {
  const int64_t n = p.cols;
  int64_t row = begin / n, col = begin - row * n;
  while (begin < end) {
    const int64_t len = n - col < end - begin ? n - col : end - begin;
    const T* a = static_cast<const T*>(p.x) + row * p.x_stride + col;
    T* y = static_cast<T*>(p.out) + begin;
    forward_run<V, Act, kGated>(a, a + n, y, len, p.stream_out && reinterpret_cast<uintptr_t>(y) % 64 == 0);
    begin += len;
    ++row;
    col = 0;
  }
  if (p.stream_out) stream_fence();
  return Status::ok;
}

template <typename V, typename T, typename Act, bool kGated>
Status backward_range(const ActivationBackward& p, int64_t begin, int64_t end) {
  const int64_t n = p.cols;
  int64_t row = begin / n, col = begin - row * n;
  while (begin < end) {
    const int64_t len = n - col < end - begin ? n - col : end - begin;
    const T* g = static_cast<const T*>(p.grad_out) + row * p.grad_out_stride + col;
    const T* a = static_cast<const T*>(p.x) + row * p.x_stride + col;
    T* da = static_cast<T*>(p.grad_x) + (kGated ? row * 2 * n + col : begin);
    backward_run<V, Act, kGated>(g, a, a + n, da, da + n, len);
    begin += len;
    ++row;
    col = 0;
  }
  return Status::ok;
}

template <typename V, typename T>
Status act_forward_typed(const ActivationForward& p, int64_t begin, int64_t end) {
  switch (p.act) {
    case Activation::silu:
      return p.gated ? forward_range<V, T, Silu<V>, true>(p, begin, end)
                     : forward_range<V, T, Silu<V>, false>(p, begin, end);
    case Activation::gelu:
      return p.gated ? forward_range<V, T, Gelu<V>, true>(p, begin, end)
                     : forward_range<V, T, Gelu<V>, false>(p, begin, end);
    case Activation::gelu_tanh:
      return p.gated ? forward_range<V, T, GeluTanh<V>, true>(p, begin, end)
                     : forward_range<V, T, GeluTanh<V>, false>(p, begin, end);
    default: break;
  }
  return Status::invalid_argument;
}

template <typename V, typename T>
Status act_backward_typed(const ActivationBackward& p, int64_t begin, int64_t end) {
  switch (p.act) {
    case Activation::silu:
      return p.gated ? backward_range<V, T, Silu<V>, true>(p, begin, end)
                     : backward_range<V, T, Silu<V>, false>(p, begin, end);
    case Activation::gelu:
      return p.gated ? backward_range<V, T, Gelu<V>, true>(p, begin, end)
                     : backward_range<V, T, Gelu<V>, false>(p, begin, end);
    case Activation::gelu_tanh:
      return p.gated ? backward_range<V, T, GeluTanh<V>, true>(p, begin, end)
                     : backward_range<V, T, GeluTanh<V>, false>(p, begin, end);
    default: break;
  }
  return Status::invalid_argument;
}

inline Status act_forward_dispatch(const ActivationForward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return act_forward_typed<Vec, float>(p, begin, end);
    case DType::f16: return act_forward_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return act_forward_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}

inline Status act_backward_dispatch(const ActivationBackward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return act_backward_typed<Vec, float>(p, begin, end);
    case DType::f16: return act_backward_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return act_backward_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}
