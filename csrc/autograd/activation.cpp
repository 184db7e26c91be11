// Autograd for silu_and_mul, gelu_and_mul and gelu in C++ (LibTorch users get gradients too). Forward
// redispatches below Autograd and records a node (autograd/node.h); backward calls the yirage::*_backward op through the dispatcher, so every
// backend supplies its own backward kernel. Saved: x only.
//
// The backward ops have Autograd kernels as well: without a graph to record they redispatch to the
// backend kernel (the usual case: the engine runs backward with grad mode off); when a graph is needed
// (double backward, create_graph=True) they compute the same gradient with differentiable ATen ops in
// fp32 (fp64 for fp64), so second derivatives are torch's own formulas rather than silently missing.
#include <ATen/TensorOperators.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/sigmoid.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include <string>

#include "autograd/common.h"
#include "autograd/node.h"
#include "ops/activation.h"

namespace yirage {
namespace {

using torch::autograd::variable_list;
using GatedSig = at::Tensor(const at::Tensor&);
using GeluSig = at::Tensor(const at::Tensor&, c10::string_view);
using GatedBackwardSig = at::Tensor(const at::Tensor&, const at::Tensor&);
using GeluBackwardSig = at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view);

const auto& silu_and_mul_op() {
  static const auto op = find_op<GatedSig>("yirage::silu_and_mul");
  return op;
}
const auto& gelu_and_mul_op() {
  static const auto op = find_op<GeluSig>("yirage::gelu_and_mul");
  return op;
}
const auto& gelu_op() {
  static const auto op = find_op<GeluSig>("yirage::gelu");
  return op;
}
const auto& silu_and_mul_backward_op() {
  static const auto op = find_op<GatedBackwardSig>("yirage::silu_and_mul_backward");
  return op;
}
const auto& gelu_and_mul_backward_op() {
  static const auto op = find_op<GeluBackwardSig>("yirage::gelu_and_mul_backward");
  return op;
}
const auto& gelu_backward_op() {
  static const auto op = find_op<GeluBackwardSig>("yirage::gelu_backward");
  return op;
}

// grad_fn of the output; saved: x only.
struct SiluAndMulNode : autograd_node::SavedNode<1> {
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined() || !should_compute_output(0)) return {at::Tensor()};
    // through the backward op's own Autograd kernel (not call_backward): with create_graph or forward-mode
    // tangents it computes a differentiable composite
    return {silu_and_mul_backward_op().call(grads[0], unpack_saved()[0])};
  }
  std::string name() const override { return "YirageSiluAndMulBackward"; }
};

template <bool Gated>
struct GeluNode : autograd_node::SavedNode<1> {
  std::string approximate;
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined() || !should_compute_output(0)) return {at::Tensor()};
    const at::Tensor x = unpack_saved()[0];
    if constexpr (Gated) return {gelu_and_mul_backward_op().call(grads[0], x, approximate)};
    return {gelu_backward_op().call(grads[0], x, approximate)};
  }
  std::string name() const override { return Gated ? "YirageGeluAndMulBackward" : "YirageGeluBackward"; }
};

at::Tensor silu_and_mul_autograd(const at::Tensor& x) {
  check_no_tangents("silu_and_mul", x);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = silu_and_mul_op().call(x);
  }
  if (!needs_graph(x)) return out;
  auto node = autograd_node::connect<SiluAndMulNode>({out}, x);
  node->saved[0] = autograd_node::SavedVariable(x, /*is_output=*/false);
  return out;
}

template <bool Gated>
at::Tensor gelu_autograd(const at::Tensor& x, c10::string_view approximate) {
  check_no_tangents(Gated ? "gelu_and_mul" : "gelu", x);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = Gated ? gelu_and_mul_op().call(x, approximate) : gelu_op().call(x, approximate);
  }
  if (!needs_graph(x)) return out;
  auto node = autograd_node::connect<GeluNode<Gated>>({out}, x);
  node->saved[0] = autograd_node::SavedVariable(x, /*is_output=*/false);
  node->approximate = std::string(approximate);
  return out;
}

// ---- backward ops: differentiable ATen composites when a graph is needed ----

at::ScalarType acc_type(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

// [g * b * act'(a), g * act(a)] with act'(a) * v = act_backward(v, a)
template <typename Act, typename ActBackward>
at::Tensor gated_backward_composite(const at::Tensor& grad_out, const at::Tensor& x, const Act& act,
                                    const ActBackward& act_backward) {
  const c10::SymInt d = x.sym_size(-1) / 2;
  const at::Tensor a = x.narrow_symint(-1, 0, d).to(acc_type(x)), b = x.narrow_symint(-1, d, d).to(acc_type(x));
  const at::Tensor g = grad_out.to(acc_type(x));
  return at::cat({act_backward(g * b, a), g * act(a)}, -1).to(x.scalar_type());
}

at::Tensor silu_and_mul_backward_autograd(const at::Tensor& grad_out, const at::Tensor& x) {
  if (!needs_graph(grad_out, x) && !any_tangent(grad_out, x)) {  // tangents: the composite has a jvp
    at::AutoDispatchBelowADInplaceOrView guard;
    return silu_and_mul_backward_op().call(grad_out, x);
  }
  check_gated_backward("silu_and_mul_backward", grad_out, x);
  // silu'(a) = s (1 + a (1 - s)), s = sigmoid(a), spelled out: aten::silu_backward has no derivative
  const auto silu_backward = [](const at::Tensor& v, const at::Tensor& a) {
    const at::Tensor s = at::sigmoid(a);
    return v * s * (1 + a * (1 - s));
  };
  return gated_backward_composite(grad_out, x, [](const at::Tensor& a) { return at::silu(a); }, silu_backward);
}

at::Tensor gelu_and_mul_backward_autograd(const at::Tensor& grad_out, const at::Tensor& x,
                                          c10::string_view approximate) {
  if (!needs_graph(grad_out, x) && !any_tangent(grad_out, x)) {  // tangents: the composite has a jvp
    at::AutoDispatchBelowADInplaceOrView guard;
    return gelu_and_mul_backward_op().call(grad_out, x, approximate);
  }
  check_gated_backward("gelu_and_mul_backward", grad_out, x);
  check_approximate("gelu_and_mul_backward", approximate);
  return gated_backward_composite(
      grad_out, x, [&](const at::Tensor& a) { return at::gelu(a, approximate); },
      [&](const at::Tensor& v, const at::Tensor& a) { return at::gelu_backward(v, a, approximate); });
}

at::Tensor gelu_backward_autograd(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  if (!needs_graph(grad_out, x) && !any_tangent(grad_out, x)) {  // tangents: the composite has a jvp
    at::AutoDispatchBelowADInplaceOrView guard;
    return gelu_backward_op().call(grad_out, x, approximate);
  }
  check_gelu_backward(grad_out, x, approximate);
  return at::gelu_backward(grad_out.to(acc_type(x)), x.to(acc_type(x)), approximate).to(x.scalar_type()).contiguous();
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) {
  m.impl("silu_and_mul", &silu_and_mul_autograd);
  m.impl("gelu_and_mul", &gelu_autograd<true>);
  m.impl("gelu", &gelu_autograd<false>);
  m.impl("silu_and_mul_backward", &silu_and_mul_backward_autograd);
  m.impl("gelu_and_mul_backward", &gelu_and_mul_backward_autograd);
  m.impl("gelu_backward", &gelu_backward_autograd);
}

}  // namespace yirage
