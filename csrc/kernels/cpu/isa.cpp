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
    return Isa::avx512;
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
  }
  return "unknown";
}

bool parse_isa(const char* name, Isa* out) {
  for (Isa isa : {Isa::generic, Isa::avx2, Isa::avx512}) {
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
