// bf16 x bf16 -> fp32 GEMM on AVX512-BF16 (vdpbf16ps: 16 lanes, each the sum of two bf16 products added to
// an fp32 accumulator), for the attention tile loops of the avx512_bf16 variant (attention_bf16_impl.h).
// No include guard: included inside the avx512_bf16 namespace and target region only (per_isa.h), after
// gemm_f32_avx512.h (its 16 x 16 transpose).
//
// Operands:
//   A: row-major bf16, m rows of an even number of elements k (row stride lda elements); the element pair
//      (2p, 2p + 1) of a row is read as one 32-bit word and broadcast. A K of odd length is padded with a zero
//      column by the caller (and the matching row of B with zeros: 0 * garbage may be NaN).
//   B: packed in pairs along K: 32-bit word (p, j) of the packed matrix holds B[2p][j] in its low half and
//      B[2p + 1][j] in its high half; rows of ldb words. Loads are whole 16-word vectors: columns up to n
//      rounded up to 16 must be readable (their values only reach accumulators that are not stored).
//      The packing functions below need ldb >= n rounded up to 16.
//   C: row-major fp32 (row stride ldc), written (accumulate = false) or added to; columns >= n untouched.
// Register tile: 6 rows x 64 columns (24 accumulators, 4 B vectors, one broadcast A pair); C read and written
// once per tile, the B panel (k/2 x 64 words: 32 KiB at k = 256) stays in L1 across the m loop.

namespace bf16dot {

constexpr int kMr = f32dot::kMr;  // rows of a register tile
constexpr int kNv = f32dot::kNv;  // 16-column vectors of a register tile

inline int32_t pair_word(const bf16* p) {
  int32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

template <int MR, int NV>
void tile(int64_t kp, const bf16* a, int64_t lda, const uint32_t* b, int64_t ldb, float* c, int64_t ldc,
          bool accumulate, __mmask16 last) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      acc[i][j] = !accumulate      ? _mm512_setzero_ps()
                  : j == NV - 1 ? _mm512_maskz_loadu_ps(last, c + i * ldc + 16 * j)
                                : _mm512_loadu_ps(c + i * ldc + 16 * j);
    }
  }
  for (int64_t p = 0; p < kp; ++p) {
    __m512i bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = _mm512_loadu_si512(b + p * ldb + 16 * j);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512i av = _mm512_set1_epi32(pair_word(a + i * lda + 2 * p));
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], reinterpret_cast<__m512bh>(av), reinterpret_cast<__m512bh>(bv[j]));
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      if (j == NV - 1) {
        _mm512_mask_storeu_ps(c + i * ldc + 16 * j, last, acc[i][j]);
      } else {
        _mm512_storeu_ps(c + i * ldc + 16 * j, acc[i][j]);
      }
    }
  }
}

using TileFn = void (*)(int64_t, const bf16*, int64_t, const uint32_t*, int64_t, float*, int64_t, bool, __mmask16);

template <int MR>
constexpr std::array<TileFn, kNv> tiles_of_rows() {
  return {&tile<MR, 1>, &tile<MR, 2>, &tile<MR, 3>, &tile<MR, 4>};
}

// C (m x n) (+)= A (m x k) B (k x n), k = 2 * kp (see above).
inline void gemm(int64_t m, int64_t n, int64_t kp, const bf16* a, int64_t lda, const uint32_t* b, int64_t ldb,
                 float* c, int64_t ldc, bool accumulate) {
  static constexpr std::array<std::array<TileFn, kNv>, kMr> tiles = {
      tiles_of_rows<1>(), tiles_of_rows<2>(), tiles_of_rows<3>(),
      tiles_of_rows<4>(), tiles_of_rows<5>(), tiles_of_rows<6>()};
  f32dot::for_each_tile(m, n, [&](int64_t m0, int64_t n0, int mr, int nv, __mmask16 last) {
    tiles[mr - 1][nv - 1](kp, a + m0 * lda, lda, b + n0, ldb, c + m0 * ldc + n0, ldc, accumulate, last);
  });
}

// ---- packing (bf16 in, bf16 out) ----

