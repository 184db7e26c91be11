// CPU glue for rms_norm, fused_add_rms_norm (ops/norm_glue.h, shared with CUDA) and rms_norm_backward: checks,
// row views, thread split, the weight gradient summed in one row of partial sums per thread. The kernels
// (kernels/cpu/rms_norm.h) are vectorized per ISA and chosen at run time.
#include <ATen/Parallel.h>  // at::get_num_threads, at::get_thread_num
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>

#include "common/cpu_launch.h"
#include "common/cpu_memory.h"
#include "common/rows.h"
#include "kernels/cpu/rms_norm.h"
#include "ops/rms_norm.h"
#include "ops/norm_glue.h"

namespace yirage {
namespace {

namespace k = kernels::cpu;

struct RmsNormCpu : CpuGlueBackend {
  static void forward(const char* op, const kernels::RmsNormForward& args) {
    kernels::RmsNormForward p = args;
    p.stream_out = cpu_stream_outputs((p.residual ? 4 : 2) * p.rows * p.cols * cpu_dtype_size(p.dtype));
    cpu_for_rows(op, p.rows, p.cols, [&](int64_t b, int64_t e) { return k::rms_norm_forward(p, b, e); });
  }
};

std::tuple<at::Tensor, at::Tensor> rms_norm_backward_cpu(const at::Tensor& grad_out, const at::Tensor& x,
                                                         const std::optional<at::Tensor>& weight, double eps,
                                                         const std::optional<at::Tensor>& grad_add,
                                                         bool weight_grad) {
  const char* op = "rms_norm_backward";
  check_rms_norm_backward(grad_out, x, weight, eps, grad_add);
  const int64_t cols = x.size(-1);
  at::Tensor dx = cpu_empty(x.sizes(), x.options());
  const bool has_add = grad_add.has_value() && grad_add->defined();
  // fp32 partial sums of the weight gradient, one row per task (fp64 for fp64 inputs)
  const auto acc_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const ColumnPartials dw_acc(weight_grad, x.numel() / std::max<int64_t>(cols, 1), cols,
                              x.options().dtype(acc_type));
  if (x.numel() > 0) {
    const Rows xr = as_rows(x), gr = as_rows(grad_out);
    const Rows ar = has_add ? as_rows(*grad_add) : Rows{};
    const at::Tensor w = weight.has_value() && weight->defined() ? weight->contiguous() : at::Tensor();
    k::RmsNormBackward p;
    p.grad_out = gr.tensor.const_data_ptr();
    p.grad_out_stride = gr.stride;
    p.x = xr.tensor.const_data_ptr();
    p.x_stride = xr.stride;
    p.weight = w.defined() ? w.const_data_ptr() : nullptr;
    p.grad_add = has_add ? ar.tensor.const_data_ptr() : nullptr;
    p.grad_add_stride = ar.stride;
    p.grad_x = dx.data_ptr();
    p.rows = x.numel() / cols;
    p.cols = cols;
    p.eps = eps;
    p.dtype = cpu_kernel_dtype(op, x.scalar_type());
    cpu_for_rows(op, p.rows, cols, [&](int64_t b, int64_t e) {
      k::RmsNormBackward q = p;
      q.weight_grad_acc = dw_acc.row();
      return k::rms_norm_backward(q, b, e);
    });
  }
  return {dx, dw_acc.sum(x.scalar_type(), x.options())};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) {
  RmsNormGlue<RmsNormCpu>::register_forward(m);
  m.impl("rms_norm_backward", &rms_norm_backward_cpu);
}

}  // namespace yirage
