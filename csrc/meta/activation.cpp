// Meta (shape and dtype) kernels for silu_and_mul, gelu_and_mul, gelu and their backward ops: the real
// kernels' checks, contiguous outputs, symbolic sizes.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include "ops/activation.h"

namespace yirage {
namespace {

at::Tensor silu_and_mul_meta(const at::Tensor& x) {
  check_gated("silu_and_mul", x);
  return at::empty_symint(gated_out_sizes(x), x.options());
}

at::Tensor gelu_and_mul_meta(const at::Tensor& x, c10::string_view approximate) {
  check_gated("gelu_and_mul", x);
  check_approximate("gelu_and_mul", approximate);
  return at::empty_symint(gated_out_sizes(x), x.options());
}

at::Tensor gelu_meta(const at::Tensor& x, c10::string_view approximate) {
  check_gelu("gelu", x, approximate);
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor silu_and_mul_backward_meta(const at::Tensor& grad_out, const at::Tensor& x) {
  check_gated_backward("silu_and_mul_backward", grad_out, x);
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor gelu_and_mul_backward_meta(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  check_gated_backward("gelu_and_mul_backward", grad_out, x);
  check_approximate("gelu_and_mul_backward", approximate);
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor gelu_backward_meta(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  check_gelu_backward(grad_out, x, approximate);
  return at::empty_symint(x.sym_sizes(), x.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Meta, m) {
  m.impl("silu_and_mul", &silu_and_mul_meta);
  m.impl("gelu_and_mul", &gelu_and_mul_meta);
  m.impl("gelu", &gelu_meta);
  m.impl("silu_and_mul_backward", &silu_and_mul_backward_meta);
  m.impl("gelu_and_mul_backward", &gelu_and_mul_backward_meta);
  m.impl("gelu_backward", &gelu_backward_meta);
}

}  // namespace yirage
