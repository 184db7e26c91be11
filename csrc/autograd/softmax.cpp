// Autograd for softmax and log_softmax in C++ (LibTorch users get gradients too). Forward redispatches
// below Autograd and records a SoftmaxNode (autograd/node.h); backward calls yirage::softmax_backward /
// log_softmax_backward through the dispatcher.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/library.h>

#include "autograd/common.h"
#include "autograd/node.h"

namespace yirage {
namespace {

using torch::autograd::variable_list;

using ForwardSig = at::Tensor(const at::Tensor&, int64_t);
using BackwardSig = at::Tensor(const at::Tensor&, const at::Tensor&, int64_t);

template <bool Log>
const auto& forward_op() {
  static const auto op = find_op<ForwardSig>(Log ? "yirage::log_softmax" : "yirage::softmax");
  return op;
}

template <bool Log>
const auto& backward_op() {
  static const auto op = find_op<BackwardSig>(Log ? "yirage::log_softmax_backward" : "yirage::softmax_backward");
  return op;
}

// grad_fn of the output; saved: the output only (both gradients are functions of it), never the input.
template <bool Log>
struct SoftmaxNode : autograd_node::SavedNode<1> {
  int64_t dim = 0;
  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined() || !should_compute_output(0)) return {at::Tensor()};
    const auto saved = unpack_saved();
    return {call_backward(backward_op<Log>(), grads[0], saved[0], dim)};
  }
  std::string name() const override { return Log ? "YirageLogSoftmaxBackward" : "YirageSoftmaxBackward"; }
};

template <bool Log>
at::Tensor softmax_autograd(const at::Tensor& x, int64_t dim) {
  check_no_tangents(Log ? "log_softmax" : "softmax", x);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = forward_op<Log>().call(x, dim);
  }
  if (!needs_graph(x)) return out;
  auto node = autograd_node::connect<SoftmaxNode<Log>>({out}, x);
  node->saved[0] = autograd_node::SavedVariable(out, /*is_output=*/true);
  node->dim = dim;
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) {
  m.impl("softmax", &softmax_autograd<false>);
  m.impl("log_softmax", &softmax_autograd<true>);
}

}  // namespace yirage
