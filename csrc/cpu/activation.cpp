// CPU glue for silu_and_mul, gelu_and_mul, gelu and their backward ops: checks, row views, thread split
// over flat output elements. The kernels (kernels/cpu/activation.h) are vectorized per ISA and chosen at
// run time. Inputs are read in place when their rows have one stride (rows.h); any other layout (e.g. a
// transposed x) is copied to a contiguous tensor first.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/string_view.h>
#include <torch/library.h>

#include <vector>

#include "common/cpu_launch.h"
#include "common/cpu_memory.h"
#include "common/rows.h"
#include "kernels/cpu/activation.h"
#include "ops/activation.h"

namespace yirage {
namespace {

namespace k = kernels::cpu;

k::Activation gelu_kind(const char* op, c10::string_view approximate) {
  return check_approximate(op, approximate) ? k::Activation::gelu_tanh : k::Activation::gelu;
}

// silu for the SwiGLU ops (approximate == nullptr), gelu's variant otherwise; checked after x.
k::Activation gated_kind(const char* op, const c10::string_view* approximate) {
  return approximate ? gelu_kind(op, *approximate) : k::Activation::silu;
}

// Runs fn(begin, end) over flat output elements on torch's intra-op threads (~32K elements per task).
template <typename Fn>
void cpu_for_elements(const char* op, int64_t numel, const Fn& fn) {
  cpu_for_rows(op, numel, 1, fn);
}

// An elementwise operand as rows: any shape (0-dim included) whose rows have one stride; a contiguous
// tensor is one long row.
struct Elementwise {
  Rows rows;
  int64_t cols = 0;
};

Elementwise elementwise_rows(const at::Tensor& t) {
  const at::Tensor v = t.dim() == 0 ? t.reshape({1}) : t;
  return {as_rows(v), v.size(-1)};
}

at::Tensor gated_forward(const char* op, const at::Tensor& x, const c10::string_view* approximate) {
  check_gated(op, x);
  const k::Activation act = gated_kind(op, approximate);
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() /= 2;
  at::Tensor y = at::empty(sizes, x.options());
  if (y.numel() == 0) return y;
  advise_huge_pages(y);
  const Rows xr = as_rows(x);
  k::ActivationForward p;
  p.x = xr.tensor.const_data_ptr();
  p.x_stride = xr.stride;
  p.out = y.data_ptr();
  p.cols = sizes.back();
  p.rows = y.numel() / p.cols;
  p.act = act;
  p.gated = true;
  p.dtype = cpu_kernel_dtype(op, x.scalar_type());
  cpu_for_elements(op, y.numel(), [&](int64_t b, int64_t e) { return k::activation_forward(p, b, e); });
  return y;
}

at::Tensor gated_backward(const char* op, const at::Tensor& grad_out, const at::Tensor& x,
                          const c10::string_view* approximate) {
  check_gated_backward(op, grad_out, x);
  const k::Activation act = gated_kind(op, approximate);
  at::Tensor dx = at::empty(x.sizes(), x.options());
  if (dx.numel() == 0) return dx;
  advise_huge_pages(dx);
  const Rows xr = as_rows(x), gr = as_rows(grad_out);
  k::ActivationBackward p;
  p.grad_out = gr.tensor.const_data_ptr();
  p.grad_out_stride = gr.stride;
  p.x = xr.tensor.const_data_ptr();
  p.x_stride = xr.stride;
  p.grad_x = dx.data_ptr();
  p.cols = x.size(-1) / 2;
  p.rows = x.numel() / x.size(-1);
  p.act = act;
  p.gated = true;
  p.dtype = cpu_kernel_dtype(op, x.scalar_type());
  cpu_for_elements(op, p.rows * p.cols, [&](int64_t b, int64_t e) { return k::activation_backward(p, b, e); });
  return dx;
}

at::Tensor silu_and_mul_cpu(const at::Tensor& x) {
  return gated_forward("silu_and_mul", x, nullptr);
}

at::Tensor gelu_and_mul_cpu(const at::Tensor& x, c10::string_view approximate) {
  return gated_forward("gelu_and_mul", x, &approximate);
}

at::Tensor silu_and_mul_backward_cpu(const at::Tensor& grad_out, const at::Tensor& x) {
  return gated_backward("silu_and_mul_backward", grad_out, x, nullptr);
}

at::Tensor gelu_and_mul_backward_cpu(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  return gated_backward("gelu_and_mul_backward", grad_out, x, &approximate);
}

at::Tensor gelu_cpu(const at::Tensor& x, c10::string_view approximate) {
  const char* op = "gelu";
  check_gelu(op, x, approximate);
  at::Tensor y = at::empty(x.sizes(), x.options());
  if (y.numel() == 0) return y;
  advise_huge_pages(y);
  const Elementwise xe = elementwise_rows(x);
  const bool flat = xe.rows.stride == xe.cols;  // contiguous: one row of numel elements
  k::ActivationForward p;
  p.x = xe.rows.tensor.const_data_ptr();
  p.cols = flat ? y.numel() : xe.cols;
  p.x_stride = flat ? p.cols : xe.rows.stride;
  p.rows = y.numel() / p.cols;
  p.out = y.data_ptr();
  p.act = gelu_kind(op, approximate);
  p.dtype = cpu_kernel_dtype(op, x.scalar_type());
  cpu_for_elements(op, y.numel(), [&](int64_t b, int64_t e) { return k::activation_forward(p, b, e); });
  return y;
}

at::Tensor gelu_backward_cpu(const at::Tensor& grad_out, const at::Tensor& x, c10::string_view approximate) {
  const char* op = "gelu_backward";
  check_gelu_backward(grad_out, x, approximate);
  at::Tensor dx = at::empty(x.sizes(), x.options());
  if (dx.numel() == 0) return dx;
  advise_huge_pages(dx);
  const Elementwise xe = elementwise_rows(x), ge = elementwise_rows(grad_out);
  const bool flat = xe.rows.stride == xe.cols && ge.rows.stride == ge.cols;
  k::ActivationBackward p;
  p.grad_out = ge.rows.tensor.const_data_ptr();
  p.x = xe.rows.tensor.const_data_ptr();
  p.cols = flat ? dx.numel() : xe.cols;
  p.grad_out_stride = flat ? p.cols : ge.rows.stride;
  p.x_stride = flat ? p.cols : xe.rows.stride;
  p.rows = dx.numel() / p.cols;
  p.grad_x = dx.data_ptr();
  p.act = gelu_kind(op, approximate);
  p.dtype = cpu_kernel_dtype(op, x.scalar_type());
  cpu_for_elements(op, dx.numel(), [&](int64_t b, int64_t e) { return k::activation_backward(p, b, e); });
  return dx;
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) {
  m.impl("silu_and_mul", &silu_and_mul_cpu);
  m.impl("gelu_and_mul", &gelu_and_mul_cpu);
  m.impl("gelu", &gelu_cpu);
  m.impl("silu_and_mul_backward", &silu_and_mul_backward_cpu);
  m.impl("gelu_and_mul_backward", &gelu_and_mul_backward_cpu);
  m.impl("gelu_backward", &gelu_backward_cpu);
}

}  // namespace yirage
