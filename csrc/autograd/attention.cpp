// Autograd for attention and attention_forward in C++ (LibTorch users get gradients too). The forward
// runs yirage::attention_forward below Autograd (out and the log-sum-exp lse); backward calls
// yirage::attention_backward through the dispatcher. Saved: q, k, v, out and lse; the probabilities are
// recomputed. lse is not differentiable. Without a graph (no input requires grad, or grad mode off) the
// public attention redispatches to the kernel that does not compute lse.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include <tuple>

#include "autograd/common.h"
#include "autograd/node.h"

namespace yirage {
namespace {

using torch::autograd::variable_list;
using OptDouble = std::optional<double>;

const auto& attention_op() {
  static const auto op = find_op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool, OptDouble)>(
      "yirage::attention");
  return op;
}

const auto& attention_forward_op() {
  static const auto op = find_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                    const at::Tensor&, bool, OptDouble)>(
      "yirage::attention_forward");
  return op;
}

const auto& attention_backward_op() {
  static const auto op = find_op<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
      const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
      const at::Tensor&, bool, OptDouble)>("yirage::attention_backward");
  return op;
}

// grad_fn of the output (the log-sum-exp is not differentiable); saved: q, k, v, the output and the lse.
struct AttentionNode : autograd_node::SavedNode<5> {
  bool causal = false;
  OptDouble scale;
  variable_list apply(variable_list&& grads) override {
    const bool q_grad = should_compute_output(0), k_grad = should_compute_output(1), v_grad = should_compute_output(2);
    if (!grads[0].defined() || (!q_grad && !k_grad && !v_grad)) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = unpack_saved();
    auto [dq, dk, dv] = call_backward(attention_backward_op(), grads[0], saved[0], saved[1], saved[2], saved[3],
                                      saved[4], causal, scale);
    return {q_grad ? dq : at::Tensor(), k_grad ? dk : at::Tensor(), v_grad ? dv : at::Tensor()};
  }
  std::string name() const override { return "YirageAttentionBackward"; }
};

std::tuple<at::Tensor, at::Tensor> attention_with_graph(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v, bool causal, OptDouble scale) {
  at::Tensor out, lse;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    std::tie(out, lse) = attention_forward_op().call(q, k, v, causal, scale);
  }
  auto node = autograd_node::connect<AttentionNode>({out}, q, k, v);
  node->saved[0] = autograd_node::SavedVariable(q, /*is_output=*/false);
  node->saved[1] = autograd_node::SavedVariable(k, /*is_output=*/false);
  node->saved[2] = autograd_node::SavedVariable(v, /*is_output=*/false);
  node->saved[3] = autograd_node::SavedVariable(out, /*is_output=*/true);
  node->saved[4] = autograd_node::SavedVariable(lse, /*is_output=*/false);
  node->causal = causal;
  node->scale = scale;
  return {out, lse};
}

at::Tensor attention_autograd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                              OptDouble scale) {
  check_no_tangents("attention", q, k, v);
  if (!needs_graph(q, k, v)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return attention_op().call(q, k, v, causal, scale);
  }
  return std::get<0>(attention_with_graph(q, k, v, causal, scale));
}

std::tuple<at::Tensor, at::Tensor> attention_forward_autograd(const at::Tensor& q, const at::Tensor& k,
                                                              const at::Tensor& v, bool causal, OptDouble scale) {
  check_no_tangents("attention_forward", q, k, v);
  if (!needs_graph(q, k, v)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return attention_forward_op().call(q, k, v, causal, scale);
  }
  return attention_with_graph(q, k, v, causal, scale);
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) {
  m.impl("attention", &attention_autograd);
  m.impl("attention_forward", &attention_forward_autograd);
}

}  // namespace yirage
