// Instantiates the GEMM epilogue loops once per ISA and picks one at run time (isa.h).
#include "linear_epilogue.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

// GCC 12's AVX-512 intrinsics (max, min, round, convert, shifts, as vexp and vmax use them) report their own
// `__Y = __Y` placeholders as uninitialized; target.h silences only the "maybe" form of that warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define YR_KERNEL_IMPL "linear_epilogue_impl.h"
#include "per_isa.h"

namespace yirage::kernels::cpu {

Status linear_epilogue(const LinearEpilogue& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) {
    if (p.in_dtype != DType::f64) return Status::unsupported_dtype;
    return generic::epilogue_act<generic::VecD, double, double>(p, row_begin, row_end);
  }
  YR_DISPATCH_ISA(epilogue_dispatch, p, row_begin, row_end);
}

Status linear_act_grad(const LinearActGrad& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) return generic::act_grad_typed<generic::VecD, double>(p, row_begin, row_end);
  YR_DISPATCH_ISA(act_grad_dispatch, p, row_begin, row_end);
}

}  // namespace yirage::kernels::cpu
