// The registry of backends (see backend.h): the table of known backends, selection with fallbacks, the default.
#include <c10/core/DeviceType.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "backend/backend.h"
#include "backend/probes.h"

namespace yirage {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// ---- Backend ----

Backend::Backend(BackendType type, std::string name, std::string display_name, std::string description, Probe probe)
    : type_(type), name_(std::move(name)), display_name_(std::move(display_name)),
      description_(std::move(description)), probe_(probe) {}

std::string Backend::get_name() const {
  return type_ == BackendType::privateuse1 ? c10::get_privateuse1_backend(/*lower_case=*/true) : name_;
}

std::string Backend::get_display_name() const {
  if (type_ != BackendType::privateuse1) return display_name_;
  return "PrivateUse1 device '" + get_name() + "'";
}

BackendStatus Backend::status() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (external_) return *external_;
  }
  return probe_();
}

std::vector<c10::ScalarType> Backend::get_data_types() const {
  switch (type_) {
    case BackendType::cpu: return {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble};
    case BackendType::cuda:
    case BackendType::rocm:
    case BackendType::mps:
    case BackendType::privateuse1: return {at::kFloat, at::kHalf, at::kBFloat16};
    default: return {};
  }
}

bool Backend::supports_data_type(c10::ScalarType dtype) const {
  const auto types = get_data_types();
  return std::find(types.begin(), types.end(), dtype) != types.end();
}

std::optional<c10::DispatchKey> Backend::dispatch_key() const {
  switch (type_) {
    case BackendType::cpu: return c10::DispatchKey::CPU;
    case BackendType::cuda:
    case BackendType::rocm: return c10::DispatchKey::CUDA;  // HIP builds register at the CUDA key
    case BackendType::mps: return c10::DispatchKey::MPS;
    case BackendType::privateuse1: return c10::DispatchKey::PrivateUse1;
    default: return std::nullopt;
  }
}

std::map<std::string, OpSupport> Backend::op_support() const {
  std::map<std::string, OpSupport> out;
  const auto key = dispatch_key();
  if (!key) return out;
  for (const std::string& op : registered_ops()) out[op] = op_support_at(op, *key);
  return out;
}

// ---- BackendRegistry ----

BackendRegistry::BackendRegistry() {
  using T = BackendType;
  namespace p = probes;
  auto add = [this](T type, const char* name, const char* display, const char* what, Backend::Probe probe) {
    backends_.push_back(std::make_unique<Backend>(type, name, display, what, probe));
  };
  add(T::cpu, "cpu", "CPU", "device: native SIMD kernels (runtime ISA dispatch)", p::cpu);
  add(T::cuda, "cuda", "NVIDIA CUDA", "device: native CUDA kernels", p::cuda);
  add(T::rocm, "rocm", "AMD ROCm (HIP)", "device: the CUDA kernels hipified", p::rocm);
  add(T::mps, "mps", "Apple MPS", "device: portable ATen kernels", p::mps);
  add(T::privateuse1, "privateuseone", "PrivateUse1", "device: portable ATen kernels", p::privateuse1);
  add(T::cudnn, "cudnn", "NVIDIA cuDNN", "provider: torch's cuDNN library (SDPA, convolutions)", p::cudnn);
  add(T::mkl, "mkl", "Intel MKL", "provider: torch's BLAS/FFT library on CPU", p::mkl);
  add(T::mkldnn, "mkldnn", "oneDNN (MKLDNN)", "provider: torch's oneDNN CPU kernels", p::mkldnn);
  add(T::openmp, "openmp", "OpenMP", "provider: torch's CPU thread pool", p::openmp);
  add(T::nnpack, "nnpack", "NNPACK", "provider: torch's NNPACK CPU convolutions", p::nnpack);
  add(T::cusparselt, "cusparselt", "NVIDIA cuSPARSELt", "provider: torch's semi-structured sparse GEMMs",
      p::python_only);
  add(T::mha, "mha", "torch MHA fast path", "provider: nn.MultiheadAttention's fused fast path", p::python_only);
  add(T::opt_einsum, "opt_einsum", "opt_einsum", "provider: contraction-order optimizer for torch.einsum",
      p::python_only);
  add(T::triton, "triton", "Triton", "provider: Triton kernels (torch.compile, comparisons)", p::python_only);
  add(T::nki, "nki", "AWS Neuron (NKI)", "provider: the AWS Neuron Kernel Interface", p::python_only);
  add(T::xeon, "xeon", "Intel Xeon (AVX-512/AMX)", "provider: an Intel CPU with AVX-512 or AMX", p::xeon);
}

