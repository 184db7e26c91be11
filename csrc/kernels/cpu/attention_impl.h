// The attention tile loops, written once over a vector type V (fp32 lanes, or VecD for fp64) and the
// storage type T. No include guard: attention.cpp includes this through per_isa.h, once per ISA. See
// attention.h for the algorithm; the GEMMs go through the caller's GemmCallback, except fp32 products in the
// AVX-512 variants when the plan chose our own tiles (own_products), which run on gemm_f32_avx512.h.

#if YR_AVX512_VARIANT
#include "gemm_f32_avx512.h"
#endif

// {0, 1, ..., W-1}: compared with a lane count to keep the first lanes of a tail.
template <typename V>
inline V lane_index() {
  typename V::acc_t idx[V::W];
  for (int i = 0; i < V::W; ++i) idx[i] = typename V::acc_t(i);
  return V::load(idx);
}

// n elements of T to the accumulation type.
template <typename V, typename T>
inline void convert_row(const T* src, typename V::acc_t* dst, int64_t n) {
  constexpr int W = V::W;
  int64_t i = 0;
  for (; i + W <= n; i += W) V::load(src + i).store(dst + i);
  if (i < n) store_n(load_n<V>(src + i, n - i), dst + i, n - i);
}

// dst[0, n) = src * c, rounded to T.
template <typename V, typename T>
inline void scale_row_to(const typename V::acc_t* src, int64_t n, typename V::acc_t c, T* dst) {
  constexpr int W = V::W;
  const V vc = V::set1(c);
  int64_t i = 0;
  for (; i + W <= n; i += W) (V::load(src + i) * vc).store(dst + i);
  if (i < n) store_n(load_n<V>(src + i, n - i) * vc, dst + i, n - i);
}

// A tile of `rows` rows of d elements (row stride ld) as a GEMM operand of the accumulation type: the
// tile itself when T is that type and the rows are BLAS-compatible (ld >= d), else a copy in buf (row
// stride d). *ld_out gets the operand's row stride.
template <typename V, typename T>
inline const typename V::acc_t* gemm_operand(const T* src, int64_t ld, int64_t rows, int64_t d,
                                             typename V::acc_t* buf, int64_t* ld_out) {
  using A = typename V::acc_t;
  if constexpr (std::is_same_v<T, A>) {
    if (ld >= d) {
      *ld_out = ld;
      return src;
    }
  }
  for (int64_t r = 0; r < rows; ++r) convert_row<V>(src + r * ld, buf + r * d, d);
  *ld_out = d;
  return buf;
}

// A task's stacked tile: row g * mq + r is row r of head g (element strides st, from src at head 0 and the
// block's first row), as a GEMM operand of the accumulation type. In place when the rows are evenly
// strided (one head, or one row per head) and of that type; else gathered into buf (row stride d).
template <typename V, typename T>
inline const typename V::acc_t* stacked_rows(const T* src, const Strides4& st, int64_t heads, int64_t mq, int64_t d,
                                             typename V::acc_t* buf, int64_t* ld_out) {
  if (heads == 1 || mq == 1) return gemm_operand<V>(src, heads == 1 ? st.s : st.h, heads * mq, d, buf, ld_out);
  for (int64_t r = 0; r < heads * mq; ++r) convert_row<V>(src + r / mq * st.h + r % mq * st.s, buf + r * d, d);
  *ld_out = d;
  return buf;
}

// Causal query blocks in the order 0, n-1, 1, n-2, ...: any contiguous half of the order has half the work.
inline int64_t balanced_block(bool causal, int64_t n, int64_t blocks) {
  return !causal ? n : n % 2 == 0 ? n / 2 : blocks - 1 - n / 2;
}

