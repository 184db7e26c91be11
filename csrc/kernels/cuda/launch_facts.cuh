// Launch facts of the current device, asked of the CUDA runtime once per device (and kernel configuration) and
// remembered: device attributes, the SM count, resident blocks of a kernel. Host code, torch-free, thread-safe.
// Shared by the norm, skinny linear and attention launchers.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "compat.cuh"

namespace yirage::kernels::cuda {

// The facts are kept per device and per (kernel, block size or tag, shared memory): asked once instead of twice per
// norm backward call (workspace query and launch) and once per attention call. (The host time of a norm backward
// call measured 33-60 us on an H100 host both with and without; the difference was inside that host's noise.)
// Tags of device attributes and set-up steps (what < 0), one meaning each: -1 SMs, -2 opt-in shared memory per
// block, -3 a kernel's dynamic shared memory raised to the opt-in cap (norm_bwd_plan.cuh), -4 memory clock,
// -5 memory bus width, -6 compute capability (major).
namespace detail {
struct LaunchFact {
  const void* kernel;  // nullptr for a device attribute
  int device;
  int what;            // block size, or a negative tag for device attributes and set-up steps
  size_t smem;
  int value;
};
inline std::mutex& launch_facts_mutex() {
  static std::mutex m;
  return m;
}
inline std::vector<LaunchFact>& launch_facts() {
  static std::vector<LaunchFact> v;
  return v;
}
template <typename F>
inline int remembered(const void* kernel, int what, size_t smem, F ask) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return ask();
  }
  {
    std::lock_guard<std::mutex> lock(launch_facts_mutex());
    for (const LaunchFact& f : launch_facts()) {
      if (f.kernel == kernel && f.device == dev && f.what == what && f.smem == smem) return f.value;
    }
  }
  const int v = ask();
  std::lock_guard<std::mutex> lock(launch_facts_mutex());
  launch_facts().push_back({kernel, dev, what, smem, v});
  return v;
}
}  // namespace detail

// An attribute of the current device (`fallback` if the query fails), remembered under the tag `what` (< 0).
template <typename Attr>
inline int device_attribute(Attr attr, int what, int fallback) {
  return detail::remembered(nullptr, what, 0, [&] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, attr, dev) != cudaSuccess || n <= 0) {
      (void)cudaGetLastError();
      return fallback;
    }
    return n;
  });
}

// Streaming multiprocessors of the current device (1 if the query fails).
inline int sm_count() { return device_attribute(cudaDevAttrMultiProcessorCount, -1, 1); }

// The most dynamic shared memory a block of the current device may opt into (48 KiB if the query fails).
inline int smem_optin() { return device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, -2, 48 * 1024); }

// Blocks of `kernel` that fit on one SM at `block` threads and `smem` bytes of dynamic shared memory
// (at least 1).
template <typename K>
inline int blocks_per_sm(K kernel, int block, size_t smem) {
  return detail::remembered(reinterpret_cast<const void*>(kernel), block, smem, [&] {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, block, smem) != cudaSuccess || n <= 0) {
      (void)cudaGetLastError();  // clear the query's error so the next launch_status() is not polluted
      return 1;
    }
    return n;
  });
}

}  // namespace yirage::kernels::cuda
