// The backend registry: every backend this library knows, whether it is compiled in, whether it is available
// here and why not, its devices, and which ops it runs (read from the dispatcher). Reachable from C++
// (LibTorch, no Python) and bound to Python by the `_C` module (yirage_ext.backends).
//
// Two kinds of backend:
//   devices    cpu, cuda, rocm, mps and the PrivateUse1 device (under the name torch knows it by): they run the
//              yirage ops, each at one dispatch key;
//   providers  cudnn, mkl, mkldnn, openmp, nnpack, cusparselt, mha, opt_einsum, triton, nki, xeon: libraries and
//              hardware features that torch or the comparison framework use; they run no yirage kernel.
// Some providers can only be answered by the Python package (triton, nki, opt_einsum, cusparselt, mha); until it
// answers (set_external_status), they are unavailable with a reason that says so.
//
// Errors: std::invalid_argument for an unknown name or a bad argument, std::runtime_error when selection finds
// nothing available (pybind11 turns them into ValueError and RuntimeError).
#pragma once

#include <c10/core/DispatchKey.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace yirage {

enum class BackendType : int {
  cpu, cuda, rocm, mps, privateuse1,  // devices: run the yirage ops
  cudnn, mkl, mkldnn, openmp, nnpack, cusparselt, mha, opt_einsum, triton, nki, xeon,  // providers
};

// How an op is implemented at a dispatch key (the vocabulary of the op tables):
//   native    a kernel written for that key: ours (CPU SIMD kernels, CUDA kernels, Meta shape functions,
//             Autograd kernels with a derivative), or one another library registered over ours (a vendor's
//             kernel for its PrivateUse1 device)
//   portable  our portable kernel, written with ATen ops (registered for MPS and PrivateUse1)
//   fallback  torch's autogradNotImplementedFallback at the Autograd key: the op runs, but differentiating
//             through it raises (the backward ops and linear_forward have no derivative of their own)
//   none      nothing of ours is registered at that key
enum class OpSupport : int { none, native, portable, fallback };
const char* op_support_name(OpSupport s);

struct DeviceInfo {
  std::string name;
  int64_t memory = 0;  // bytes
};

// What a probe found out. Filled by the probes (probes_*.cpp) or, for what only Python can know, by
// BackendRegistry::set_external_status.
struct BackendStatus {
  bool compiled = false;   // built into this binary (devices: kernels for its key; providers: torch has it)
  bool available = false;  // usable here and now
  std::string reason;      // why not available ("" when available)
  int device_count = 0;
  std::vector<DeviceInfo> devices;
  int compute_capability = 0;  // major * 10 + minor on CUDA; gfx major*10+minor on ROCm; 0 elsewhere
  int compute_units = 0;       // SMs, CUs or logical CPU cores
  int64_t max_memory = 0;      // bytes of the largest device (CPU: physical memory)
  int64_t max_shared_memory = 0;  // bytes per block (GPUs); 0 where there is no such thing
  std::map<std::string, std::string> details;  // versions, CPU brand and features, ...
};

class Backend {
 public:
  using Probe = BackendStatus (*)();
  Backend(BackendType type, std::string name, std::string display_name, std::string description, Probe probe);

  // The name users pass: for the PrivateUse1 device the name torch knows it by (renamed or "privateuseone").
  std::string get_name() const;
  std::string get_display_name() const;
  std::string get_description() const { return description_; }
  BackendType get_type() const { return type_; }
  bool is_device() const { return type_ <= BackendType::privateuse1; }
  bool is_compiled() const { return status().compiled; }
  bool is_available() const { return status().available; }
  std::string unavailable_reason() const { return status().reason; }
  int64_t get_max_memory() const { return status().max_memory; }
  int64_t get_max_shared_memory() const { return status().max_shared_memory; }
  int get_device_count() const { return status().device_count; }
  int get_compute_capability() const { return status().compute_capability; }
  int get_compute_units() const { return status().compute_units; }
  std::vector<DeviceInfo> get_devices() const { return status().devices; }
  // The dtypes the yirage ops accept on this backend (empty for providers).
  std::vector<c10::ScalarType> get_data_types() const;
  bool supports_data_type(c10::ScalarType dtype) const;
  // The dispatch key the yirage ops run at on this backend (none for providers).
  std::optional<c10::DispatchKey> dispatch_key() const;
  // op name (without "yirage::") -> how it runs here, for every yirage op the dispatcher knows (empty for
  // providers).
  std::map<std::string, OpSupport> op_support() const;
  // Everything at once (one probe).
  BackendStatus status() const;

 private:
  friend class BackendRegistry;
  BackendType type_;
  std::string name_, display_name_, description_;
  Probe probe_;
  mutable std::mutex mutex_;
  std::optional<BackendStatus> external_;  // set from Python for what only Python can know
};

class BackendRegistry {
 public:
  static BackendRegistry& get_instance();

  // nullptr for an unknown name. Names are lower case; the PrivateUse1 device answers to its current name and
  // to "privateuseone".
  Backend* get_backend(const std::string& name);
  // Same, but throws std::invalid_argument naming the known backends.
  Backend& backend_or_throw(const std::string& name, const char* what);
  std::vector<Backend*> get_all_backends();
  std::vector<std::string> get_backend_names();
  std::vector<std::string> get_available_backends();
  bool is_backend_available(const std::string& name);  // throws for an unknown name

  // The default device backend: the one set by set_default_backend, else the first available of cuda, rocm,
  // mps, the PrivateUse1 device, cpu.
  std::string get_default_backend();
  // Throws std::invalid_argument for an unknown name, a provider, or an unavailable backend (with its reason).
  void set_default_backend(const std::string& name);
  void reset_default_backend();
  // The first available of preferred, then fallbacks in order. Throws std::runtime_error listing every
  // candidate with its reason when none is available; std::invalid_argument for an unknown name.
  std::string select(const std::string& preferred, const std::vector<std::string>& fallbacks = {});

  // Answers for a backend that only the host language can probe (Triton, NKI, ...).
  void set_external_status(const std::string& name, const BackendStatus& status);

 private:
  BackendRegistry();
  std::vector<std::unique_ptr<Backend>> backends_;
  std::mutex mutex_;
  std::string default_;
};

// Free functions of the original design.
inline BackendRegistry& backend_registry() { return BackendRegistry::get_instance(); }
std::string get_default_backend();
std::vector<std::string> get_available_backends();
bool is_backend_available(const std::string& name);

// The names of every yirage op registered with the dispatcher, without "yirage::", sorted.
std::vector<std::string> registered_ops();
// How `op` (without "yirage::") is implemented at `key`, from the dispatcher.
OpSupport op_support_at(const std::string& op, c10::DispatchKey key);
// Classifies a kernel that a registration helper put at (op, key) as portable or fallback (see OpSupport);
// a kernel of ours without a note is native. Registration helpers call it right after registering
// (portable/register.h, autograd/no_double_backward.cpp); it is not a list kept by hand. A kernel registered
// later at the same (op, key) by someone else (a vendor's native kernel for its PrivateUse1 device) replaces
// ours, and the op then reports native there.
void note_kernel(const char* op, c10::DispatchKey key, OpSupport kind);

}  // namespace yirage
