// CPU glue for matmul: checks, the batch layout, and BLAS products straight into the preallocated output
// (cpu/gemm.h). Broadcast batch dims are never materialized:
//   - b without a batch of its own and a whose (batch, M) rows collapse to one stride: one (B*M, K) @ (K, N);
//   - batch dims that collapse to one stride each (stride 0 for broadcast ones): one batched product (bmm; not
//     where fp32 products run on our sgemm, gemm.h);
//   - otherwise one product per output matrix on strided views, over threads when the matrices are small.
// bf16/fp16 products that go through fp32 (gemm_via_fp32) convert a and b once, unexpanded.
#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>

#include "common/cpu_memory.h"
#include "cpu/gemm.h"
#include "ops/matmul.h"

namespace yirage {
namespace {

// Products under 2^20 multiply-adds run one per thread (single-threaded BLAS); larger ones one at a time
// with BLAS threads.
constexpr int64_t kSmallProduct = int64_t{1} << 20;

// The matrix at flat batch index i of t (batch dims, then 2 matrix dims; expanded strides allowed).
at::Tensor matrix_at(const at::Tensor& t, int64_t i) {
  int64_t offset = t.storage_offset();
  for (int64_t d = t.dim() - 3; d >= 0; --d) {
    offset += (i % t.size(d)) * t.stride(d);
    i /= t.size(d);
  }
  return t.as_strided({t.size(-2), t.size(-1)}, {t.stride(-2), t.stride(-1)}, offset);
}

at::Tensor matmul_cpu(const at::Tensor& a, const at::Tensor& b) {
  const char* op = "matmul";
  check_matmul(op, a, b);
  const MatmulShape shape = matmul_shape(a, b);
  const int64_t m = shape.m, k = shape.k, n = shape.n, nbatch = shape.nbatch;
  at::Tensor out = cpu_empty(shape.out_sizes, a.options());
  if (out.numel() == 0) return out;
  if (k == 0) return out.zero_();

  // b shared by every output matrix: its batch folds into the rows of one product
  if (auto a2 = matmul_shared_b_rows(a, b, shape)) {
    gemm_into(op, out.view({nbatch * m, n}), *a2, b.reshape({k, n}));
    return out;
  }
  const bool via_fp32 = gemm_via_fp32(a, b);
  const at::Tensor ae = (via_fp32 ? to_fp32(a) : a).expand(shape.a_sizes);
  const at::Tensor be = (via_fp32 ? to_fp32(b) : b).expand(shape.b_sizes);
  // one batched BLAS call, unless fp32 products run on our sgemm (then per matrix, through gemm_into)
  if (!via_fp32 && !(a.scalar_type() == at::kFloat && sgemm_fp32())) {
    auto a3 = matmul_view_as(ae, {nbatch, m, k});
    auto b3 = matmul_view_as(be, {nbatch, k, n});
    if (a3 && b3) {
      at::Tensor out3 = out.view({nbatch, m, n});
      at::cpu::bmm_out(out3, *a3, *b3);
      return out;
    }
  }
  const auto products = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) gemm_into(op, matrix_at(out, i), matrix_at(ae, i), matrix_at(be, i));
  };
  const int64_t work = m * n * k;
  if (work < kSmallProduct && nbatch > 1) {
    at::parallel_for(0, nbatch, std::max<int64_t>(1, kSmallProduct / work), [&](int64_t begin, int64_t end) {
      at::AutoDispatchBelowADInplaceOrView guard;  // thread-local dispatch state is not inherited by workers
      products(begin, end);
    });
  } else {
    products(0, nbatch);
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) { m.impl("matmul", &matmul_cpu); }

}  // namespace yirage
