// Autograd for rms_norm and fused_add_rms_norm, in C++ so LibTorch users get gradients too.
// Forward redispatches below Autograd to the backend kernel; backward calls yirage::rms_norm_backward
// through the dispatcher, so every backend (CPU, CUDA, portable) supplies its own backward kernel.
// Saved: the normalized input (x, or h for the fused op) and the weight; rstd is recomputed.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "autograd/common.h"

namespace yirage {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
const auto& rms_norm_op() {
  static const auto op = find_op<at::Tensor(const at::Tensor&, const OptTensor&, double)>("yirage::rms_norm");
  return op;
}

const auto& fused_add_rms_norm_op() {
  static const auto op =
      find_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const OptTensor&, double)>(
          "yirage::fused_add_rms_norm");
  return op;
}

const auto& rms_norm_backward_op() {
  static const auto op = find_op<std::tuple<at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const OptTensor&, double, const OptTensor&, bool)>(
      "yirage::rms_norm_backward");
  return op;
}

class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const OptTensor& weight, double eps) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({x, weight.value_or(at::Tensor())});
    ctx->saved_data["eps"] = eps;
    return rms_norm_op().call(x, weight, eps);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[1];
    const bool weight_grad = weight.defined() && ctx->needs_input_grad(1);
    auto [dx, dw] = call_backward(rms_norm_backward_op(), grads[0], saved[0], as_optional(weight),
                                  ctx->saved_data["eps"].toDouble(), std::nullopt, weight_grad);
    return {dx, weight_grad ? dw : at::Tensor(), at::Tensor()};
  }
};

class FusedAddRmsNormFunction : public torch::autograd::Function<FusedAddRmsNormFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& residual,
                               const OptTensor& weight, double eps) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [y, h] = fused_add_rms_norm_op().call(x, residual, weight, eps);
    ctx->save_for_backward({h, weight.value_or(at::Tensor())});
    ctx->saved_data["eps"] = eps;
    ctx->set_materialize_grads(false);  // an unused output costs nothing in backward
    return {y, h};
  }

  // h = x + residual feeds both outputs: dh = rms_norm_backward(dy, h) + grad of h; dx = dresidual = dh
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor& dy = grads[0];
    const at::Tensor& dh_direct = grads[1];
    if (!dy.defined()) return {dh_direct, dh_direct, at::Tensor(), at::Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& weight = saved[1];
    const bool weight_grad = weight.defined() && ctx->needs_input_grad(2);
    auto [dh, dw] = call_backward(rms_norm_backward_op(), dy, saved[0], as_optional(weight),
                                  ctx->saved_data["eps"].toDouble(), as_optional(dh_direct), weight_grad);
    return {dh, dh, weight_grad ? dw : at::Tensor(), at::Tensor()};
  }
};

at::Tensor rms_norm_autograd(const at::Tensor& x, const OptTensor& weight, double eps) {
  check_no_tangents("rms_norm", x, weight);
  if (!needs_graph(x, weight)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return rms_norm_op().call(x, weight, eps);
  }
  return RmsNormFunction::apply(x, weight, eps);
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm_autograd(const at::Tensor& x, const at::Tensor& residual,
                                                               const OptTensor& weight, double eps) {
  check_no_tangents("fused_add_rms_norm", x, residual, weight);
  if (!needs_graph(x, residual, weight)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return fused_add_rms_norm_op().call(x, residual, weight, eps);
  }
  variable_list out = FusedAddRmsNormFunction::apply(x, residual, weight, eps);
  return {out[0], out[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) {
  m.impl("rms_norm", &rms_norm_autograd);
  m.impl("fused_add_rms_norm", &fused_add_rms_norm_autograd);
}

}  // namespace yirage
