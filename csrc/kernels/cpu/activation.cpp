// Instantiates the activation loops once per ISA and picks one at run time (isa.h).
#include "activation.h"

#include <cmath>
#include <cstdint>
#include <cstring>

// GCC 12 reports the AVX-512 intrinsics headers' own `__Y = __Y` placeholders (reached through vexp and
// the masked blends) as uninitialized; target.h silences only the "maybe" form of that warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define YR_KERNEL_IMPL "activation_impl.h"
#include "per_isa.h"

namespace yirage::kernels::cpu {

namespace {
bool valid_range(int64_t rows, int64_t cols, int64_t begin, int64_t end) {
  return rows >= 0 && cols >= 0 && 0 <= begin && begin <= end && end <= rows * cols;
}
}  // namespace

Status activation_forward(const ActivationForward& p, int64_t begin, int64_t end) {
  if (!valid_range(p.rows, p.cols, begin, end)) return Status::invalid_argument;
  if (begin == end) return Status::ok;
  if (p.dtype == DType::f64) return generic::act_forward_typed<generic::VecD, double>(p, begin, end);
  YR_DISPATCH_ISA(act_forward_dispatch, p, begin, end);
}

Status activation_backward(const ActivationBackward& p, int64_t begin, int64_t end) {
  if (!valid_range(p.rows, p.cols, begin, end)) return Status::invalid_argument;
  if (begin == end) return Status::ok;
  if (p.dtype == DType::f64) return generic::act_backward_typed<generic::VecD, double>(p, begin, end);
  YR_DISPATCH_ISA(act_backward_dispatch, p, begin, end);
}

}  // namespace yirage::kernels::cpu
