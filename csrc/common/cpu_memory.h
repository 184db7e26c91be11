// Memory for large CPU outputs: a cache of freed blocks, and huge pages.
//
// A fresh multi-megabyte CPU tensor from torch's allocator usually comes from a fresh mmap (glibc maps every
// allocation of 32 MiB and up, and often smaller ones), and first touching it costs one page fault per 4 KiB: on a
// 2-core VM an rms_norm over a 4096 x 4096 bf16 tensor took 2.9 ms in the kernel that wrote a fresh output (huge
// pages advised) and 6.8 ms with 4 KiB pages, against 1.6 ms writing memory it had written before
// (benchmarks/results/cpu-output-cache-epyc-2026-11-27.md). So the CPU ops take their outputs of 4 MiB and up
// from cpu_empty(): blocks mapped once (2 MiB aligned, transparent huge pages advised unless
// YIRAGE_CPU_HUGEPAGES=0) and, when a tensor's storage dies, kept for the next output of a size that fits, as
// PyTorch's CUDA caching allocator does on the GPU. The cache holds at most YIRAGE_CPU_CACHE_MB MiB of free
// blocks (default: an eighth of the machine's memory, at most 2048), the oldest unmapped first; 0 turns it off
// (outputs from torch's allocator, huge pages advised as before). cpu_cache_stats() / empty_cpu_cache() are
// yirage_ext.cpu_cache_stats() / yirage_ext.empty_cpu_cache(). Linux only; elsewhere torch's allocator.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "common/cpu_cache.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace yirage {

inline bool huge_pages_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("YIRAGE_CPU_HUGEPAGES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

// Asks for transparent huge pages on the whole 2 MiB pages inside a fresh tensor of 4 MiB or more (nothing else
// of the caller's memory is touched). cpu_empty() does this itself for the blocks it maps.
inline void advise_huge_pages(const at::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const size_t bytes = t.nbytes();
  if (bytes < 2 * kHuge || !huge_pages_enabled()) return;
  const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // advisory only
#else
  (void)t;
#endif
}

// A new contiguous CPU tensor (like at::empty(sizes, options)), from the cache above when it is 4 MiB or more.
at::Tensor cpu_empty(at::IntArrayRef sizes, const at::TensorOptions& options);

}  // namespace yirage