BackendRegistry& BackendRegistry::get_instance() {
  static BackendRegistry* registry = new BackendRegistry();  // never destroyed (used until exit)
  return *registry;
}

Backend* BackendRegistry::get_backend(const std::string& name) {
  const std::string n = lower(name);
  for (auto& b : backends_) {
    if (b->get_name() == n || b->name_ == n) return b.get();
  }
  return nullptr;
}

Backend& BackendRegistry::backend_or_throw(const std::string& name, const char* what) {
  Backend* b = get_backend(name);
  if (b == nullptr) {
    throw std::invalid_argument(std::string(what) + ": unknown backend '" + name + "'; expected one of " +
                                join(get_backend_names()));
  }
  return *b;
}

std::vector<Backend*> BackendRegistry::get_all_backends() {
  std::vector<Backend*> out;
  for (auto& b : backends_) out.push_back(b.get());
  return out;
}

std::vector<std::string> BackendRegistry::get_backend_names() {
  std::vector<std::string> out;
  for (auto& b : backends_) out.push_back(b->get_name());
  return out;
}

std::vector<std::string> BackendRegistry::get_available_backends() {
  std::vector<std::string> out;
  for (auto& b : backends_) {
    if (b->is_available()) out.push_back(b->get_name());
  }
  return out;
}

bool BackendRegistry::is_backend_available(const std::string& name) {
  return backend_or_throw(name, "is_backend_available").is_available();
}

std::string BackendRegistry::get_default_backend() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!default_.empty()) return default_;
  }
  for (auto& b : backends_) {  // devices come first, in the order of preference; cpu is always available
    if (b->is_device() && b->get_type() != BackendType::cpu && b->is_available()) return b->get_name();
  }
  return "cpu";
}

void BackendRegistry::set_default_backend(const std::string& name) {
  Backend& b = backend_or_throw(name, "set_default_backend");
  if (!b.is_device()) {
    std::vector<std::string> devices;
    for (auto& d : backends_) {
      if (d->is_device()) devices.push_back(d->get_name());
    }
    throw std::invalid_argument("set_default_backend: '" + name + "' is a provider, not a device that runs the "
                                "yirage ops; expected one of " + join(devices));
  }
  const BackendStatus s = b.status();
  if (!s.available) {
    throw std::invalid_argument("set_default_backend: backend '" + b.get_name() + "' is not available: " +
                                s.reason);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  default_ = b.get_name();
}

void BackendRegistry::reset_default_backend() {
  std::lock_guard<std::mutex> lock(mutex_);
  default_.clear();
}

std::string BackendRegistry::select(const std::string& preferred, const std::vector<std::string>& fallbacks) {
  std::vector<Backend*> candidates{&backend_or_throw(preferred, "select_backend")};
  for (const auto& f : fallbacks) candidates.push_back(&backend_or_throw(f, "select_backend"));
  std::string why;
  for (Backend* b : candidates) {
    const BackendStatus s = b->status();
    if (s.available) return b->get_name();
    why += "\n  " + b->get_name() + ": " + s.reason;
  }
  throw std::runtime_error("select_backend: none of the requested backends is available (preferred '" + preferred +
                           "', fallbacks [" + join(fallbacks) + "]):" + why + "\navailable here: " +
                           join(get_available_backends()));
}

void BackendRegistry::set_external_status(const std::string& name, const BackendStatus& status) {
  Backend& b = backend_or_throw(name, "set_external_status");
  if (b.probe_ != &probes::python_only) {
    throw std::invalid_argument("set_external_status: backend '" + name + "' is probed in C++; expected one of "
                                "the backends only the host language can probe (cusparselt, mha, opt_einsum, "
                                "triton, nki)");
  }
  if (!status.available && status.reason.empty()) {
    throw std::invalid_argument("set_external_status: backend '" + name + "' is unavailable but no reason was "
                                "given; expected a reason");
  }
  std::lock_guard<std::mutex> lock(b.mutex_);
  b.external_ = status;
}

// ---- free functions ----

std::string get_default_backend() { return BackendRegistry::get_instance().get_default_backend(); }

std::vector<std::string> get_available_backends() { return BackendRegistry::get_instance().get_available_backends(); }

bool is_backend_available(const std::string& name) {
  return BackendRegistry::get_instance().is_backend_available(name);
}

}  // namespace yirage
