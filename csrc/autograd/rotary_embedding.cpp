// Autograd for rotary_embedding in C++ (LibTorch users get gradients too). Forward redispatches below
// Autograd; backward calls yirage::rotary_embedding_backward through the dispatcher. Saved: cos and sin,
// and q and k only when cos or sin requires grad (the input gradients need only the angles, so training
// with fixed tables keeps no extra copy of q and k alive). An output whose gradient is not given, or not
// needed, costs nothing in backward.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "autograd/common.h"

namespace yirage {
namespace {

using torch::autograd::AutogradContext;
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

class RotaryEmbeddingFunction : public torch::autograd::Function<RotaryEmbeddingFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                               const at::Tensor& sin, bool interleaved) {
    at::AutoDispatchBelowADInplaceOrView guard;
    const bool tables_grad = requires_grad(cos) || requires_grad(sin);
    ctx->save_for_backward({tables_grad ? q : at::Tensor(), tables_grad ? k : at::Tensor(), cos, sin});
    ctx->saved_data["interleaved"] = interleaved;
    ctx->set_materialize_grads(false);
    auto [out_q, out_k] = rotary_embedding_op().call(q, k, cos, sin, interleaved);
    return {out_q, out_k};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const bool cos_sin_grad = ctx->needs_input_grad(2) || ctx->needs_input_grad(3);
    // an output's gradient is used for its input's gradient and for the cos/sin gradients
    const auto used = [&](int i) { return grads[i].defined() && (ctx->needs_input_grad(i) || cos_sin_grad); };
    if (!used(0) && !used(1)) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    const auto given = [](bool use, const at::Tensor& t) { return use ? as_optional(t) : std::nullopt; };
    auto [dq, dk, dcos, dsin] =
        call_backward(rotary_embedding_backward_op(), given(used(0), grads[0]), given(used(1), grads[1]),
                      given(cos_sin_grad, saved[0]), given(cos_sin_grad, saved[1]), saved[2], saved[3],
                      ctx->saved_data["interleaved"].toBool(), cos_sin_grad);
    const auto keep = [&](int i, bool computed, at::Tensor& t) {
      return computed && ctx->needs_input_grad(i) ? t : at::Tensor();
    };
    return {keep(0, used(0), dq), keep(1, used(1), dk), keep(2, cos_sin_grad, dcos), keep(3, cos_sin_grad, dsin),
            at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> rotary_embedding_autograd(const at::Tensor& q, const at::Tensor& k,
                                                             const at::Tensor& cos, const at::Tensor& sin,
                                                             bool interleaved) {
  check_no_tangents("rotary_embedding", q, k, cos, sin);
  if (!needs_graph(q, k, cos, sin)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return rotary_embedding_op().call(q, k, cos, sin, interleaved);
  }
  variable_list out = RotaryEmbeddingFunction::apply(q, k, cos, sin, interleaved);
  return {out[0], out[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) { m.impl("rotary_embedding", &rotary_embedding_autograd); }

}  // namespace yirage
