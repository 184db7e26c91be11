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
  // softmax_backward: grad_x = out * (grad_out - sum(grad_out * out, dim)), the vjp of softmax(x, dim)
  //   at grad_out, from the forward's output `out` (x is not needed).
  // log_softmax_backward: grad_x = grad_out - exp(out) * sum(grad_out, dim), the vjp of
  //   log_softmax(x, dim) at grad_out, from the forward's output `out`.
  m.def("softmax_backward(Tensor grad_out, Tensor out, int dim=-1) -> Tensor", tags);
  m.def("log_softmax_backward(Tensor grad_out, Tensor out, int dim=-1) -> Tensor", tags);

  // ---- activations ----
  m.def("silu_and_mul(Tensor x) -> Tensor", tags);
  m.def("gelu_and_mul(Tensor x, str approximate=\"none\") -> Tensor", tags);
  m.def("gelu(Tensor x, str approximate=\"none\") -> Tensor", tags);
  // Backward ops of the activations (the gradient wrt x, contiguous, x's shape and dtype):
  //   silu_and_mul_backward / gelu_and_mul_backward: grad_out (..., d) and x (..., 2*d); both halves of
  //     grad_x in one pass: [grad_out * b * act'(a), grad_out * act(a)] with a = x[..., :d], b = x[..., d:].
  //   gelu_backward: grad_out * gelu'(x), grad_out of x's shape.
  m.def("silu_and_mul_backward(Tensor grad_out, Tensor x) -> Tensor", tags);
  m.def("gelu_and_mul_backward(Tensor grad_out, Tensor x, str approximate=\"none\") -> Tensor", tags);
  m.def("gelu_backward(Tensor grad_out, Tensor x, str approximate=\"none\") -> Tensor", tags);

  // ---- rotary embedding ----
  m.def("rotary_embedding(Tensor q, Tensor k, Tensor cos, Tensor sin, bool interleaved=False)"
        " -> (Tensor, Tensor)", tags);
  // rotary_embedding_backward: grad_q and grad_k are the gradients of the two outputs rotated by -theta
  //   (shape (0,) where that gradient is None: an output that was not used). When cos_sin_grad, grad_cos and
  //   grad_sin have cos's and sin's shape and dtype: sums over heads (and the leading dims cos/sin broadcast
  //   over) of g1*x1 + g2*x2 and g2*x1 - g1*x2, with x = q for grad_q and k for grad_k (q and k are needed
  //   only for these); else shape (0,).
  m.def("rotary_embedding_backward(Tensor? grad_q, Tensor? grad_k, Tensor? q, Tensor? k, Tensor cos, Tensor sin,"
        " bool interleaved=False, bool cos_sin_grad=False)"
        " -> (Tensor grad_q, Tensor grad_k, Tensor grad_cos, Tensor grad_sin)", tags);

  // ---- GEMM ----
  m.def("matmul(Tensor a, Tensor b) -> Tensor", tags);
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None, str activation=\"none\") -> Tensor", tags);
  // linear_forward: linear plus what its backward needs: (out, pre) with pre = z = x @ weight.T + bias (x's
  //   dtype, out's shape) for the activations whose derivative needs z (gelu, gelu_tanh, silu), else shape (0,).
  // linear_backward: dz = grad_out * act'(z), act' read from `saved` (z for gelu, gelu_tanh, silu; the forward
  //   output for relu, since relu' = out > 0; unused for none); grad_x = dz @ weight (x's shape),
  //   grad_weight = dz^T x (N, K), grad_bias = dz summed over rows (N,); each (0,) when its flag is false.
  m.def("linear_forward(Tensor x, Tensor weight, Tensor? bias=None, str activation=\"none\")"
        " -> (Tensor out, Tensor pre)", tags);
  m.def("linear_backward(Tensor grad_out, Tensor x, Tensor weight, Tensor? saved=None, str activation=\"none\","
        " bool x_grad=True, bool weight_grad=True, bool bias_grad=True)"
        " -> (Tensor grad_x, Tensor grad_weight, Tensor grad_bias)", tags);

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
