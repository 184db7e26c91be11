// Huge pages for large CPU outputs.
//
// A fresh multi-megabyte CPU tensor comes from mmap, and first touching it costs one page fault per
// 4 KiB page: on a 2-core machine, ~20 ms of a ~25 ms rms_norm over 64 MB. Where transparent huge
// pages are in "madvise" mode, asking for them on the output we are about to fill cuts that ~4x
// (PyTorch's own THP_MEM_ALLOC_ENABLE=1 does the same for every allocation). Only whole 2 MiB pages
// inside the tensor are advised; nothing else of the caller's memory is touched. YIRAGE_CPU_HUGEPAGES=0
// turns it off (e.g. where huge-page compaction stalls matter more than throughput).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

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

// Call on a freshly allocated output before writing it.
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

}  // namespace yirage
