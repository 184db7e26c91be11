// Instantiates the rotary token loops once per ISA and picks one at run time (isa.h).
#include "rotary.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <vector>

#define YR_KERNEL_IMPL "rotary_impl.h"
#include "per_isa.h"

namespace yirage::kernels::cpu {
namespace {

constexpr int64_t kMaxLanes = 16;  // the widest Vec (AVX-512 floats)

Status rope_run(const RotaryParams& p, int64_t begin, int64_t end, bool backward) {
  if (p.seq <= 0 || p.half < 0 || 2 * p.half > p.head_dim) return Status::invalid_argument;
  if (backward && (p.grad_cos == nullptr) != (p.grad_sin == nullptr)) return Status::invalid_argument;
  // the token's angle buffers and gradient sums, padded to whole vectors of any ISA (allocated here, outside
  // the ISA-specific code, once per call)
  const int64_t lanes = p.interleaved ? 2 * p.half : p.half;
  const int64_t padded = (lanes + kMaxLanes - 1) / kMaxLanes * kMaxLanes;
  if (p.dtype == DType::f64) {
    if (p.cos_dtype != DType::f64) return Status::unsupported_dtype;
    std::vector<double> scratch(size_t(4 * padded));
    return generic::rope_tokens<generic::VecD, double, double>(p, begin, end, backward, scratch.data(), padded);
  }
  std::vector<float> scratch(size_t(4 * padded));
  YR_DISPATCH_ISA(rope_dispatch, p, begin, end, backward, scratch.data(), padded);
}

}  // namespace

Status rotary_forward(const RotaryParams& p, int64_t token_begin, int64_t token_end) {
  return rope_run(p, token_begin, token_end, false);
}

Status rotary_backward(const RotaryParams& p, int64_t token_begin, int64_t token_end) {
  return rope_run(p, token_begin, token_end, true);
}

}  // namespace yirage::kernels::cpu
