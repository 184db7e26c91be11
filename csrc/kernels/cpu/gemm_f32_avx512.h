// fp32 GEMM on AVX-512 FMA for the attention tile loops of the avx512 and avx512_bf16 variants (attention_impl.h).
// torch's CPU BLAS (MKL) runs its AVX2 kernels on AMD CPUs: about 110 GFLOP/s a core on an AVX-512 EPYC (Zen 5),
// where these tiles reach about 265 (benchmarks/cpu/gemm_bf16_bench.cpp). No include guard: included inside the
// AVX-512 namespaces and target regions only (per_isa.h).
//
//   C (m x n) = alpha * op(A) B' + beta * C (beta 0: C not read; else beta must be 1), all fp32 row-major:
//   op(A) m x k: a[i * lda + p], or with trans_a a[p * lda + i] (A stored k x m) - both read by scalar broadcast.
//   B' k x n: b[p * ldb + j], or with trans_b b[j * ldb + p] (B stored n x k), which is first transposed into a
//   per-thread buffer (16 x 16 blocks). B rows are read with a masked last vector: no padding needed.
// Register tile: 6 rows x 64 columns (24 accumulators, 4 B vectors, one broadcast), the B panel (k x 64) in L1
// across the m loop.

namespace f32dot {

constexpr int kMr = 6;
constexpr int kNv = 4;

// r[0, 16) as a 16 x 16 matrix of 32-bit words, transposed in place: 32-bit and 64-bit unpacks, then two rounds
// of 128-bit lane shuffles.
inline void transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + c], 128-bit lane L: column 4L + c of rows 4i .. 4i + 3
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m512i x = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), y = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
    const __m512i x2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    const __m512i y2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
    r[c] = _mm512_shuffle_i32x4(x, x2, 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(x, x2, 0xdd);
    r[4 + c] = _mm512_shuffle_i32x4(y, y2, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(y, y2, 0xdd);
  }
}

template <int MR, int NV, bool TA>
void tile(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc, float alpha,
          bool accumulate, __mmask16 last) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  if (accumulate) {  // C is added at the end: its lines into L2 meanwhile (a large C comes from memory)
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * j), _MM_HINT_T1);
    }
  }
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      bv[j] = j == NV - 1 ? _mm512_maskz_loadu_ps(last, b + p * ldb + 16 * j) : _mm512_loadu_ps(b + p * ldb + 16 * j);
    }
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(TA ? a[p * lda + i] : a[i * lda + p]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      float* cp = c + i * ldc + 16 * j;
      const __mmask16 mk = j == NV - 1 ? last : __mmask16(0xffff);
      const __m512 r = accumulate ? _mm512_fmadd_ps(acc[i][j], va, _mm512_maskz_loadu_ps(mk, cp))
                                  : _mm512_mul_ps(acc[i][j], va);
      _mm512_mask_storeu_ps(cp, mk, r);
    }
  }
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, float, bool, __mmask16);

template <int MR, bool TA>
constexpr std::array<TileFn, kNv> tiles_of_rows() {
  return {&tile<MR, 1, TA>, &tile<MR, 2, TA>, &tile<MR, 3, TA>, &tile<MR, 4, TA>};
}

template <bool TA>
constexpr std::array<std::array<TileFn, kNv>, kMr> tile_table() {
  return {tiles_of_rows<1, TA>(), tiles_of_rows<2, TA>(), tiles_of_rows<3, TA>(),
          tiles_of_rows<4, TA>(), tiles_of_rows<5, TA>(), tiles_of_rows<6, TA>()};
}

// The mask of the valid lanes of the last 16-column vector of a strip nn columns wide.
inline __mmask16 tail_mask(int64_t nn) {
  return nn % 16 == 0 ? __mmask16(0xffff) : __mmask16((1u << (nn % 16)) - 1);
}

// The register tiles covering an m x n C, columns outer (one B strip stays in L1 across the rows):
// fn(m0, n0, mr, nv, last) for a tile of mr rows and nv vectors at (m0, n0).
template <typename F>
inline void for_each_tile(int64_t m, int64_t n, F&& fn) {
  for (int64_t n0 = 0; n0 < n; n0 += 16 * kNv) {
    const int64_t nn = std::min<int64_t>(16 * kNv, n - n0);
    const int nv = int((nn + 15) / 16);
    const __mmask16 last = tail_mask(nn);
    for (int64_t m0 = 0; m0 < m; m0 += kMr) fn(m0, n0, int(std::min<int64_t>(kMr, m - m0)), nv, last);
  }
}

// dst (k x ldd) = src^T for src (n x k, row stride ld): 16 x 16 blocks through registers, partial ones masked.
inline void transpose_to(const float* src, int64_t ld, int64_t n, int64_t k, float* dst, int64_t ldd) {
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nj = std::min<int64_t>(16, n - j0);
    for (int64_t p0 = 0; p0 < k; p0 += 16) {
      const int64_t np = std::min<int64_t>(16, k - p0);
      const __mmask16 mk = np == 16 ? __mmask16(0xffff) : __mmask16((1u << np) - 1);
      __m512i r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        r[j] = j < nj ? _mm512_castps_si512(_mm512_maskz_loadu_ps(mk, src + (j0 + j) * ld + p0)) : _mm512_setzero_si512();
      }
      transpose16x16(r);
      const __mmask16 mj = nj == 16 ? __mmask16(0xffff) : __mmask16((1u << nj) - 1);
      for (int64_t q = 0; q < np; ++q) _mm512_mask_storeu_ps(dst + (p0 + q) * ldd + j0, mj, _mm512_castsi512_ps(r[q]));
    }
  }
}

inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  static constexpr auto tiles_n = tile_table<false>();
  static constexpr auto tiles_t = tile_table<true>();
  if (trans_b) {
    thread_local std::vector<float> packed;
    const int64_t ldp = (n + 15) / 16 * 16 + 16;  // skewed rows: see attention.cpp's packed_ld
    if (packed.size() < size_t(k * ldp)) packed.resize(size_t(k * ldp));
    transpose_to(b, ldb, n, k, packed.data(), ldp);
    b = packed.data();
    ldb = ldp;
  }
  const bool accumulate = beta != 0.f;
  for_each_tile(m, n, [&](int64_t m0, int64_t n0, int mr, int nv, __mmask16 last) {
    const float* am = trans_a ? a + m0 : a + m0 * lda;
    (trans_a ? tiles_t : tiles_n)[mr - 1][nv - 1](k, am, lda, b + n0, ldb, c + m0 * ldc + n0, ldc, alpha, accumulate,
                                                  last);
  });
}

}  // namespace f32dot
