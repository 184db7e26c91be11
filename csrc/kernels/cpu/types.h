// Torch-free element types, status codes and scalar conversions shared by the CPU kernels.
//
// bf16 and fp16 are plain 16-bit payloads with the same layout as c10::BFloat16 / c10::Half, so glue
// code can hand kernel functions the data pointers of ATen tensors unchanged. Conversions to and from
// float are exact (widening) or round-to-nearest-even (narrowing), NaN stays NaN, and fp16 handles
// subnormals and overflow to infinity the way IEEE 754 (and PyTorch) does.
#pragma once

#include <cstdint>
#include <cstring>

#include "../dtype.h"

namespace yirage::kernels::cpu {

using kernels::DType;  // dtype.h
using kernels::dtype_name;

enum class Status : int {
  ok = 0,
  unsupported_dtype = 1,  // the dtype switch reached its else-branch: the glue sent a dtype we lack
  invalid_argument = 2,   // sizes or strides the kernel's preconditions exclude
};

struct bf16 { uint16_t bits; };
struct f16 { uint16_t bits; };

inline float bits_to_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float to_float(float v) { return v; }
inline float to_float(bf16 v) { return bits_to_float(uint32_t(v.bits) << 16); }
inline float to_float(f16 v) {
  const uint32_t h = v.bits;
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return bits_to_float(sign);
  // subnormal: value = mant * 2^-24, exact in float
  int e = 113;
  while ((mant & 0x400u) == 0) { mant <<= 1; --e; }
  return bits_to_float(sign | (uint32_t(e) << 23) | ((mant & 0x3ffu) << 13));
}

template <typename T> T from_float(float v);
template <> inline float from_float<float>(float v) { return v; }
template <> inline bf16 from_float<bf16>(float v) {
  uint32_t u = float_to_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40u)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return bf16{uint16_t(u >> 16)};
}
template <> inline f16 from_float<f16>(float v) {
  const uint32_t u = float_to_bits(v);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return f16{uint16_t(sign | 0x7e00u)};  // NaN
  if (a >= 0x477ff000u) return f16{uint16_t(sign | 0x7c00u)};  // rounds to >= 65520: inf
  if (a >= 0x38800000u) {  // normal fp16 range (>= 2^-14)
    uint32_t r = a - 0x38000000u;  // rebias exponent 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);
    return f16{uint16_t(sign | (r >> 13))};
  }
  // subnormal or zero: add 0.5 so the float adder rounds the mantissa to an fp16 subnormal (RNE)
  const float m = bits_to_float(a) + 0.5f;
  return f16{uint16_t(sign | (float_to_bits(m) - 0x3f000000u))};
}

}  // namespace yirage::kernels::cpu
