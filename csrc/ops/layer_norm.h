// layer_norm: the argument checks every backend runs (CPU, CUDA, portable, Meta).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "common/checks.h"

namespace yirage {

// x: (..., N) floating; weight and bias: (N,) or absent; same dtype and device throughout.
inline void check_layer_norm(const char* op, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                             const std::optional<at::Tensor>& bias, double eps) {
  check_defined(op, "x", x);
  check_float(op, "x", x);
  TORCH_CHECK_VALUE(x.dim() >= 1, "yirage.", op,
                    ": x must have at least 1 dimension (..., N), got a 0-dim tensor");
  if (weight.has_value() && weight->defined()) check_feature_param(op, "weight", *weight, x);
  if (bias.has_value() && bias->defined()) check_feature_param(op, "bias", *bias, x);
  check_eps(op, eps);
}

inline void check_layer_norm_backward(const at::Tensor& grad_out, const at::Tensor& x,
                                      const std::optional<at::Tensor>& weight, double eps) {
  const char* op = "layer_norm_backward";
  check_layer_norm(op, x, weight, std::nullopt, eps);
  check_defined(op, "grad_out", grad_out);
  check_same_dtype(op, "grad_out", grad_out, "x", x);
  check_same_device(op, "grad_out", grad_out, "x", x);
  check_same_shape(op, "grad_out", grad_out, "x", x);
}

}  // namespace yirage
