// The attention tile loops for bf16 inputs on AVX512-BF16 CPUs: every product a bf16 x bf16 -> fp32 GEMM
// (gemm_bf16_avx512.h) at about 4.6x the fp32 GEMM rate of the same core, instead of converting tiles to fp32
// for the BLAS. The probabilities P and score gradients dS are rounded to bf16 before their products, as
// torch's CPU flash attention and the GPU kernels do; softmax statistics, accumulators and dQ / dK / dV sums
// stay fp32. No include guard: attention_impl.h includes this in the avx512_bf16 variant only; attention.cpp
// runs these loops when the plan chose them (bf16 inputs, that variant active) and sized the scratch for them
// (Bf16FwdScratch, Bf16BwdScratch).

#include "gemm_bf16_avx512.h"

// C (m x n) (+)= A B with k = 2 kp (gemm_bf16_avx512.h's operands): on the matrix engine where the glue supplied
// one (Bf16GemmCallback), else on our AVX512-BF16 tiles.
inline void bf16_product(const Bf16GemmCallback& engine, int64_t m, int64_t n, int64_t kp, const bf16* a,
                         int64_t lda, const uint32_t* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (engine.fn == nullptr) {
    bf16dot::gemm(m, n, kp, a, lda, b, ldb, c, ldc, accumulate);
  } else if (m > 0 && n > 0) {
    engine.fn(engine.ctx, m, n, 2 * kp, a, lda, b, ldb, c, ldc, accumulate);
  }
}


// dst[0, n) = src rounded to bf16; dst[n] = 0 when `pad` (the zero column of an odd K).
inline void round_row_bf16(const float* src, int64_t n, bf16* dst, bool pad) {
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_loadu_ps(src + c))));
  }
  if (c < n) {
    const __mmask16 mk = __mmask16((1u << (n - c)) - 1);
    _mm256_mask_storeu_epi16(dst + c, mk,
                             reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, src + c))));
  }
  if (pad) dst[n].bits = 0;
}

// B packed from fp32 rows (bf16dot::pack_pairs_of_cols's layout, rounded to bf16): word (p, j) = (src[2p][j],
// src[2p + 1][j]) for k rows of n columns (row stride ld), a zero high half when 2p + 1 = k; columns up to
// up16(n) written (zeros past n).
inline void pack_pairs_f32(const float* src, int64_t ld, int64_t k, int64_t n, uint32_t* dst, int64_t ldb) {
  // cvtne2ps(b, a): a's 16 rounded lanes, then b's; the permute interleaves them into (a_j, b_j) words
  alignas(64) static constexpr int16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                          8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kInterleave);
  const int64_t n16 = up16(n);
  for (int64_t p = 0; p < (k + 1) / 2; ++p) {
    const float* r0 = src + 2 * p * ld;
    const float* r1 = 2 * p + 1 < k ? r0 + ld : nullptr;
    uint32_t* d = dst + p * ldb;
    for (int64_t c = 0; c < n16; c += 16) {
      const __mmask16 mk = c + 16 <= n ? __mmask16(0xffff) : c < n ? __mmask16((1u << (n - c)) - 1) : __mmask16(0);
      const __m512 a = _mm512_maskz_loadu_ps(mk, r0 + c);
      const __m512 b = r1 ? _mm512_maskz_loadu_ps(mk, r1 + c) : _mm512_setzero_ps();
      const __m512i both = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
      _mm512_storeu_si512(d + c, _mm512_permutexvar_epi16(idx, both));
    }
  }
}

// A task's stacked rows (as stacked_rows in attention_impl.h) copied into dst (rows x ldd bf16, zero columns
// [d, ldd)).
inline void stack_rows_bf16(const bf16* src, const Strides4& st, int64_t heads, int64_t mq, int64_t d, bf16* dst,
                            int64_t ldd) {
  for (int64_t r = 0; r < heads * mq; ++r) {
    bf16dot::copy_rows(src + r / mq * st.h + r % mq * st.s, 0, 1, d, dst + r * ldd, ldd);
  }
}

