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
}
