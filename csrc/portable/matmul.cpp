// Portable matmul with ATen ops (fp32 accumulation: half types are multiplied in fp32 and rounded once),
// registered for MPS and PrivateUse1. Also the readable statement of what the op computes.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "ops/matmul.h"
#include "portable/register.h"

namespace yirage {
namespace {

at::Tensor matmul_portable(const at::Tensor& a, const at::Tensor& b) {
  check_matmul("matmul", a, b);
  const at::ScalarType acc = a.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  return at::matmul(a.to(acc), b.to(acc)).to(a.scalar_type()).contiguous();
}

void register_matmul_kernels(PortableKernels& k) {
  k.impl("matmul", &matmul_portable);
}

}  // namespace

YIRAGE_PORTABLE_KERNELS(register_matmul_kernels)

}  // namespace yirage
