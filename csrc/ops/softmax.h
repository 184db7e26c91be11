// softmax / log_softmax: the argument checks every backend runs (CPU, CUDA, portable, Meta), the
// wrapped dim, and the (outer, dim, inner) view of each input that the CPU and CUDA glue hand their
// kernels. A 0-dim x behaves as torch.softmax treats it: as one element, dim in [-1, 0].
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "common/checks.h"
#include "common/rows.h"

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

// t's sizes folded around dim: the product of the dims before it, its size, the product after it.
struct SoftmaxShape {
  int64_t outer = 1, dim = 1, inner = 1;
};

inline SoftmaxShape softmax_shape(const at::Tensor& t, int64_t dim) {
  SoftmaxShape s;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) s.outer *= t.size(d);
    else if (d == dim) s.dim = t.size(d);
    else s.inner *= t.size(d);
  }
  return s;
}

// t as (outer, dim, inner) with inner contiguous: the tensor to read and its outer and dim strides.
struct SoftmaxView {
  at::Tensor tensor;
  int64_t outer_stride = 0, dim_stride = 0;
};

// The one stride that walks dims [begin, end) of t as a single flattened index (size-1 dims ignored;
// 0 when all have size 1), or none when their strides do not nest.
inline std::optional<int64_t> softmax_flat_stride(const at::Tensor& t, int64_t begin, int64_t end) {
  std::optional<int64_t> stride;
  int64_t next = 0;
  for (int64_t d = end - 1; d >= begin; --d) {
    if (t.size(d) == 1) continue;
    if (!stride) {
      stride = t.stride(d);
      next = t.stride(d) * t.size(d);
    } else if (t.stride(d) == next) {
      next *= t.size(d);
    } else {
      return std::nullopt;
    }
  }
  return stride.value_or(0);
}

// Read in place where the layout allows (slices, padded rows, broadcast outer or dim strides); otherwise a
// contiguous copy. inner == 1 (dim is the last non-trivial dim; 0-dim x included) is the row case of
// as_rows.
inline SoftmaxView softmax_view(const at::Tensor& t, int64_t dim, int64_t inner) {
  if (inner == 1) {
    const Rows r = as_rows(t.flatten(dim));  // a view: trailing dims have size 1
    return {r.tensor, r.stride, 1};
  }
  const auto outer = softmax_flat_stride(t, 0, dim), in = softmax_flat_stride(t, dim + 1, t.dim());
  if (outer && in && *in == 1) return {t, *outer, t.stride(dim)};
  const int64_t d = t.size(dim);
  return {t.contiguous(), d * inner, inner};
}

}  // namespace yirage
