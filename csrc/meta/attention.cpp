// Meta (shape and dtype) kernels for attention, attention_forward and attention_backward: the real
// kernels' checks, contiguous outputs, symbolic sizes.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <tuple>

#include "ops/attention.h"

namespace yirage {
namespace {

at::Tensor attention_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                          std::optional<double> scale) {
  check_attention("attention", q, k, v, scale);
  return at::empty_symint(q.sym_sizes(), q.options());
}

std::tuple<at::Tensor, at::Tensor> attention_forward_meta(const at::Tensor& q, const at::Tensor& k,
                                                          const at::Tensor& v, bool causal,
                                                          std::optional<double> scale) {
  check_attention("attention_forward", q, k, v, scale);
  const auto acc = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  return {at::empty_symint(q.sym_sizes(), q.options()),
          at::empty_symint({q.sym_size(0), q.sym_size(1), q.sym_size(2)}, q.options().dtype(acc))};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward_meta(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, std::optional<double> scale) {
  check_attention_backward(grad_out, q, k, v, out, lse, scale);
  return {at::empty_symint(q.sym_sizes(), q.options()), at::empty_symint(k.sym_sizes(), k.options()),
          at::empty_symint(v.sym_sizes(), v.options())};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Meta, m) {
  m.impl("attention", &attention_meta);
  m.impl("attention_forward", &attention_forward_meta);
  m.impl("attention_backward", &attention_backward_meta);
}

}  // namespace yirage
