// Per-device properties of the CUDA (or, hipified, ROCm) devices for the backend registry: name, memory,
// compute capability, SM/CU count, shared memory per block. Compiled only with the CUDA kernels (setup and the
// JIT build skip csrc/cuda/ otherwise), so the CPU build never includes a CUDA header. Only the CUDA runtime
// API is used (no torch CUDA headers); the properties are read once per process (they do not change).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "backend/probes.h"

namespace yirage {
namespace {

const std::vector<cudaDeviceProp>& properties(int count) {
  static std::once_flag once;
  static std::vector<cudaDeviceProp> props;
  std::call_once(once, [count] {
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
        (void)cudaGetLastError();  // leave no sticky error for torch to trip over
        break;
      }
      props.push_back(p);
    }
  });
  return props;
}

void fill_gpu_info(BackendStatus* s) {
  const auto& props = properties(s->device_count);
  for (size_t i = 0; i < props.size(); ++i) {
    const cudaDeviceProp& p = props[i];
    s->devices.push_back({p.name, static_cast<int64_t>(p.totalGlobalMem)});
    s->max_memory = std::max<int64_t>(s->max_memory, static_cast<int64_t>(p.totalGlobalMem));
    if (i == 0) {  // device 0 describes the backend; devices lists every one
      s->compute_capability = p.major * 10 + p.minor;
      s->compute_units = p.multiProcessorCount;
#if defined(USE_ROCM) || defined(__HIP_PLATFORM_AMD__)
      s->max_shared_memory = static_cast<int64_t>(p.sharedMemPerBlock);
      s->details["arch"] = p.gcnArchName;
#else
      // what a kernel can use with the opt-in attribute (227 KiB on Hopper), not the 48 KiB default
      s->max_shared_memory = static_cast<int64_t>(p.sharedMemPerBlockOptin);
#endif
    }
  }
}

const bool registered = (probes::set_gpu_info_provider(&fill_gpu_info), true);

}  // namespace
}  // namespace yirage
