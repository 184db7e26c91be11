// Which yirage ops a dispatch key runs, read from the dispatcher; portable and fallback kernels are told apart
// from native ones by the notes their registration helpers leave (note_kernel), as long as the kernel they
// noted still serves the key.
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "backend/backend.h"

namespace yirage {

namespace {

constexpr const char* kNamespace = "yirage::";

// A note: the kind, and the dispatch-table entry of (op, key) when it was noted ("registered at FILE:LINE
// [kernel]"). A kernel registered later at that key by someone else (a vendor's native kernel for its
// PrivateUse1 device, say) replaces ours and changes the entry: the note no longer applies.
struct Note {
  OpSupport kind;
  std::string entry;
};

struct Notes {
  std::mutex mutex;
  std::map<std::pair<std::string, c10::DispatchKey>, Note> kinds;
};

Notes& notes() {
  static Notes* n = new Notes();  // never destroyed: registrations run at static initialization and exit
  return *n;
}

// The computed dispatch-table line of `key` for `op` ("" when there is none). Alias keys have no line of their
// own: Autograd is read at AutogradCPU, the runtime key every Autograd registration fills.
std::string table_entry(const std::string& op, c10::DispatchKey key) {
  const auto handle = c10::Dispatcher::singleton().findOp({kNamespace + op, ""});
  if (!handle) return "";
  const c10::DispatchKey runtime = key == c10::DispatchKey::Autograd ? c10::DispatchKey::AutogradCPU : key;
  const std::string prefix = std::string(c10::toString(runtime)) + ": ";
  std::istringstream lines(handle->dumpComputedTable());
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, prefix.size(), prefix) == 0) return line;
  }
  return "";
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
  std::string entry = table_entry(op, key);
  Notes& n = notes();
  std::lock_guard<std::mutex> lock(n.mutex);
  n.kinds[{op, key}] = Note{kind, std::move(entry)};
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
  std::optional<Note> note;
  {
    Notes& n = notes();
    std::lock_guard<std::mutex> lock(n.mutex);
    const auto it = n.kinds.find({op, key});
    if (it != n.kinds.end()) note = it->second;
  }
  if (!note || table_entry(op, key) != note->entry) return OpSupport::native;  // unnoted, or replaced since
  return note->kind;
}

}  // namespace yirage
