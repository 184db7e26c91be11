// CPU glue for silu_and_mul, gelu_and_mul, gelu and their backward ops (ops/activation_glue.h, shared with CUDA):
// the kernels (kernels/cpu/activation.h) are vectorized per ISA and chosen at run time; work is split over flat
// output elements on torch's intra-op threads (~32K elements per task), new outputs get huge pages.
#include <torch/library.h>

#include "common/cpu_launch.h"
#include "kernels/cpu/activation.h"
#include "ops/activation_glue.h"

namespace yirage {
namespace {

struct ActivationCpu : CpuGlueBackend {
  static void forward(const char* op, const kernels::ActivationForward& args) {
    kernels::ActivationForward p = args;
    p.stream_out = cpu_stream_outputs((p.gated ? 3 : 2) * p.rows * p.cols * cpu_dtype_size(p.dtype));
    cpu_for_rows(op, p.rows * p.cols, 1,
                 [&](int64_t b, int64_t e) { return kernels::cpu::activation_forward(p, b, e); });
  }
  static void backward(const char* op, const kernels::ActivationBackward& p) {
    cpu_for_rows(op, p.rows * p.cols, 1,
                 [&](int64_t b, int64_t e) { return kernels::cpu::activation_backward(p, b, e); });
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) { ActivationGlue<ActivationCpu>::register_kernels(m); }

}  // namespace yirage
