// View a tensor as rows of its last dimension, for kernels that take (pointer, row stride) inputs.
#pragma once

#include <ATen/core/Tensor.h>

namespace yirage {

struct Rows {
  at::Tensor tensor;   // the tensor to read (the input itself, or a contiguous copy)
  int64_t stride = 0;  // elements between consecutive rows
};

// The input itself when its last dim is contiguous and its leading dims collapse into one row
// index with a single stride (broadcast leading dims with stride 0 included: rows are only read);
// otherwise a contiguous copy.
inline Rows as_rows(const at::Tensor& t) {
  const int64_t n = t.size(-1);
  bool ok = n <= 1 || t.stride(-1) == 1;
  int64_t row_stride = n, next = -1;
  for (int64_t d = t.dim() - 2; ok && d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (next < 0) {
      row_stride = t.stride(d);
      next = row_stride * t.size(d);
    } else if (t.stride(d) == next) {
      next *= t.size(d);
    } else {
      ok = false;
    }
  }
  if (!ok) return {t.contiguous(), n};
  return {t, row_stride};
}

}  // namespace yirage
