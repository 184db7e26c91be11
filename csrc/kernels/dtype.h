// The element-type tag of the torch-free kernel interfaces, shared by the CPU kernels (cpu/types.h) and the
// CUDA kernels (cuda/types.h) and their glue.
#pragma once

namespace yirage::kernels {

enum class DType : int { f32 = 0, f16 = 1, bf16 = 2, f64 = 3 };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
  }
  return "unknown";
}

}  // namespace yirage::kernels