// One row of a tile of unscaled scores q.k s[0, nk), of which the first `vis` columns are visible: writes
// P = exp(scale * s - m_new) (0 in the hidden columns) to out[0, nk) (s itself, or a row of another type: the sum
// is of the unrounded values), updates the running max *m and sum *l
// of the scaled scores and returns the factor alpha = exp(m_old - m_new) the row's accumulator must be
// scaled by. A row that has seen no key yet keeps m = -inf, l = 0 (its exponent base is taken as 0, so
// nothing becomes NaN). The scale is applied here, not in the GEMM: free in the max pass and the exp's fma.
template <typename V, typename O>
inline typename V::acc_t online_softmax_row(const typename V::acc_t* s, int64_t nk, int64_t vis,
                                            typename V::acc_t scale, typename V::acc_t* m, typename V::acc_t* l,
                                            O* out) {
  using A = typename V::acc_t;
  constexpr int W = V::W;
  const A ninf = -std::numeric_limits<A>::infinity();
  const V idx = lane_index<V>();
  const V vs = V::set1(scale);
  V vm = V::set1(ninf);
  int64_t c = 0;
  for (; c + W <= vis; c += W) vm = vmax(vm, V::load(s + c) * vs);
  if (c < vis) vm = vmax(vm, vselect_lt(idx, V::set1(A(vis - c)), load_n<V>(s + c, vis - c) * vs, V::set1(ninf)));
  const A m_new = std::max(*m, vm.max());
  const A base = m_new == ninf ? A(0) : m_new;
  const V vnb = V::set1(-base);
  V sum = V::zero();
  for (c = 0; c + W <= vis; c += W) {
    const V e = vexp_ftz(V::fma(V::load(s + c), vs, vnb));
    sum = sum + e;
    e.store(out + c);
  }
  if (c < vis) {
    const V e = vselect_lt(idx, V::set1(A(vis - c)), vexp_ftz(V::fma(load_n<V>(s + c, vis - c), vs, vnb)), V::zero());
    sum = sum + e;
    store_n(e, out + c, vis - c);
  }
  if (vis < nk) std::memset(static_cast<void*>(out + vis), 0, size_t(nk - vis) * sizeof(O));
  const A alpha = std::exp(*m - base);  // exp(-inf) = 0 for the first visible tile
  *l = *l * alpha + sum.sum();
  *m = m_new;
  return alpha;
}

// s[0, nk) = exp(scale * s - lse) for the first `vis` columns (s: unscaled scores), 0 for the rest (and for
// a row with lse = -inf, which sees no key).
template <typename V>
inline void probs_row(typename V::acc_t* s, int64_t nk, int64_t vis, typename V::acc_t scale, typename V::acc_t lse) {
  using A = typename V::acc_t;
  constexpr int W = V::W;
  if (lse == -std::numeric_limits<A>::infinity()) vis = 0;
  const V vs = V::set1(scale), vnl = V::set1(-lse);
  int64_t c = 0;
  for (; c + W <= vis; c += W) vexp_ftz(V::fma(V::load(s + c), vs, vnl)).store(s + c);
  if (c < vis) store_n(vexp_ftz(V::fma(load_n<V>(s + c, vis - c), vs, vnl)), s + c, vis - c);
  if (vis < nk) std::memset(s + vis, 0, size_t(nk - vis) * sizeof(A));
}

// dp[0, n) = scale * p * (dp - di): the gradient of the unscaled scores, from the probabilities and
// dP = dO V^T.
template <typename V>
inline void score_grad_row(const typename V::acc_t* p, typename V::acc_t* dp, int64_t n, typename V::acc_t di,
                           typename V::acc_t scale) {
  using A = typename V::acc_t;
  constexpr int W = V::W;
  const V vd = V::set1(di), vs = V::set1(scale);
  int64_t c = 0;
  for (; c + W <= n; c += W) (V::load(p + c) * vs * (V::load(dp + c) - vd)).store(dp + c);
  for (; c < n; ++c) dp[c] = p[c] * A(scale) * (dp[c] - di);
}

// sum(a * b) over n elements of T, in the accumulation type.
template <typename V, typename T>
inline typename V::acc_t dot_row(const T* a, const T* b, int64_t n) {
  constexpr int W = V::W;
  V acc = V::zero();
  int64_t i = 0;
  for (; i + W <= n; i += W) acc = V::fma(V::load(a + i), V::load(b + i), acc);
  if (i < n) acc = V::fma(load_n<V>(a + i, n - i), load_n<V>(b + i, n - i), acc);
  return acc.sum();
}

// Visible columns of a key tile [j0, j0 + nk) for query row i: keys j <= i + off under the causal mask.
inline int64_t visible_keys(bool causal, int64_t i, int64_t off, int64_t j0, int64_t nk) {
  return causal ? std::clamp<int64_t>(i + off - j0 + 1, 0, nk) : nk;
}