// The first n columns of src (k rows of row stride ld, fp32) as n rows of k elements of T: dst[j][c] = src[c][j].
// Sixteen columns at a time through buf (16 * k floats): vector loads along src's rows, scalar stores into buf's
// rows, then each row converted and stored whole.
template <typename T>
inline void transpose_out(const float* src, int64_t ld, int64_t k, int64_t n, T* dst, float* buf) {
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nj = std::min<int64_t>(16, n - j0);
    alignas(64) float lanes[16];
    for (int64_t c = 0; c < k; ++c) {
      _mm512_store_ps(lanes, _mm512_loadu_ps(src + c * ld + j0));  // ld is a multiple of 16: readable
      for (int64_t j = 0; j < nj; ++j) buf[j * k + c] = lanes[j];
    }
    for (int64_t j = 0; j < nj; ++j) scale_row_to<Vec>(buf + j * k, k, 1.f, dst + (j0 + j) * k);
  }
}

Status attn_forward_bf16(const AttentionForward& p, int64_t begin, int64_t end, void* scratch) {
  using V = Vec;
  const AttentionDims& d = p.dims;
  const int64_t D = d.head_dim, Sq = d.seq_q, Sk = d.seq_kv, BQ = p.block_q, BK = p.block_kv;
  const int64_t G = p.heads_per_task, off = Sk - Sq;
  const int64_t Dp = even_up(D), BKp = even_up(BK), ldk = packed_ld(BK), ldv = packed_ld(D);
  const Bf16FwdScratch L = bf16_fwd_scratch(G * BQ, BK, D);
  char* const base = static_cast<char*>(scratch);
  float *s = reinterpret_cast<float*>(base + L.s), *acc = reinterpret_cast<float*>(base + L.acc);
  float *m = reinterpret_cast<float*>(base + L.m), *l = reinterpret_cast<float*>(base + L.l);
  bf16 *qb = reinterpret_cast<bf16*>(base + L.q), *pb = reinterpret_cast<bf16*>(base + L.p);
  uint32_t *kt = reinterpret_cast<uint32_t*>(base + L.k), *vv = reinterpret_cast<uint32_t*>(base + L.v);
  const float scale = float(d.scale);
  for (int64_t t = begin; t < end; ++t) {
    const FwdTask<bf16> task = fwd_task<bf16>(p, t);
    const int64_t i0 = task.i0, mq = task.mq, R = task.R, b = task.b, h0 = task.h0;
    const bf16 *q = task.q, *k = task.k, *v = task.v;
    stack_rows_bf16(q, p.q_strides, G, mq, D, qb, Dp);
    const int64_t kend = d.causal ? std::clamp<int64_t>(i0 + mq + off, 0, Sk) : Sk;
    std::fill(m, m + R, -std::numeric_limits<float>::infinity());
    std::fill(l, l + R, 0.f);
    std::fill(acc, acc + R * D, 0.f);
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
      const int64_t nk = std::min(BK, kend - j0);
      bf16dot::pack_pairs_of_rows(k + j0 * p.k_strides.s, p.k_strides.s, nk, D, kt, ldk);
      bf16_product(p.bf16_gemm, R, nk, Dp / 2, qb, Dp, kt, ldk, s, BK, false);  // S (R, nk) = Q K^T
      for (int64_t r = 0; r < R; ++r) {
        const int64_t vis = visible_keys(d.causal, i0 + r % mq, off, j0, nk);
        const float alpha = online_softmax_row<V>(s + r * BK, nk, vis, scale, m + r, l + r, pb + r * BKp);
        if (alpha != 1.f) scale_row_to<V>(acc + r * D, D, alpha, acc + r * D);
        if (nk % 2 != 0) pb[r * BKp + nk].bits = 0;  // the zero column of an odd K
      }
      bf16dot::pack_pairs_of_cols(v + j0 * p.v_strides.s, p.v_strides.s, nk, D, vv, ldv);
      bf16_product(p.bf16_gemm, R, D, (nk + 1) / 2, pb, BKp, vv, ldv, acc, D, true);  // O (R, D) += P V
    }
    for (int64_t r = 0; r < R; ++r) {
      const int64_t row = (b * d.heads_q + h0 + r / mq) * Sq + i0 + r % mq;
      scale_row_to<V>(acc + r * D, D, l[r] > 0.f ? 1.f / l[r] : 0.f, static_cast<bf16*>(p.out) + row * D);
      if (p.lse) {
        static_cast<float*>(p.lse)[row] = l[r] > 0.f ? m[r] + std::log(l[r]) : -std::numeric_limits<float>::infinity();
      }
    }
  }
  return Status::ok;
}

