// softmax / log_softmax: the argument checks every backend runs (CPU, CUDA, portable, Meta), and the
// wrapped dim. A 0-dim x behaves as torch.softmax treats it: as one element, dim in [-1, 0].
#pragma once

#include <ATen/core/Tensor.h>

#include "common/checks.h"

namespace yirage {

// dim in [-max(x.dim(), 1), max(x.dim(), 1) - 1], returned in [0, max(x.dim(), 1) - 1].
inline int64_t wrap_softmax_dim(const char* op, const at::Tensor& x, int64_t dim) {
  const int64_t n = x.dim() > 0 ? x.dim() : 1;
  TORCH_CHECK_INDEX(dim >= -n && dim < n, "yirage.", op, ": dim must be in the range [", -n, ", ", n - 1,
                    "] for x with ", x.dim(), " dimension", x.dim() == 1 ? "" : "s", ", got ", dim);
  return dim < 0 ? dim + n : dim;
}

// x: any shape, floating. Returns the wrapped dim.
inline int64_t check_softmax(const char* op, const at::Tensor& x, int64_t dim) {
  check_defined(op, "x", x);
  check_float(op, "x", x);
  return wrap_softmax_dim(op, x, dim);
}

// grad_out and out (the forward's output): same shape, dtype and device. Returns the wrapped dim.
inline int64_t check_softmax_backward(const char* op, const at::Tensor& grad_out, const at::Tensor& out,
                                      int64_t dim) {
  check_defined(op, "out", out);
  check_float(op, "out", out);
  check_defined(op, "grad_out", grad_out);
  check_same_dtype(op, "grad_out", grad_out, "out", out);
  check_same_device(op, "grad_out", grad_out, "out", out);
  check_same_shape(op, "grad_out", grad_out, "out", out);
  return wrap_softmax_dim(op, out, dim);
}

}  // namespace yirage
