// CUDA glue for rotary_embedding and rotary_embedding_backward: checks, device guard, (batch, seq, head)
// strides of the inputs (no copy for the usual layouts: contiguous, slices of a fused qkv tensor, (B, H, S, D)
// transposed to (B, S, H, D), broadcast cos/sin), then one kernel launch (kernels/cuda/rotary.h). cos/sin
// gradients: per-token sums from the kernel, summed over the broadcast leading dims with at::sum (deterministic).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "common/cuda_launch.h"
#include "kernels/cuda/rotary.h"
#include "ops/rotary_embedding.h"

namespace yirage {
namespace {

namespace kcu = kernels::cuda;

kcu::RotaryParams rotary_cuda_params(const char* op, const at::Tensor& x, const RotaryStrided& cos,
                                     const RotaryStrided& sin, bool interleaved) {
  kcu::RotaryParams p;
  p.seq = x.size(-3);
  p.batch = p.seq > 0 ? rotary_tokens(x) / p.seq : 0;
  p.head_dim = x.size(-1);
  p.half = cos.t.size(-1);
  p.interleaved = interleaved;
  p.dtype = cuda_kernel_dtype(op, x.scalar_type());
  p.cos_dtype = cuda_kernel_dtype(op, cos.t.scalar_type());
  p.cos = cos.t.const_data_ptr();
  p.sin = sin.t.const_data_ptr();
  p.cos_stride_b = cos.stride_b;
  p.cos_stride_s = cos.t.stride(-2);
  p.sin_stride_b = sin.stride_b;
  p.sin_stride_s = sin.t.stride(-2);
  return p;
}

void rotary_cuda_input(kcu::RotaryHeads& in, const RotaryStrided& x, const at::Tensor& out) {
  in.x = x.t.const_data_ptr();
  in.heads = x.t.size(-2);
  in.stride_b = x.stride_b;
  in.stride_s = x.t.stride(-3);
  in.stride_h = x.t.stride(-2);
  in.out = out.data_ptr();
}

void rotary_cuda_saved(kcu::RotaryHeads& in, const RotaryStrided& x) {
  in.saved = x.t.const_data_ptr();
  in.saved_stride_b = x.stride_b;
  in.saved_stride_s = x.t.stride(-3);
  in.saved_stride_h = x.t.stride(-2);
}

std::tuple<at::Tensor, at::Tensor> rotary_embedding_cuda(const at::Tensor& q, const at::Tensor& k,
                                                         const at::Tensor& cos, const at::Tensor& sin,
                                                         bool interleaved) {
  const char* op = "rotary_embedding";
  check_rotary_embedding(op, q, k, cos, sin);
  const c10::cuda::CUDAGuard guard(q.device());
  at::Tensor out_q = at::empty(q.sizes(), q.options()), out_k = at::empty(k.sizes(), k.options());
  if (out_q.numel() == 0 && out_k.numel() == 0) return {out_q, out_k};
  const RotaryStrided qv = rotary_strided(q, 3), kv = rotary_strided(k, 3);
  const RotaryStrided cv = rotary_table(cos, q), sv = rotary_table(sin, q);
  kcu::RotaryParams p = rotary_cuda_params(op, q, cv, sv, interleaved);
  if (out_q.numel() > 0) rotary_cuda_input(p.q, qv, out_q);
  if (out_k.numel() > 0) rotary_cuda_input(p.k, kv, out_k);
  check_launch(op, kcu::rotary_forward(p, current_stream()));
  return {out_q, out_k};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> rotary_embedding_backward_cuda(
    const std::optional<at::Tensor>& grad_q, const std::optional<at::Tensor>& grad_k,
    const std::optional<at::Tensor>& q, const std::optional<at::Tensor>& k, const at::Tensor& cos,
    const at::Tensor& sin, bool interleaved, bool cos_sin_grad) {
  const char* op = "rotary_embedding_backward";
  const at::Tensor* ref = check_rotary_embedding_backward(grad_q, grad_k, q, k, cos, sin, cos_sin_grad);
  const c10::cuda::CUDAGuard guard(cos.device());
  const auto opts = ref != nullptr ? ref->options() : cos.options();
  at::Tensor dq = has(grad_q) ? at::empty(grad_q->sizes(), grad_q->options()) : at::empty({0}, opts);
  at::Tensor dk = has(grad_k) ? at::empty(grad_k->sizes(), grad_k->options()) : at::empty({0}, opts);
  const auto no_grad = [&] { return at::empty({0}, cos.options()); };
  if (ref == nullptr) {  // no gradient and no input: cos/sin get zeros
    return {dq, dk, cos_sin_grad ? at::zeros(cos.sizes(), cos.options()) : no_grad(),
            cos_sin_grad ? at::zeros(sin.sizes(), sin.options()) : no_grad()};
  }
  const int64_t tokens = rotary_tokens(*ref), half = cos.size(-1);
  // per-token cos/sin gradients (summed over heads by the kernel), summed over the broadcast leading dims below
  const auto acc = cos.options().dtype(ref->scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  const bool any_heads = (has(grad_q) && grad_q->numel() > 0) || (has(grad_k) && grad_k->numel() > 0);
  // the kernel writes every (token, i) when it sees any head; zeros otherwise
  const auto buffer = [&] { return any_heads ? at::empty({tokens, half}, acc) : at::zeros({tokens, half}, acc); };
  at::Tensor gcos = cos_sin_grad ? buffer() : at::Tensor();
  at::Tensor gsin = cos_sin_grad ? buffer() : at::Tensor();
  if (tokens > 0 && any_heads) {
    const RotaryStrided cv = rotary_table(cos, *ref), sv = rotary_table(sin, *ref);
    kcu::RotaryParams p = rotary_cuda_params(op, *ref, cv, sv, interleaved);
    RotaryStrided gqv, gkv, qv, kv;
    if (has(grad_q) && grad_q->numel() > 0) {
      gqv = rotary_strided(*grad_q, 3);
      rotary_cuda_input(p.q, gqv, dq);
      if (cos_sin_grad) rotary_cuda_saved(p.q, qv = rotary_strided(*q, 3));
    }
    if (has(grad_k) && grad_k->numel() > 0) {
      gkv = rotary_strided(*grad_k, 3);
      rotary_cuda_input(p.k, gkv, dk);
      if (cos_sin_grad) rotary_cuda_saved(p.k, kv = rotary_strided(*k, 3));
    }
    p.grad_cos = cos_sin_grad ? gcos.data_ptr() : nullptr;
    p.grad_sin = cos_sin_grad ? gsin.data_ptr() : nullptr;
    check_launch(op, kcu::rotary_backward(p, current_stream()));
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

TORCH_LIBRARY_IMPL(yirage, CUDA, m) {
  m.impl("rotary_embedding", &rotary_embedding_cuda);
  m.impl("rotary_embedding_backward", &rotary_embedding_backward_cuda);
}

}  // namespace yirage
