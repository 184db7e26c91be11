// Helpers shared by the portable (ATen composite) kernels.
#pragma once

#include <ATen/ATen.h>

#include "common/checks.h"

namespace yirage::portable {

// The type the portable kernels compute in: fp64 for fp64 inputs, fp32 for every other float dtype.
inline at::ScalarType acc_type(const at::Tensor& x) {
  return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

}  // namespace yirage::portable