// dst (rows x ldd) = src (rows x k, row stride ld), columns [k, ldd) zero.
inline void copy_rows(const bf16* src, int64_t ld, int64_t rows, int64_t k, bf16* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * ldd, src + r * ld, size_t(k) * sizeof(bf16));
    if (ldd > k) std::memset(dst + r * ldd + k, 0, size_t(ldd - k) * sizeof(bf16));
  }
}

// dst (k x ldd) = src^T for src (rows x k, row stride ld): dst[c][r] = src[r][c]; columns [rows, ldd) zero.
inline void transpose_rows(const bf16* src, int64_t ld, int64_t rows, int64_t k, bf16* dst, int64_t ldd) {
  for (int64_t c = 0; c < k; ++c) {
    bf16* d = dst + c * ldd;
    for (int64_t r = 0; r < rows; ++r) d[r] = src[r * ld + c];
    if (ldd > rows) std::memset(d + rows, 0, size_t(ldd - rows) * sizeof(bf16));
  }
}

// B = src^T packed, for src (n x k, row stride ld; the rows of a K or V tile as the columns of B): word (p, j)
// = (src[j][2p], src[j][2p + 1]), a zero high half when 2p + 1 = k; kp = ceil(k / 2) rows of ldb words, of
// which columns [n, ldb) are zero. In 16 x 16 word blocks (a 32-bit transpose), partial blocks through masked
// loads.
inline void pack_pairs_of_rows(const bf16* src, int64_t ld, int64_t n, int64_t k, uint32_t* dst, int64_t ldb) {
  const int64_t kp = (k + 1) / 2;
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t nj = std::min<int64_t>(16, n - j0);
    for (int64_t p0 = 0; p0 < kp; p0 += 16) {
      const int64_t ne = std::min<int64_t>(32, k - 2 * p0);  // elements of a row in this block
      const __mmask32 mk = ne == 32 ? __mmask32(0xffffffffu) : __mmask32((1u << ne) - 1);
      __m512i r[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        r[j] = j < nj ? _mm512_maskz_loadu_epi16(mk, src + (j0 + j) * ld + 2 * p0) : _mm512_setzero_si512();
      }
      f32dot::transpose16x16(r);
      const int64_t np = std::min<int64_t>(16, kp - p0);
      for (int64_t q = 0; q < np; ++q) _mm512_storeu_si512(dst + (p0 + q) * ldb + j0, r[q]);
    }
  }
  const int64_t n16 = (n + 15) / 16 * 16;  // the blocks wrote zeros in [n, n16)
  if (ldb > n16) {
    for (int64_t p = 0; p < kp; ++p) std::memset(dst + p * ldb + n16, 0, size_t(ldb - n16) * sizeof(uint32_t));
  }
}

// B = src packed, for src (k x n, row stride ld): word (p, j) = (src[2p][j], src[2p + 1][j]), a zero high half
// when 2p + 1 = k; kp = ceil(k / 2) rows of ldb words, columns [n, ldb) zero.
inline void pack_pairs_of_cols(const bf16* src, int64_t ld, int64_t k, int64_t n, uint32_t* dst, int64_t ldb) {
  // unpacklo / unpackhi interleave within 128-bit lanes: lo holds the words of columns 0-3, 8-11, 16-19, 24-27,
  // hi those of 4-7, 12-15, 20-23, 28-31; two permutes put them in column order
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int64_t p = 0; p < (k + 1) / 2; ++p) {
    const bf16* r0 = src + 2 * p * ld;
    const bf16* r1 = 2 * p + 1 < k ? r0 + ld : nullptr;
    uint32_t* d = dst + p * ldb;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
      const __m512i a = _mm512_loadu_si512(r0 + j);
      const __m512i b = r1 ? _mm512_loadu_si512(r1 + j) : _mm512_setzero_si512();
      const __m512i lo = _mm512_unpacklo_epi16(a, b), hi = _mm512_unpackhi_epi16(a, b);
      _mm512_storeu_si512(d + j, _mm512_permutex2var_epi32(lo, first, hi));
      _mm512_storeu_si512(d + j + 16, _mm512_permutex2var_epi32(lo, second, hi));
    }
    for (; j < n; ++j) d[j] = uint32_t(r0[j].bits) | (r1 ? uint32_t(r1[j].bits) << 16 : 0u);
    if (ldb > n) std::memset(d + n, 0, size_t(ldb - n) * sizeof(uint32_t));
  }
}

}  // namespace bf16dot
