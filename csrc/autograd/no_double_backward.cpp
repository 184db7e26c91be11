// The Autograd kernel of the ops that autograd itself calls and that have no derivative of their own (the
// backward ops, and linear_forward, which the Autograd kernel of linear calls). Without one, backpropagating
// through them (a first backward with create_graph=True, then a second backward) would only warn and give
// zero second derivatives. torch's not-implemented fallback instead gives their outputs a grad_fn that raises
// "derivative for yirage::<op> is not implemented" when the second backward reaches it; the first backward,
// with or without create_graph, runs as before.
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include "backend/backend.h"

TORCH_LIBRARY_IMPL(yirage, Autograd, m) {
  for (const char* name : {"rms_norm_backward", "layer_norm_backward", "softmax_backward", "log_softmax_backward",
                           "rotary_embedding_backward", "linear_forward", "linear_backward",
                           "attention_backward"}) {
    m.impl(name, torch::autograd::autogradNotImplementedFallback());
    yirage::note_kernel(name, c10::DispatchKey::Autograd, yirage::OpSupport::fallback);  // for the op tables
  }
}