// Forward task t: its query block [i0, i0 + mq) (balanced order for causal), R = stacked rows, batch, first query
// head h0, key/value head hk, and the Q tile (head h0, row i0), K and V (head hk) it reads.
template <typename T>
struct FwdTask {
  int64_t i0, mq, R, b, h0, hk;
  const T *q, *k, *v;
};
template <typename T>
inline FwdTask<T> fwd_task(const AttentionForward& p, int64_t t) {
  const AttentionDims& d = p.dims;
  const int64_t BQ = p.block_q, G = p.heads_per_task, sets = d.heads_q / G, group = d.heads_q / d.heads_kv;
  const int64_t blocks = (d.seq_q + BQ - 1) / BQ;
  FwdTask<T> r;
  r.i0 = balanced_block(d.causal, t % blocks, blocks) * BQ;
  r.mq = std::min(BQ, d.seq_q - r.i0);
  r.R = G * r.mq;
  r.b = t / blocks / sets;
  r.h0 = t / blocks % sets * G;
  r.hk = r.h0 / group;
  r.q = static_cast<const T*>(p.q) + r.b * p.q_strides.b + r.h0 * p.q_strides.h + r.i0 * p.q_strides.s;
  r.k = static_cast<const T*>(p.k) + r.b * p.k_strides.b + r.hk * p.k_strides.h;
  r.v = static_cast<const T*>(p.v) + r.b * p.v_strides.b + r.hk * p.v_strides.h;
  return r;
}

template <typename V, typename T>
Status attn_forward_tasks(const AttentionForward& p, int64_t begin, int64_t end, void* scratch) {
  using A = typename V::acc_t;
  constexpr bool f64 = sizeof(A) == 8;
  const AttentionDims& d = p.dims;
  const int64_t D = d.head_dim, Sq = d.seq_q, Sk = d.seq_kv, BQ = p.block_q, BK = p.block_kv;
  const int64_t G = p.heads_per_task, off = Sk - Sq;
  const FwdScratch L = fwd_scratch(G * BQ, BK, D);
  const A scale = A(d.scale);
  A* const base = static_cast<A*>(scratch);
  A *s = base + L.s, *acc = base + L.acc, *qbuf = base + L.q, *m = base + L.m, *l = base + L.l;
  const auto gemm = [&](bool ta, bool tb, int64_t mm, int64_t nn, int64_t kk, double alpha, const A* a, int64_t lda,
                        const A* b, int64_t ldb, double beta, A* c, int64_t ldc) {
#if YR_AVX512_VARIANT
    if constexpr (!f64) {
      if (p.own_products) return f32dot::gemm(ta, tb, mm, nn, kk, A(alpha), a, lda, b, ldb, A(beta), c, ldc);
    }
#endif
    p.gemm.fn(p.gemm.ctx, f64, ta, tb, mm, nn, kk, alpha, a, lda, b, ldb, beta, c, ldc);
  };
  for (int64_t t = begin; t < end; ++t) {
    const FwdTask<T> task = fwd_task<T>(p, t);
    const int64_t i0 = task.i0, mq = task.mq, R = task.R, b = task.b, h0 = task.h0;
    const T *q = task.q, *k = task.k, *v = task.v;  // Q tile: row g * mq + r is query i0 + r of head h0 + g
    int64_t ldq, ldk, ldv;
    const A* qa = stacked_rows<V>(q, p.q_strides, G, mq, D, qbuf, &ldq);
    // keys [0, kend) are visible to some row of this block
    const int64_t kend = d.causal ? std::clamp<int64_t>(i0 + mq + off, 0, Sk) : Sk;
    std::fill(m, m + R, -std::numeric_limits<A>::infinity());
    std::fill(l, l + R, A(0));
    std::fill(acc, acc + R * D, A(0));
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
      const int64_t nk = std::min(BK, kend - j0);
      const A* ka = gemm_operand<V>(k + j0 * p.k_strides.s, p.k_strides.s, nk, D, base + L.k, &ldk);
      gemm(false, true, R, nk, D, 1.0, qa, ldq, ka, ldk, 0.0, s, BK);  // S (R, nk) = Q K^T
      for (int64_t r = 0; r < R; ++r) {
        const int64_t vis = visible_keys(d.causal, i0 + r % mq, off, j0, nk);
        const A alpha = online_softmax_row<V>(s + r * BK, nk, vis, scale, m + r, l + r, s + r * BK);
        if (alpha != A(1)) scale_row_to<V>(acc + r * D, D, alpha, acc + r * D);
      }
      const A* va = gemm_operand<V>(v + j0 * p.v_strides.s, p.v_strides.s, nk, D, base + L.v, &ldv);
      gemm(false, false, R, D, nk, 1.0, s, BK, va, ldv, 1.0, acc, D);  // O (R, D) += P V
    }
    for (int64_t r = 0; r < R; ++r) {
      const int64_t row = (b * d.heads_q + h0 + r / mq) * Sq + i0 + r % mq;  // (b, head, query)
      scale_row_to<V>(acc + r * D, D, l[r] > A(0) ? A(1) / l[r] : A(0), static_cast<T*>(p.out) + row * D);
      if (p.lse) {
        static_cast<A*>(p.lse)[row] = l[r] > A(0) ? m[r] + std::log(l[r]) : -std::numeric_limits<A>::infinity();
      }
    }
  }
  return Status::ok;
}

