// silu_and_mul, gelu_and_mul, gelu and their backward ops on CUDA (torch-free entry points; kernels in
// activation.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../activation.h"
#include "types.h"

namespace yirage::kernels::cuda {

using kernels::Activation;  // silu, gelu and gelu_tanh here

struct ActivationForward {
  const void* x = nullptr;
  int64_t x_stride = 0;  // elements between rows of x (the last dim is contiguous)
  void* out = nullptr;   // rows x cols, contiguous
  int64_t rows = 0;
  int64_t cols = 0;      // output row length: d (half of x's row) when gated, else x's row length
  Activation act = Activation::silu;
  bool gated = false;    // out = act(x[:, :cols]) * x[:, cols:2*cols]; else out = act(x)
  DType dtype = DType::f32;
};

struct ActivationBackward {
  const void* grad_out = nullptr;  // rows x cols, rows `grad_out_stride` apart
  int64_t grad_out_stride = 0;
  const void* x = nullptr;         // rows x cols, or rows x 2*cols when gated
  int64_t x_stride = 0;
  void* grad_x = nullptr;          // contiguous, x's row length: [g*b*act'(a), g*act(a)] when gated, else g*act'(x)
  int64_t rows = 0, cols = 0;
  Activation act = Activation::silu;
  bool gated = false;
  DType dtype = DType::f32;
};

cudaError_t activation_forward(const ActivationForward& p, cudaStream_t stream);
cudaError_t activation_backward(const ActivationBackward& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
