// The CPU GEMM with a fused epilogue (see gemm.h).
#include "cpu/gemm.h"

#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <ATen/native/CPUBlas.h>

#include <algorithm>

#include "common/cpu_launch.h"
#include "common/cpu_memory.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/linear_epilogue.h"
#include "kernels/cpu/sgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define YR_X86_CPUID 1
#endif

namespace yirage {
namespace {

namespace k = kernels::cpu;

#if YR_X86_CPUID
bool cpuid_bit(unsigned leaf, unsigned subleaf, int reg, int bit) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(leaf, subleaf, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1u;
}
#endif

// Whether torch's CPU GEMM has a native kernel for this half type here (its oneDNN path: AVX-512 for bf16,
// AVX512-FP16 for fp16, or AVX-NE-CONVERT for both); otherwise it runs a scalar fallback loop.
bool torch_has_native_half_gemm(at::ScalarType t) {
#if YR_X86_CPUID
  static const bool ne_convert = k::best_isa() >= k::Isa::avx2 && cpuid_bit(7, 1, 3, 5);  // EDX bit 5
  static const bool avx512fp16 = k::best_isa() >= k::Isa::avx512 && cpuid_bit(7, 0, 3, 23);
  static const bool avx512 = k::best_isa() >= k::Isa::avx512;
  return ne_convert || (t == at::kBFloat16 ? avx512 : avx512fp16);
#else
  (void)t;
  return true;
#endif
}

// Rows from which the fp32 path beats torch's half fallback in the dot-product layout (see gemm_via_fp32).
constexpr int64_t kDotLayoutFp32Rows = 16;

// Rows per block of the fp32 path: about 4 MiB of fp32 product (in the last-level cache for the epilogue),
// never fewer than 128 rows so that each sgemm still amortizes its packing of b.
int64_t fp32_block_rows(int64_t m, int64_t n) {
  const int64_t rows = std::max<int64_t>(128, (int64_t{1} << 20) / std::max<int64_t>(n, 1));
  return std::min(rows, m);
}

// Products below this many multiply-adds are not split over threads.
constexpr int64_t kSplitWork = int64_t{1} << 18;

// out = epilogue(in), both the block [r0, r0 + rows) x [c0, c0 + cols) of the full product (bias and pre are
// indexed from there); `in` undefined means zeros (K = 0).
void apply_epilogue(const char* op, const at::Tensor& out, const at::Tensor& in, const GemmEpilogue& e, int64_t r0,
                    int64_t c0) {
  k::LinearEpilogue p;
  p.dtype = cpu_kernel_dtype(op, out.scalar_type());
  p.in = in.defined() ? in.const_data_ptr() : nullptr;
  p.in_stride = in.defined() ? in.stride(0) : 0;
  p.in_dtype = in.defined() ? cpu_kernel_dtype(op, in.scalar_type()) : p.dtype;
  p.bias = e.bias.defined() ? static_cast<const char*>(e.bias.const_data_ptr()) + c0 * e.bias.element_size() : nullptr;
  p.out = out.data_ptr();
  p.out_stride = out.stride(0);
  TORCH_CHECK(!e.pre.defined() || e.pre.stride(0) == out.stride(0), "yirage.", op,
              ": internal error: pre and out row strides differ");
  p.pre = e.pre.defined()
              ? static_cast<char*>(e.pre.data_ptr()) + (r0 * e.pre.stride(0) + c0) * e.pre.element_size()
              : nullptr;
  p.rows = out.size(0);
  p.cols = out.size(1);
  p.act = e.act;
  cpu_for_rows(op, p.rows, p.cols, [&](int64_t b0, int64_t e0) { return k::linear_epilogue(p, b0, e0); });
}

// Our sgemm takes blocks of at least this many rows and columns (smaller ones keep torch's BLAS, a row vector
// its GEMV). On the 2-core AVX-512 EPYC, x (M x 4096) @ W^T (4096 x 4096) fp32: 4 rows 2.09x torch, 16 rows 1.79x
// (benchmarks/results/cpu-sgemm-epyc-2026-11-27.md).
constexpr int64_t kSgemmMinRows = 4;
constexpr int64_t kSgemmMinCols = 64;

// o = a @ b (o's last dim contiguous): our sgemm where sgemm_fp32() holds and the block is large enough, else
// torch's BLAS (at::cpu::mm_out).
void product(at::Tensor& o, const at::Tensor& a, const at::Tensor& b) {
  if (o.scalar_type() == at::kFloat && a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat &&
      sgemm_fp32() && o.stride(1) == 1 && o.size(0) >= kSgemmMinRows && o.size(1) >= kSgemmMinCols) {
    k::SgemmArgs g;
    g.m = o.size(0);
    g.n = o.size(1);
    g.k = a.size(1);
    g.a = a.const_data_ptr<float>();
    g.a_rs = a.stride(0);
    g.a_cs = a.stride(1);
    g.b = b.const_data_ptr<float>();
    g.b_rs = b.stride(0);
    g.b_cs = b.stride(1);
    g.c = o.mutable_data_ptr<float>();
    g.ldc = o.stride(0);
    const k::Status status = k::sgemm(g);
    TORCH_CHECK(status == k::Status::ok, "yirage: CPU sgemm failed with status ", static_cast<int>(status));
    return;
  }
  at::cpu::mm_out(o, a, b);
}

at::Tensor block(const at::Tensor& t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  return t.narrow(0, r0, r1 - r0).narrow(1, c0, c1 - c0);
}

// Whether a (m x k) is of a half type with a matrix engine here (AMX: torch's oneDNN can pack for it) and has
// kEngineOneCallRows rows or more: such products are not split over threads (split_product) but left to oneDNN's own.
// On a 16-core Intel Xeon with AMX, bf16, split against one call, two runs each (ratios to torch.matmul / to the
// unfused torch code): matmul 256x512x512 0.51x -> 0.86-0.96x, 512x4096x4096 0.52-0.65x -> 0.95-1.01x, 64x4096x4096
// 0.65-0.69x -> 0.97-1.01x; linear 512x4096x4096 0.51-0.58x -> 1.04-1.05x; but 16 rows split 1.05-1.33x, one call
// 0.75-0.98x (benchmarks/results/cpu-bf16-gemm-amx-split-intel-xeon-2026-11-27.md).
constexpr int64_t kEngineOneCallRows = 32;
bool matrix_engine_half(const at::Tensor& a) {
  const at::ScalarType t = a.scalar_type();
  if ((t != at::kBFloat16 && t != at::kHalf) || a.size(0) < kEngineOneCallRows) return false;
  static const bool bf16 = at::native::cpublas::could_pack(at::kBFloat16);
  static const bool f16 = at::native::cpublas::could_pack(at::kHalf);
  return t == at::kBFloat16 ? bf16 : f16;
}

// c = a @ b through BLAS, then after(r0, r1, c0, c1) on each block right after its product, while the block is
// in the cache of the thread that wrote it. The larger of M and N is split into one contiguous block per thread,
// each a single-threaded BLAS call (BLAS runs single-threaded inside at::parallel_for): on the 2-core machine
// this was written on this beat BLAS's own threading by 1.3-3x for 16 to 128 rows and matched it for large
// products. A row vector (BLAS's threaded GEMV was faster there), a small product, a call already inside
// a parallel region, or a half-type product on a matrix engine (matrix_engine_half) makes one BLAS call instead.
template <typename After>
void split_product(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, const After& after) {
  const int64_t m = c.size(0), n = c.size(1), kdim = a.size(1);
  const int64_t threads = at::get_num_threads();
  if (m == 1 || threads == 1 || at::in_parallel_region() || m * n * kdim < kSplitWork || matrix_engine_half(a)) {
    at::Tensor o = c;
    product(o, a, b);
    after(0, m, 0, n);
    return;
  }
  const bool by_rows = m >= n;
  const int64_t len = by_rows ? m : n;
  const int64_t align = by_rows ? 1 : 32;  // column blocks start on a cache line of the output
  const int64_t chunk = ((len + threads - 1) / threads + align - 1) / align * align;
  at::parallel_for(0, len, chunk, [&](int64_t s0, int64_t s1) {
    at::AutoDispatchBelowADInplaceOrView guard;  // thread-local dispatch state is not inherited by workers
    if (by_rows) {
      at::Tensor o = c.narrow(0, s0, s1 - s0);
      product(o, a.narrow(0, s0, s1 - s0), b);
      after(s0, s1, int64_t{0}, n);
    } else {
      at::Tensor o = c.narrow(1, s0, s1 - s0);
      product(o, a, b.narrow(1, s0, s1 - s0));
      after(int64_t{0}, m, s0, s1);
    }
  });
}

}  // namespace

bool sgemm_fp32() { return k::sgemm_preferred(); }

at::Tensor to_fp32(const at::Tensor& t) {
  if (t.scalar_type() == at::kFloat) return t;
  if (t.is_contiguous() || !t.is_non_overlapping_and_dense()) {
    return cpu_empty(t.sizes(), t.options().dtype(at::kFloat)).copy_(t);
  }
  at::Tensor r = at::empty_strided(t.sizes(), t.strides(), t.options().dtype(at::kFloat));
  advise_huge_pages(r);
  return r.copy_(t);
}

bool gemm_via_fp32(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType dtype = a.scalar_type();
  if ((dtype != at::kBFloat16 && dtype != at::kHalf) || torch_has_native_half_gemm(dtype)) return false;
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  if (m * n * k < (int64_t{1} << 15)) return false;  // tiny: not worth the copies
  // Both operands contiguous along K (x @ weight.T): torch's fallback computes dot products, about a third of
  // sgemm's speed, and reads the operands as they are; the copies pay off from about 16 rows. In any other
  // layout the fallback is a strided scalar loop (~100x slower than sgemm): copies win from one row.
  const bool dot_layout = (a.stride(-1) == 1 || k == 1) && (b.stride(-2) == 1 || k == 1);
  return !dot_layout || m >= kDotLayoutFp32Rows;
}

void gemm_into(const char* op, const at::Tensor& out, const at::Tensor& a, const at::Tensor& b,
               const GemmEpilogue& e) {
  const int64_t m = out.size(0), n = out.size(1), kdim = a.size(1);
  if (m == 0 || n == 0) return;
  if (kdim == 0) {
    if (e.any()) apply_epilogue(op, out, at::Tensor(), e, 0, 0);
    else out.zero_();
    return;
  }
  const bool via_fp32 = out.scalar_type() != at::kFloat && a.scalar_type() == at::kFloat;
  if (!via_fp32 && !gemm_via_fp32(a, b)) {
    split_product(out, a, b, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      if (e.any()) {
        const at::Tensor o = block(out, r0, r1, c0, c1);
        apply_epilogue(op, o, o, e, r0, c0);
      }
    });
    return;
  }
  const at::Tensor b32 = to_fp32(b);
  const int64_t rows = fp32_block_rows(m, n);
  const at::Tensor scratch = cpu_empty({rows, n}, out.options().dtype(at::kFloat));
  for (int64_t i0 = 0; i0 < m; i0 += rows) {
    const int64_t nr = std::min(rows, m - i0);
    const at::Tensor c = scratch.narrow(0, 0, nr);
    split_product(c, to_fp32(a.narrow(0, i0, nr)), b32, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      apply_epilogue(op, block(out, i0 + r0, i0 + r1, c0, c1), block(c, r0, r1, c0, c1), e, i0 + r0, c0);
    });
  }
}

}  // namespace yirage
