// Which yirage ops a dispatch key runs, read from the dispatcher; portable and fallback kernels are told apart
// from native ones by the notes their registration helpers leave (note_kernel).
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <utility>

#include "backend/backend.h"

namespace yirage {

namespace {

constexpr const char* kNamespace = "yirage::";

struct Notes {
  std::mutex mutex;
  std::map<std::pair<std::string, c10::DispatchKey>, OpSupport> kinds;
};

Notes& notes() {
  static Notes* n = new Notes();  // never destroyed: registrations run at static initialization and exit
  return *n;
}

}  // namespace

const char* op_support_name(OpSupport s) {
  switch (s) {
    case OpSupport::none: return "none";
    case OpSupport::native: return "native";
    case OpSupport::portable: return "portable";
    case OpSupport::fallback: return "fallback";
  }
  return "unknown";
}

void note_kernel(const char* op, c10::DispatchKey key, OpSupport kind) {
  Notes& n = notes();
  std::lock_guard<std::mutex> lock(n.mutex);
  n.kinds[{op, key}] = kind;
}

std::vector<std::string> registered_ops() {
  std::vector<std::string> out;
  const std::string prefix = kNamespace;
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.compare(0, prefix.size(), prefix) == 0 && name.overload_name.empty()) {
      out.push_back(name.name.substr(prefix.size()));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

OpSupport op_support_at(const std::string& op, c10::DispatchKey key) {
  const auto handle = c10::Dispatcher::singleton().findOp({kNamespace + op, ""});
  if (!handle || !handle->hasKernelForDispatchKey(key)) return OpSupport::none;
  Notes& n = notes();
  std::lock_guard<std::mutex> lock(n.mutex);
  const auto it = n.kinds.find({op, key});
  return it == n.kinds.end() ? OpSupport::native : it->second;
}

}  // namespace yirage