// Backward task t: its (batch, key/value head, split of the query blocks), first query head, and the matrices of
// that head group (q, dO, O at head h0; k, v at head hk).
template <typename T>
struct BwdTask {
  int64_t split, b, hk, h0;
  const T *q, *go, *o, *k, *v;
};
template <typename T>
inline BwdTask<T> bwd_task(const AttentionBackward& p, int64_t t) {
  const AttentionDims& d = p.dims;
  const auto at = [](const void* ptr, const Strides4& st, int64_t b, int64_t h) {
    return static_cast<const T*>(ptr) + b * st.b + h * st.h;
  };
  BwdTask<T> r;
  r.split = t % p.splits;
  r.b = t / p.splits / d.heads_kv;
  r.hk = t / p.splits % d.heads_kv;
  r.h0 = r.hk * (d.heads_q / d.heads_kv);
  r.q = at(p.q, p.q_strides, r.b, r.h0);
  r.go = at(p.grad_out, p.grad_out_strides, r.b, r.h0);
  r.o = at(p.out, p.out_strides, r.b, r.h0);
  r.k = at(p.k, p.k_strides, r.b, r.hk);
  r.v = at(p.v, p.v_strides, r.b, r.hk);
  return r;
}

template <typename V, typename T>
Status attn_backward_tasks(const AttentionBackward& p, int64_t begin, int64_t end, void* scratch) {
  using A = typename V::acc_t;
  constexpr bool f64 = sizeof(A) == 8;
  const AttentionDims& d = p.dims;
  const int64_t D = d.head_dim, Sq = d.seq_q, Sk = d.seq_kv, BQ = p.block_q, BK = p.block_kv;
  const int64_t G = d.heads_q / d.heads_kv, blocks = (Sq + BQ - 1) / BQ, off = Sk - Sq;
  const BwdScratch L = bwd_scratch(Sk, G * BQ, BK, D);
  const A scale = A(d.scale);
  A* const base = static_cast<A*>(scratch);
  A *dk = base + L.dk, *dv = base + L.dv, *dq = base + L.dq, *di = base + L.di, *lse = base + L.lse;
  A *s = base + L.s, *dp = base + L.dp;
  const auto gemm = [&](bool ta, bool tb, int64_t mm, int64_t nn, int64_t kk, double alpha, const A* a, int64_t lda,
                        const A* b, int64_t ldb, double beta, A* c, int64_t ldc) {
#if YR_AVX512_VARIANT
    if constexpr (!f64) {
      if (p.own_products) return f32dot::gemm(ta, tb, mm, nn, kk, A(alpha), a, lda, b, ldb, A(beta), c, ldc);
    }
#endif
    p.gemm.fn(p.gemm.ctx, f64, ta, tb, mm, nn, kk, alpha, a, lda, b, ldb, beta, c, ldc);
  };
  for (int64_t t = begin; t < end; ++t) {
    const BwdTask<T> task = bwd_task<T>(p, t);
    const int64_t split = task.split, b = task.b, hk = task.hk, h0 = task.h0;
    const T *q = task.q, *go = task.go, *o = task.o, *k = task.k, *v = task.v;
    std::fill(dk, dk + Sk * D, A(0));
    std::fill(dv, dv + Sk * D, A(0));
    for (int64_t n = split * blocks / p.splits; n < (split + 1) * blocks / p.splits; ++n) {
      const int64_t i0 = balanced_block(d.causal, n, blocks) * BQ, mq = std::min(BQ, Sq - i0), R = G * mq;
      int64_t ldq, ldg, ldk, ldv;
      const A* qa = stacked_rows<V>(q + i0 * p.q_strides.s, p.q_strides, G, mq, D, base + L.q, &ldq);
      const A* ga = stacked_rows<V>(go + i0 * p.grad_out_strides.s, p.grad_out_strides, G, mq, D, base + L.dout, &ldg);
      for (int64_t r = 0; r < R; ++r) {  // row r: query i0 + r % mq of head h0 + r / mq
        const int64_t g = r / mq, i = i0 + r % mq;
        di[r] = dot_row<V>(go + g * p.grad_out_strides.h + i * p.grad_out_strides.s,
                           o + g * p.out_strides.h + i * p.out_strides.s, D);
        lse[r] = static_cast<const A*>(p.lse)[(b * d.heads_q + h0 + g) * Sq + i];
      }
      std::fill(dq, dq + R * D, A(0));
      // keys [0, kend) are visible to some row of this block
      const int64_t kend = d.causal ? std::clamp<int64_t>(i0 + mq + off, 0, Sk) : Sk;
      for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        const int64_t nk = std::min(BK, kend - j0);
        const A* ka = gemm_operand<V>(k + j0 * p.k_strides.s, p.k_strides.s, nk, D, base + L.k, &ldk);
        const A* va = gemm_operand<V>(v + j0 * p.v_strides.s, p.v_strides.s, nk, D, base + L.v, &ldv);
        gemm(false, true, R, nk, D, 1.0, qa, ldq, ka, ldk, 0.0, s, BK);  // S = Q_i K_j^T (unscaled)
        for (int64_t r = 0; r < R; ++r) {
          probs_row<V>(s + r * BK, nk, visible_keys(d.causal, i0 + r % mq, off, j0, nk), scale, lse[r]);
        }
        gemm(true, false, nk, D, R, 1.0, s, BK, ga, ldg, 1.0, dv + j0 * D, D);   // dV_j += P^T dO_i
        gemm(false, true, R, nk, D, 1.0, ga, ldg, va, ldv, 0.0, dp, BK);          // dP = dO_i V_j^T
        for (int64_t r = 0; r < R; ++r) score_grad_row<V>(s + r * BK, dp + r * BK, nk, di[r], scale);
        gemm(false, false, R, D, nk, 1.0, dp, BK, ka, ldk, 1.0, dq, D);        // dQ_i += scale dS K_j
        gemm(true, false, nk, D, R, 1.0, dp, BK, qa, ldq, 1.0, dk + j0 * D, D);  // dK_j += scale dS^T Q_i
      }
      for (int64_t r = 0; r < R; ++r) {
        const int64_t row = (b * d.heads_q + h0 + r / mq) * Sq + i0 + r % mq;
        scale_row_to<V>(dq + r * D, D, A(1), static_cast<T*>(p.grad_q) + row * D);
      }
    }
    const int64_t head = b * d.heads_kv + hk;
    if (p.splits == 1) {
      scale_row_to<V>(dk, Sk * D, A(1), static_cast<T*>(p.grad_k) + head * Sk * D);
      scale_row_to<V>(dv, Sk * D, A(1), static_cast<T*>(p.grad_v) + head * Sk * D);
    } else {
      std::memcpy(static_cast<A*>(p.grad_k) + (head * p.splits + split) * Sk * D, dk, size_t(Sk * D) * sizeof(A));
      std::memcpy(static_cast<A*>(p.grad_v) + (head * p.splits + split) * Sk * D, dv, size_t(Sk * D) * sizeof(A));
    }
  }
  return Status::ok;
}

inline Status attn_forward_dispatch(const AttentionForward& p, int64_t begin, int64_t end, void* scratch) {
  switch (p.dims.dtype) {
    case DType::f32: return attn_forward_tasks<Vec, float>(p, begin, end, scratch);
    case DType::f16: return attn_forward_tasks<Vec, f16>(p, begin, end, scratch);
    case DType::bf16: return attn_forward_tasks<Vec, bf16>(p, begin, end, scratch);
    default: return Status::unsupported_dtype;
  }
}

inline Status attn_backward_dispatch(const AttentionBackward& p, int64_t begin, int64_t end, void* scratch) {
  switch (p.dims.dtype) {
    case DType::f32: return attn_backward_tasks<Vec, float>(p, begin, end, scratch);
    case DType::f16: return attn_backward_tasks<Vec, f16>(p, begin, end, scratch);
    case DType::bf16: return attn_backward_tasks<Vec, bf16>(p, begin, end, scratch);
    default: return Status::unsupported_dtype;
  }
}

#if YR_AVX512_BF16_CONVERT
#include "attention_bf16_impl.h"
#endif
