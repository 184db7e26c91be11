// Portable attention / attention_forward / attention_backward with ATen ops (fp32 accumulation, fp64 for
// fp64), registered for MPS and PrivateUse1. Also the readable statement of what the ops compute: the same
// online softmax over key blocks as the CPU kernel, so no Sq x Sk matrix is formed (one (Hq*Sq, BK) block
// of scores at a time). The query heads of a GQA group are stacked as rows of one matrix per key/value head,
// so the key/value gradients come out summed over the group. The CUDA glue calls the forward and backward
// (portable/attention.h) for what its tensor-core kernels do not cover.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <limits>
#include <tuple>

#include "ops/attention.h"
#include "portable/attention.h"
#include "portable/common.h"
#include "portable/register.h"

namespace yirage {
namespace {

using portable::acc_type;

constexpr int64_t kBlock = 512;  // keys per block

// (B, Hq, S, X) -> (B, Hk, G*S, X) in the accumulation type: the G query heads of each key/value head
// stacked along the rows.
at::Tensor group_rows(const at::Tensor& t, int64_t hk) {
  return t.to(acc_type(t)).reshape({t.size(0), hk, t.size(1) / hk * t.size(2), t.size(3)});
}

// Which keys [j0, j0 + n) each stacked query row sees: (G*Sq, n) bool, or undefined when all do.
at::Tensor visible(const at::Tensor& q, int64_t hk, int64_t sk, int64_t j0, int64_t n, bool causal) {
  if (!causal) return at::Tensor();
  const int64_t sq = q.size(2), group = q.size(1) / hk;
  const auto opts = at::TensorOptions().dtype(at::kLong).device(q.device());
  const at::Tensor row = at::arange(sq, opts).repeat({group}).unsqueeze(1);  // query index i of each row
  return at::arange(j0, j0 + n, opts).unsqueeze(0) <= row + (sk - sq);       // j <= i + Sk - Sq
}

// scale * q k^T for keys [j0, j0 + n), hidden keys at -inf: (B, Hk, G*Sq, n).
at::Tensor scores(const at::Tensor& qg, const at::Tensor& kf, const at::Tensor& mask, int64_t j0, int64_t n,
                  double scale) {
  at::Tensor s = at::matmul(qg, kf.narrow(2, j0, n).transpose(-1, -2)) * scale;
  return mask.defined() ? s.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity()) : s;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> attention_forward_portable(const char* op, const at::Tensor& q,
                                                              const at::Tensor& k, const at::Tensor& v, bool causal,
                                                              std::optional<double> scale_opt) {
  check_attention(op, q, k, v, scale_opt);
  const double scale = attention_scale(q, scale_opt);
  const int64_t hk = k.size(1), sk = k.size(2);
  const at::Tensor qg = group_rows(q, hk), kf = k.to(acc_type(q)), vf = v.to(acc_type(q));
  const double ninf = -std::numeric_limits<double>::infinity();
  at::Tensor m = at::full({qg.size(0), hk, qg.size(2), 1}, ninf, qg.options());  // running row max
  at::Tensor l = at::zeros_like(m);                                             // running row sum
  at::Tensor o = at::zeros_like(qg);                                            // unnormalized output
  for (int64_t j0 = 0; j0 < sk; j0 += kBlock) {
    const int64_t n = std::min(kBlock, sk - j0);
    const at::Tensor s = scores(qg, kf, visible(q, hk, sk, j0, n, causal), j0, n, scale);
    const at::Tensor m_new = at::maximum(m, s.amax(-1, /*keepdim=*/true));
    const at::Tensor base = at::where(m_new == ninf, at::zeros_like(m_new), m_new);  // rows with no key yet
    const at::Tensor p = at::exp(s - base), alpha = at::exp(m - base);
    l = l * alpha + p.sum(-1, /*keepdim=*/true);
    o = o * alpha + at::matmul(p, vf.narrow(2, j0, n));
    m = m_new;
  }
  const at::Tensor seen = l > 0;  // rows that see no key give zeros and lse = -inf
  const at::Tensor out = at::where(seen, o / l, at::zeros_like(o));
  const at::Tensor lse = at::where(seen, m + at::log(l), at::full_like(m, ninf));
  return {out.reshape(q.sizes()).to(q.scalar_type()).contiguous(), lse.reshape({q.size(0), q.size(1), q.size(2)})};
}

namespace {

at::Tensor attention_portable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                              std::optional<double> scale) {
  return std::get<0>(attention_forward_portable("attention", q, k, v, causal, scale));
}

std::tuple<at::Tensor, at::Tensor> attention_forward_with_lse(const at::Tensor& q, const at::Tensor& k,
                                                              const at::Tensor& v, bool causal,
                                                              std::optional<double> scale) {
  return attention_forward_portable("attention_forward", q, k, v, causal, scale);
}

}  // namespace

// FlashAttention-2's backward per key block: P = exp(S - lse), dV = P^T dO, dP = dO V^T,
// dS = P * (dP - rowsum(dO * O)), dQ += scale dS K, dK = scale dS^T Q.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward_portable(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, std::optional<double> scale_opt) {
  check_attention_backward(grad_out, q, k, v, out, lse, scale_opt);
  const double scale = attention_scale(q, scale_opt);
  const int64_t hk = k.size(1), sk = k.size(2);
  const at::Tensor qg = group_rows(q, hk), gg = group_rows(grad_out, hk), kf = k.to(acc_type(q)),
                   vf = v.to(acc_type(q));
  const at::Tensor di = (gg * group_rows(out, hk)).sum(-1, /*keepdim=*/true);
  // a row that sees no key (lse = -inf) gets P = 0: exp(s - inf)
  at::Tensor lg = lse.to(acc_type(q)).reshape({q.size(0), hk, qg.size(2), 1});
  lg = at::where(lg == -std::numeric_limits<double>::infinity(),
                 at::full_like(lg, std::numeric_limits<double>::infinity()), lg);
  at::Tensor dq = at::zeros_like(qg);
  at::Tensor dk = at::empty_like(kf), dv = at::empty_like(vf);
  for (int64_t j0 = 0; j0 < sk; j0 += kBlock) {
    const int64_t n = std::min(kBlock, sk - j0);
    const at::Tensor p = at::exp(scores(qg, kf, visible(q, hk, sk, j0, n, causal), j0, n, scale) - lg);
    dv.narrow(2, j0, n).copy_(at::matmul(p.transpose(-1, -2), gg));
    const at::Tensor ds = p * (at::matmul(gg, vf.narrow(2, j0, n).transpose(-1, -2)) - di);
    dq += at::matmul(ds, kf.narrow(2, j0, n)) * scale;
    dk.narrow(2, j0, n).copy_(at::matmul(ds.transpose(-1, -2), qg) * scale);
  }
  return {dq.reshape(q.sizes()).to(q.scalar_type()).contiguous(), dk.to(q.scalar_type()).contiguous(),
          dv.to(q.scalar_type()).contiguous()};  // contiguous, as the schema (and the Meta kernel) says
}

namespace {

void register_attention_kernels(PortableKernels& k) {
  k.impl("attention", &attention_portable);
  k.impl("attention_forward", &attention_forward_with_lse);
  k.impl("attention_backward", &attention_backward_portable);
}

}  // namespace

YIRAGE_PORTABLE_KERNELS(register_attention_kernels)

}  // namespace yirage
