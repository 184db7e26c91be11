// Instantiates the RMSNorm row loops once per ISA and picks one at run time (isa.h).
#include "rms_norm.h"

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
#include "rms_norm_impl.h"
}  // namespace
}  // namespace generic

#if YR_HAVE_X86_VARIANTS
YR_TARGET_BEGIN(YR_AVX2_TARGET)
namespace avx2 {
namespace {
#include "vec_avx2.h"
#include "vec_util.h"
#include "rms_norm_impl.h"
}  // namespace
}  // namespace avx2
YR_TARGET_END

YR_TARGET_BEGIN(YR_AVX512_TARGET)
namespace avx512 {
namespace {
#include "vec_avx512.h"
#include "vec_util.h"
#include "rms_norm_impl.h"
}  // namespace
}  // namespace avx512
YR_TARGET_END
#endif

Status rms_norm_forward(const RmsNormForward& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) return generic::forward_rows<generic::VecD, double>(p, row_begin, row_end);
#if YR_HAVE_X86_VARIANTS
  switch (active_isa()) {
    case Isa::avx512: return avx512::forward_dispatch(p, row_begin, row_end);
    case Isa::avx2: return avx2::forward_dispatch(p, row_begin, row_end);
    default: break;
  }
#endif
  return generic::forward_dispatch(p, row_begin, row_end);
}

Status rms_norm_backward(const RmsNormBackward& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == DType::f64) return generic::backward_rows<generic::VecD, double>(p, row_begin, row_end);
#if YR_HAVE_X86_VARIANTS
  switch (active_isa()) {
    case Isa::avx512: return avx512::backward_dispatch(p, row_begin, row_end);
    case Isa::avx2: return avx2::backward_dispatch(p, row_begin, row_end);
    default: break;
  }
#endif
  return generic::backward_dispatch(p, row_begin, row_end);
}

}  // namespace yirage::kernels::cpu
