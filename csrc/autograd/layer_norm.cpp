// Autograd for layer_norm in C++ (LibTorch users get gradients too). Forward redispatches below
// Autograd and records a LayerNormNode (autograd/node.h); backward calls yirage::layer_norm_backward through the dispatcher. Saved: x and weight;
// mean and rstd are recomputed.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include "autograd/common.h"
#include "autograd/node.h"

namespace yirage {
namespace {

using torch::autograd::variable_list;
const auto& layer_norm_op() {
  static const auto op =
      find_op<at::Tensor(const at::Tensor&, const OptTensor&, const OptTensor&, double)>("yirage::layer_norm");
  return op;
}

const auto& layer_norm_backward_op() {
  static const auto op = find_op<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const OptTensor&, double, bool, bool)>("yirage::layer_norm_backward");
  return op;
}

// grad_fn of the output; saved: x and weight (mean and rstd are recomputed).
struct LayerNormNode : autograd_node::SavedNode<2> {
  double eps = 0.0;
  bool has_bias = false;
  variable_list apply(variable_list&& grads) override {
    const bool x_grad = should_compute_output(0);
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = unpack_saved();
    const at::Tensor& weight = saved[1];
    const bool weight_grad = weight.defined() && should_compute_output(1);
    const bool bias_grad = has_bias && should_compute_output(2);
    if (!x_grad && !weight_grad && !bias_grad) return {at::Tensor(), at::Tensor(), at::Tensor()};
    auto [dx, dw, db] = call_backward(layer_norm_backward_op(), grads[0], saved[0], as_optional(weight), eps,
                                      weight_grad, bias_grad);
    return {x_grad ? dx : at::Tensor(), weight_grad ? dw : at::Tensor(), bias_grad ? db : at::Tensor()};
  }
  std::string name() const override { return "YirageLayerNormBackward"; }
};

at::Tensor layer_norm_autograd(const at::Tensor& x, const OptTensor& weight, const OptTensor& bias, double eps) {
  check_no_tangents("layer_norm", x, weight, bias);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = layer_norm_op().call(x, weight, bias, eps);
  }
  if (!needs_graph(x, weight, bias)) return out;
  auto node = autograd_node::connect<LayerNormNode>({out}, x, weight, bias);
  node->saved[0] = autograd_node::SavedVariable(x, /*is_output=*/false);
  node->saved[1] = autograd_node::SavedVariable(weight.value_or(at::Tensor()), /*is_output=*/false);
  node->eps = eps;
  node->has_bias = bias.has_value() && bias->defined();
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) { m.impl("layer_norm", &layer_norm_autograd); }

}  // namespace yirage
