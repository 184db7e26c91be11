// The parameters of the rms_norm / fused_add_rms_norm forward kernels, shared by the CPU (cpu/rms_norm.h) and
// CUDA (cuda/rms_norm.h) entry points (torch-free). y = x * rsqrt(mean(x^2) + eps) * weight per row; with
// `residual`, h = x + residual rounded to the dtype is written to `residual_out` and y = rms_norm(h). Inputs are
// rows with a row stride (the last dim contiguous); outputs are contiguous. (The backward parameters differ: each
// backend reduces the weight gradient its own way.)
#pragma once

#include <cstdint>

#include "dtype.h"

namespace yirage::kernels {

struct RmsNormForward {
  const void* x = nullptr;
  int64_t x_stride = 0;             // elements between rows of x
  const void* residual = nullptr;   // null: plain rms_norm; else h = x + residual is normalized
  int64_t residual_stride = 0;
  const void* weight = nullptr;     // null or `cols` contiguous elements
  void* out = nullptr;              // rows x cols, contiguous
  void* residual_out = nullptr;     // h, rows x cols contiguous; required when residual is set
  int64_t rows = 0, cols = 0;
  double eps = 1e-6;
  DType dtype = DType::f32;
};

}  // namespace yirage::kernels
