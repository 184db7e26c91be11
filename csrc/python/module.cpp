// The Python module `_C`. Importing it runs the static TORCH_LIBRARY registrations of the library's other
// translation units; the ops themselves are reached through torch.ops.yirage, never from here. It carries only
// the non-op API: the CPU kernel variant (ISA), the CPU output cache's counters and the backend registry (yirage_ext.backends wraps it).
// Plain pybind11 over the C++ registry (no torch/extension.h: dtypes and dispatch keys cross as names).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>

#include "backend/backend.h"
#include "common/cpu_cache.h"
#include "cpu/attention_engine.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/isa.h"

namespace py = pybind11;

namespace {

namespace k = yirage::kernels::cpu;
using yirage::Backend;
using yirage::BackendRegistry;
using yirage::BackendStatus;

const char* dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Double: return "float64";
    default: return c10::toString(t);
  }
}

// The dispatch keys of the op table, by the names torch uses for them.
const std::vector<std::pair<const char*, c10::DispatchKey>>& table_keys() {
  static const std::vector<std::pair<const char*, c10::DispatchKey>> keys = {
      {"CPU", c10::DispatchKey::CPU},   {"CUDA", c10::DispatchKey::CUDA}, {"MPS", c10::DispatchKey::MPS},
      {"PrivateUse1", c10::DispatchKey::PrivateUse1}, {"Meta", c10::DispatchKey::Meta},
      {"Autograd", c10::DispatchKey::Autograd}};
  return keys;
}

py::dict backend_info(const std::string& name) {
  Backend& b = BackendRegistry::get_instance().backend_or_throw(name, "get_backend_info");
  const BackendStatus s = b.status();
  py::dict d;
  d["name"] = b.get_name();
  d["display_name"] = b.get_display_name();
  d["description"] = b.get_description();
  d["kind"] = b.is_device() ? "device" : "provider";
  d["compiled"] = s.compiled;
  d["available"] = s.available;
  d["reason"] = s.reason;
  d["device_count"] = s.device_count;
  py::list devices;
  for (const auto& dev : s.devices) {
    py::dict e;
    e["name"] = dev.name;
    e["memory"] = dev.memory;
    devices.append(e);
  }
  d["devices"] = devices;
  d["compute_capability"] = s.compute_capability;
  d["compute_units"] = s.compute_units;
  d["max_memory"] = s.max_memory;
  d["max_shared_memory"] = s.max_shared_memory;
  py::list dtypes;
  for (c10::ScalarType t : b.get_data_types()) dtypes.append(dtype_name(t));
  d["dtypes"] = dtypes;
  const auto key = b.dispatch_key();
  d["dispatch_key"] = key ? py::object(py::str(c10::toString(*key))) : py::object(py::none());
  py::dict ops;
  for (const auto& [op, support] : b.op_support()) ops[py::str(op)] = yirage::op_support_name(support);
  d["ops"] = ops;
  d["details"] = s.details;
  return d;
}

// op -> {dispatch key name -> native/portable/fallback/none}, for every yirage op the dispatcher has.
py::dict op_table() {
  py::dict out;
  for (const std::string& op : yirage::registered_ops()) {
    py::dict row;
    for (const auto& [name, key] : table_keys()) row[name] = yirage::op_support_name(yirage::op_support_at(op, key));
    out[py::str(op)] = row;
  }
  return out;
}

