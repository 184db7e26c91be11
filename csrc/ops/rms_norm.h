// rms_norm / fused_add_rms_norm: the argument checks every backend runs (CPU, CUDA, portable, Meta).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "common/checks.h"

namespace yirage {

// x: (..., N) floating; weight: (N,) or absent; residual (fused op): the shape of x. Same dtype and
// device throughout.
inline void check_rms_norm(const char* op, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                           double eps, const at::Tensor* residual = nullptr) {
  check_defined(op, "x", x);
  check_float(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() >= 1, "yirage.", op,
                    ": x must have at least 1 dimension (..., N), got a 0-dim tensor");
  if (residual != nullptr) {
    check_defined(op, "residual", *residual);
    check_same_dtype(op, "residual", *residual, "x", x);
    check_same_device(op, "residual", *residual, "x", x);
    check_same_shape(op, "residual", *residual, "x", x);
  }
  if (weight.has_value() && weight->defined()) check_feature_param(op, "weight", *weight, x);
  check_eps(op, eps);
}

inline void check_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                    const std::optional<at::Tensor>& weight, double eps,
                                    const std::optional<at::Tensor>& grad_add) {
  const char* op = "rms_norm_backward";
  check_rms_norm(op, x, weight, eps);
  check_defined(op, "grad_out", grad_out);
  check_same_dtype(op, "grad_out", grad_out, "x", x);
  check_same_device(op, "grad_out", grad_out, "x", x);
  check_same_shape(op, "grad_out", grad_out, "x", x);
  if (grad_add.has_value() && grad_add->defined()) {
    check_same_dtype(op, "grad_add", *grad_add, "x", x);
    check_same_device(op, "grad_add", *grad_add, "x", x);
    check_same_shape(op, "grad_add", *grad_add, "x", x);
  }
}

}  // namespace yirage
