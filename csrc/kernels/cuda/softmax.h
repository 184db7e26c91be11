// softmax / log_softmax and their backward ops on CUDA over any dim (torch-free entry points; the forward
// kernels in softmax.cu, the backward in softmax_bwd.cu).
//
// Layout: each input is viewed as (outer, dim, inner) with the inner elements contiguous and one stride each
// for the outer index and the softmax index (slices, padded rows and broadcast strides are read in place;
// the glue copies any other layout). Outputs are (outer, dim, inner), contiguous.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../softmax.h"
#include "types.h"

namespace yirage::kernels::cuda {

using kernels::SoftmaxBackward;  // ../softmax.h
using kernels::SoftmaxForward;

cudaError_t softmax_forward(const SoftmaxForward& p, cudaStream_t stream);
cudaError_t softmax_backward(const SoftmaxBackward& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
