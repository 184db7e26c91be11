// Per-device properties of the CUDA (or, hipified, ROCm) devices for the backend registry: name, memory,
// compute capability, SM/CU count, shared memory per block. Compiled only with the CUDA kernels (setup and the
// JIT build skip csrc/cuda/ otherwise), so the CPU build never includes a CUDA header.
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>

#include "backend/probes.h"

namespace yirage {
namespace {

void fill_gpu_info(BackendStatus* s) {
  for (int i = 0; i < s->device_count; ++i) {
    const auto* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(i));
    s->devices.push_back({p->name, static_cast<int64_t>(p->totalGlobalMem)});
    s->max_memory = std::max<int64_t>(s->max_memory, static_cast<int64_t>(p->totalGlobalMem));
    if (i == 0) {  // device 0 describes the backend; devices lists every one
      s->compute_capability = p->major * 10 + p->minor;
      s->compute_units = p->multiProcessorCount;
#if defined(USE_ROCM)
      s->max_shared_memory = static_cast<int64_t>(p->sharedMemPerBlock);
      s->details["arch"] = p->gcnArchName;
#else
      // what a kernel can use with the opt-in attribute (227 KiB on Hopper), not the 48 KiB default
      s->max_shared_memory = static_cast<int64_t>(p->sharedMemPerBlockOptin);
#endif
    }
  }
}

const bool registered = (probes::set_gpu_info_provider(&fill_gpu_info), true);

}  // namespace
}  // namespace yirage
