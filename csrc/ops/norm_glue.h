// The forward glue of rms_norm, fused_add_rms_norm and layer_norm, shared by the CPU and CUDA backends: checks,
// outputs, row views and the kernels' parameters (kernels/norm.h). The backward glue stays per backend (the CPU
// sums the parameter gradients in per-thread rows, CUDA in per-block partials reduced by the kernel). A backend
// supplies, as static members of `Backend` (as for ops/activation_glue.h):
//   guard(x)              an object that keeps x's device current while it lives (CPU: nothing)
//   empty(sizes, opts)    a new output (CPU: cpu_empty, common/cpu_memory.h; CUDA: at::empty)
//   dtype(op, t)          the kernels' DType for t (a clear error for others)
//   forward(op, p)        runs the kernel over p.rows rows (overloaded on kernels::RmsNormForward and
//                         kernels::LayerNormForward)
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "common/rows.h"
#include "kernels/norm.h"
#include "ops/layer_norm.h"
#include "ops/rms_norm.h"

namespace yirage {

template <typename Backend>
struct RmsNormGlue {
  // y = rms_norm(x) (residual null), or (y, h) with h = x + residual and y = rms_norm(h).
  static std::tuple<at::Tensor, at::Tensor> forward(const char* op, const at::Tensor& x, const at::Tensor* residual,
                                                    const std::optional<at::Tensor>& weight, double eps) {
    check_rms_norm(op, x, weight, eps, residual);
    const auto guard = Backend::guard(x);
    at::Tensor y = Backend::empty(x.sizes(), x.options());
    at::Tensor h = residual ? Backend::empty(x.sizes(), x.options()) : at::Tensor();
    if (x.numel() == 0) return {y, h};
    const Rows xr = as_rows(x);
    const Rows rr = residual ? as_rows(*residual) : Rows{};
    const at::Tensor w = has(weight) ? weight->contiguous() : at::Tensor();
    kernels::RmsNormForward p;
    p.x = xr.tensor.const_data_ptr();
    p.x_stride = xr.stride;
    p.residual = residual ? rr.tensor.const_data_ptr() : nullptr;
    p.residual_stride = rr.stride;
    p.weight = w.defined() ? w.const_data_ptr() : nullptr;
    p.out = y.data_ptr();
    p.residual_out = residual ? h.data_ptr() : nullptr;
    p.cols = x.size(-1);
    p.rows = x.numel() / p.cols;
    p.eps = eps;
    p.dtype = Backend::dtype(op, x.scalar_type());
    Backend::forward(op, p);
    return {y, h};
  }

  static at::Tensor rms_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
    return std::get<0>(forward("rms_norm", x, nullptr, weight, eps));
  }

  static std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                                               const std::optional<at::Tensor>& weight, double eps) {
    return forward("fused_add_rms_norm", x, &residual, weight, eps);
  }

  // The two forward ops' kernels for the backend's dispatch key.
  static void register_forward(torch::Library& m) {
    m.impl("rms_norm", &rms_norm);
    m.impl("fused_add_rms_norm", &fused_add_rms_norm);
  }
};

template <typename Backend>
struct LayerNormGlue {
  static at::Tensor layer_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                               const std::optional<at::Tensor>& bias, double eps) {
    const char* op = "layer_norm";
    check_layer_norm(op, x, weight, bias, eps);
    const auto guard = Backend::guard(x);
    at::Tensor y = Backend::empty(x.sizes(), x.options());
    if (x.numel() == 0) return y;
    const Rows xr = as_rows(x);
    const at::Tensor w = has(weight) ? weight->contiguous() : at::Tensor();
    const at::Tensor b = has(bias) ? bias->contiguous() : at::Tensor();
    kernels::LayerNormForward p;
    p.x = xr.tensor.const_data_ptr();
    p.x_stride = xr.stride;
    p.weight = w.defined() ? w.const_data_ptr() : nullptr;
    p.bias = b.defined() ? b.const_data_ptr() : nullptr;
    p.out = y.data_ptr();
    p.cols = x.size(-1);
    p.rows = x.numel() / p.cols;
    p.eps = eps;
    p.dtype = Backend::dtype(op, x.scalar_type());
    Backend::forward(op, p);
    return y;
  }

  static void register_forward(torch::Library& m) { m.impl("layer_norm", &layer_norm); }
};

}  // namespace yirage
