// Instantiates an op's row loops once per ISA. Usage, in the op's kernel file (after its public header
// and the standard headers the loops need):
//
//   #define YR_KERNEL_IMPL "layer_norm_impl.h"
//   #include "per_isa.h"
//
// This puts the loops in namespaces generic, avx2, avx512 and avx512_bf16 (the wide ones compiled for their target
// only, see target.h), each with its Vec type and the vec_util.h helpers; YR_DISPATCH_ISA then calls the
// variant active_isa() selects. No include guard: one use per translation unit.
#include "isa.h"
#include "target.h"
#include "types.h"

namespace yirage::kernels::cpu {

namespace generic {
namespace {
#include "vec_generic.h"
#include "vec_util.h"
#include YR_KERNEL_IMPL
}  // namespace
}  // namespace generic

#if YR_HAVE_X86_VARIANTS
YR_TARGET_BEGIN(YR_AVX2_TARGET)
namespace avx2 {
namespace {
#include "vec_avx2.h"
#include "vec_util.h"
#include YR_KERNEL_IMPL
}  // namespace
}  // namespace avx2
YR_TARGET_END

// the AVX-512 variants (both): code may use AVX-512F/BW/VL/DQ intrinsics under #if YR_AVX512_VARIANT
#define YR_AVX512_VARIANT 1
YR_TARGET_BEGIN(YR_AVX512_TARGET)
namespace avx512 {
namespace {
#include "vec_avx512.h"
#include "vec_util.h"
#include YR_KERNEL_IMPL
}  // namespace
}  // namespace avx512
YR_TARGET_END

// the avx512 code again, its bf16 results rounded by the AVX512-BF16 conversions (vec_avx512.h)
#define YR_AVX512_BF16_CONVERT 1
YR_TARGET_BEGIN(YR_AVX512_BF16_TARGET)
namespace avx512_bf16 {
namespace {
#include "vec_avx512.h"
#include "vec_util.h"
#include YR_KERNEL_IMPL
}  // namespace
}  // namespace avx512_bf16
YR_TARGET_END
#undef YR_AVX512_BF16_CONVERT
#undef YR_AVX512_VARIANT

// Returns fn(args...) of the active ISA's namespace.
#define YR_DISPATCH_ISA(fn, ...)                                          \
  do {                                                                    \
    switch (active_isa()) {                                               \
      case Isa::avx512_bf16: return avx512_bf16::fn(__VA_ARGS__);         \
      case Isa::avx512: return avx512::fn(__VA_ARGS__);                   \
      case Isa::avx2: return avx2::fn(__VA_ARGS__);                       \
      default: return generic::fn(__VA_ARGS__);                           \
    }                                                                     \
  } while (0)
#else
#define YR_DISPATCH_ISA(fn, ...) return generic::fn(__VA_ARGS__)
#endif

}  // namespace yirage::kernels::cpu
