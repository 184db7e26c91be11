// Autograd for attention and attention_forward in C++ (LibTorch users get gradients too). The forward
// runs yirage::attention_forward below Autograd (out and the log-sum-exp lse); backward calls
// yirage::attention_backward through the dispatcher. Saved: q, k, v, out and lse; the probabilities are
// recomputed. lse is not differentiable. Without a graph (no input requires grad, or grad mode off) the
// public attention redispatches to the kernel that does not compute lse.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <tuple>

#include "autograd/common.h"

namespace yirage {
namespace {

using torch::autograd::AutogradContext;
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

class AttentionFunction : public torch::autograd::Function<AttentionFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               bool causal, OptDouble scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, lse] = attention_forward_op().call(q, k, v, causal, scale);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    ctx->mark_non_differentiable({lse});
    return {out, lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    auto [dq, dk, dv] = call_backward(attention_backward_op(), grads[0], saved[0], saved[1], saved[2], saved[3],
                                      saved[4], ctx->saved_data["causal"].toBool(),
                                      ctx->saved_data["scale"].toOptional<double>());
    return {ctx->needs_input_grad(0) ? dq : at::Tensor(), ctx->needs_input_grad(1) ? dk : at::Tensor(),
            ctx->needs_input_grad(2) ? dv : at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor attention_autograd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                              OptDouble scale) {
  check_no_tangents("attention", q, k, v);
  if (!needs_graph(q, k, v)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return attention_op().call(q, k, v, causal, scale);
  }
  return AttentionFunction::apply(q, k, v, causal, scale)[0];
}

std::tuple<at::Tensor, at::Tensor> attention_forward_autograd(const at::Tensor& q, const at::Tensor& k,
                                                              const at::Tensor& v, bool causal, OptDouble scale) {
  check_no_tangents("attention_forward", q, k, v);
  if (!needs_graph(q, k, v)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return attention_forward_op().call(q, k, v, causal, scale);
  }
  variable_list r = AttentionFunction::apply(q, k, v, causal, scale);
  return {r[0], r[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) {
  m.impl("attention", &attention_autograd);
  m.impl("attention_forward", &attention_forward_autograd);
}

}  // namespace yirage
