// Meta (shape and dtype) kernel for matmul: the real kernels' checks, a contiguous output, symbolic sizes.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops/matmul.h"

namespace yirage {
namespace {

at::Tensor matmul_meta(const at::Tensor& a, const at::Tensor& b) {
  check_matmul("matmul", a, b);
  return at::empty_symint(matmul_out_sizes(a, b), a.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Meta, m) { m.impl("matmul", &matmul_meta); }

}  // namespace yirage
