// Meta (shape and dtype) kernels for softmax, log_softmax and their backward ops: the real kernels'
// checks, contiguous outputs of the input's shape, symbolic sizes.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops/softmax.h"

namespace yirage {
namespace {

at::Tensor softmax_meta(const at::Tensor& x, int64_t dim) {
  check_softmax("softmax", x, dim);
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor log_softmax_meta(const at::Tensor& x, int64_t dim) {
  check_softmax("log_softmax", x, dim);
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor softmax_backward_meta(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  check_softmax_backward("softmax_backward", grad_out, out, dim);
  return at::empty_symint(out.sym_sizes(), out.options());
}

at::Tensor log_softmax_backward_meta(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  check_softmax_backward("log_softmax_backward", grad_out, out, dim);
  return at::empty_symint(out.sym_sizes(), out.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, Meta, m) {
  m.impl("softmax", &softmax_meta);
  m.impl("log_softmax", &log_softmax_meta);
  m.impl("softmax_backward", &softmax_backward_meta);
  m.impl("log_softmax_backward", &log_softmax_backward_meta);
}

}  // namespace yirage
