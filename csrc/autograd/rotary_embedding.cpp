// Autograd for rotary_embedding in C++ (LibTorch users get gradients too). Forward redispatches below
// Autograd and records a node (autograd/node.h); backward calls yirage::rotary_embedding_backward through the dispatcher. Saved: cos and sin,
// and q and k only when cos or sin requires grad (the input gradients need only the angles, so training
// with fixed tables keeps no extra copy of q and k alive). An output whose gradient is not given, or not
// needed, costs nothing in backward.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include "autograd/common.h"
#include "autograd/node.h"

namespace yirage {
namespace {

using torch::autograd::variable_list;

const auto& rotary_embedding_op() {
  static const auto op = find_op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                    const at::Tensor&, const at::Tensor&, bool)>(
      "yirage::rotary_embedding");
  return op;
}

const auto& rotary_embedding_backward_op() {
  static const auto op = find_op<std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>(
      const OptTensor&, const OptTensor&, const OptTensor&, const OptTensor&, const at::Tensor&, const at::Tensor&,
      bool, bool)>("yirage::rotary_embedding_backward");
  return op;
}

// grad_fn of both outputs; saved: q, k (only when cos or sin requires grad), cos, sin.
struct RotaryEmbeddingNode : autograd_node::SavedNode<4> {
  bool interleaved = false;
  variable_list apply(variable_list&& grads) override {
    const bool cos_sin_grad = should_compute_output(2) || should_compute_output(3);
    // an output's gradient is used for its input's gradient and for the cos/sin gradients
    const auto used = [&](int i) { return grads[i].defined() && (should_compute_output(i) || cos_sin_grad); };
    if (!used(0) && !used(1)) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = unpack_saved();
    const auto given = [](bool use, const at::Tensor& t) { return use ? as_optional(t) : std::nullopt; };
    auto [dq, dk, dcos, dsin] =
        call_backward(rotary_embedding_backward_op(), given(used(0), grads[0]), given(used(1), grads[1]),
                      given(cos_sin_grad, saved[0]), given(cos_sin_grad, saved[1]), saved[2], saved[3], interleaved,
                      cos_sin_grad);
    const auto keep = [&](int i, bool computed, at::Tensor& t) {
      return computed && should_compute_output(i) ? t : at::Tensor();
    };
    return {keep(0, used(0), dq), keep(1, used(1), dk), keep(2, cos_sin_grad, dcos), keep(3, cos_sin_grad, dsin)};
  }
  std::string name() const override { return "YirageRotaryEmbeddingBackward"; }
};

std::tuple<at::Tensor, at::Tensor> rotary_embedding_autograd(const at::Tensor& q, const at::Tensor& k,
                                                             const at::Tensor& cos, const at::Tensor& sin,
                                                             bool interleaved) {
  check_no_tangents("rotary_embedding", q, k, cos, sin);
  at::Tensor out_q, out_k;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    std::tie(out_q, out_k) = rotary_embedding_op().call(q, k, cos, sin, interleaved);
  }
  if (!needs_graph(q, k, cos, sin)) return {out_q, out_k};
  auto node = autograd_node::connect<RotaryEmbeddingNode>({out_q, out_k}, q, k, cos, sin);
  const bool tables_grad = requires_grad(cos) || requires_grad(sin);
  node->saved[0] = autograd_node::SavedVariable(tables_grad ? q : at::Tensor(), /*is_output=*/false);
  node->saved[1] = autograd_node::SavedVariable(tables_grad ? k : at::Tensor(), /*is_output=*/false);
  node->saved[2] = autograd_node::SavedVariable(cos, /*is_output=*/false);
  node->saved[3] = autograd_node::SavedVariable(sin, /*is_output=*/false);
  node->interleaved = interleaved;
  return {out_q, out_k};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) { m.impl("rotary_embedding", &rotary_embedding_autograd); }

}  // namespace yirage
