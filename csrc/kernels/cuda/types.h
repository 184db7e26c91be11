// Torch-free element types and the launch status shared by the CUDA kernels and their glue.
//
// The glue (csrc/cuda/) includes this header from host C++ code; kernels (*.cu next to it) include
// common.cuh, which includes this. A kernel entry point takes a parameter struct of raw pointers,
// sizes and strides plus a stream and returns a cudaError_t: cudaSuccess, the launch's error, or
// cudaErrorInvalidValue for a dtype or a size its preconditions exclude (the glue checks first, so that
// only happens on a glue bug).
#pragma once

#include <cstdint>

namespace yirage::kernels::cuda {

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

}  // namespace yirage::kernels::cuda
