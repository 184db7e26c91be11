// Meta (shape and dtype) kernels for rotary_embedding and rotary_embedding_backward: the real kernels'
// checks, contiguous outputs, symbolic sizes.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops/rotary_embedding.h"

namespace yirage {
namespace {

using OptTensor = std::optional<at::Tensor>;

std::tuple<at::Tensor, at::Tensor> rotary_embedding_meta(const at::Tensor& q, const at::Tensor& k,
                                                         const at::Tensor& cos, const at::Tensor& sin,
                                                         bool interleaved) {
  check_rotary_embedding("rotary_embedding", q, k, cos, sin);
  return {at::empty_symint(q.sym_sizes(), q.options()), at::empty_symint(k.sym_sizes(), k.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> rotary_embedding_backward_meta(
    const OptTensor& grad_q, const OptTensor& grad_k, const OptTensor& q, const OptTensor& k, const at::Tensor& cos,
    const at::Tensor& sin, bool interleaved, bool cos_sin_grad) {
  const at::Tensor* ref = check_rotary_embedding_backward(grad_q, grad_k, q, k, cos, sin, cos_sin_grad);
  const auto opts = ref != nullptr ? ref->options() : cos.options();
  const auto grad = [&](const OptTensor& g) {
    return has(g) ? at::empty_symint(g->sym_sizes(), opts) : at::empty_symint({0}, opts);
  };
  const auto table_grad = [&](const at::Tensor& t) {
    return at::empty_symint(cos_sin_grad ? t.sym_sizes() : c10::SymIntArrayRef({0}), t.options());
  };
  return {grad(grad_q), grad(grad_k), table_grad(cos), table_grad(sin)};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Meta, m) {
  m.impl("rotary_embedding", &rotary_embedding_meta);
  m.impl("rotary_embedding_backward", &rotary_embedding_backward_meta);
}

}  // namespace yirage
