// softmax / log_softmax and their backward ops on CUDA over any dim (torch-free entry points; the forward
// kernels in softmax.cu, the backward in softmax_bwd.cu).
//
// Layout: each input is viewed as (outer, dim, inner) with the inner elements contiguous and one stride each
// for the outer index and the softmax index (slices, padded rows and broadcast strides are read in place;
// the glue copies any other layout). Outputs are (outer, dim, inner), contiguous.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "types.h"

namespace yirage::kernels::cuda {

struct SoftmaxForward {
  const void* x = nullptr;
  int64_t x_outer_stride = 0;  // elements between outer indices of x
  int64_t x_dim_stride = 0;    // elements between indices along the softmax dim (must be 1 when inner == 1)
  void* out = nullptr;         // (outer, dim, inner), contiguous
  int64_t outer = 0, dim = 0, inner = 0;
  bool log = false;            // log_softmax instead of softmax
  DType dtype = DType::f32;
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

cudaError_t softmax_forward(const SoftmaxForward& p, cudaStream_t stream);
cudaError_t softmax_backward(const SoftmaxBackward& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
