// Rotary position embedding on CUDA (torch-free entry points; kernels in rotary.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../rotary.h"
#include "types.h"

namespace yirage::kernels::cuda {

using kernels::RotaryInput;  // ../rotary.h
using kernels::RotaryParams;

// out = x rotated by theta (neox pairs (i, i + R/2), or interleaved pairs (2i, 2i+1)); features >= R copied.
cudaError_t rotary_forward(const RotaryParams& p, cudaStream_t stream);
// out = gradient rotated by -theta; grad_cos/grad_sin (when set) as ../rotary.h describes.
cudaError_t rotary_backward(const RotaryParams& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
