// CPU glue for softmax, log_softmax and their backward ops (ops/softmax_glue.h, shared with CUDA): the kernels
// (kernels/cpu/softmax.h) are vectorized per ISA and chosen at run time; work is split into the tasks the kernels
// define (softmax_tasks) on torch's intra-op threads; new outputs get huge pages.
#include <torch/library.h>

#include "common/cpu_launch.h"
#include "kernels/cpu/softmax.h"
#include "ops/softmax_glue.h"

namespace yirage {
namespace {

namespace k = kernels::cpu;

struct SoftmaxCpu : CpuGlueBackend {
  static void forward(const char* op, const kernels::SoftmaxForward& args) {
    kernels::SoftmaxForward p = args;
    p.stream_out = p.inner == 1 && cpu_stream_outputs(2 * p.outer * p.dim * cpu_dtype_size(p.dtype));  // rows
    const k::SoftmaxTasks tasks = k::softmax_tasks(p.outer, p.dim, p.inner, p.dtype);
    cpu_for_rows(op, tasks.count, tasks.elems, [&](int64_t b, int64_t e) { return k::softmax_forward(p, b, e); });
  }
  static void backward(const char* op, const kernels::SoftmaxBackward& p) {
    const k::SoftmaxTasks tasks = k::softmax_tasks(p.outer, p.dim, p.inner, p.dtype);
    cpu_for_rows(op, tasks.count, tasks.elems, [&](int64_t b, int64_t e) { return k::softmax_backward(p, b, e); });
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) { SoftmaxGlue<SoftmaxCpu>::register_kernels(m); }

}  // namespace yirage
