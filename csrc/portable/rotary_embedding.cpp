// Portable rotary_embedding / rotary_embedding_backward with ATen ops (fp32 math, fp64 for fp64),
// registered for MPS and PrivateUse1. Also the readable statement of what the ops compute.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <utility>

#include "ops/rotary_embedding.h"
#include "portable/common.h"
#include "portable/register.h"

namespace yirage {
namespace {

using portable::acc_type;

using OptTensor = std::optional<at::Tensor>;

// The pairs (x1, x2) of the first 2 * half features: neox the two halves, gpt-j the even and odd features.
std::pair<at::Tensor, at::Tensor> split_pairs(const at::Tensor& x, int64_t half, bool interleaved) {
  if (interleaved) {
    const at::Tensor v = x.narrow(-1, 0, 2 * half).unflatten(-1, {half, 2});
    return {v.select(-1, 0), v.select(-1, 1)};
  }
  return {x.narrow(-1, 0, half), x.narrow(-1, half, half)};
}

// x (..., S, H, D) rotated by (c, s) (..., S, 1, R/2) in the accumulation type: y1 = x1*c - x2*s,
// y2 = x2*c + x1*s; the features past R copied.
at::Tensor rotate(const at::Tensor& x, const at::Tensor& c, const at::Tensor& s, bool interleaved) {
  const int64_t half = c.size(-1), d = x.size(-1);
  const at::Tensor xf = x.to(c.scalar_type());
  const auto [x1, x2] = split_pairs(xf, half, interleaved);
  const at::Tensor y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
  at::Tensor y = interleaved ? at::stack({y1, y2}, -1).flatten(-2) : at::cat({y1, y2}, -1);
  if (d > 2 * half) y = at::cat({y, xf.narrow(-1, 2 * half, d - 2 * half)}, -1);
  return y.to(x.scalar_type()).contiguous();
}

// (cos, sin) in the accumulation type with a heads dim: (..., S, 1, R/2)
std::pair<at::Tensor, at::Tensor> angles(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return {cos.to(acc_type(x)).unsqueeze(-2), sin.to(acc_type(x)).unsqueeze(-2)};
}

std::tuple<at::Tensor, at::Tensor> rotary_embedding_portable(const at::Tensor& q, const at::Tensor& k,
                                                             const at::Tensor& cos, const at::Tensor& sin,
                                                             bool interleaved) {
  check_rotary_embedding("rotary_embedding", q, k, cos, sin);
  const auto [c, s] = angles(q, cos, sin);
  return {rotate(q, c, s, interleaved), rotate(k, c, s, interleaved)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> rotary_embedding_backward_portable(
    const OptTensor& grad_q, const OptTensor& grad_k, const OptTensor& q, const OptTensor& k, const at::Tensor& cos,
    const at::Tensor& sin, bool interleaved, bool cos_sin_grad) {
  const at::Tensor* ref = check_rotary_embedding_backward(grad_q, grad_k, q, k, cos, sin, cos_sin_grad);
  const auto opts = ref != nullptr ? ref->options() : cos.options();
  const at::Tensor none = at::empty({0}, cos.options());
  if (ref == nullptr) {
    return {at::empty({0}, opts), at::empty({0}, opts), cos_sin_grad ? at::zeros_like(cos) : none,
            cos_sin_grad ? at::zeros_like(sin) : none};
  }
  const auto [c, s] = angles(*ref, cos, sin);
  // the input gradient is the rotation by -theta
  const auto input_grad = [&](const OptTensor& g) {
    return has(g) ? rotate(*g, c, -s, interleaved) : at::empty({0}, opts);
  };
  if (!cos_sin_grad) return {input_grad(grad_q), input_grad(grad_k), none, none};
  // d/dcos = g1*x1 + g2*x2, d/dsin = g2*x1 - g1*x2, summed over heads, then over broadcast leading dims
  const int64_t half = cos.size(-1);
  at::Tensor gc = at::zeros_like(c.squeeze(-2)), gs = at::zeros_like(gc);
  for (const auto& [g, x] : {std::pair(&grad_q, &q), std::pair(&grad_k, &k)}) {
    if (!has(*g)) continue;
    const auto [g1, g2] = split_pairs(g->value().to(c.scalar_type()), half, interleaved);
    const auto [x1, x2] = split_pairs(x->value().to(c.scalar_type()), half, interleaved);
    gc = gc + (g1 * x1 + g2 * x2).sum(-2);
    gs = gs + (g2 * x1 - g1 * x2).sum(-2);
  }
  const auto reduce = [&](const at::Tensor& t, const at::Tensor& like) {
    return t.sum_to_size(like.sizes()).to(like.scalar_type()).contiguous();
  };
  return {input_grad(grad_q), input_grad(grad_k), reduce(gc, cos), reduce(gs, sin)};
}

void register_rotary_embedding_kernels(PortableKernels& k) {
  k.impl("rotary_embedding", &rotary_embedding_portable);
  k.impl("rotary_embedding_backward", &rotary_embedding_backward_portable);
}

}  // namespace

YIRAGE_PORTABLE_KERNELS(register_rotary_embedding_kernels)

}  // namespace yirage
