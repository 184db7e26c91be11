// Autograd for layer_norm in C++ (LibTorch users get gradients too). Forward redispatches below
// Autograd; backward calls yirage::layer_norm_backward through the dispatcher. Saved: x and weight;
// mean and rstd are recomputed.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "autograd/common.h"

namespace yirage {
namespace {

using torch::autograd::AutogradContext;
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

class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const OptTensor& weight,
                            const OptTensor& bias, double eps) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x, weight.value_or(at::Tensor())});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return layer_norm_op().call(x, weight, bias, eps);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[1];
    const bool weight_grad = weight.defined() && ctx->needs_input_grad(1);
    const bool bias_grad = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2);
    auto [dx, dw, db] = call_backward(layer_norm_backward_op(), grads[0], saved[0], as_optional(weight),
                                      ctx->saved_data["eps"].toDouble(), weight_grad, bias_grad);
    return {dx, weight_grad ? dw : at::Tensor(), bias_grad ? db : at::Tensor(), at::Tensor()};
  }
};

at::Tensor layer_norm_autograd(const at::Tensor& x, const OptTensor& weight, const OptTensor& bias, double eps) {
  check_no_tangents("layer_norm", x, weight, bias);
  if (!needs_graph(x, weight, bias)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return layer_norm_op().call(x, weight, bias, eps);
  }
  return LayerNormFunction::apply(x, weight, bias, eps);
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) { m.impl("layer_norm", &layer_norm_autograd); }

}  // namespace yirage
