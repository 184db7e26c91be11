// The counters of the CPU output cache (cpu_memory.h), without torch headers (the Python module reads them).
#pragma once

#include <cstdint>

namespace yirage {

struct CpuCacheStats {
  int64_t limit_bytes = 0;      // YIRAGE_CPU_CACHE_MB in bytes (0: off)
  int64_t cached_bytes = 0;     // free blocks held
  int64_t cached_blocks = 0;
  int64_t allocated_bytes = 0;  // blocks in tensors now
  int64_t allocated_blocks = 0;
  int64_t hits = 0;             // outputs served from a free block
  int64_t misses = 0;           // outputs that mapped a new block
};
CpuCacheStats cpu_cache_stats();
// Unmaps every free block; blocks in live tensors are unaffected.
void empty_cpu_cache();

}  // namespace yirage
