// linear, linear_forward and linear_backward: the argument checks every backend runs (CPU, CUDA, portable,
// Meta), the activation names, and the output shape.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <optional>
#include <string>

#include "common/checks.h"
#include "kernels/activation.h"

namespace yirage {

using kernels::Activation;

inline Activation parse_activation_arg(const char* op, c10::string_view name) {
  Activation act;
  TORCH_CHECK_VALUE(kernels::parse_activation(std::string(name).c_str(), &act), "yirage.", op,
                    ": activation must be one of ", kernels::kActivationNames, ", got '", name, "'");
  return act;
}

// x: (..., K) floating; weight: (N, K); bias: (N,) or absent; one dtype, one device; a known activation.
inline Activation check_linear(const char* op, const at::Tensor& x, const at::Tensor& weight,
                               const std::optional<at::Tensor>& bias, c10::string_view activation) {
  check_defined(op, "x", x);
  check_defined(op, "weight", weight);
  check_float(op, "x", x);
  check_same_dtype(op, "weight", weight, "x", x);
  check_same_device(op, "weight", weight, "x", x);
  TORCH_CHECK_VALUE(x.dim() >= 1, "yirage.", op, ": x must have at least 1 dimension (..., K), got a 0-D tensor");
  TORCH_CHECK_VALUE(weight.dim() == 2, "yirage.", op, ": weight must have 2 dimensions (N, K), got shape ",
                    weight.sym_sizes());
  TORCH_CHECK_VALUE(x.sym_size(-1).sym_eq(weight.sym_size(1)).expect_true(__FILE__, __LINE__), "yirage.", op,
                    ": x must have K = weight.size(1) = ", weight.sym_size(1), " features in its last dim, got shape ",
                    x.sym_sizes());
  if (bias.has_value() && bias->defined()) {
    const at::Tensor& b = *bias;
    check_same_dtype(op, "bias", b, "x", x);
    check_same_device(op, "bias", b, "x", x);
    TORCH_CHECK_VALUE(b.dim() == 1 && b.sym_size(0).sym_eq(weight.sym_size(0)).expect_true(__FILE__, __LINE__),
                      "yirage.", op, ": bias must have shape (N,) = (", weight.sym_size(0),
                      ",) to match weight.size(0), got ", b.sym_sizes());
  }
  return parse_activation_arg(op, activation);
}

// x.shape[:-1] + (N,)
inline c10::SymDimVector linear_out_sizes(const at::Tensor& x, const at::Tensor& weight) {
  c10::SymDimVector out(x.sym_sizes().begin(), x.sym_sizes().end() - 1);
  out.push_back(weight.sym_size(0));
  return out;
}

inline void check_out_shaped(const char* op, const char* arg, const at::Tensor& t, const at::Tensor& x,
                             const at::Tensor& weight) {
  check_defined(op, arg, t);
  check_same_dtype(op, arg, t, "x", x);
  check_same_device(op, arg, t, "x", x);
  const c10::SymDimVector want = linear_out_sizes(x, weight);
  bool same = t.dim() == static_cast<int64_t>(want.size());
  for (int64_t d = 0; same && d < t.dim(); ++d) same = t.sym_size(d).sym_eq(want[d]).expect_true(__FILE__, __LINE__);
  TORCH_CHECK_VALUE(same, "yirage.", op, ": ", arg, " must have the output's shape x.shape[:-1] + (N,) = ",
                    c10::SymIntArrayRef(want), ", got ", t.sym_sizes());
}

// grad_out: the output's shape; saved: z (gelu, gelu_tanh, silu) or the output (relu), of that shape; unused
// for none.
inline Activation check_linear_backward(const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight,
                                        const std::optional<at::Tensor>& saved, c10::string_view activation) {
  const char* op = "linear_backward";
  const Activation act = check_linear(op, x, weight, std::nullopt, activation);
  check_out_shaped(op, "grad_out", grad_out, x, weight);
  if (act != Activation::none) {
    TORCH_CHECK_VALUE(saved.has_value() && saved->defined(), "yirage.", op, ": saved must be a tensor (",
                      act == Activation::relu ? "the forward output" : "the pre-activation z",
                      ") for activation '", kernels::activation_name(act), "', got None");
    check_out_shaped(op, "saved", *saved, x, weight);
  }
  return act;
}

}  // namespace yirage
