// Shared by the Autograd kernels: typed dispatcher handles, and the test for whether a call needs a
// graph node at all (when no input requires grad, the kernel redispatches directly: a graph node costs
// microseconds per call, a torch::autograd::Function several, most of a small op; see node.h).
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <optional>
#include <utility>

namespace yirage {

using OptTensor = std::optional<at::Tensor>;

template <typename Sig>
c10::TypedOperatorHandle<Sig> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

inline OptTensor as_optional(const at::Tensor& t) { return t.defined() ? OptTensor(t) : std::nullopt; }

inline bool requires_grad(const at::Tensor& t) { return t.defined() && t.requires_grad(); }
inline bool requires_grad(const OptTensor& t) { return t.has_value() && requires_grad(*t); }

template <typename... Ts>
bool needs_graph(const Ts&... inputs) {
  return c10::GradMode::is_enabled() && (requires_grad(inputs) || ...);
}

// Whether an input carries a forward-mode tangent (torch.func.jvp, torch.autograd.forward_ad).
inline bool has_tangent(const at::Tensor& t) { return t.defined() && t._fw_grad(/*level=*/0).defined(); }
inline bool has_tangent(const OptTensor& t) { return t.has_value() && has_tangent(*t); }

template <typename... Ts>
bool any_tangent(const Ts&... inputs) {
  return (has_tangent(inputs) || ...);
}

// The ops have no forward-mode derivatives: raise rather than drop a tangent. (Below the Autograd key the
// kernels return a result without one, which torch.func.jvp reads as a zero tangent.)
template <typename... Ts>
void check_no_tangents(const char* op, const Ts&... inputs) {
  TORCH_CHECK_NOT_IMPLEMENTED(!any_tangent(inputs...), "yirage.", op,
                              ": forward-mode AD (torch.func.jvp, torch.autograd.forward_ad) is not supported; "
                              "use reverse mode (Tensor.backward, torch.autograd.grad)");
}

// Calls a backward op from an autograd backward. Without create_graph (grad mode off, the usual case) nothing
// can differentiate its result, so the call goes straight below the Autograd key, past the not-implemented
// fallback registered there (a boxed call: about a microsecond of a small op's backward); with create_graph it
// goes through that fallback, so a second backward raises instead of giving zeros.
template <typename Sig, typename... Args>
auto call_backward(const c10::TypedOperatorHandle<Sig>& op, Args&&... args) {
  if (c10::GradMode::is_enabled()) return op.call(std::forward<Args>(args)...);
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(std::forward<Args>(args)...);
}

}  // namespace yirage
