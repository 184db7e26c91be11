// Meta (shape and dtype) kernels for rms_norm, fused_add_rms_norm and rms_norm_backward. They run the
// same checks as the real kernels, so torch.compile and LibTorch users see the same errors at trace time.
// Outputs are contiguous, as every backend returns them. Sizes stay symbolic (SymInt).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops/rms_norm.h"

namespace yirage {
namespace {

at::Tensor rms_norm_meta(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  check_rms_norm("rms_norm", x, weight, eps);
  return at::empty_symint(x.sym_sizes(), x.options());
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm_meta(const at::Tensor& x, const at::Tensor& residual,
                                                           const std::optional<at::Tensor>& weight, double eps) {
  check_rms_norm("fused_add_rms_norm", x, weight, eps, &residual);
  return {at::empty_symint(x.sym_sizes(), x.options()), at::empty_symint(x.sym_sizes(), x.options())};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward_meta(const at::Tensor& grad_out, const at::Tensor& x,
                                                          const std::optional<at::Tensor>& weight, double eps,
                                                          const std::optional<at::Tensor>& grad_add,
                                                          bool weight_grad) {
  check_rms_norm_backward(grad_out, x, weight, eps, grad_add);
  c10::SymInt n = weight_grad ? x.sym_size(-1) : c10::SymInt(0);
  return {at::empty_symint(x.sym_sizes(), x.options()), at::empty_symint({n}, x.options())};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Meta, m) {
  m.impl("rms_norm", &rms_norm_meta);
  m.impl("fused_add_rms_norm", &fused_add_rms_norm_meta);
  m.impl("rms_norm_backward", &rms_norm_backward_meta);
}

}  // namespace yirage
