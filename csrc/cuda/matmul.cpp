// CUDA glue for matmul: checks, the batch layout, then cuBLAS straight into the output (cuda/blas_gemm.h).
// Broadcast batch dims are never materialized where a stride describes them:
//   - b without a batch of its own and a whose (batch, M) rows collapse to one stride: one (B*M, K) @ (K, N);
//   - batch dims that collapse to one stride each (stride 0 for broadcast ones): one strided-batched GEMM;
//   - otherwise the operand that does not fold is copied to (batch, rows, cols) and the product is batched.
// Row-major and transposed matrices are read in place (cuBLAS op N / op T); other layouts are copied.
#include <ATen/ExpandUtils.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "common/cuda_launch.h"
#include "cuda/blas_gemm.h"
#include "ops/matmul.h"

namespace yirage {
namespace {

// t as a view of `shape` when its strides allow one (broadcast stride-0 dims included), else nothing.
std::optional<at::Tensor> matmul_cuda_view(const at::Tensor& t, at::IntArrayRef shape) {
  auto strides = at::detail::computeStride(t.sizes(), t.strides(), shape);
  if (!strides) return std::nullopt;
  return t.as_strided(shape, *strides, t.storage_offset());
}

at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b) {
  const char* op = "matmul";
  check_matmul(op, a, b);
  const c10::cuda::CUDAGuard guard(a.device());
  TORCH_CHECK_TYPE(a.scalar_type() == at::kFloat || a.scalar_type() == at::kHalf ||
                       a.scalar_type() == at::kBFloat16 || a.scalar_type() == at::kDouble,
                   "yirage.", op, ": no CUDA kernel for dtype ", dtype_name(a.scalar_type()));
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const std::vector<int64_t> batch =
      at::infer_size(a.sizes().slice(0, a.dim() - 2), b.sizes().slice(0, b.dim() - 2));
  int64_t nbatch = 1;
  for (int64_t s : batch) nbatch *= s;
  std::vector<int64_t> out_sizes = batch, a_sizes = batch, b_sizes = batch;
  out_sizes.insert(out_sizes.end(), {m, n});
  a_sizes.insert(a_sizes.end(), {m, k});
  b_sizes.insert(b_sizes.end(), {k, n});
  at::Tensor out = at::empty(out_sizes, a.options());
  if (out.numel() == 0) return out;
  if (k == 0) return out.zero_();

  // b shared by every output matrix: its batch folds into the rows of one product
  if (b.numel() == k * n) {
    if (auto a2 = matmul_cuda_view(a.expand(a_sizes), {nbatch * m, k})) {
      blas_mm_into(op, out.view({nbatch * m, n}), *a2, b.reshape({k, n}));
      return out;
    }
  }
  const at::Tensor ae = a.expand(a_sizes), be = b.expand(b_sizes);
  std::optional<at::Tensor> a3 = matmul_cuda_view(ae, {nbatch, m, k});
  std::optional<at::Tensor> b3 = matmul_cuda_view(be, {nbatch, k, n});
  if (!a3) a3 = ae.reshape({nbatch, m, k});  // a copy: the batch dims do not collapse to one stride
  if (!b3) b3 = be.reshape({nbatch, k, n});
  at::Tensor ha, hb;
  BlasOperand oa = blas_operand(*a3, &ha), ob = blas_operand(*b3, &hb);
  if (nbatch == 1) oa.batch_stride = ob.batch_stride = 0;
  blas_gemm_rowmajor(op, a.scalar_type(), nbatch, m, n, k, oa, ob, out.data_ptr(), n, m * n);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) { m.impl("matmul", &matmul_cuda); }

}  // namespace yirage
