// silu_and_mul, gelu_and_mul, gelu and their backward ops on CUDA (torch-free entry points; kernels in
// activation.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../activation.h"
#include "types.h"

namespace yirage::kernels::cuda {

// kernels/activation.h: the activation (silu, gelu, gelu_tanh here) and the kernels' parameters
using kernels::Activation;
using kernels::ActivationBackward;
using kernels::ActivationForward;

cudaError_t activation_forward(const ActivationForward& p, cudaStream_t stream);
cudaError_t activation_backward(const ActivationBackward& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
