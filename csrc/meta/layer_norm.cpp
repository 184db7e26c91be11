// Meta (shape and dtype) kernels for layer_norm and layer_norm_backward: the real kernels' checks,
// contiguous outputs, symbolic sizes.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops/layer_norm.h"

namespace yirage {
namespace {

at::Tensor layer_norm_meta(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                           const std::optional<at::Tensor>& bias, double eps) {
  check_layer_norm("layer_norm", x, weight, bias, eps);
  return at::empty_symint(x.sym_sizes(), x.options());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_meta(
    const at::Tensor& grad_out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
    bool weight_grad, bool bias_grad) {
  check_layer_norm_backward(grad_out, x, weight, eps);
  const c10::SymInt n = x.sym_size(-1);
  return {at::empty_symint(x.sym_sizes(), x.options()),
          at::empty_symint({weight_grad ? n : c10::SymInt(0)}, x.options()),
          at::empty_symint({bias_grad ? n : c10::SymInt(0)}, x.options())};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Meta, m) {
  m.impl("layer_norm", &layer_norm_meta);
  m.impl("layer_norm_backward", &layer_norm_backward_meta);
}

}  // namespace yirage
