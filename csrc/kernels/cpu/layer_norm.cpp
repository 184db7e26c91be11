// Instantiates the LayerNorm row loops once per ISA and picks one at run time (isa.h).
#include "layer_norm.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "isa.h"
#include "target.h"
#include "types.h"

namespace yirage::kernels::cpu {

namespace generic {
namespace {
#include "vec_generic.h"
#include "vec_util.h"
#include "layer_norm_impl.h"
}  // namespace
}  // namespace generic

#if YR_HAVE_X86_VARIANTS
YR_TARGET_BEGIN(YR_AVX2_TARGET)
namespace avx2 {
namespace {
#include "vec_avx2.h"
#include "vec_util.h"
#include "layer_norm_impl.h"
}  // namespace
}  // namespace avx2
YR_TARGET_END

YR_TARGET_BEGIN(YR_AVX512_TARGET)
namespace avx512 {
namespace {
#include "vec_avx512.h"
#include "vec_util.h"
#include "layer_norm_impl.h"
}  // namespace
}  // namespace avx512
YR_TARGET_END
#endif

Status layer_norm_forward(const LayerNormForward& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) return generic::ln_forward_rows<generic::VecD, double>(p, row_begin, row_end);
#if YR_HAVE_X86_VARIANTS
  switch (active_isa()) {
    case Isa::avx512: return avx512::ln_forward_dispatch(p, row_begin, row_end);
    case Isa::avx2: return avx2::ln_forward_dispatch(p, row_begin, row_end);
    default: break;
  }
#endif
  return generic::ln_forward_dispatch(p, row_begin, row_end);
}

Status layer_norm_backward(const LayerNormBackward& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) return generic::ln_backward_rows<generic::VecD, double>(p, row_begin, row_end);
#if YR_HAVE_X86_VARIANTS
  switch (active_isa()) {
    case Isa::avx512: return avx512::ln_backward_dispatch(p, row_begin, row_end);
    case Isa::avx2: return avx2::ln_backward_dispatch(p, row_begin, row_end);
    default: break;
  }
#endif
  return generic::ln_backward_dispatch(p, row_begin, row_end);
}

}  // namespace yirage::kernels::cpu
