// The probes behind the registry's entries: each answers BackendStatus for one backend, from torch's own
// answers (at::globalContext(), the accelerator hooks, c10) and from cpuid. Cheap enough to run on every query,
// so the answers follow the process (a PrivateUse1 device registered later, a default changed from Python).
#pragma once

#include "backend/backend.h"

namespace yirage::probes {

// devices (probes_device.cpp)
BackendStatus cpu();
BackendStatus cuda();
BackendStatus rocm();
BackendStatus mps();
BackendStatus privateuse1();
// providers (probes_library.cpp)
BackendStatus cudnn();
BackendStatus mkl();
BackendStatus mkldnn();
BackendStatus openmp();
BackendStatus nnpack();
BackendStatus xeon();
// What only the Python package can answer; C++ alone reports it unavailable and says why.
BackendStatus python_only();

// Per-device properties of the CUDA/HIP devices. Set by csrc/cuda/device_info.cpp in a build with the CUDA
// kernels (the only place that includes CUDA headers); null otherwise.
using GpuInfoFn = void (*)(BackendStatus* status);
void set_gpu_info_provider(GpuInfoFn fn);
GpuInfoFn gpu_info_provider();

// Whether this library was built with its CUDA (or hipified) kernels.
bool built_with_cuda();

}  // namespace yirage::probes
