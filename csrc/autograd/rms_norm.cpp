// Autograd for rms_norm and fused_add_rms_norm, in C++ so LibTorch users get gradients too.
// Forward redispatches below Autograd to the backend kernel and records a node (autograd/node.h); backward calls yirage::rms_norm_backward
// through the dispatcher, so every backend (CPU, CUDA, portable) supplies its own backward kernel.
// Saved: the normalized input (x, or h for the fused op) and the weight; rstd is recomputed.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include "autograd/common.h"
#include "autograd/node.h"

namespace yirage {
namespace {

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

// grad_fn of the output; saved: x and weight.
struct RmsNormNode : autograd_node::SavedNode<2> {
  double eps = 0.0;
  variable_list apply(variable_list&& grads) override {
    const bool x_grad = should_compute_output(0);
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor()};
    const auto saved = unpack_saved();
    const at::Tensor& weight = saved[1];
    const bool weight_grad = weight.defined() && should_compute_output(1);
    if (!x_grad && !weight_grad) return {at::Tensor(), at::Tensor()};
    auto [dx, dw] = call_backward(rms_norm_backward_op(), grads[0], saved[0], as_optional(weight), eps,
                                  std::nullopt, weight_grad);
    return {x_grad ? dx : at::Tensor(), weight_grad ? dw : at::Tensor()};
  }
  std::string name() const override { return "YirageRmsNormBackward"; }
};

// grad_fn of both outputs (y, h); saved: h = x + residual and the weight. h feeds both outputs:
// dh = rms_norm_backward(dy, h) + the gradient given for h; dx = dresidual = dh. An output whose gradient is
// not given costs nothing.
struct FusedAddRmsNormNode : autograd_node::SavedNode<2> {
  double eps = 0.0;
  variable_list apply(variable_list&& grads) override {
    const at::Tensor& dy = grads[0];
    const at::Tensor& dh_direct = grads[1];
    const bool x_grad = should_compute_output(0), res_grad = should_compute_output(1);
    if (!dy.defined()) return {x_grad ? dh_direct : at::Tensor(), res_grad ? dh_direct : at::Tensor(), at::Tensor()};
    const auto saved = unpack_saved();
    const at::Tensor& weight = saved[1];
    const bool weight_grad = weight.defined() && should_compute_output(2);
    if (!x_grad && !res_grad && !weight_grad) return {at::Tensor(), at::Tensor(), at::Tensor()};
    auto [dh, dw] = call_backward(rms_norm_backward_op(), dy, saved[0], as_optional(weight), eps,
                                  as_optional(dh_direct), weight_grad);
    return {x_grad ? dh : at::Tensor(), res_grad ? dh : at::Tensor(), weight_grad ? dw : at::Tensor()};
  }
  std::string name() const override { return "YirageFusedAddRmsNormBackward"; }
};

at::Tensor rms_norm_autograd(const at::Tensor& x, const OptTensor& weight, double eps) {
  check_no_tangents("rms_norm", x, weight);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = rms_norm_op().call(x, weight, eps);
  }
  if (!needs_graph(x, weight)) return out;
  auto node = autograd_node::connect<RmsNormNode>({out}, x, weight);
  node->saved[0] = autograd_node::SavedVariable(x, /*is_output=*/false);
  node->saved[1] = autograd_node::SavedVariable(weight.value_or(at::Tensor()), /*is_output=*/false);
  node->eps = eps;
  return out;
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm_autograd(const at::Tensor& x, const at::Tensor& residual,
                                                               const OptTensor& weight, double eps) {
  check_no_tangents("fused_add_rms_norm", x, residual, weight);
  at::Tensor y, h;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    std::tie(y, h) = fused_add_rms_norm_op().call(x, residual, weight, eps);
  }
  if (!needs_graph(x, residual, weight)) return {y, h};
  auto node = autograd_node::connect<FusedAddRmsNormNode>({y, h}, x, residual, weight);
  node->saved[0] = autograd_node::SavedVariable(h, /*is_output=*/true);
  node->saved[1] = autograd_node::SavedVariable(weight.value_or(at::Tensor()), /*is_output=*/false);
  node->eps = eps;
  return {y, h};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) {
  m.impl("rms_norm", &rms_norm_autograd);
  m.impl("fused_add_rms_norm", &fused_add_rms_norm_autograd);
}

}  // namespace yirage
