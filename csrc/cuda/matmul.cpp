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

#include "common/cuda_launch.h"
#include "cuda/blas_gemm.h"
#include "ops/matmul.h"

namespace yirage {
namespace {

at::Tensor matmul_cuda(const at::Tensor& a, const at::Tensor& b) {
  const char* op = "matmul";
  check_matmul(op, a, b);
  const c10::cuda::CUDAGuard guard(a.device());
  TORCH_CHECK_TYPE(a.scalar_type() == at::kFloat || a.scalar_type() == at::kHalf ||
                       a.scalar_type() == at::kBFloat16 || a.scalar_type() == at::kDouble,
                   "yirage.", op, ": no CUDA kernel for dtype ", dtype_name(a.scalar_type()));
  const MatmulShape shape = matmul_shape(a, b);
  const int64_t m = shape.m, k = shape.k, n = shape.n, nbatch = shape.nbatch;
  at::Tensor out = at::empty(shape.out_sizes, a.options());
  if (out.numel() == 0) return out;
  if (k == 0) return out.zero_();

  // b shared by every output matrix: its batch folds into the rows of one product
  if (auto a2 = matmul_shared_b_rows(a, b, shape)) {
    blas_mm_into(op, out.view({nbatch * m, n}), *a2, b.reshape({k, n}));
    return out;
  }
  const at::Tensor ae = a.expand(shape.a_sizes), be = b.expand(shape.b_sizes);
  std::optional<at::Tensor> a3 = matmul_view_as(ae, {nbatch, m, k});
  std::optional<at::Tensor> b3 = matmul_view_as(be, {nbatch, k, n});
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
