// The blocked fp32 GEMM of sgemm.h: packing and loops, compiled for AVX-512 only (target.h); the register tile
// is gemm_f32_avx512.h's.
#include "sgemm.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "isa.h"
#include "target.h"

#if YR_HAVE_X86_VARIANTS
YR_TARGET_BEGIN(YR_AVX512_TARGET)
namespace yirage::kernels::cpu::avx512_sgemm {
namespace {

#include "gemm_f32_avx512.h"

// Blocking, tried on the 2-core AVX-512 EPYC (same-process A/B at 1024^3 .. 3072^3; kKc x kMc x kNc): 128 x 144 x
// 1024 (a B micro-panel in L1) 150-205 GFLOP/s a core; 384 x 96 x 2048 +10-14%; 512 x 72 x 2048 +3-5% more
// (230-240); 768 or 512 x 48 level; kNc 1024 instead of 2048 2-4% slower but half the per-thread buffer (kept: 2 MiB
// of B panel a thread). The tile also prefetches the C lines it will add to (into L2) when it starts.
constexpr int64_t kKc = 512;
constexpr int64_t kMc = 72;  // 12 micro-panels of 6 rows
constexpr int64_t kNc = 1024;
constexpr int64_t kNr = 16 * f32dot::kNv;  // 64 columns
constexpr int64_t kMr = f32dot::kMr;
// Up to this many rows of A, a B with contiguous rows is not packed (run()).
constexpr int64_t kDirectRows = 24;

// Rows [i0, i0 + mc) x columns [p0, p0 + kc) of A into micro-panels of kMr rows: element (i, p) of a panel at
// p * kMr + i (a short last panel leaves its missing rows unwritten: the tile does not read them).
void pack_a(const SgemmArgs& g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* ap) {
  for (int64_t ir = 0; ir < mc; ir += kMr) {
    const int64_t mr = std::min(kMr, mc - ir);
    float* dst = ap + ir * kc;
    const float* src = g.a + (i0 + ir) * g.a_rs + p0 * g.a_cs;
    if (g.a_rs == 1 && mr == kMr) {  // A stored transposed: each p is 6 contiguous floats
      for (int64_t p = 0; p < kc; ++p) std::memcpy(dst + p * kMr, src + p * g.a_cs, kMr * sizeof(float));
    } else if (g.a_cs == 1) {
      for (int64_t i = 0; i < mr; ++i) {
        const float* row = src + i * g.a_rs;
        for (int64_t p = 0; p < kc; ++p) dst[p * kMr + i] = row[p];
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t i = 0; i < mr; ++i) dst[p * kMr + i] = src[i * g.a_rs + p * g.a_cs];
      }
    }
  }
}

// Rows [p0, p0 + kc) x columns [j0, j0 + nc) of B into micro-panels of kNr columns: element (p, j) of a panel at
// p * kNr + j (a short last panel's missing columns unwritten: the tile masks them).
void pack_b(const SgemmArgs& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* bp) {
  if (g.b_cs == 1) {  // rows of B contiguous: each row read once, front to back, into every micro-panel
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = g.b + (p0 + p) * g.b_rs + j0;
      for (int64_t jr = 0; jr < nc; jr += kNr) {
        std::memcpy(bp + jr * kc + p * kNr, src + jr, size_t(std::min(kNr, nc - jr)) * sizeof(float));
      }
    }
    return;
  }
  for (int64_t jr = 0; jr < nc; jr += kNr) {
    const int64_t nn = std::min(kNr, nc - jr);
    float* dst = bp + jr * kc;
    const float* src = g.b + p0 * g.b_rs + (j0 + jr) * g.b_cs;
    if (g.b_rs == 1) {  // B stored transposed (x @ weight.T): 16 x 16 transposes
      f32dot::transpose_to(src, g.b_cs, nn, kc, dst, kNr);
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        for (int64_t j = 0; j < nn; ++j) dst[p * kNr + j] = src[p * g.b_rs + j * g.b_cs];
      }
    }
  }
}

