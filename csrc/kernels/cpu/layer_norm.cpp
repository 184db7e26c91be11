// Instantiates the LayerNorm row loops once per ISA and picks one at run time (isa.h).
#include "layer_norm.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#define YR_KERNEL_IMPL "layer_norm_impl.h"
#include "per_isa.h"

namespace yirage::kernels::cpu {

Status layer_norm_forward(const LayerNormForward& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) return generic::ln_forward_rows<generic::VecD, double>(p, row_begin, row_end);
  YR_DISPATCH_ISA(ln_forward_dispatch, p, row_begin, row_end);
}

Status layer_norm_backward(const LayerNormBackward& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) return generic::ln_backward_rows<generic::VecD, double>(p, row_begin, row_end);
  YR_DISPATCH_ISA(ln_backward_dispatch, p, row_begin, row_end);
}

}  // namespace yirage::kernels::cpu
