// CPU glue for softmax, log_softmax and their backward ops: checks, the (outer, dim, inner) view of each
// input, the thread split. The kernels (kernels/cpu/softmax.h) are vectorized per ISA, chosen at run time.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>

#include "common/cpu_launch.h"
#include "common/cpu_memory.h"
#include "common/rows.h"
#include "kernels/cpu/softmax.h"
#include "ops/softmax.h"

namespace yirage {
namespace {

namespace k = kernels::cpu;

// t as (outer, dim, inner) with inner contiguous: the tensor to read and its outer and dim strides.
struct View3 {
  at::Tensor tensor;
  int64_t outer_stride = 0, dim_stride = 0;
};

// The one stride that walks dims [begin, end) of t as a single flattened index (size-1 dims ignored;
// 0 when all have size 1), or none when their strides do not nest.
std::optional<int64_t> flat_stride(const at::Tensor& t, int64_t begin, int64_t end) {
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
View3 view3(const at::Tensor& t, int64_t dim, int64_t inner) {
  if (inner == 1) {
    const Rows r = as_rows(t.flatten(dim));  // a view: trailing dims have size 1
    return {r.tensor, r.stride, 1};
  }
  const auto outer = flat_stride(t, 0, dim), in = flat_stride(t, dim + 1, t.dim());
  if (outer && in && *in == 1) return {t, *outer, t.stride(dim)};
  const int64_t d = t.size(dim);
  return {t.contiguous(), d * inner, inner};
}

struct Shape3 {
  int64_t outer = 1, dim = 1, inner = 1;
};

Shape3 shape3(const at::Tensor& t, int64_t dim) {
  Shape3 s;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) s.outer *= t.size(d);
    else if (d == dim) s.dim = t.size(d);
    else s.inner *= t.size(d);
  }
  return s;
}

at::Tensor softmax_impl(const char* op, const at::Tensor& x, int64_t dim, bool log) {
  dim = check_softmax(op, x, dim);
  at::Tensor y = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  advise_huge_pages(y);
  const Shape3 s = shape3(x, dim);
  const View3 xv = view3(x, dim, s.inner);
  k::SoftmaxForward p;
  p.x = xv.tensor.const_data_ptr();
  p.x_outer_stride = xv.outer_stride;
  p.x_dim_stride = xv.dim_stride;
  p.out = y.data_ptr();
  p.outer = s.outer;
  p.dim = s.dim;
  p.inner = s.inner;
  p.log = log;
  p.dtype = cpu_kernel_dtype(op, x.scalar_type());
  const k::SoftmaxTasks tasks = k::softmax_tasks(s.outer, s.dim, s.inner, p.dtype);
  cpu_for_rows(op, tasks.count, tasks.elems, [&](int64_t b, int64_t e) { return k::softmax_forward(p, b, e); });
  return y;
}

at::Tensor softmax_backward_impl(const char* op, const at::Tensor& grad_out, const at::Tensor& out, int64_t dim,
                                 bool log) {
  dim = check_softmax_backward(op, grad_out, out, dim);
  at::Tensor dx = at::empty(out.sizes(), out.options());
  if (out.numel() == 0) return dx;
  advise_huge_pages(dx);
  const Shape3 s = shape3(out, dim);
  const View3 gv = view3(grad_out, dim, s.inner), ov = view3(out, dim, s.inner);
  k::SoftmaxBackward p;
  p.grad_out = gv.tensor.const_data_ptr();
  p.grad_out_outer_stride = gv.outer_stride;
  p.grad_out_dim_stride = gv.dim_stride;
  p.out = ov.tensor.const_data_ptr();
  p.out_outer_stride = ov.outer_stride;
  p.out_dim_stride = ov.dim_stride;
  p.grad_x = dx.data_ptr();
  p.outer = s.outer;
  p.dim = s.dim;
  p.inner = s.inner;
  p.log = log;
  p.dtype = cpu_kernel_dtype(op, out.scalar_type());
  const k::SoftmaxTasks tasks = k::softmax_tasks(s.outer, s.dim, s.inner, p.dtype);
  cpu_for_rows(op, tasks.count, tasks.elems, [&](int64_t b, int64_t e) { return k::softmax_backward(p, b, e); });
  return dx;
}

at::Tensor softmax_cpu(const at::Tensor& x, int64_t dim) { return softmax_impl("softmax", x, dim, false); }

at::Tensor log_softmax_cpu(const at::Tensor& x, int64_t dim) { return softmax_impl("log_softmax", x, dim, true); }

at::Tensor softmax_backward_cpu(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  return softmax_backward_impl("softmax_backward", grad_out, out, dim, false);
}

at::Tensor log_softmax_backward_cpu(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  return softmax_backward_impl("log_softmax_backward", grad_out, out, dim, true);
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) {
  m.impl("softmax", &softmax_cpu);
  m.impl("log_softmax", &log_softmax_cpu);
  m.impl("softmax_backward", &softmax_backward_cpu);
  m.impl("log_softmax_backward", &log_softmax_backward_cpu);
}

}  // namespace yirage
