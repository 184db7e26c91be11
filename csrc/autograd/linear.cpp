// Autograd for linear in C++ (LibTorch users get gradients too). Forward calls yirage::linear_forward below
// Autograd, which also returns the pre-activation z when act' needs it (gelu, gelu_tanh, silu; relu's
// derivative comes from the output, none needs nothing); backward is one yirage::linear_backward call through
// the dispatcher. Saved: x, weight, and z or the output. Without grad, linear itself runs (no z stored).
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include <string>
#include <tuple>

#include "autograd/common.h"
#include "autograd/node.h"
#include "ops/linear.h"

namespace yirage {
namespace {

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

// grad_fn of the output; saved: x, weight, and the activation's input (its output for relu, whose derivative
// needs only that).
struct LinearNode : autograd_node::SavedNode<3> {
  std::string activation;
  bool has_bias = false;
  variable_list apply(variable_list&& grads) override {
    const bool x_grad = should_compute_output(0), weight_grad = should_compute_output(1);
    const bool bias_grad = has_bias && should_compute_output(2);
    if (!grads[0].defined() || (!x_grad && !weight_grad && !bias_grad)) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = unpack_saved();
    auto [dx, dw, db] = call_backward(linear_backward_op(), grads[0], saved[0], saved[1], as_optional(saved[2]),
                                      activation, x_grad, weight_grad, bias_grad);
    return {x_grad ? dx : at::Tensor(), weight_grad ? dw : at::Tensor(), bias_grad ? db : at::Tensor()};
  }
  std::string name() const override { return "YirageLinearBackward"; }
};

at::Tensor linear_autograd(const at::Tensor& x, const at::Tensor& weight, const OptTensor& bias,
                           c10::string_view activation) {
  check_no_tangents("linear", x, weight, bias);
  if (!needs_graph(x, weight, bias)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return linear_op().call(x, weight, bias, activation);
  }
  const bool relu = parse_activation_arg("linear", activation) == Activation::relu;
  at::Tensor out, pre;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    std::tie(out, pre) = linear_forward_op().call(x, weight, bias, activation);
  }
  auto node = autograd_node::connect<LinearNode>({out}, x, weight, bias);
  node->saved[0] = autograd_node::SavedVariable(x, /*is_output=*/false);
  node->saved[1] = autograd_node::SavedVariable(weight, /*is_output=*/false);
  node->saved[2] = autograd_node::SavedVariable(relu ? out : pre, /*is_output=*/relu);
  node->activation = std::string(activation);
  node->has_bias = bias.has_value() && bias->defined();
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) { m.impl("linear", &linear_autograd); }

}  // namespace yirage