// As attn_backward_tasks, with dK and dV accumulated transposed (D x Sk: the products dV^T += dO^T P and
// dK^T += Q^T dS take P and dS packed in pairs of query rows, straight from their fp32 tiles) and K / V packed
// once per task for all query blocks.
Status attn_backward_bf16(const AttentionBackward& p, int64_t begin, int64_t end, void* scratch) {
  using V = Vec;
  const AttentionDims& d = p.dims;
  const int64_t D = d.head_dim, Sq = d.seq_q, Sk = d.seq_kv, BQ = p.block_q, BK = p.block_kv;
  const int64_t G = d.heads_q / d.heads_kv, blocks = (Sq + BQ - 1) / BQ, off = Sk - Sq;
  const int64_t Dp = even_up(D), BKp = even_up(BK), ldkv = packed_ld(Sk), ldn = packed_ld(D), ldbk = packed_ld(BK);
  const Bf16BwdScratch L = bf16_bwd_scratch(Sk, G * BQ, BK, D);
  char* const base = static_cast<char*>(scratch);
  const auto f32 = [&](size_t o) { return reinterpret_cast<float*>(base + o); };
  const auto b16 = [&](size_t o) { return reinterpret_cast<bf16*>(base + o); };
  const auto u32 = [&](size_t o) { return reinterpret_cast<uint32_t*>(base + o); };
  float *dkt = f32(L.dkt), *dvt = f32(L.dvt), *dq = f32(L.dq), *di = f32(L.di), *lse = f32(L.lse), *s = f32(L.s),
        *dp = f32(L.dp), *tr = f32(L.tr);
  uint32_t *kt = u32(L.kt), *vt = u32(L.vt), *kr = u32(L.kr), *pv = u32(L.pv), *dsv = u32(L.dsv);
  bf16 *qb = b16(L.q), *gb = b16(L.dout), *qt = b16(L.qt), *gt = b16(L.dot), *dsb = b16(L.dsb);
  const float scale = float(d.scale);
  for (int64_t t = begin; t < end; ++t) {
    const BwdTask<bf16> task = bwd_task<bf16>(p, t);
    const int64_t split = task.split, b = task.b, hk = task.hk, h0 = task.h0;
    const bf16 *q = task.q, *go = task.go, *o = task.o, *k = task.k, *v = task.v;
    // the head's K^T and V^T (B of S = Q K^T and dP = dO V^T) and K (B of dQ += dS K), packed once
    bf16dot::pack_pairs_of_rows(k, p.k_strides.s, Sk, D, kt, ldkv);
    bf16dot::pack_pairs_of_rows(v, p.v_strides.s, Sk, D, vt, ldkv);
    bf16dot::pack_pairs_of_cols(k, p.k_strides.s, Sk, D, kr, ldn);
    std::fill(dkt, dkt + D * ldkv, 0.f);
    std::fill(dvt, dvt + D * ldkv, 0.f);
    for (int64_t n = split * blocks / p.splits; n < (split + 1) * blocks / p.splits; ++n) {
      const int64_t i0 = balanced_block(d.causal, n, blocks) * BQ, mq = std::min(BQ, Sq - i0), R = G * mq;
      const int64_t Rp = even_up(R);
      stack_rows_bf16(q + i0 * p.q_strides.s, p.q_strides, G, mq, D, qb, Dp);
      stack_rows_bf16(go + i0 * p.grad_out_strides.s, p.grad_out_strides, G, mq, D, gb, Dp);
      bf16dot::transpose_rows(qb, Dp, R, D, qt, Rp);  // Q^T (D, R): A of dK^T += Q^T dS
      bf16dot::transpose_rows(gb, Dp, R, D, gt, Rp);  // dO^T: A of dV^T += dO^T P
      for (int64_t r = 0; r < R; ++r) {
        const int64_t g = r / mq, i = i0 + r % mq;
        di[r] = dot_row<V>(go + g * p.grad_out_strides.h + i * p.grad_out_strides.s,
                           o + g * p.out_strides.h + i * p.out_strides.s, D);
        lse[r] = static_cast<const float*>(p.lse)[(b * d.heads_q + h0 + g) * Sq + i];
      }
      std::fill(dq, dq + R * D, 0.f);
      const int64_t kend = d.causal ? std::clamp<int64_t>(i0 + mq + off, 0, Sk) : Sk;
      for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        const int64_t nk = std::min(BK, kend - j0);
        bf16_product(p.bf16_gemm, R, nk, Dp / 2, qb, Dp, kt + j0, ldkv, s, BK, false);  // S = Q_i K_j^T (unscaled)
        for (int64_t r = 0; r < R; ++r) {
          probs_row<V>(s + r * BK, nk, visible_keys(d.causal, i0 + r % mq, off, j0, nk), scale, lse[r]);
        }
        pack_pairs_f32(s, BK, R, nk, pv, ldbk);
        bf16_product(p.bf16_gemm, D, nk, Rp / 2, gt, Rp, pv, ldbk, dvt + j0, ldkv, true);  // dV_j^T += dO_i^T P
        bf16_product(p.bf16_gemm, R, nk, Dp / 2, gb, Dp, vt + j0, ldkv, dp, BK, false);    // dP = dO_i V_j^T
        for (int64_t r = 0; r < R; ++r) {
          score_grad_row<V>(s + r * BK, dp + r * BK, nk, di[r], scale);
          round_row_bf16(dp + r * BK, nk, dsb + r * BKp, nk % 2 != 0);
        }
        pack_pairs_f32(dp, BK, R, nk, dsv, ldbk);
        // dQ_i += scale dS K_j
        bf16_product(p.bf16_gemm, R, D, (nk + 1) / 2, dsb, BKp, kr + j0 / 2 * ldn, ldn, dq, D, true);
        bf16_product(p.bf16_gemm, D, nk, Rp / 2, qt, Rp, dsv, ldbk, dkt + j0, ldkv, true);  // dK_j^T += scale Q_i^T dS
      }
      for (int64_t r = 0; r < R; ++r) {
        const int64_t row = (b * d.heads_q + h0 + r / mq) * Sq + i0 + r % mq;
        scale_row_to<V>(dq + r * D, D, 1.f, static_cast<bf16*>(p.grad_q) + row * D);
      }
    }
    const int64_t head = b * d.heads_kv + hk;
    if (p.splits == 1) {
      transpose_out(dkt, ldkv, D, Sk, static_cast<bf16*>(p.grad_k) + head * Sk * D, tr);
      transpose_out(dvt, ldkv, D, Sk, static_cast<bf16*>(p.grad_v) + head * Sk * D, tr);
    } else {
      transpose_out(dkt, ldkv, D, Sk, static_cast<float*>(p.grad_k) + (head * p.splits + split) * Sk * D, tr);
      transpose_out(dvt, ldkv, D, Sk, static_cast<float*>(p.grad_v) + (head * p.splits + split) * Sk * D, tr);
    }
  }
  return Status::ok;
}
