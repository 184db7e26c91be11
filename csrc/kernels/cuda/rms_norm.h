// RMSNorm on CUDA (torch-free entry points; kernels in rms_norm.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "types.h"

namespace yirage::kernels::cuda {

struct RmsNormForward {
  const void* x = nullptr;
  int64_t x_stride = 0;             // elements between rows of x (the last dim is contiguous)
  const void* weight = nullptr;     // null or `cols` contiguous elements
  void* out = nullptr;              // rows x cols, contiguous
  int64_t rows = 0, cols = 0;
  double eps = 1e-6;
  DType dtype = DType::f32;
};

cudaError_t rms_norm_forward(const RmsNormForward& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
