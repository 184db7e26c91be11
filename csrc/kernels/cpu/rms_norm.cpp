// Instantiates the RMSNorm row loops once per ISA and picks one at run time (isa.h).
#include "rms_norm.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#define YR_KERNEL_IMPL "rms_norm_impl.h"
#include "per_isa.h"

namespace yirage::kernels::cpu {

Status rms_norm_forward(const RmsNormForward& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) return generic::forward_rows<generic::VecD, double>(p, row_begin, row_end);
  YR_DISPATCH_ISA(forward_dispatch, p, row_begin, row_end);
}

Status rms_norm_backward(const RmsNormBackward& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) return generic::backward_rows<generic::VecD, double>(p, row_begin, row_end);
  YR_DISPATCH_ISA(backward_dispatch, p, row_begin, row_end);
}

}  // namespace yirage::kernels::cpu
