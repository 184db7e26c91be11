// CUDA glue for silu_and_mul, gelu_and_mul, gelu and their backward ops (ops/activation_glue.h, shared with the
// CPU): device guard, the current stream, kernels/cuda/activation.h.
#include <torch/library.h>

#include "common/cuda_launch.h"
#include "kernels/cuda/activation.h"
#include "ops/activation_glue.h"

namespace yirage {
namespace {

struct ActivationCuda : CudaGlueBackend {
  static void forward(const char* op, const kernels::ActivationForward& p) {
    check_launch(op, kernels::cuda::activation_forward(p, current_stream()));
  }
  static void backward(const char* op, const kernels::ActivationBackward& p) {
    check_launch(op, kernels::cuda::activation_backward(p, current_stream()));
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) { ActivationGlue<ActivationCuda>::register_kernels(m); }

}  // namespace yirage
