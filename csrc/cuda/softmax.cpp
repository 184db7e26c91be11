// CUDA glue for softmax, log_softmax and their backward ops: checks, device guard, current stream, the
// (outer, dim, inner) view of each input (kernels/cuda/softmax.h), as the CPU glue builds it.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>

#include "common/cuda_launch.h"
#include "common/rows.h"
#include "kernels/cuda/softmax.h"
#include "ops/softmax.h"

namespace yirage {
namespace {

namespace kc = kernels::cuda;

// t as (outer, dim, inner) with inner contiguous: the tensor to read and its outer and dim strides.
struct SoftmaxCudaView {
  at::Tensor tensor;
  int64_t outer_stride = 0, dim_stride = 0;
};

// The one stride that walks dims [begin, end) of t as a single flattened index (size-1 dims ignored;
// 0 when all have size 1), or none when their strides do not nest.
std::optional<int64_t> softmax_cuda_flat_stride(const at::Tensor& t, int64_t begin, int64_t end) {
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
SoftmaxCudaView softmax_cuda_view(const at::Tensor& t, int64_t dim, int64_t inner) {
  if (inner == 1) {
    const Rows r = as_rows(t.flatten(dim));  // a view: trailing dims have size 1
    return {r.tensor, r.stride, 1};
  }
  const auto outer = softmax_cuda_flat_stride(t, 0, dim), in = softmax_cuda_flat_stride(t, dim + 1, t.dim());
  if (outer && in && *in == 1) return {t, *outer, t.stride(dim)};
  const int64_t d = t.size(dim);
  return {t.contiguous(), d * inner, inner};
}

struct SoftmaxCudaShape {
  int64_t outer = 1, dim = 1, inner = 1;
};

SoftmaxCudaShape softmax_cuda_shape(const at::Tensor& t, int64_t dim) {
  SoftmaxCudaShape s;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) s.outer *= t.size(d);
    else if (d == dim) s.dim = t.size(d);
    else s.inner *= t.size(d);
  }
  return s;
}

at::Tensor softmax_cuda_impl(const char* op, const at::Tensor& x, int64_t dim, bool log) {
  dim = check_softmax(op, x, dim);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  const SoftmaxCudaShape s = softmax_cuda_shape(x, dim);
  const SoftmaxCudaView xv = softmax_cuda_view(x, dim, s.inner);
  kc::SoftmaxForward p;
  p.x = xv.tensor.const_data_ptr();
  p.x_outer_stride = xv.outer_stride;
  p.x_dim_stride = xv.dim_stride;
  p.out = y.data_ptr();
  p.outer = s.outer;
  p.dim = s.dim;
  p.inner = s.inner;
  p.log = log;
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  check_launch(op, kc::softmax_forward(p, current_stream()));
  return y;
}

at::Tensor softmax_cuda_backward_impl(const char* op, const at::Tensor& grad_out, const at::Tensor& out,
                                      int64_t dim, bool log) {
  dim = check_softmax_backward(op, grad_out, out, dim);
  const c10::cuda::CUDAGuard guard(out.device());
  at::Tensor dx = at::empty(out.sizes(), out.options());
  if (out.numel() == 0) return dx;
  const SoftmaxCudaShape s = softmax_cuda_shape(out, dim);
  const SoftmaxCudaView gv = softmax_cuda_view(grad_out, dim, s.inner), ov = softmax_cuda_view(out, dim, s.inner);
  kc::SoftmaxBackward p;
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
  p.dtype = cuda_kernel_dtype(op, out.scalar_type());
  check_launch(op, kc::softmax_backward(p, current_stream()));
  return dx;
}

at::Tensor softmax_cuda(const at::Tensor& x, int64_t dim) { return softmax_cuda_impl("softmax", x, dim, false); }

at::Tensor log_softmax_cuda(const at::Tensor& x, int64_t dim) {
  return softmax_cuda_impl("log_softmax", x, dim, true);
}

at::Tensor softmax_backward_cuda(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  return softmax_cuda_backward_impl("softmax_backward", grad_out, out, dim, false);
}

at::Tensor log_softmax_backward_cuda(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  return softmax_cuda_backward_impl("log_softmax_backward", grad_out, out, dim, true);
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) {
  m.impl("softmax", &softmax_cuda);
  m.impl("log_softmax", &log_softmax_cuda);
  m.impl("softmax_backward", &softmax_backward_cuda);
  m.impl("log_softmax_backward", &log_softmax_backward_cuda);
}

}  // namespace yirage
