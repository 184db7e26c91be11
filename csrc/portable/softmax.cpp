// Portable softmax / log_softmax and their backward ops with ATen ops (fp32 accumulation, fp64 for fp64),
// registered for MPS and PrivateUse1. Also the readable statement of what the ops compute.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "ops/softmax.h"
#include "portable/register.h"

namespace yirage {
namespace {

at::Tensor acc(const at::Tensor& t) { return t.to(t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat); }

// x - max(x, dim): the shift that keeps exp finite (NaN for a row of all -inf, as torch gives)
at::Tensor shifted(const at::Tensor& x, int64_t dim) {
  const at::Tensor xf = acc(x);
  return xf - xf.amax(dim, /*keepdim=*/true);
}

at::Tensor softmax_portable(const at::Tensor& x, int64_t dim) {
  dim = check_softmax("softmax", x, dim);
  const at::Tensor e = shifted(x, dim).exp();
  return (e / e.sum(dim, /*keepdim=*/true)).to(x.scalar_type()).contiguous();
}

at::Tensor log_softmax_portable(const at::Tensor& x, int64_t dim) {
  dim = check_softmax("log_softmax", x, dim);
  const at::Tensor z = shifted(x, dim);
  return (z - z.exp().sum(dim, /*keepdim=*/true).log()).to(x.scalar_type()).contiguous();
}

at::Tensor softmax_backward_portable(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  dim = check_softmax_backward("softmax_backward", grad_out, out, dim);
  const at::Tensor g = acc(grad_out), o = acc(out);
  return (o * (g - (g * o).sum(dim, /*keepdim=*/true))).to(out.scalar_type()).contiguous();
}

at::Tensor log_softmax_backward_portable(const at::Tensor& grad_out, const at::Tensor& out, int64_t dim) {
  dim = check_softmax_backward("log_softmax_backward", grad_out, out, dim);
  const at::Tensor g = acc(grad_out);
  return (g - acc(out).exp() * g.sum(dim, /*keepdim=*/true)).to(out.scalar_type()).contiguous();
}

void register_softmax_kernels(PortableKernels& k) {
  k.impl("softmax", &softmax_portable);
  k.impl("log_softmax", &log_softmax_portable);
  k.impl("softmax_backward", &softmax_backward_portable);
  k.impl("log_softmax_backward", &log_softmax_backward_portable);
}

}  // namespace

YIRAGE_PORTABLE_KERNELS(register_softmax_kernels)

}  // namespace yirage
