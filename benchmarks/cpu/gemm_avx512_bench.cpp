// The CPU attention's own GEMMs alone: the bf16 x bf16 -> fp32 one (csrc/kernels/cpu/gemm_bf16_avx512.h,
// AVX512-BF16) and the fp32 one (gemm_f32_avx512.h, AVX-512 FMA; A as stored or transposed, B as stored or
// transposed). Checks each shape against a double-precision product of the same inputs, then times it (one
// thread, operands in cache; the best of five rounds) with the bf16 packing routines. Shapes are the attention
// tiles' (M x N x K): the forward's S = Q K^T and O += P V, the backward's dV^T += dO^T P and dQ += dS K, and odd
// sizes.
//   g++ -O3 -std=c++20 -Icsrc benchmarks/cpu/gemm_avx512_bench.cpp csrc/kernels/cpu/isa.cpp -o build/gemm_avx512_bench
//   build/gemm_avx512_bench [REPS]
// Needs a CPU with AVX512-BF16 (it says so and exits 2 otherwise).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/target.h"
#include "kernels/cpu/types.h"

using namespace yirage::kernels::cpu;

YR_TARGET_BEGIN(YR_AVX512_BF16_TARGET)
namespace bench {
#include "kernels/cpu/gemm_f32_avx512.h"
#include "kernels/cpu/gemm_bf16_avx512.h"
}  // namespace bench
YR_TARGET_END

namespace {

bf16 round_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return bf16{uint16_t(u >> 16)};
}

template <typename F>
double seconds_per_call(int reps, F f) {
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {  // the best of five rounds of reps calls
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (best_isa() != Isa::avx512_bf16) {
    std::printf("this CPU has no AVX512-BF16\n");
    return 2;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 400;
  const int shapes[][3] = {{256, 512, 128}, {256, 128, 512}, {128, 256, 256}, {256, 128, 256}, {255, 250, 127}, {6, 64, 128}};
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  int failures = 0;
  std::printf("%-14s %10s %10s %12s %14s %14s\n", "bf16 M x N x K", "max err", "us", "GFLOP/s", "pack B^T us", "pack B us");
  for (const auto& sh : shapes) {
    const int m = sh[0], n = sh[1], k = sh[2], kp = (k + 1) / 2, ka = 2 * kp, ldb = (n + 15) / 16 * 16 + 16;
    std::vector<bf16> a(size_t(m) * ka), b(size_t(k) * n), bt(size_t(n) * k);
    for (int i = 0; i < m; ++i) {
      for (int c = 0; c < ka; ++c) a[size_t(i) * ka + c] = c < k ? round_bf16(normal(gen)) : bf16{0};
    }
    for (int c = 0; c < k; ++c) {
      for (int j = 0; j < n; ++j) bt[size_t(j) * k + c] = b[size_t(c) * n + j] = round_bf16(normal(gen));
    }
    std::vector<uint32_t> packed(size_t(kp) * ldb), packed_t(size_t(kp) * ldb);
    bench::bf16dot::pack_pairs_of_cols(b.data(), n, k, n, packed.data(), ldb);
    bench::bf16dot::pack_pairs_of_rows(bt.data(), k, n, k, packed_t.data(), ldb);
    if (packed != packed_t) {
      std::printf("%dx%dx%d: the two packings differ\n", m, n, k);
      ++failures;
    }
    std::vector<float> c(size_t(m) * n, 1.f);
    bench::bf16dot::gemm(m, n, kp, a.data(), ka, packed.data(), ldb, c.data(), n, false);
    double err = 0;  // relative to the row's sum of |products|, the scale of fp32 accumulation error
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        double want = 0, mag = 0;
        for (int q = 0; q < k; ++q) {
          const double p = double(to_float(a[size_t(i) * ka + q])) * to_float(b[size_t(q) * n + j]);
          want += p;
          mag += std::fabs(p);
        }
        err = std::max(err, std::fabs(c[size_t(i) * n + j] - want) / std::max(mag, 1e-30));
      }
    }
    if (err > 1e-5) ++failures;
    const double t = seconds_per_call(reps, [&] {
      bench::bf16dot::gemm(m, n, kp, a.data(), ka, packed.data(), ldb, c.data(), n, true);
    });
    const double tt = seconds_per_call(reps, [&] {
      bench::bf16dot::pack_pairs_of_rows(bt.data(), k, n, k, packed_t.data(), ldb);
    });
    const double tn = seconds_per_call(reps, [&] {
      bench::bf16dot::pack_pairs_of_cols(b.data(), n, k, n, packed.data(), ldb);
    });
    char name[32];
    std::snprintf(name, sizeof name, "%dx%dx%d", m, n, k);
    std::printf("%-14s %10.1e %10.2f %12.1f %14.2f %14.2f\n", name, err, t * 1e6, 2.0 * m * n * k / t / 1e9, tt * 1e6,
                tn * 1e6);
    // fp32: the same values (A m x k and its transpose, B k x n and its transpose), every layout
    std::vector<float> af(size_t(m) * k), aft(size_t(k) * m), bf(size_t(k) * n), bft(size_t(n) * k);
    for (int i = 0; i < m; ++i) {
      for (int q = 0; q < k; ++q) aft[size_t(q) * m + i] = af[size_t(i) * k + q] = to_float(a[size_t(i) * ka + q]);
    }
    for (int q = 0; q < k; ++q) {
      for (int j = 0; j < n; ++j) bft[size_t(j) * k + q] = bf[size_t(q) * n + j] = to_float(b[size_t(q) * n + j]);
    }
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      const float* ap = ta ? aft.data() : af.data();
      const float* bp = tb ? bft.data() : bf.data();
      const int64_t lda = ta ? m : k, ldb2 = tb ? k : n;
      std::fill(c.begin(), c.end(), 1.f);
      bench::f32dot::gemm(ta, tb, m, n, k, 1.f, ap, lda, bp, ldb2, 0.f, c.data(), n);
      double e32 = 0;
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double want = 0, mag = 0;
          for (int q = 0; q < k; ++q) {
            const double p = double(af[size_t(i) * k + q]) * bf[size_t(q) * n + j];
            want += p;
            mag += std::fabs(p);
          }
          e32 = std::max(e32, std::fabs(c[size_t(i) * n + j] - want) / std::max(mag, 1e-30));
        }
      }
      if (e32 > 1e-5) ++failures;
      const double t32 = seconds_per_call(reps, [&] {
        bench::f32dot::gemm(ta, tb, m, n, k, 1.f, ap, lda, bp, ldb2, 1.f, c.data(), n);
      });
      std::printf("  fp32 %s%s %10.1e %10.2f %12.1f\n", ta ? "A^T" : "A  ", tb ? " B^T" : " B  ", e32, t32 * 1e6,
                  2.0 * m * n * k / t32 / 1e9);
    }
  }
  if (failures) std::printf("%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
