// CUDA glue for softmax, log_softmax and their backward ops (ops/softmax_glue.h, shared with the CPU): device
// guard, the current stream, kernels/cuda/softmax.h.
#include <torch/library.h>

#include "common/cuda_launch.h"
#include "kernels/cuda/softmax.h"
#include "ops/softmax_glue.h"

namespace yirage {
namespace {

struct SoftmaxCuda : CudaGlueBackend {
  static void forward(const char* op, const kernels::SoftmaxForward& p) {
    check_launch(op, kernels::cuda::softmax_forward(p, current_stream()));
  }
  static void backward(const char* op, const kernels::SoftmaxBackward& p) {
    check_launch(op, kernels::cuda::softmax_backward(p, current_stream()));
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) { SoftmaxGlue<SoftmaxCuda>::register_kernels(m); }

}  // namespace yirage