void set_external_status(const std::string& name, bool compiled, bool available, const std::string& reason,
                         const std::map<std::string, std::string>& details) {
  BackendStatus s;
  s.compiled = compiled;
  s.available = available;
  s.reason = available ? "" : reason;
  s.details = details;
  BackendRegistry::get_instance().set_external_status(name, s);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "yirage_ext native library (ops register with torch.ops.yirage on import; backend registry)";

  m.def("cpu_isa", [] { return k::isa_name(k::active_isa()); },
        "The CPU kernel variant in use: 'generic', 'avx2', 'avx512' or 'avx512_bf16'.");
  m.def("cpu_best_isa", [] { return k::isa_name(k::best_isa()); },
        "The widest CPU kernel variant this CPU supports.");
  m.def(
      "set_cpu_isa",
      [](py::object arg) {
        k::Isa isa;
        if (!py::isinstance<py::str>(arg) || !k::parse_isa(arg.cast<std::string>().c_str(), &isa)) {
          throw py::value_error("set_cpu_isa: expected one of 'generic', 'avx2', 'avx512', 'avx512_bf16', got " +
                                py::repr(arg).cast<std::string>());
        }
        if (!k::set_isa(isa)) {
          throw py::value_error("set_cpu_isa: this CPU does not support '" + arg.cast<std::string>() +
                                "' (best: '" + k::isa_name(k::best_isa()) + "')");
        }
      },
      "Select the CPU kernel variant (not wider than cpu_best_isa()).");
  m.def(
      "cpu_cache_stats",
      [] {
        const yirage::CpuCacheStats s = yirage::cpu_cache_stats();
        py::dict d;
        d["limit_bytes"] = s.limit_bytes;
        d["cached_bytes"] = s.cached_bytes;
        d["cached_blocks"] = s.cached_blocks;
        d["allocated_bytes"] = s.allocated_bytes;
        d["allocated_blocks"] = s.allocated_blocks;
        d["hits"] = s.hits;
        d["misses"] = s.misses;
        return d;
      },
      "Counters of the CPU output cache (large outputs reuse freed blocks; YIRAGE_CPU_CACHE_MB caps it).");
  m.def("empty_cpu_cache", [] { yirage::empty_cpu_cache(); },
        "Return the CPU output cache's free blocks to the system (blocks in live tensors stay).");
  m.def("cpu_own_sgemm", [] { return k::sgemm_preferred(); },
        "Whether fp32 matmul / linear products and attention's tile products run on the library's own AVX-512 "
        "GEMMs (AMD CPUs with AVX-512; YIRAGE_CPU_SGEMM=0 turns it off) rather than torch's BLAS.");
  m.def("cpu_bf16_attention_amx", [] { return yirage::cpu_bf16_attention_engine(); },
        "Whether bf16 attention's tile products go through torch's oneDNN brgemm (AMX; YIRAGE_CPU_AMX) in the "
        "avx512_bf16 variant.");
  m.def("cpu_features", [] {
    const k::CpuFeatures& f = k::cpu_features();
    py::dict d;
    d["vendor"] = f.vendor;
    d["brand"] = f.brand;
    d["avx2_fma"] = f.avx2_fma;
    d["avx512f"] = f.avx512f;
    d["amx_tile"] = f.amx_tile;
    d["amx_bf16"] = f.amx_bf16;
    d["amx_int8"] = f.amx_int8;
    d["llc_bytes"] = f.llc_bytes;
    return d;
  });

  auto& reg = BackendRegistry::get_instance();
  m.def("backend_names", [&reg] { return reg.get_backend_names(); });
  m.def("backend_info", &backend_info, py::arg("name"));
  m.def("get_available_backends", [&reg] { return reg.get_available_backends(); });
  m.def("is_backend_available", [&reg](const std::string& n) { return reg.is_backend_available(n); });
  m.def("get_default_backend", [&reg] { return reg.get_default_backend(); });
  m.def("set_default_backend", [&reg](const std::string& n) { reg.set_default_backend(n); });
  m.def("reset_default_backend", [&reg] { reg.reset_default_backend(); });
  m.def("select_backend", [&reg](const std::string& p, const std::vector<std::string>& f) { return reg.select(p, f); },
        py::arg("preferred"), py::arg("fallbacks"));
  m.def("set_external_status", &set_external_status, py::arg("name"), py::arg("compiled"), py::arg("available"),
        py::arg("reason"), py::arg("details"));
  m.def("registered_ops", &yirage::registered_ops);
  m.def("op_table", &op_table);
  m.def("built_with_cuda", [] {
#ifdef YIRAGE_WITH_CUDA
    return true;
#else
    return false;
#endif
  });
}
