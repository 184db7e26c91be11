// The parameters of the softmax / log_softmax kernels, shared by the CPU (cpu/softmax.h) and CUDA
// (cuda/softmax.h) entry points (torch-free). Each input is viewed as (outer, dim, inner) with the inner
// elements contiguous and one stride each for the outer index and the softmax index; outputs are
// (outer, dim, inner), contiguous.
#pragma once

#include <cstdint>

#include "dtype.h"

namespace yirage::kernels {

struct SoftmaxForward {
  const void* x = nullptr;
  int64_t x_outer_stride = 0;  // elements between outer indices of x
  int64_t x_dim_stride = 0;    // elements between indices along the softmax dim (must be 1 when inner == 1)
  void* out = nullptr;         // (outer, dim, inner), contiguous
  int64_t outer = 0, dim = 0, inner = 0;
  bool log = false;            // log_softmax instead of softmax
  DType dtype = DType::f32;
  bool stream_out = false;     // CPU: write out with non-temporal stores (set by the glue for outputs far larger
                               // than the last-level cache; other backends ignore it)
};

struct SoftmaxBackward {
  const void* grad_out = nullptr;  // layout as SoftmaxForward::x
  int64_t grad_out_outer_stride = 0, grad_out_dim_stride = 0;
  const void* out = nullptr;  // the forward's output, layout as SoftmaxForward::x
  int64_t out_outer_stride = 0, out_dim_stride = 0;
  void* grad_x = nullptr;  // (outer, dim, inner), contiguous
  int64_t outer = 0, dim = 0, inner = 0;
  bool log = false;  // log_softmax_backward: grad_x = g - exp(out) * sum(g); else out * (g - sum(g * out))
  DType dtype = DType::f32;
};

}  // namespace yirage::kernels
