// Typed C++ entry points to the yirage ops for LibTorch programs (no Python): each calls the op through the
// PyTorch dispatcher, exactly as torch.ops.yirage.<op> does, so the backend is picked from the tensors' device
// and autograd records the call. The library must be loaded (linked, or dlopen'ed) so that its registrations
// have run; a missing op throws c10::Error naming it.
//
//   #include "yirage/ops.h"
//   at::Tensor y = yirage::rms_norm(x, weight, 1e-6);
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string_view>
#include <tuple>

namespace yirage {

namespace detail {
template <typename Signature>
c10::TypedOperatorHandle<Signature> op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}
using OptTensor = std::optional<at::Tensor>;
}  // namespace detail

inline at::Tensor rms_norm(const at::Tensor& x, const detail::OptTensor& weight = std::nullopt, double eps = 1e-6) {
  static auto h = detail::op<at::Tensor(const at::Tensor&, const detail::OptTensor&, double)>("yirage::rms_norm");
  return h.call(x, weight, eps);
}

inline std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                             const detail::OptTensor& weight = std::nullopt,
                                                             double eps = 1e-6) {
  static auto h = detail::op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                const detail::OptTensor&, double)>(
      "yirage::fused_add_rms_norm");
  return h.call(x, residual, weight, eps);
}

inline at::Tensor layer_norm(const at::Tensor& x, const detail::OptTensor& weight = std::nullopt,
                             const detail::OptTensor& bias = std::nullopt, double eps = 1e-5) {
  static auto h = detail::op<at::Tensor(const at::Tensor&, const detail::OptTensor&, const detail::OptTensor&,
                                        double)>("yirage::layer_norm");
  return h.call(x, weight, bias, eps);
}

inline at::Tensor softmax(const at::Tensor& x, int64_t dim = -1) {
  static auto h = detail::op<at::Tensor(const at::Tensor&, int64_t)>("yirage::softmax");
  return h.call(x, dim);
}

inline at::Tensor log_softmax(const at::Tensor& x, int64_t dim = -1) {
  static auto h = detail::op<at::Tensor(const at::Tensor&, int64_t)>("yirage::log_softmax");
  return h.call(x, dim);
}

inline at::Tensor silu_and_mul(const at::Tensor& x) {
  static auto h = detail::op<at::Tensor(const at::Tensor&)>("yirage::silu_and_mul");
  return h.call(x);
}

inline at::Tensor gelu_and_mul(const at::Tensor& x, c10::string_view approximate = "none") {
  static auto h = detail::op<at::Tensor(const at::Tensor&, c10::string_view)>("yirage::gelu_and_mul");
  return h.call(x, approximate);
}

inline at::Tensor gelu(const at::Tensor& x, c10::string_view approximate = "none") {
  static auto h = detail::op<at::Tensor(const at::Tensor&, c10::string_view)>("yirage::gelu");
  return h.call(x, approximate);
}

inline std::tuple<at::Tensor, at::Tensor> rotary_embedding(const at::Tensor& q, const at::Tensor& k,
                                                           const at::Tensor& cos, const at::Tensor& sin,
                                                           bool interleaved = false) {
  static auto h = detail::op<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                const at::Tensor&, const at::Tensor&, bool)>(
      "yirage::rotary_embedding");
  return h.call(q, k, cos, sin, interleaved);
}

inline at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  static auto h = detail::op<at::Tensor(const at::Tensor&, const at::Tensor&)>("yirage::matmul");
  return h.call(a, b);
}

inline at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const detail::OptTensor& bias = std::nullopt,
                         c10::string_view activation = "none") {
  static auto h = detail::op<at::Tensor(const at::Tensor&, const at::Tensor&, const detail::OptTensor&,
                                        c10::string_view)>("yirage::linear");
  return h.call(x, weight, bias, activation);
}

inline at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal = false,
                            std::optional<double> scale = std::nullopt) {
  static auto h = detail::op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
                                        std::optional<double>)>("yirage::attention");
  return h.call(q, k, v, causal, scale);
}

}  // namespace yirage