Status run(const SgemmArgs& g) {
  static constexpr auto tiles = f32dot::tile_table<true>();
  thread_local std::vector<float> abuf, bbuf;  // as large as this thread's largest call needed (at most 2.1 MiB)
  const size_t a_need = size_t(std::min(kMc, g.m) + kMr) * size_t(std::min(kKc, g.k));
  const size_t b_need = size_t((std::min(kNc, g.n) + kNr - 1) / kNr * kNr) * size_t(std::min(kKc, g.k));
  if (abuf.size() < a_need) abuf.resize(a_need);
  if (bbuf.size() < b_need) bbuf.resize(b_need);
  float *ap = abuf.data(), *bp = bbuf.data();
  if (g.k == 0) {
    if (!g.accumulate) {
      for (int64_t i = 0; i < g.m; ++i) std::memset(g.c + i * g.ldc, 0, size_t(g.n) * sizeof(float));
    }
    return Status::ok;
  }
  if (g.b_cs == 1 && g.m <= kDirectRows) {
    // few rows: packing B would cost more than the product; B's rows are read where they lie, a 64-column
    // strip at a time (from memory for the first 6 rows, from L2 for the rest), against all of A packed
    if (abuf.size() < size_t((g.m + kMr) * g.k)) abuf.resize(size_t((g.m + kMr) * g.k));
    ap = abuf.data();
    pack_a(g, 0, g.m, 0, g.k, ap);
    for (int64_t jr = 0; jr < g.n; jr += kNr) {
      const int64_t nn = std::min(kNr, g.n - jr);
      const int nv = int((nn + 15) / 16);
      const __mmask16 last = f32dot::tail_mask(nn);
      for (int64_t ir = 0; ir < g.m; ir += kMr) {
        const int mr = int(std::min(kMr, g.m - ir));
        tiles[mr - 1][nv - 1](g.k, ap + ir * g.k, kMr, g.b + jr, g.b_rs, g.c + ir * g.ldc + jr, g.ldc, 1.f,
                              g.accumulate, last);
      }
    }
    return Status::ok;
  }
  for (int64_t jc = 0; jc < g.n; jc += kNc) {
    const int64_t nc = std::min(kNc, g.n - jc);
    for (int64_t pc = 0; pc < g.k; pc += kKc) {
      const int64_t kc = std::min(kKc, g.k - pc);
      const bool accumulate = g.accumulate || pc > 0;
      pack_b(g, pc, kc, jc, nc, bp);
      for (int64_t ic = 0; ic < g.m; ic += kMc) {
        const int64_t mc = std::min(kMc, g.m - ic);
        pack_a(g, ic, mc, pc, kc, ap);
        for (int64_t jr = 0; jr < nc; jr += kNr) {
          const int64_t nn = std::min(kNr, nc - jr);
          const int nv = int((nn + 15) / 16);
          const __mmask16 last = f32dot::tail_mask(nn);
          for (int64_t ir = 0; ir < mc; ir += kMr) {
            const int mr = int(std::min(kMr, mc - ir));
            tiles[mr - 1][nv - 1](kc, ap + ir * kc, kMr, bp + jr * kc, kNr, g.c + (ic + ir) * g.ldc + jc + jr, g.ldc,
                                  1.f, accumulate, last);
          }
        }
      }
    }
  }
  return Status::ok;
}

}  // namespace
}  // namespace yirage::kernels::cpu::avx512_sgemm
YR_TARGET_END
#endif

namespace yirage::kernels::cpu {

bool sgemm_preferred() {
#if YR_HAVE_X86_VARIANTS
  static const bool enabled = [] {
    const char* env = std::getenv("YIRAGE_CPU_SGEMM");
    return !(env != nullptr && std::strcmp(env, "0") == 0);
  }();
  static const bool amd = std::strcmp(cpu_features().vendor, "AuthenticAMD") == 0;
  return enabled && amd && active_isa() >= Isa::avx512;
#else
  return false;
#endif
}

Status sgemm(const SgemmArgs& args) {
  if (args.m < 0 || args.n < 0 || args.k < 0) return Status::invalid_argument;
#if YR_HAVE_X86_VARIANTS
  if (best_isa() < Isa::avx512) return Status::invalid_argument;
  if (args.m == 0 || args.n == 0) return Status::ok;
  return avx512_sgemm::run(args);
#else
  return Status::invalid_argument;
#endif
}

}  // namespace yirage::kernels::cpu
