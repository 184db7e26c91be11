// CPU glue for rotary_embedding and rotary_embedding_backward (ops/rotary_glue.h, shared with CUDA): the kernels
// (kernels/cpu/rotary.h) are vectorized per ISA and chosen at run time; work is split over tokens on torch's
// intra-op threads; new outputs get huge pages.
#include <torch/library.h>

#include "common/cpu_launch.h"
#include "kernels/cpu/rotary.h"
#include "ops/rotary_glue.h"

namespace yirage {
namespace {

struct RotaryCpu : CpuGlueBackend {
  static void forward(const char* op, const kernels::RotaryParams& params) {
    kernels::RotaryParams p = params;
    p.stream_out = cpu_stream_outputs(2 * p.batch * p.seq * (p.q.heads + p.k.heads) * p.head_dim *
                                      cpu_dtype_size(p.dtype));
    cpu_for_rows(op, p.batch * p.seq, (p.q.heads + p.k.heads) * p.head_dim,
                 [&](int64_t b, int64_t e) { return kernels::cpu::rotary_forward(p, b, e); });
  }
  static void backward(const char* op, const kernels::RotaryParams& p) {
    cpu_for_rows(op, p.batch * p.seq, (p.q.heads + p.k.heads) * p.head_dim,
                 [&](int64_t b, int64_t e) { return kernels::cpu::rotary_backward(p, b, e); });
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) { RotaryGlue<RotaryCpu>::register_kernels(m); }

}  // namespace yirage
