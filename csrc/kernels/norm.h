// The parameters of the norm forward kernels, shared by the CPU (cpu/rms_norm.h, cpu/layer_norm.h) and CUDA
// (cuda/rms_norm.h, cuda/layer_norm.h) entry points (torch-free). Inputs are rows with a row stride (the last
// dim contiguous); outputs are contiguous. (The backward parameters differ: each backend reduces the parameter
// gradients its own way.)
#pragma once

#include <cstdint>

#include "dtype.h"

namespace yirage::kernels {

// rms_norm: y = x * rsqrt(mean(x^2) + eps) * weight per row; with `residual` (fused_add_rms_norm),
// h = x + residual rounded to the dtype is written to `residual_out` and y = rms_norm(h).
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
  bool stream_out = false;  // CPU: write out with non-temporal stores (outputs beyond the last-level cache)
};

// layer_norm: y = (x - mean) * rsqrt(var + eps) * weight + bias per row (biased variance).
struct LayerNormForward {
  const void* x = nullptr;
  int64_t x_stride = 0;          // elements between rows of x
  const void* weight = nullptr;  // null or `cols` contiguous elements
  const void* bias = nullptr;    // null or `cols` contiguous elements
  void* out = nullptr;           // rows x cols, contiguous
  int64_t rows = 0, cols = 0;
  double eps = 1e-5;
  DType dtype = DType::f32;
  bool stream_out = false;  // CPU: write out with non-temporal stores (outputs beyond the last-level cache)
};

}  // namespace yirage::kernels
