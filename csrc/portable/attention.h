// The portable attention forward and backward (ATen ops; portable/attention.cpp), for backends whose native
// kernels cover only part of the op: the CUDA glue runs them for dtypes, head dims and GPUs its tensor-core
// kernels do not cover. Both run check_attention / check_attention_backward first.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace yirage {

// (out, lse) of attention, `op` naming the caller in error messages.
std::tuple<at::Tensor, at::Tensor> attention_forward_portable(const char* op, const at::Tensor& q,
                                                              const at::Tensor& k, const at::Tensor& v, bool causal,
                                                              std::optional<double> scale);

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward_portable(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, std::optional<double> scale);

}  // namespace yirage
