// Probes of the providers: libraries and CPU features that torch (or the comparison framework) uses, asked from
// torch's own flags (the same ones torch.backends.* reads) and, for xeon, from cpuid.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/_nnpack_available.h>

#include "backend/probes.h"
#include "kernels/cpu/isa.h"

namespace yirage::probes {

namespace {

BackendStatus provider(bool compiled, bool available, std::string reason) {
  BackendStatus s;
  s.compiled = compiled;
  s.available = available;
  if (!available) s.reason = std::move(reason);
  return s;
}

}  // namespace

BackendStatus cudnn() {
  const bool built = at::globalContext().hasCuDNN();
  BackendStatus s = provider(built, built && at::hasCUDA(),
                             built ? "cuDNN is built into torch but no CUDA device is visible"
                                   : "this torch was built without cuDNN");
  if (s.available) {
    s.details["version"] = std::to_string(at::detail::getCUDAHooks().versionCuDNN());
    if (!at::globalContext().userEnabledCuDNN()) {
      s.available = false;
      s.reason = "disabled (torch.backends.cudnn.enabled is False)";
    }
  }
  return s;
}

BackendStatus mkl() {
  return provider(at::hasMKL(), at::hasMKL(), "this torch was built without MKL");
}

BackendStatus mkldnn() {
  const bool built = at::hasMKLDNN();
  BackendStatus s = provider(built, built, "this torch was built without oneDNN (MKLDNN)");
  if (built && !at::globalContext().userEnabledMkldnn()) {
    s.available = false;
    s.reason = "disabled (torch.backends.mkldnn.enabled is False)";
  }
  return s;
}

BackendStatus openmp() {
  BackendStatus s = provider(at::hasOpenMP(), at::hasOpenMP(), "this torch was built without OpenMP");
  s.details["threads"] = std::to_string(at::get_num_threads());
  return s;
}

BackendStatus nnpack() {
  const bool built = at::_nnpack_available();
  BackendStatus s = provider(built, built, "this torch was built without NNPACK (or it failed to initialize)");
  if (built && !at::globalContext().userEnabledNNPACK()) {
    s.available = false;
    s.reason = "disabled (torch.backends.nnpack is turned off)";
  }
  return s;
}

BackendStatus xeon() {
  const auto& f = yirage::kernels::cpu::cpu_features();
  const std::string vendor = f.vendor, brand = f.brand[0] ? f.brand : "unknown CPU";
  BackendStatus s;
  s.compiled = true;
  s.details["brand"] = brand;
  s.details["avx512f"] = f.avx512f ? "yes" : "no";
  s.details["amx"] = f.amx_tile ? "yes" : "no";
  if (vendor.empty()) {
    s.reason = "not an x86-64 CPU";
  } else if (vendor != "GenuineIntel") {
    s.reason = "the CPU is not an Intel one (" + vendor + ", " + brand + ")";
  } else if (!f.avx512f && !f.amx_tile) {
    s.reason = "the Intel CPU has neither AVX-512 nor AMX (" + brand + ")";
  } else {
    s.available = true;
  }
  return s;
}

BackendStatus python_only() {
  return provider(false, false, "only the Python package can probe it (import yirage_ext answers it)");
}

}  // namespace yirage::probes
