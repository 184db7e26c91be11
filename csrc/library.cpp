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
  // (attention helper/backward ops go here)
}
