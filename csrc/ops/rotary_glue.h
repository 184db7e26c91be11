// The glue of rotary_embedding and rotary_embedding_backward, shared by the CPU and CUDA backends: checks,
// outputs, the (batch, seq, head) strides of each input (no copy for the usual layouts: contiguous, slices of a
// fused qkv tensor, (B, H, S, D) transposed to (B, S, H, D), broadcast cos/sin; ops/rotary_embedding.h) and the
// kernels' parameters (kernels/rotary.h). cos/sin gradients: per-token sums from the kernel, summed over the
// broadcast leading dims with at::sum (deterministic). An input with no elements is left out of the kernel's
// parameters (heads = 0). A backend supplies, as static members of `Backend` (as for ops/activation_glue.h):
//   guard(t)              an object that keeps t's device current while it lives (CPU: nothing)
//   empty(sizes, opts)    a new output (CPU: cpu_empty, common/cpu_memory.h; CUDA: at::empty)
//   dtype(op, t)          the kernels' DType for t (a clear error for others)
//   forward(op, p), backward(op, p)   runs the kernel over the batch * seq tokens
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "kernels/rotary.h"
#include "ops/rotary_embedding.h"

namespace yirage {

template <typename Backend>
struct RotaryGlue {
  using OptTensor = std::optional<at::Tensor>;

  // Shapes, dtypes and tables; x is q (or what stands for it in backward).
  static kernels::RotaryParams params(const char* op, const at::Tensor& x, const RotaryStrided& cos,
                                      const RotaryStrided& sin, bool interleaved) {
    kernels::RotaryParams p;
    p.seq = x.size(-3);
    p.batch = p.seq > 0 ? rotary_tokens(x) / p.seq : 0;
    p.head_dim = x.size(-1);
    p.half = cos.t.size(-1);
    p.interleaved = interleaved;
    p.dtype = Backend::dtype(op, x.scalar_type());
    p.cos_dtype = Backend::dtype(op, cos.t.scalar_type());
    p.cos = cos.t.const_data_ptr();
    p.sin = sin.t.const_data_ptr();
    p.cos_stride_b = cos.stride_b;
    p.cos_stride_s = cos.t.stride(-2);
    p.sin_stride_b = sin.stride_b;
    p.sin_stride_s = sin.t.stride(-2);
    return p;
  }

  static void set_input(kernels::RotaryInput& in, const RotaryStrided& x, const at::Tensor& out) {
    in.x = x.t.const_data_ptr();
    in.heads = x.t.size(-2);
    in.stride_b = x.stride_b;
    in.stride_s = x.t.stride(-3);
    in.stride_h = x.t.stride(-2);
    in.out = out.data_ptr();
  }

  static void set_saved(kernels::RotaryInput& in, const RotaryStrided& x) {
    in.saved = x.t.const_data_ptr();
    in.saved_stride_b = x.stride_b;
    in.saved_stride_s = x.t.stride(-3);
    in.saved_stride_h = x.t.stride(-2);
  }

  static at::Tensor new_like(const at::Tensor& t) {
    return Backend::empty(t.sizes(), t.options());
  }

  static std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                                    const at::Tensor& sin, bool interleaved) {
    const char* op = "rotary_embedding";
    check_rotary_embedding(op, q, k, cos, sin);
    const auto guard = Backend::guard(q);
    at::Tensor out_q = new_like(q), out_k = new_like(k);
    if (out_q.numel() == 0 && out_k.numel() == 0) return {out_q, out_k};
    const RotaryStrided qv = rotary_strided(q, 3), kv = rotary_strided(k, 3);
    const RotaryStrided cv = rotary_table(cos, q), sv = rotary_table(sin, q);
    kernels::RotaryParams p = params(op, q, cv, sv, interleaved);
    if (out_q.numel() > 0) set_input(p.q, qv, out_q);
    if (out_k.numel() > 0) set_input(p.k, kv, out_k);
    Backend::forward(op, p);
    return {out_q, out_k};
  }

  static std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward(
      const OptTensor& grad_q, const OptTensor& grad_k, const OptTensor& q, const OptTensor& k, const at::Tensor& cos,
      const at::Tensor& sin, bool interleaved, bool cos_sin_grad) {
    const char* op = "rotary_embedding_backward";
    const at::Tensor* ref = check_rotary_embedding_backward(grad_q, grad_k, q, k, cos, sin, cos_sin_grad);
    const auto guard = Backend::guard(cos);
    const auto opts = ref != nullptr ? ref->options() : cos.options();
    at::Tensor dq = has(grad_q) ? new_like(*grad_q) : at::empty({0}, opts);
    at::Tensor dk = has(grad_k) ? new_like(*grad_k) : at::empty({0}, opts);
    const auto no_grad = [&] { return at::empty({0}, cos.options()); };
    if (ref == nullptr) {  // no gradient and no input: cos/sin get zeros
      return {dq, dk, cos_sin_grad ? at::zeros(cos.sizes(), cos.options()) : no_grad(),
              cos_sin_grad ? at::zeros(sin.sizes(), sin.options()) : no_grad()};
    }
    const int64_t tokens = rotary_tokens(*ref), half = cos.size(-1);
    const bool with_q = has(grad_q) && grad_q->numel() > 0, with_k = has(grad_k) && grad_k->numel() > 0;
    // per-token cos/sin gradients (summed over heads by the kernel, which writes every (token, i) when it sees any
    // head; zeros otherwise), summed over the broadcast leading dims below
    const auto acc = cos.options().dtype(ref->scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
    const auto buffer = [&] {
      return with_q || with_k ? at::empty({tokens, half}, acc) : at::zeros({tokens, half}, acc);
    };
    at::Tensor gcos = cos_sin_grad ? buffer() : at::Tensor();
    at::Tensor gsin = cos_sin_grad ? buffer() : at::Tensor();
    if (tokens > 0 && (with_q || with_k)) {
      const RotaryStrided cv = rotary_table(cos, *ref), sv = rotary_table(sin, *ref);
      kernels::RotaryParams p = params(op, *ref, cv, sv, interleaved);
      RotaryStrided gqv, gkv, qv, kv;
      if (with_q) {
        gqv = rotary_strided(*grad_q, 3);
        set_input(p.q, gqv, dq);
        if (cos_sin_grad) set_saved(p.q, qv = rotary_strided(*q, 3));
      }
      if (with_k) {
        gkv = rotary_strided(*grad_k, 3);
        set_input(p.k, gkv, dk);
        if (cos_sin_grad) set_saved(p.k, kv = rotary_strided(*k, 3));
      }
      p.grad_cos = cos_sin_grad ? gcos.data_ptr() : nullptr;
      p.grad_sin = cos_sin_grad ? gsin.data_ptr() : nullptr;
      Backend::backward(op, p);
    }
    if (!cos_sin_grad) return {dq, dk, no_grad(), no_grad()};
    std::vector<int64_t> sizes(ref->sizes().begin(), ref->sizes().end() - 2);
    sizes.push_back(half);
    const auto reduce = [&](const at::Tensor& g, const at::Tensor& like) {
      return g.view(sizes).sum_to_size(like.sizes()).to(like.scalar_type()).contiguous();
    };
    return {dq, dk, reduce(gcos, cos), reduce(gsin, sin)};
  }

  // The two ops' kernels for the backend's dispatch key.
  static void register_kernels(torch::Library& m) {
    m.impl("rotary_embedding", &forward);
    m.impl("rotary_embedding_backward", &backward);
  }
};

}  // namespace yirage
