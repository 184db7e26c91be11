// CUDA glue for rotary_embedding and rotary_embedding_backward (ops/rotary_glue.h, shared with the CPU): device
// guard, the current stream, one kernel launch (kernels/cuda/rotary.h).
#include <torch/library.h>

#include "common/cuda_launch.h"
#include "kernels/cuda/rotary.h"
#include "ops/rotary_glue.h"

namespace yirage {
namespace {

struct RotaryCuda : CudaGlueBackend {
  static void forward(const char* op, const kernels::RotaryParams& p) {
    check_launch(op, kernels::cuda::rotary_forward(p, current_stream()));
  }
  static void backward(const char* op, const kernels::RotaryParams& p) {
    check_launch(op, kernels::cuda::rotary_backward(p, current_stream()));
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) { RotaryGlue<RotaryCuda>::register_kernels(m); }

}  // namespace yirage
