// CPU glue for layer_norm (ops/norm_glue.h, shared with CUDA) and layer_norm_backward: checks, row views, thread
// split, the parameter gradients summed in one row of partial sums per thread. The kernels
// (kernels/cpu/layer_norm.h) are vectorized per ISA and chosen at run time.
#include <ATen/Parallel.h>  // at::get_num_threads, at::get_thread_num
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>

#include "common/cpu_launch.h"
#include "common/cpu_memory.h"
#include "common/rows.h"
#include "kernels/cpu/layer_norm.h"
#include "ops/layer_norm.h"
#include "ops/norm_glue.h"

namespace yirage {
namespace {

namespace k = kernels::cpu;

at::Tensor contiguous_or_none(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? t->contiguous() : at::Tensor();
}

struct LayerNormCpu : CpuGlueBackend {
  static void forward(const char* op, const kernels::LayerNormForward& args) {
    kernels::LayerNormForward p = args;
    p.stream_out = cpu_stream_outputs(2 * p.rows * p.cols * cpu_dtype_size(p.dtype));
    cpu_for_rows(op, p.rows, p.cols, [&](int64_t b, int64_t e) { return k::layer_norm_forward(p, b, e); });
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
    bool weight_grad, bool bias_grad) {
  const char* op = "layer_norm_backward";
  check_layer_norm_backward(grad_out, x, weight, eps);
  const int64_t cols = x.size(-1);
  at::Tensor dx = cpu_empty(x.sizes(), x.options());
  // partial sums of the parameter gradients, one row per task, in the accumulation type
  const auto acc = x.options().dtype(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  const int64_t rows = x.numel() / std::max<int64_t>(cols, 1);
  const ColumnPartials dw_acc(weight_grad, rows, cols, acc), db_acc(bias_grad, rows, cols, acc);
  if (x.numel() > 0) {
    const Rows xr = as_rows(x), gr = as_rows(grad_out);
    const at::Tensor w = contiguous_or_none(weight);
    k::LayerNormBackward p;
    p.grad_out = gr.tensor.const_data_ptr();
    p.grad_out_stride = gr.stride;
    p.x = xr.tensor.const_data_ptr();
    p.x_stride = xr.stride;
    p.weight = w.defined() ? w.const_data_ptr() : nullptr;
    p.grad_x = dx.data_ptr();
    p.rows = x.numel() / cols;
    p.cols = cols;
    p.eps = eps;
    p.dtype = cpu_kernel_dtype(op, x.scalar_type());
    cpu_for_rows(op, p.rows, cols, [&](int64_t b0, int64_t e0) {
      k::LayerNormBackward q = p;
      q.weight_grad_acc = dw_acc.row();
      q.bias_grad_acc = db_acc.row();
      return k::layer_norm_backward(q, b0, e0);
    });
  }
  return {dx, dw_acc.sum(x.scalar_type(), x.options()), db_acc.sum(x.scalar_type(), x.options())};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) {
  LayerNormGlue<LayerNormCpu>::register_forward(m);
  m.impl("layer_norm_backward", &layer_norm_backward_cpu);
}

}  // namespace yirage
