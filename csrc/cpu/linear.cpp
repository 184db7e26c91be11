// CPU glue for linear, linear_forward and linear_backward.
//
// Forward: out = act(x @ weight.T + bias), one allocation: the product goes straight into out (BLAS, see
// cpu/gemm.h) and one fused pass adds the bias and applies the activation while the block is in cache
// (linear_forward also stores z there, for the backward). Backward: one pass dz = grad_out * act'(z) that also
// sums the bias gradient's columns, then grad_x = dz @ weight and grad_weight = dz^T @ x, both BLAS.
#include <ATen/Parallel.h>  // at::get_num_threads, at::get_thread_num
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "common/cpu_launch.h"
#include "common/cpu_memory.h"
#include "common/rows.h"
#include "cpu/gemm.h"
#include "kernels/cpu/linear_epilogue.h"
#include "ops/linear.h"

namespace yirage {
namespace {

namespace k = kernels::cpu;

std::tuple<at::Tensor, at::Tensor> linear_impl(const char* op, const at::Tensor& x, const at::Tensor& weight,
                                               const std::optional<at::Tensor>& bias, Activation act, bool save_pre) {
  const int64_t n = weight.size(0), kdim = weight.size(1);
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end() - 1);
  sizes.push_back(n);
  at::Tensor out = cpu_empty(sizes, x.options());
  at::Tensor pre = save_pre && kernels::activation_needs_pre(act) ? cpu_empty(sizes, x.options())
                                                                    : at::empty({0}, x.options());
  if (out.numel() == 0) return {out, pre};
  const int64_t m = out.numel() / n;
  GemmEpilogue e;
  e.act = act;
  if (bias.has_value() && bias->defined()) e.bias = bias->contiguous();
  if (pre.numel() > 0) e.pre = pre.view({m, n});
  gemm_into(op, out.view({m, n}), x.reshape({m, kdim}), weight.t(), e);
  return {out, pre};
}

at::Tensor linear_cpu(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                      c10::string_view activation) {
  const Activation act = check_linear("linear", x, weight, bias, activation);
  return std::get<0>(linear_impl("linear", x, weight, bias, act, /*save_pre=*/false));
}

std::tuple<at::Tensor, at::Tensor> linear_forward_cpu(const at::Tensor& x, const at::Tensor& weight,
                                                      const std::optional<at::Tensor>& bias,
                                                      c10::string_view activation) {
  const Activation act = check_linear("linear_forward", x, weight, bias, activation);
  return linear_impl("linear_forward", x, weight, bias, act, /*save_pre=*/true);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& saved,
    c10::string_view activation, bool x_grad, bool weight_grad, bool bias_grad) {
  const char* op = "linear_backward";
  const Activation act = check_linear_backward(grad_out, x, weight, saved, activation);
  const int64_t n = weight.size(0), kdim = weight.size(1);
  const int64_t m = c10::multiply_integers(x.sizes().slice(0, x.dim() - 1));
  const auto empty = [&] { return at::empty({0}, x.options()); };
  // dz = grad_out * act'(saved), and the column sums of dz for the bias, in one pass
  at::Tensor dz;
  at::Tensor db = bias_grad ? at::zeros({n}, x.options()) : empty();
  const bool need_dz = x_grad || weight_grad;
  if (act == Activation::none && (!bias_grad || m == 0)) {
    dz = grad_out.reshape({m, n});
  } else if (m > 0 && n > 0) {
    const Rows g = as_rows(grad_out);
    const Rows s = act == Activation::none ? Rows{} : as_rows(*saved);
    if (need_dz && act != Activation::none) dz = cpu_empty({m, n}, x.options());
    else dz = grad_out.reshape({m, n});
    // partial column sums, one row per task, in the accumulation type
    const auto acc = x.options().dtype(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
    const ColumnPartials db_acc(bias_grad, m, n, acc);
    k::LinearActGrad p;
    p.grad_out = g.tensor.const_data_ptr();
    p.grad_stride = g.stride;
    p.saved = s.tensor.defined() ? s.tensor.const_data_ptr() : nullptr;
    p.saved_stride = s.stride;
    p.grad_pre = need_dz && act != Activation::none ? dz.data_ptr() : nullptr;
    p.rows = m;
    p.cols = n;
    p.act = act;
    p.dtype = cpu_kernel_dtype(op, x.scalar_type());
    cpu_for_rows(op, m, n, [&](int64_t b0, int64_t e0) {
      k::LinearActGrad q = p;
      q.bias_grad_acc = db_acc.row();
      return k::linear_act_grad(q, b0, e0);
    });
    if (bias_grad) db = db_acc.sum(x.scalar_type(), x.options());
  } else {
    dz = at::zeros({m, n}, x.options());
  }
  at::Tensor dx = empty(), dw = empty();
  if (x_grad) {
    dx = cpu_empty(x.sizes(), x.options());
    gemm_into(op, dx.view({m, kdim}), dz, weight);
  }
  if (weight_grad) {
    dw = cpu_empty({n, kdim}, x.options());
    gemm_into(op, dw, dz.t(), x.reshape({m, kdim}));
  }
  return {dx, dw, db};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) {
  m.impl("linear", &linear_cpu);
  m.impl("linear_forward", &linear_forward_cpu);
  m.impl("linear_backward", &linear_backward_cpu);
}

}  // namespace yirage
