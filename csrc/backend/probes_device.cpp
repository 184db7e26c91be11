// Probes of the devices that run the yirage ops: cpu, cuda, rocm, mps and the PrivateUse1 device. Torch is
// asked through its accelerator hooks (no CUDA header here: the CPU build never includes one); per-device GPU
// properties come from csrc/cuda/device_info.cpp when the CUDA kernels are built.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/detail/MPSHooksInterface.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <unistd.h>

#include <atomic>
#include <initializer_list>
#include <string>
#include <string_view>

#include "backend/probes.h"
#include "kernels/cpu/isa.h"

namespace yirage::probes {

namespace {

std::atomic<GpuInfoFn> g_gpu_info{nullptr};

int64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

// Concatenation by append: GCC 12 at -O2 warns falsely (-Wstringop-overflow) on chains of std::string operator+.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p.data(), p.size());
  return out;
}

bool torch_gpu_built() { return at::detail::getCUDAHooks().isBuilt(); }
bool torch_is_rocm() { return torch_gpu_built() && at::detail::getCUDAHooks().hasROCM(); }

int gpu_count() { return torch_gpu_built() ? at::detail::getCUDAHooks().getNumGPUs() : 0; }

// cuda and rocm share the CUDA dispatch key and torch's CUDA hooks; `rocm` selects which of the two this is.
// Available: torch of that kind, a device, and kernels of ours registered at the CUDA key.
BackendStatus gpu(bool rocm) {
  const char* name = rocm ? "ROCm" : "CUDA";
  const bool ours = op_support_at("rms_norm", c10::DispatchKey::CUDA) != OpSupport::none;
  BackendStatus s;
  s.compiled = ours && torch_gpu_built() && torch_is_rocm() == rocm;
  if (!torch_gpu_built()) {
    s.reason = cat({"this torch is a CPU-only build (no ", name, " support)"});
    return s;
  }
  if (torch_is_rocm() != rocm) {
    s.reason = rocm ? "this torch is a CUDA build, not a ROCm build (use the 'cuda' backend)"
                    : "this torch is a ROCm build (use the 'rocm' backend)";
    return s;
  }
  s.device_count = gpu_count();
  if (GpuInfoFn fn = g_gpu_info.load()) fn(&s);
  if (s.device_count == 0) {
    s.reason = cat({"no ", name, " device is visible (torch finds 0 devices)"});
  } else if (!ours) {
    s.reason = cat({"yirage_ext has no ", name, " kernels registered (",
                    built_with_cuda() ? "none in this version" : "built without them", ")"});
  } else {
    s.available = true;
  }
  return s;
}

}  // namespace

void set_gpu_info_provider(GpuInfoFn fn) { g_gpu_info.store(fn); }
GpuInfoFn gpu_info_provider() { return g_gpu_info.load(); }

bool built_with_cuda() {
#ifdef YIRAGE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

BackendStatus cpu() {
  namespace k = yirage::kernels::cpu;
  const k::CpuFeatures& f = k::cpu_features();
  BackendStatus s;
  s.compiled = s.available = true;
  s.device_count = 1;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  s.compute_units = cores > 0 ? static_cast<int>(cores) : 1;
  s.max_memory = physical_memory();
  s.devices.push_back({f.brand[0] != '\0' ? f.brand : "CPU", s.max_memory});
  s.details["vendor"] = f.vendor;
  s.details["brand"] = f.brand;
  s.details["isa"] = k::isa_name(k::active_isa());
  s.details["best_isa"] = k::isa_name(k::best_isa());
  s.details["avx512f"] = f.avx512f ? "yes" : "no";
  s.details["amx"] = f.amx_tile ? (std::string("yes") + (f.amx_bf16 ? " bf16" : "") + (f.amx_int8 ? " int8" : ""))
                                : "no";
  s.details["threads"] = std::to_string(at::get_num_threads());
  return s;
}

BackendStatus cuda() { return gpu(/*rocm=*/false); }

BackendStatus rocm() { return gpu(/*rocm=*/true); }

BackendStatus mps() {
  BackendStatus s;
  const bool built = at::detail::getMPSHooks().isBuilt();
  s.compiled = built && op_support_at("rms_norm", c10::DispatchKey::MPS) != OpSupport::none;
  if (!built) {
    s.reason = "this torch was built without MPS (Apple GPUs, macOS only)";
    return s;
  }
  if (!at::hasMPS()) {
    s.reason = "no MPS device is available (needs an Apple GPU and macOS 12.3 or later)";
    return s;
  }
  s.device_count = 1;
  s.compute_units = 0;
  s.available = s.compiled;
  if (!s.compiled) s.reason = "yirage_ext has no MPS kernels registered";
  return s;
}

BackendStatus privateuse1() {
  BackendStatus s;
  s.compiled = op_support_at("rms_norm", c10::DispatchKey::PrivateUse1) != OpSupport::none;
  const std::string name = c10::get_privateuse1_backend(/*lower_case=*/true);
  s.details["torch_name"] = name;
  if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::PrivateUse1)) {
    s.reason = "no PrivateUse1 device is registered with torch (an out-of-tree device extension registers one, "
               "usually under its own name)";
    return s;
  }
  s.device_count = static_cast<int>(c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->deviceCount());
  if (s.device_count == 0) {
    s.reason = "the PrivateUse1 device '" + name + "' is registered but reports 0 devices";
  } else if (!s.compiled) {
    s.reason = "yirage_ext has no PrivateUse1 kernels registered";
  } else {
    s.available = true;
  }
  return s;
}

}  // namespace yirage::probes
