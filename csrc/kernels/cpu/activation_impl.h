// The activation loops, written once over a vector type V. No include guard: activation.cpp includes
// this through per_isa.h, once per ISA. See activation.h for the strategy and the math.

#include "activation_math_impl.h"

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
      V v0 = act_f<Act, T>(a0), v1 = act_f<Act, T>(a1), v2 = act_f<Act, T>(a2), v3 = act_f<Act, T>(a3);
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
      V v0 = act_f<Act, T>(a0), v1 = act_f<Act, T>(a1);
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
    V v = act_f<Act, T>(V::load(a + i));
    if constexpr (kGated) v = v * V::load(b + i);
    if (sizeof(T) == sizeof(typename V::acc_t) && stream) stream_one(v, y + i); else v.store(y + i);
  }
  if (i < len) {
    V v = act_f<Act, T>(load_n<V>(a + i, len - i));
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
