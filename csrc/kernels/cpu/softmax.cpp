// Instantiates the softmax / log_softmax loops once per ISA and picks one at run time (isa.h).
#include "softmax.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#define YR_KERNEL_IMPL "softmax_impl.h"
#include "per_isa.h"

namespace yirage::kernels::cpu {

SoftmaxTasks softmax_tasks(int64_t outer, int64_t dim, int64_t inner, DType dtype) {
  if (dtype == DType::f64) return generic::tasks_for<generic::VecD>(outer, dim, inner);
  YR_DISPATCH_ISA(softmax_tasks_dispatch, outer, dim, inner);
}

Status softmax_forward(const SoftmaxForward& p, int64_t task_begin, int64_t task_end) {
  if (p.dtype == DType::f64) return generic::softmax_forward_typed<generic::VecD, double>(p, task_begin, task_end);
  YR_DISPATCH_ISA(softmax_forward_dispatch, p, task_begin, task_end);
}

Status softmax_backward(const SoftmaxBackward& p, int64_t task_begin, int64_t task_end) {
  if (p.dtype == DType::f64) return generic::softmax_backward_typed<generic::VecD, double>(p, task_begin, task_end);
  YR_DISPATCH_ISA(softmax_backward_dispatch, p, task_begin, task_end);
}

}  // namespace yirage::kernels::cpu
