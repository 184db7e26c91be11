#include "isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace yirage::kernels::cpu {

namespace {

Isa detect() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the wide register state (XCR0).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("fma")) {
    return __builtin_cpu_supports("avx512bf16") ? Isa::avx512_bf16 : Isa::avx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return Isa::avx2;
  }
#endif
  return Isa::generic;
}

int initial_isa() {
  Isa isa = best_isa();
  const char* env = std::getenv("YIRAGE_CPU_ISA");
  Isa wanted;
  if (env != nullptr && *env != '\0' && std::strcmp(env, "auto") != 0 && parse_isa(env, &wanted) &&
      static_cast<int>(wanted) < static_cast<int>(isa)) {
    isa = wanted;
  }
  return static_cast<int>(isa);
}

std::atomic<int>& active() {
  static std::atomic<int> value{initial_isa()};
  return value;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::generic: return "generic";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512_bf16: return "avx512_bf16";
  }
  return "unknown";
}

bool parse_isa(const char* name, Isa* out) {
  for (Isa isa : {Isa::generic, Isa::avx2, Isa::avx512, Isa::avx512_bf16}) {
    if (std::strcmp(name, isa_name(isa)) == 0) {
      *out = isa;
      return true;
    }
  }
  return false;
}

Isa best_isa() {
  static const Isa best = detect();
  return best;
}

Isa active_isa() { return static_cast<Isa>(active().load(std::memory_order_relaxed)); }

bool set_isa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(best_isa())) return false;
  active().store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

}  // namespace yirage::kernels::cpu

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

namespace yirage::kernels::cpu {

namespace {

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The largest data or unified cache of the highest level that cpuid's deterministic cache parameters (leaf 4 on
// Intel, 0x8000001D on AMD: the same layout) list, in bytes; 0 when there are none.
uint64_t last_level_cache(unsigned leaf) {
  uint64_t size = 0;
  unsigned level = 0;
  for (unsigned i = 0; i < 16; ++i) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    __cpuid_count(leaf, i, a, b, c, d);
    const unsigned type = a & 31u;
    if (type == 0) break;
    if (type == 2) continue;  // instruction cache
    const unsigned lv = (a >> 5) & 7u;
    const uint64_t bytes = uint64_t((b >> 22) + 1) * (((b >> 12) & 1023u) + 1) * ((b & 4095u) + 1) * (uint64_t(c) + 1);
    if (lv > level || (lv == level && bytes > size)) {
      level = lv;
      size = bytes;
    }
  }
  return size;
}
#endif

CpuFeatures read_features() {
  CpuFeatures f{};
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    const unsigned max_leaf = a;
    std::memcpy(f.vendor + 0, &b, 4);
    std::memcpy(f.vendor + 4, &d, 4);
    std::memcpy(f.vendor + 8, &c, 4);
    __builtin_cpu_init();
    f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    if (max_leaf >= 7) {
      __cpuid_count(7, 0, a, b, c, d);
      const bool tile = (d >> 24) & 1u;
      // The OS must enable the tile state: XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA). Linux also needs
      // a per-process arch_prctl request before the first tile instruction; that is the user's job.
      unsigned xcr0_hi = 0, xcr0_lo = 0;
      bool os_tiles = false;
      __cpuid(1, a, b, c, d);
      if ((c >> 27) & 1u) {  // OSXSAVE: xgetbv is allowed
        __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
        os_tiles = ((xcr0_lo >> 17) & 3u) == 3u;
      }
      __cpuid_count(7, 0, a, b, c, d);
      f.amx_tile = tile && os_tiles;
      f.amx_bf16 = f.amx_tile && ((d >> 22) & 1u);
      f.amx_int8 = f.amx_tile && ((d >> 25) & 1u);
    }
    __get_cpuid(0x80000000u, &a, &b, &c, &d);
    const unsigned max_ext = a;
    const bool amd = std::memcmp(f.vendor, "AuthenticAMD", 12) == 0;
    if (amd && max_ext >= 0x8000001Du) f.llc_bytes = last_level_cache(0x8000001Du);
    else if (!amd && max_leaf >= 4) f.llc_bytes = last_level_cache(4);
    if (a >= 0x80000004u) {
      unsigned regs[12];
      for (unsigned i = 0; i < 3; ++i) __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                                                   &regs[4 * i + 3]);
      std::memcpy(f.brand, regs, 48);
      // trim the padding spaces some CPUs put around the brand
      char* s = f.brand;
      while (*s == ' ') ++s;
      std::memmove(f.brand, s, std::strlen(s) + 1);
      for (size_t n = std::strlen(f.brand); n > 0 && f.brand[n - 1] == ' '; --n) f.brand[n - 1] = '\0';
    }
  }
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = read_features();
  return features;
}

}  // namespace yirage::kernels::cpu
