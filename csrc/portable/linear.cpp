// Portable linear / linear_forward / linear_backward with ATen ops (fp32 accumulation, fp64 for fp64),
// registered for MPS and PrivateUse1. Also the readable statement of what the ops compute.
#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <tuple>

#include "ops/linear.h"
#include "portable/common.h"
#include "portable/register.h"

namespace yirage {
namespace {

using portable::acc_type;

at::Tensor activate(const at::Tensor& z, Activation act) {
  switch (act) {
    case Activation::none: return z;
    case Activation::relu: return at::relu(z);
    case Activation::gelu: return at::gelu(z, "none");
    case Activation::gelu_tanh: return at::gelu(z, "tanh");
    case Activation::silu: return at::silu(z);
  }
  return z;
}

// (out, z) in the accumulation type: z = x @ weight.T + bias, out = act(z)
std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& x, const at::Tensor& weight,
                                           const std::optional<at::Tensor>& bias, Activation act) {
  const at::ScalarType acc = acc_type(x);
  const std::optional<at::Tensor> b = bias.has_value() && bias->defined() ? std::optional(bias->to(acc)) : std::nullopt;
  const at::Tensor z = at::linear(x.to(acc), weight.to(acc), b);
  return {activate(z, act), z};
}

at::Tensor linear_portable(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           c10::string_view activation) {
  const Activation act = check_linear("linear", x, weight, bias, activation);
  return std::get<0>(forward(x, weight, bias, act)).to(x.scalar_type()).contiguous();
}

std::tuple<at::Tensor, at::Tensor> linear_forward_portable(const at::Tensor& x, const at::Tensor& weight,
                                                           const std::optional<at::Tensor>& bias,
                                                           c10::string_view activation) {
  const Activation act = check_linear("linear_forward", x, weight, bias, activation);
  const auto [out, z] = forward(x, weight, bias, act);
  return {out.to(x.scalar_type()).contiguous(), kernels::activation_needs_pre(act)
                                                    ? z.to(x.scalar_type()).contiguous()
                                                    : at::empty({0}, x.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward_portable(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& saved,
    c10::string_view activation, bool x_grad, bool weight_grad, bool bias_grad) {
  const Activation act = check_linear_backward(grad_out, x, weight, saved, activation);
  const at::ScalarType acc = acc_type(x);
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t m = c10::multiply_integers(x.sizes().slice(0, x.dim() - 1));
  const at::Tensor g = grad_out.to(acc);
  at::Tensor dz = g;  // grad_out * act'(z)
  switch (act) {
    case Activation::none: break;
    case Activation::relu: dz = at::threshold_backward(g, saved->to(acc), 0); break;
    case Activation::gelu: dz = at::gelu_backward(g, saved->to(acc), "none"); break;
    case Activation::gelu_tanh: dz = at::gelu_backward(g, saved->to(acc), "tanh"); break;
    case Activation::silu: dz = at::silu_backward(g, saved->to(acc)); break;
  }
  const at::Tensor dz2 = dz.reshape({m, n});
  const auto empty = [&] { return at::empty({0}, x.options()); };
  return {x_grad ? dz.matmul(weight.to(acc)).to(x.scalar_type()).contiguous() : empty(),
          weight_grad ? dz2.t().mm(x.reshape({m, k}).to(acc)).to(x.scalar_type()) : empty(),
          bias_grad ? dz2.sum(0).to(x.scalar_type()) : empty()};
}

void register_linear_kernels(PortableKernels& k) {
  k.impl("linear", &linear_portable);
  k.impl("linear_forward", &linear_forward_portable);
  k.impl("linear_backward", &linear_backward_portable);
}

}  // namespace

YIRAGE_PORTABLE_KERNELS(register_linear_kernels)

}  // namespace yirage
