// Portable silu_and_mul / gelu_and_mul / gelu and their backward ops with ATen ops (fp32 math, fp64 for
// fp64), registered for MPS and PrivateUse1. Also the readable statement of what the ops compute.
#include <ATen/ATen.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include "ops/activation.h"
#include "portable/common.h"
#include "portable/register.h"

namespace yirage {
namespace {

using portable::acc_type;

// (a, b) = (x[..., :d], x[..., d:]) in the accumulation type
std::tuple<at::Tensor, at::Tensor> halves(const at::Tensor& x) {
  const c10::SymInt d = x.sym_size(-1) / 2;
  return {x.narrow_symint(-1, 0, d).to(acc_type(x)), x.narrow_symint(-1, d, d).to(acc_type(x))};
}

at::Tensor silu_and_mul_portable(const at::Tensor& x) {
  check_gated("silu_and_mul", x);
  const auto [a, b] = halves(x);
  return (at::silu(a) * b).to(x.scalar_type()).contiguous();
}

at::Tensor gelu_and_mul_portable(const at::Tensor& x, c10::string_view approximate) {
  check_gated("gelu_and_mul", x);
  check_approximate("gelu_and_mul", approximate);
  const auto [a, b] = halves(x);
  return (at::gelu(a, approximate) * b).to(x.scalar_type()).contiguous();
}

at::Tensor gelu_portable(const at::Tensor& x, c10::string_view approximate) {
  check_gelu("gelu", x, approximate);
  return at::gelu(x.to(acc_type(x)), approximate).to(x.scalar_type()).contiguous();
}

// grad_x = [g * b * act'(a), g * act(a)]
at::Tensor silu_and_mul_backward_portable(const at::Tensor& grad_out, const at::Tensor& x) {
  check_gated_backward("silu_and_mul_backward", grad_out, x);
  const auto [a, b] = halves(x);
  const at::Tensor g = grad_out.to(acc_type(x));
  return at::cat({at::silu_backward(g * b, a), g * at::silu(a)}, -1).to(x.scalar_type()).contiguous();
}

at::Tensor gelu_and_mul_backward_portable(const at::Tensor& grad_out, const at::Tensor& x,
                                          c10::string_view approximate) {
  check_gated_backward("gelu_and_mul_backward", grad_out, x);
  check_approximate("gelu_and_mul_backward", approximate);
  const auto [a, b] = halves(x);
  const at::Tensor g = grad_out.to(acc_type(x));
  return at::cat({at::gelu_backward(g * b, a, approximate), g * at::gelu(a, approximate)}, -1)
      .to(x.scalar_type())
      .contiguous();
}

at::Tensor gelu_backward_portable(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  check_gelu_backward(grad_out, x, approximate);
  return at::gelu_backward(grad_out.to(acc_type(x)), x.to(acc_type(x)), approximate)
      .to(x.scalar_type())
      .contiguous();
}

void register_activation_kernels(PortableKernels& k) {
  k.impl("silu_and_mul", &silu_and_mul_portable);
  k.impl("gelu_and_mul", &gelu_and_mul_portable);
  k.impl("gelu", &gelu_portable);
  k.impl("silu_and_mul_backward", &silu_and_mul_backward_portable);
  k.impl("gelu_and_mul_backward", &gelu_and_mul_backward_portable);
  k.impl("gelu_backward", &gelu_backward_portable);
}

}  // namespace

YIRAGE_PORTABLE_KERNELS(register_activation_kernels)

}  // namespace yirage
