// Portable layer_norm / layer_norm_backward with ATen ops (fp32 accumulation, fp64 for fp64), registered
// for MPS and PrivateUse1. Also the readable statement of what the ops compute.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "ops/layer_norm.h"
#include "portable/common.h"
#include "portable/register.h"

namespace yirage {
namespace {

using portable::acc_type;

// (xhat, rstd) in the accumulation type: xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps)
std::tuple<at::Tensor, at::Tensor> normalize(const at::Tensor& x, double eps) {
  const at::Tensor xf = x.to(acc_type(x));
  const at::Tensor centered = xf - xf.mean(-1, /*keepdim=*/true);
  const at::Tensor rstd = (centered.square().mean(-1, /*keepdim=*/true) + eps).rsqrt();
  return {centered * rstd, rstd};
}

at::Tensor layer_norm_portable(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                               const std::optional<at::Tensor>& bias, double eps) {
  check_layer_norm("layer_norm", x, weight, bias, eps);
  at::Tensor y = std::get<0>(normalize(x, eps));
  if (has(weight)) y = y * weight->to(acc_type(x));
  if (has(bias)) y = y + bias->to(acc_type(x));
  return y.to(x.scalar_type()).contiguous();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_portable(
    const at::Tensor& grad_out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
    bool weight_grad, bool bias_grad) {
  check_layer_norm_backward(grad_out, x, weight, eps);
  const int64_t n = x.size(-1);
  const auto [xhat, rstd] = normalize(x, eps);
  const at::Tensor gf = grad_out.to(acc_type(x));
  const at::Tensor gw = has(weight) ? gf * weight->to(acc_type(x)) : gf;
  // dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat))
  const at::Tensor dx = rstd * (gw - gw.mean(-1, true) - xhat * (gw * xhat).mean(-1, true));
  const auto rows_sum = [&](const at::Tensor& t) { return t.reshape({-1, n}).sum(0).to(x.scalar_type()); };
  return {dx.to(x.scalar_type()).contiguous(),
          weight_grad ? rows_sum(gf * xhat) : at::empty({0}, x.options()),
          bias_grad ? rows_sum(gf) : at::empty({0}, x.options())};
}

void register_layer_norm_kernels(PortableKernels& k) {
  k.impl("layer_norm", &layer_norm_portable);
  k.impl("layer_norm_backward", &layer_norm_backward_portable);
}

}  // namespace

YIRAGE_PORTABLE_KERNELS(register_layer_norm_kernels)

}  // namespace yirage
