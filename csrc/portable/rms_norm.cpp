// Portable rms_norm / fused_add_rms_norm / rms_norm_backward, written with ATen ops (fp32 accumulation,
// fp64 for fp64). Registered for MPS and PrivateUse1: any device that implements the core ATen ops
// runs them. This is also the readable statement of what the ops compute.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "ops/rms_norm.h"
#include "portable/common.h"
#include "portable/register.h"

namespace yirage {
namespace {

using portable::acc_type;

// y = x * rsqrt(mean(x^2, -1) + eps) * weight, in the accumulation type; returns (y_acc, rstd)
std::tuple<at::Tensor, at::Tensor> normalize(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                                             double eps) {
  const at::Tensor xf = x.to(acc_type(x));
  at::Tensor rstd = (xf.square().mean(-1, /*keepdim=*/true) + eps).rsqrt();
  at::Tensor y = xf * rstd;
  if (has(weight)) y = y * weight->to(acc_type(x));
  return {y, rstd};
}

at::Tensor rms_norm_portable(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  check_rms_norm("rms_norm", x, weight, eps);
  return std::get<0>(normalize(x, weight, eps)).to(x.scalar_type()).contiguous();
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm_portable(const at::Tensor& x, const at::Tensor& residual,
                                                               const std::optional<at::Tensor>& weight,
                                                               double eps) {
  check_rms_norm("fused_add_rms_norm", x, weight, eps, &residual);
  // h is rounded to the input dtype before the norm, as the unfused code does
  const at::Tensor h = (x.to(acc_type(x)) + residual.to(acc_type(x))).to(x.scalar_type()).contiguous();
  return {std::get<0>(normalize(h, weight, eps)).to(x.scalar_type()).contiguous(), h};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward_portable(const at::Tensor& grad_out, const at::Tensor& x,
                                                              const std::optional<at::Tensor>& weight, double eps,
                                                              const std::optional<at::Tensor>& grad_add,
                                                              bool weight_grad) {
  check_rms_norm_backward(grad_out, x, weight, eps, grad_add);
  const int64_t n = x.size(-1);
  const at::Tensor xf = x.to(acc_type(x)), gf = grad_out.to(acc_type(x));
  const at::Tensor rstd = (xf.square().mean(-1, /*keepdim=*/true) + eps).rsqrt();
  const at::Tensor gw = has(weight) ? gf * weight->to(acc_type(x)) : gf;
  // dx = rstd * g*w - x * rstd^3 * sum(g*w*x) / N
  at::Tensor dx = gw * rstd - xf * (rstd.pow(3) * (gw * xf).sum(-1, /*keepdim=*/true) / n);
  if (has(grad_add)) dx = dx + grad_add->to(acc_type(x));
  at::Tensor dw;
  if (weight_grad) {
    dw = x.dim() == 1 ? gf * xf * rstd : (gf * xf * rstd).reshape({-1, n}).sum(0);
    dw = dw.to(x.scalar_type()).contiguous();
  } else {
    dw = at::empty({0}, x.options());
  }
  return {dx.to(x.scalar_type()).contiguous(), dw};
}

void register_rms_norm_kernels(PortableKernels& k) {
  k.impl("rms_norm", &rms_norm_portable);
  k.impl("fused_add_rms_norm", &fused_add_rms_norm_portable);
  k.impl("rms_norm_backward", &rms_norm_backward_portable);
}

}  // namespace

YIRAGE_PORTABLE_KERNELS(register_rms_norm_kernels)

}  // namespace yirage
