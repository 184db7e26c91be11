// The cache of large CPU output blocks (cpu_memory.h says what and why).
#include "common/cpu_memory.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <list>
#include <mutex>
#include <new>
#include <string>

#if defined(__linux__)
#include <pthread.h>
#include <unistd.h>
#endif

namespace yirage {

#if defined(__linux__)

namespace {

constexpr size_t kHuge = size_t{2} << 20;      // block sizes are multiples of a huge page
constexpr size_t kMinCached = size_t{4} << 20;  // smaller outputs: torch's allocator

// The cap on free blocks held: YIRAGE_CPU_CACHE_MB, else an eighth of physical memory, at most 2 GiB.
size_t cache_limit() {
  static const size_t limit = [] {
    if (const char* v = std::getenv("YIRAGE_CPU_CACHE_MB")) {
      char* end = nullptr;
      const long long mb = std::strtoll(v, &end, 10);
      TORCH_CHECK(end != v && *end == '\0' && mb >= 0,
                  "yirage: YIRAGE_CPU_CACHE_MB must be a whole number of MiB (0 turns the CPU output cache off), "
                  "got '", v, "'");
      return static_cast<size_t>(mb) << 20;
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const size_t phys = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
    return std::min<size_t>(phys / 8, size_t{2048} << 20);
  }();
  return limit;
}

struct Block {
  void* base;    // 2 MiB aligned
  size_t bytes;  // a multiple of 2 MiB
};

class OutputCache final : public c10::Allocator {
 public:
  OutputCache() {
    // fork: the child gets the lock free and the parent's free blocks (its copies of them, mapped private)
    pthread_atfork([] { instance().mutex_.lock(); }, [] { instance().mutex_.unlock(); },
                   [] { instance().mutex_.unlock(); });
  }

  static OutputCache& instance() {
    static OutputCache* cache = new OutputCache();  // never destroyed: tensors may outlive static destructors
    return *cache;
  }

  c10::DataPtr allocate(size_t n) override {
    const size_t bytes = (std::max<size_t>(n, 1) + kHuge - 1) / kHuge * kHuge;
    Block* b = take(bytes);
    if (b == nullptr) b = map(bytes);
    if (c10::memoryProfilingEnabled()) {
      c10::reportMemoryUsageToProfiler(b->base, static_cast<int64_t>(b->bytes), allocated_bytes(),
                                       reserved_bytes(), c10::Device(c10::DeviceType::CPU));
    }
    return {b->base, b, &release, c10::Device(c10::DeviceType::CPU)};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  CpuCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    CpuCacheStats s;
    s.limit_bytes = static_cast<int64_t>(cache_limit());
    s.cached_bytes = static_cast<int64_t>(cached_bytes_);
    s.cached_blocks = static_cast<int64_t>(free_.size());
    s.allocated_bytes = static_cast<int64_t>(allocated_bytes_);
    s.allocated_blocks = allocated_blocks_;
    s.hits = hits_;
    s.misses = misses_;
    return s;
  }

  void empty() {
    std::list<Block*> drop;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      drop.swap(free_);
      cached_bytes_ = 0;
    }
    for (Block* b : drop) unmap(b);
  }

 private:
  // A free block for `bytes`: the smallest of at least `bytes` and at most 1.25x, else none.
  Block* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if ((*it)->bytes >= bytes && (*it)->bytes <= bytes + bytes / 4 &&
          (best == free_.end() || (*it)->bytes < (*best)->bytes)) {
        best = it;
        if ((*it)->bytes == bytes) break;
      }
    }
    if (best == free_.end()) return nullptr;
    Block* b = *best;
    free_.erase(best);
    cached_bytes_ -= b->bytes;
    allocated_bytes_ += b->bytes;
    ++allocated_blocks_;
    ++hits_;
    return b;
  }

