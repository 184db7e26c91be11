// Torch-free element types and the launch status shared by the CUDA kernels and their glue.
//
// The glue (csrc/cuda/) includes this header from host C++ code; kernels (*.cu next to it) include
// common.cuh, which includes this. A kernel entry point takes a parameter struct of raw pointers,
// sizes and strides plus a stream and returns a cudaError_t: cudaSuccess, the launch's error, or
// cudaErrorInvalidValue for a dtype or a size its preconditions exclude (the glue checks first, so that
// only happens on a glue bug).
#pragma once

#include <cstdint>

#include "../dtype.h"

namespace yirage::kernels::cuda {

using kernels::DType;  // dtype.h
using kernels::dtype_name;

}  // namespace yirage::kernels::cuda
