// What every CUDA glue file (csrc/cuda/*.cpp) needs to call a torch-free kernel: the dtype mapping, the
// device guard and current stream, and the check that turns a kernel's cudaError_t into an exception
// naming the op. Included only by CUDA glue (compiled only in a build with the CUDA kernels).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include "common/checks.h"
#include "kernels/cuda/types.h"

namespace yirage {

inline kernels::cuda::DType cuda_kernel_dtype(const char* op, at::ScalarType t) {
  switch (t) {
    case at::kFloat: return kernels::cuda::DType::f32;
    case at::kHalf: return kernels::cuda::DType::f16;
    case at::kBFloat16: return kernels::cuda::DType::bf16;
    case at::kDouble: return kernels::cuda::DType::f64;
    default: TORCH_CHECK_TYPE(false, "yirage.", op, ": no CUDA kernel for dtype ", dtype_name(t));
  }
}

// The stream every kernel is queued on: the caller's current stream (CUDA-graph capture included).
inline cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// Raises when a kernel entry point reported an error (a bad launch, or a precondition the glue missed).
inline void check_launch(const char* op, cudaError_t e) {
  TORCH_CHECK(e == cudaSuccess, "yirage.", op, ": CUDA kernel failed: ", cudaGetErrorString(e));
}

// The part of a CUDA backend policy of the shared glue (ops/*_glue.h) that every op has in common: the device
// guard, new outputs from torch's caching allocator, the dtype mapping. An op's policy derives from it and adds
// the kernel launches (on current_stream(), checked with check_launch).
struct CudaGlueBackend {
  static c10::cuda::CUDAGuard guard(const at::Tensor& t) { return c10::cuda::CUDAGuard(t.device()); }
  static at::Tensor empty(at::IntArrayRef sizes, const at::TensorOptions& options) {
    return at::empty(sizes, options);
  }
  static kernels::DType dtype(const char* op, at::ScalarType t) { return cuda_kernel_dtype(op, t); }
};

}  // namespace yirage
