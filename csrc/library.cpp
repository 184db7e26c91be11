// Every yirage schema, in one table. Backends add kernels with TORCH_LIBRARY_IMPL in their own files
// (cpu/, cuda/, portable/, meta/, autograd/); nothing else defines an op.
//
// The forward schemas are the public contract (see DESIGN.md). Backward ops are ours:
//   rms_norm_backward: grad_x = vjp of rms_norm(x, weight, eps) at grad_out, plus grad_add when given
//     (the fused op's gradient through h); grad_weight has shape (N,) when weight_grad (the gradient of
//     an all-ones weight when weight is None), else shape (0,).
#include <torch/library.h>

TORCH_LIBRARY(yirage, m) {
  const std::vector<at::Tag> tags = {at::Tag::pt2_compliant_tag};
  m.def("rms_norm(Tensor x, Tensor? weight=None, float eps=1e-06) -> Tensor", tags);
  m.def("fused_add_rms_norm(Tensor x, Tensor residual, Tensor? weight=None, float eps=1e-06)"
        " -> (Tensor, Tensor)", tags);
  m.def("rms_norm_backward(Tensor grad_out, Tensor x, Tensor? weight=None, float eps=1e-06,"
        " Tensor? grad_add=None, bool weight_grad=True) -> (Tensor grad_x, Tensor grad_weight)", tags);
  m.def("layer_norm(Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor", tags);
  m.def("layer_norm_backward(Tensor grad_out, Tensor x, Tensor? weight=None, float eps=1e-05,"
        " bool weight_grad=True, bool bias_grad=True) -> (Tensor grad_x, Tensor grad_weight, Tensor grad_bias)",
        tags);

  // ---- softmax family ----
  m.def("softmax(Tensor x, int dim=-1) -> Tensor", tags);
  m.def("log_softmax(Tensor x, int dim=-1) -> Tensor", tags);
  // (softmax family backward ops go here)

  // ---- activations ----
  m.def("silu_and_mul(Tensor x) -> Tensor", tags);
  m.def("gelu_and_mul(Tensor x, str approximate=\"none\") -> Tensor", tags);
  m.def("gelu(Tensor x, str approximate=\"none\") -> Tensor", tags);
  // (activation backward ops go here)

  // ---- rotary embedding ----
  m.def("rotary_embedding(Tensor q, Tensor k, Tensor cos, Tensor sin, bool interleaved=False)"
        " -> (Tensor, Tensor)", tags);
  // (rotary embedding backward ops go here)

  // ---- GEMM ----
  m.def("matmul(Tensor a, Tensor b) -> Tensor", tags);
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, str activation=\"none\") -> Tensor", tags);
  // (GEMM helper/backward ops go here)

  // ---- attention ----
  m.def("attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None) -> Tensor", tags);
  // attention_forward: attention that also returns lse = logsumexp over the visible keys of scale * q k^T,
  //   (B, Hq, Sq) in the accumulation type (float32; float64 for float64 inputs), -inf for a query row that
  //   sees no key. What autograd saves; the public attention does not compute it.
  // attention_backward: (grad_q, grad_k, grad_v) of attention at grad_out, recomputing the probabilities from
  //   the forward's out and lse (FlashAttention-2); grad_k/grad_v sum over the query heads of each key/value
  //   head (GQA). Contiguous, with the shapes of q, k, v.
  m.def("attention_forward(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None)"
        " -> (Tensor out, Tensor lse)", tags);
  m.def("attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool causal,"
        " float? scale) -> (Tensor grad_q, Tensor grad_k, Tensor grad_v)", tags);
}
