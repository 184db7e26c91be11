// One way to register the portable kernels: for MPS and PrivateUse1 alike, and noted as portable so that the
// backend registry can tell them from native kernels at those keys (backend/backend.h, OpSupport).
//
//   void register_rms_norm_kernels(yirage::PortableKernels& k) { k.impl("rms_norm", &rms_norm_portable); ... }
//   YIRAGE_PORTABLE_KERNELS(register_rms_norm_kernels)
//
// The function name must be unique in the directory: the portable files are compiled as one translation
// unit (UNITY_DIRS in yirage_ext/_build_config.py).
#pragma once

#include <torch/library.h>

#include "backend/backend.h"

namespace yirage {

class PortableKernels {
 public:
  PortableKernels(torch::Library& m, c10::DispatchKey key) : m_(m), key_(key) {}
  template <typename Fn>
  void impl(const char* op, Fn&& fn) {
    m_.impl(op, std::forward<Fn>(fn));
    note_kernel(op, key_, OpSupport::portable);
  }

 private:
  torch::Library& m_;
  c10::DispatchKey key_;
};

}  // namespace yirage

#define YIRAGE_PORTABLE_KERNELS(register_fn)                       \
  TORCH_LIBRARY_IMPL(yirage, MPS, m) {                             \
    ::yirage::PortableKernels k(m, c10::DispatchKey::MPS);         \
    register_fn(k);                                                \
  }                                                                \
  TORCH_LIBRARY_IMPL(yirage, PrivateUse1, m) {                     \
    ::yirage::PortableKernels k(m, c10::DispatchKey::PrivateUse1); \
    register_fn(k);                                                \
  }
