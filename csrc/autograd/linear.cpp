// Autograd for linear in C++ (LibTorch users get gradients too). Forward calls yirage::linear_forward below
// Autograd, which also returns the pre-activation z when act' needs it (gelu, gelu_tanh, silu; relu's
// derivative comes from the output, none needs nothing); backward is one yirage::linear_backward call through
// the dispatcher. Saved: x, weight, and z or the output. Without grad, linear itself runs (no z stored).
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <string>
#include <tuple>

#include "autograd/common.h"
#include "ops/linear.h"

namespace yirage {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const auto& linear_op() {
  static const auto op = find_op<at::Tensor(const at::Tensor&, const at::Tensor&, const OptTensor&,
                                            c10::string_view)>("yirage::linear");
  return op;
}

const auto& linear_forward_op() {
  static const auto op = find_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                    const OptTensor&, c10::string_view)>(
      "yirage::linear_forward");
  return op;
}

const auto& linear_backward_op() {
  static const auto op = find_op<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const OptTensor&, c10::string_view, bool, bool, bool)>(
      "yirage::linear_backward");
  return op;
}

class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                            c10::string_view activation) {
    at::AutoDispatchBelowADInplaceOrView guard;
    const Activation act = parse_activation_arg("linear", activation);
    auto [out, pre] = linear_forward_op().call(x, weight, bias, activation);
    ctx->save_for_backward({x, weight, act == Activation::relu ? out : pre});
    ctx->saved_data["activation"] = std::string(activation);
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const bool x_grad = ctx->needs_input_grad(0), weight_grad = ctx->needs_input_grad(1);
    const bool bias_grad = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2);
    const std::string activation = ctx->saved_data["activation"].toStringRef();
    auto [dx, dw, db] = call_backward(linear_backward_op(), grads[0], saved[0], saved[1], as_optional(saved[2]),
                                      activation, x_grad, weight_grad, bias_grad);
    return {x_grad ? dx : at::Tensor(), weight_grad ? dw : at::Tensor(), bias_grad ? db : at::Tensor(), at::Tensor()};
  }
};

at::Tensor linear_autograd(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                           c10::string_view activation) {
  check_no_tangents("linear", x, weight, bias);
  if (!needs_graph(x, weight, bias)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return linear_op().call(x, weight, bias, activation);
  }
  return LinearFunction::apply(x, weight, bias, activation);
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) { m.impl("linear", &linear_autograd); }

}  // namespace yirage
