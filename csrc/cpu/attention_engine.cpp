// cpu_bf16_attention_engine (cpu/attention_engine.h): whether CPU bf16 attention multiplies through torch's oneDNN
// brgemm. Its own translation unit, so the Python module's diagnostics can ask without the attention glue.
#include "cpu/attention_engine.h"

#include <ATen/native/CPUBlas.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>

namespace yirage {

bool cpu_bf16_attention_engine() {
  static const int mode = [] {
    const char* env = std::getenv("YIRAGE_CPU_AMX");
    if (env == nullptr || *env == '\0') return -1;
    TORCH_CHECK(std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0, "YIRAGE_CPU_AMX: expected 0 or 1, got '",
                env, "'");
    return *env - '0';
  }();
  static const bool amx = at::native::cpublas::could_pack(at::kBFloat16);
  return mode == 1 || (mode < 0 && amx);
}

}  // namespace yirage
