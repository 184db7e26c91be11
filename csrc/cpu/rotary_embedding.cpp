// CPU glue for rotary_embedding and rotary_embedding_backward: checks, (batch, seq, head) strides of the
// inputs (no copy for the usual layouts: contiguous, slices of a fused qkv tensor, (B, H, S, D) transposed
// to (B, S, H, D), broadcast cos/sin), thread split over tokens. The kernels (kernels/cpu/rotary.h) are
// vectorized per ISA and chosen at run time.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "common/cpu_launch.h"
#include "common/cpu_memory.h"
#include "kernels/cpu/rotary.h"
#include "ops/rotary_embedding.h"

namespace yirage {
namespace {

namespace kcpu = kernels::cpu;
using OptTensor = std::optional<at::Tensor>;

// Shapes, dtypes and tables; x is q (or what stands for it in backward).
kcpu::RotaryParams base_params(const char* op, const at::Tensor& x, const RotaryStrided& cos,
                               const RotaryStrided& sin, bool interleaved) {
  kcpu::RotaryParams p;
  p.seq = x.size(-3);
  p.batch = p.seq > 0 ? rotary_tokens(x) / p.seq : 0;
  p.head_dim = x.size(-1);
  p.half = cos.t.size(-1);
  p.interleaved = interleaved;
  p.dtype = cpu_kernel_dtype(op, x.scalar_type());
  p.cos_dtype = cpu_kernel_dtype(op, cos.t.scalar_type());
  p.cos = cos.t.const_data_ptr();
  p.sin = sin.t.const_data_ptr();
  p.cos_stride_b = cos.stride_b;
  p.cos_stride_s = cos.t.stride(-2);
  p.sin_stride_b = sin.stride_b;
  p.sin_stride_s = sin.t.stride(-2);
  return p;
}

void set_input(kcpu::RotaryInput& in, const RotaryStrided& x, const at::Tensor& out) {
  in.x = x.t.const_data_ptr();
  in.heads = x.t.size(-2);
  in.stride_b = x.stride_b;
  in.stride_s = x.t.stride(-3);
  in.stride_h = x.t.stride(-2);
  in.out = out.data_ptr();
}

void set_saved(kcpu::RotaryInput& in, const RotaryStrided& x) {
  in.saved = x.t.const_data_ptr();
  in.saved_stride_b = x.stride_b;
  in.saved_stride_s = x.t.stride(-3);
  in.saved_stride_h = x.t.stride(-2);
}

at::Tensor empty_like_huge(const at::Tensor& x) {
  at::Tensor out = at::empty(x.sizes(), x.options());
  advise_huge_pages(out);
  return out;
}

std::tuple<at::Tensor, at::Tensor> rotary_embedding_cpu(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& cos, const at::Tensor& sin,
                                                        bool interleaved) {
  const char* op = "rotary_embedding";
  check_rotary_embedding(op, q, k, cos, sin);
  at::Tensor out_q = empty_like_huge(q), out_k = empty_like_huge(k);
  if (out_q.numel() == 0 && out_k.numel() == 0) return {out_q, out_k};
  const RotaryStrided qv = rotary_strided(q, 3), kv = rotary_strided(k, 3);
  const RotaryStrided cv = rotary_table(cos, q), sv = rotary_table(sin, q);
  kcpu::RotaryParams p = base_params(op, q, cv, sv, interleaved);
  set_input(p.q, qv, out_q);
  set_input(p.k, kv, out_k);
  cpu_for_rows(op, p.batch * p.seq, (p.q.heads + p.k.heads) * p.head_dim,
               [&](int64_t b0, int64_t e0) { return kcpu::rotary_forward(p, b0, e0); });
  return {out_q, out_k};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> rotary_embedding_backward_cpu(
    const OptTensor& grad_q, const OptTensor& grad_k, const OptTensor& q, const OptTensor& k, const at::Tensor& cos,
    const at::Tensor& sin, bool interleaved, bool cos_sin_grad) {
  const char* op = "rotary_embedding_backward";
  const at::Tensor* ref = check_rotary_embedding_backward(grad_q, grad_k, q, k, cos, sin, cos_sin_grad);
  const auto opts = ref != nullptr ? ref->options() : cos.options();
  at::Tensor dq = has(grad_q) ? empty_like_huge(*grad_q) : at::empty({0}, opts);
  at::Tensor dk = has(grad_k) ? empty_like_huge(*grad_k) : at::empty({0}, opts);
  const auto no_grad = [&] { return at::empty({0}, cos.options()); };
  if (ref == nullptr) {  // no gradient and no input: cos/sin get zeros
    return {dq, dk, cos_sin_grad ? at::zeros(cos.sizes(), cos.options()) : no_grad(),
            cos_sin_grad ? at::zeros(sin.sizes(), sin.options()) : no_grad()};
  }
  const int64_t tokens = rotary_tokens(*ref), half = cos.size(-1);
  // per-token cos/sin gradients, summed over the broadcast leading dims below (1/(2H) of the inputs' size)
  const auto acc = cos.options().dtype(ref->scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  at::Tensor gcos = cos_sin_grad ? at::empty({tokens, half}, acc) : at::Tensor();
  at::Tensor gsin = cos_sin_grad ? at::empty({tokens, half}, acc) : at::Tensor();
  if (tokens > 0) {
    const RotaryStrided cv = rotary_table(cos, *ref), sv = rotary_table(sin, *ref);
    kcpu::RotaryParams p = base_params(op, *ref, cv, sv, interleaved);
    RotaryStrided gqv, gkv, qv, kv;
    if (has(grad_q)) {
      gqv = rotary_strided(*grad_q, 3);
      set_input(p.q, gqv, dq);
      if (cos_sin_grad) set_saved(p.q, qv = rotary_strided(*q, 3));
    }
    if (has(grad_k)) {
      gkv = rotary_strided(*grad_k, 3);
      set_input(p.k, gkv, dk);
      if (cos_sin_grad) set_saved(p.k, kv = rotary_strided(*k, 3));
    }
    p.grad_cos = cos_sin_grad ? gcos.data_ptr() : nullptr;
    p.grad_sin = cos_sin_grad ? gsin.data_ptr() : nullptr;
    cpu_for_rows(op, tokens, (p.q.heads + p.k.heads) * p.head_dim,
                 [&](int64_t b0, int64_t e0) { return kcpu::rotary_backward(p, b0, e0); });
  }
  if (!cos_sin_grad) return {dq, dk, no_grad(), no_grad()};
  std::vector<int64_t> sizes(ref->sizes().begin(), ref->sizes().end() - 2);
  sizes.push_back(half);
  const auto reduce = [&](const at::Tensor& g, const at::Tensor& like) {
    return g.view(sizes).sum_to_size(like.sizes()).to(like.scalar_type()).contiguous();
  };
  return {dq, dk, reduce(gcos, cos), reduce(gsin, sin)};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) {
  m.impl("rotary_embedding", &rotary_embedding_cpu);
  m.impl("rotary_embedding_backward", &rotary_embedding_backward_cpu);
}

}  // namespace yirage