  // A new block of `bytes`, mapped 2 MiB aligned, huge pages advised. Out of memory: the free blocks go back to
  // the system and the mapping is tried once more.
  Block* map(size_t bytes) {
    void* base = map_aligned(bytes);
    if (base == nullptr) {
      empty();
      base = map_aligned(bytes);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, base != nullptr, "yirage: out of CPU memory allocating an output of ",
                     bytes, " bytes");
#if defined(MADV_HUGEPAGE)
    if (huge_pages_enabled()) madvise(base, bytes, MADV_HUGEPAGE);  // advisory only
#endif
    Block* b = new Block{base, bytes};
    std::lock_guard<std::mutex> lock(mutex_);
    allocated_bytes_ += bytes;
    ++allocated_blocks_;
    ++misses_;
    return b;
  }

  static void* map_aligned(size_t bytes) {
    const size_t span = bytes + kHuge;
    void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    const auto start = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (start + kHuge - 1) & ~(uintptr_t{kHuge} - 1);
    if (aligned > start) munmap(p, aligned - start);
    const uintptr_t tail = start + span - (aligned + bytes);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    return reinterpret_cast<void*>(aligned);
  }

  static void unmap(Block* b) {
    munmap(b->base, b->bytes);
    delete b;
  }

  // The deleter of every DataPtr handed out: the block joins the free list; the oldest free blocks are unmapped
  // while the list holds more than the limit (a block larger than the limit is unmapped at once).
  static void release(void* ctx) {
    auto* b = static_cast<Block*>(ctx);
    OutputCache& c = instance();
    std::list<Block*> drop;
    {
      std::lock_guard<std::mutex> lock(c.mutex_);
      c.allocated_bytes_ -= b->bytes;
      --c.allocated_blocks_;
      c.free_.push_back(b);
      c.cached_bytes_ += b->bytes;
      while (c.cached_bytes_ > cache_limit() && !c.free_.empty()) {
        Block* old = c.free_.front();
        c.free_.pop_front();
        c.cached_bytes_ -= old->bytes;
        drop.push_back(old);
      }
    }
    if (c10::memoryProfilingEnabled()) {
      c10::reportMemoryUsageToProfiler(b->base, -static_cast<int64_t>(b->bytes), c.allocated_bytes(),
                                       c.reserved_bytes(), c10::Device(c10::DeviceType::CPU));
    }
    for (Block* old : drop) unmap(old);
  }

  size_t allocated_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocated_bytes_;
  }
  size_t reserved_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocated_bytes_ + cached_bytes_;
  }

  std::mutex mutex_;
  std::list<Block*> free_;  // oldest first
  size_t cached_bytes_ = 0, allocated_bytes_ = 0;
  int64_t allocated_blocks_ = 0, hits_ = 0, misses_ = 0;
};

// The bytes of a contiguous tensor of `sizes` and `itemsize`, or 0 when the product overflows (torch's allocator
// then raises its own error).
size_t contiguous_bytes(at::IntArrayRef sizes, size_t itemsize) {
  uint64_t n = itemsize;
  for (const int64_t s : sizes) {
    if (s < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(s), &n)) return 0;
  }
  return static_cast<size_t>(n);
}

}  // namespace

at::Tensor cpu_empty(at::IntArrayRef sizes, const at::TensorOptions& options) {
  const size_t bytes = contiguous_bytes(sizes, options.dtype().itemsize());
  const bool cached = bytes >= kMinCached && cache_limit() > 0 && options.device().is_cpu() &&
                      options.layout() == c10::kStrided && !options.pinned_memory();
  if (!cached) {
    at::Tensor t = at::empty(sizes, options);
    advise_huge_pages(t);
    return t;
  }
  return at::detail::empty_generic(sizes, &OutputCache::instance(), c10::DispatchKeySet(c10::DispatchKey::CPU),
                                   c10::typeMetaToScalarType(options.dtype()), std::nullopt);
}

CpuCacheStats cpu_cache_stats() {
  if (cache_limit() == 0) return {};
  return OutputCache::instance().stats();
}

void empty_cpu_cache() {
  if (cache_limit() > 0) OutputCache::instance().empty();
}

#else  // not Linux: torch's allocator

at::Tensor cpu_empty(at::IntArrayRef sizes, const at::TensorOptions& options) { return at::empty(sizes, options); }
CpuCacheStats cpu_cache_stats() { return {}; }
void empty_cpu_cache() {}

#endif

}  // namespace yirage
