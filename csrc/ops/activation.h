// silu_and_mul, gelu_and_mul, gelu and their backward ops: the argument checks every backend runs (CPU,
// CUDA, portable, Meta), and the output shape of the gated ops.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/string_view.h>

#include <vector>

#include "common/checks.h"

namespace yirage {

// gelu's `approximate`: "none" (erf) or "tanh". Returns true for "tanh".
inline bool check_approximate(const char* op, c10::string_view approximate) {
  TORCH_CHECK_VALUE(approximate == "none" || approximate == "tanh", "yirage.", op,
                    ": approximate must be \"none\" or \"tanh\", got \"", approximate, "\"");
  return approximate == "tanh";
}

// x of a gated op: (..., 2*d) floating; the output is (..., d).
inline void check_gated(const char* op, const at::Tensor& x) {
  check_defined(op, "x", x);
  check_float(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() >= 1, "yirage.", op,
                    ": x must have at least 1 dimension (..., 2*d), got a 0-dim tensor");
  TORCH_CHECK_VALUE((x.sym_size(-1) % 2).sym_eq(0).expect_true(__FILE__, __LINE__), "yirage.", op,
                    ": x must have an even last dim (..., 2*d), got shape ", x.sym_sizes());
}

// (..., d) for x of shape (..., 2*d)
inline std::vector<c10::SymInt> gated_out_sizes(const at::Tensor& x) {
  std::vector<c10::SymInt> sizes(x.sym_sizes().begin(), x.sym_sizes().end());
  sizes.back() = sizes.back() / 2;
  return sizes;
}

// grad_out: (..., d) with x's leading dims, x's dtype and device.
inline void check_gated_backward(const char* op, const at::Tensor& grad_out, const at::Tensor& x) {
  check_gated(op, x);
  check_defined(op, "grad_out", grad_out);
  check_same_dtype(op, "grad_out", grad_out, "x", x);
  check_same_device(op, "grad_out", grad_out, "x", x);
  const std::vector<c10::SymInt> want = gated_out_sizes(x);
  bool same = grad_out.dim() == x.dim();
  for (int64_t d = 0; same && d < x.dim(); ++d) {
    same = grad_out.sym_size(d).sym_eq(want[d]).expect_true(__FILE__, __LINE__);
  }
  TORCH_CHECK_VALUE(same, "yirage.", op, ": grad_out must have shape (..., d) = ", c10::SymIntArrayRef(want),
                    " for x of shape ", x.sym_sizes(), ", got ", grad_out.sym_sizes());
}

inline void check_gelu(const char* op, const at::Tensor& x, c10::string_view approximate) {
  check_defined(op, "x", x);
  check_float(op, "x", x);
  check_approximate(op, approximate);
}

inline void check_gelu_backward(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  const char* op = "gelu_backward";
  check_gelu(op, x, approximate);
  check_defined(op, "grad_out", grad_out);
  check_same_dtype(op, "grad_out", grad_out, "x", x);
  check_same_device(op, "grad_out", grad_out, "x", x);
  check_same_shape(op, "grad_out", grad_out, "x", x);
}

}  // namespace yirage
