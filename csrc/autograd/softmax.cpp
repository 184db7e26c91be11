// Autograd for softmax and log_softmax in C++ (LibTorch users get gradients too). Forward redispatches
// below Autograd; backward calls yirage::softmax_backward / log_softmax_backward through the dispatcher.
// Saved: the output only (both gradients are functions of it), never the input.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "autograd/common.h"

namespace yirage {
namespace {

using torch::autograd::AutogradContext;
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

template <bool Log>
class SoftmaxFunction : public torch::autograd::Function<SoftmaxFunction<Log>> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim) {
    at::AutoDispatchBelowADInplaceOrView guard;
    at::Tensor out = forward_op<Log>().call(x, dim);
    ctx->save_for_backward({out});  // saved as an output: no reference cycle
    ctx->saved_data["dim"] = dim;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    return {call_backward(backward_op<Log>(), grads[0], saved[0], ctx->saved_data["dim"].toInt()), at::Tensor()};
  }
};

template <bool Log>
at::Tensor softmax_autograd(const at::Tensor& x, int64_t dim) {
  check_no_tangents(Log ? "log_softmax" : "softmax", x);
  if (!needs_graph(x)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return forward_op<Log>().call(x, dim);
  }
  return SoftmaxFunction<Log>::apply(x, dim);
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Autograd, m) {
  m.impl("softmax", &softmax_autograd<false>);
  m.impl("log_softmax", &softmax_autograd<true>);
}

}  // namespace yirage
