// Meta (shape and dtype) kernels for linear, linear_forward and linear_backward: the real kernels' checks,
// contiguous outputs, symbolic sizes.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <tuple>

#include "ops/linear.h"

namespace yirage {
namespace {

at::Tensor linear_meta(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       c10::string_view activation) {
  check_linear("linear", x, weight, bias, activation);
  return at::empty_symint(linear_out_sizes(x, weight), x.options());
}

std::tuple<at::Tensor, at::Tensor> linear_forward_meta(const at::Tensor& x, const at::Tensor& weight,
                                                       const std::optional<at::Tensor>& bias,
                                                       c10::string_view activation) {
  const Activation act = check_linear("linear_forward", x, weight, bias, activation);
  const c10::SymDimVector sizes = linear_out_sizes(x, weight);
  return {at::empty_symint(sizes, x.options()),
          kernels::activation_needs_pre(act) ? at::empty_symint(sizes, x.options()) : at::empty({0}, x.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward_meta(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& saved,
    c10::string_view activation, bool x_grad, bool weight_grad, bool bias_grad) {
  check_linear_backward(grad_out, x, weight, saved, activation);
  const auto empty = [&] { return at::empty({0}, x.options()); };
  return {x_grad ? at::empty_symint(x.sym_sizes(), x.options()) : empty(),
          weight_grad ? at::empty_symint(weight.sym_sizes(), x.options()) : empty(),
          bias_grad ? at::empty_symint({weight.sym_size(0)}, x.options()) : empty()};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Meta, m) {
  m.impl("linear", &linear_meta);
  m.impl("linear_forward", &linear_forward_meta);
  m.impl("linear_backward", &linear_backward_meta);
}

}  // namespace yirage
