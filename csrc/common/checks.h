// Argument checks shared by every op and every backend (glue code only: includes ATen).
//
// Messages follow one shape: "yirage.<op>: <arg> must <expectation>, got <what was given>".
// Wrong dtypes raise TypeError, wrong shapes and values ValueError, device mismatches RuntimeError.
// Size comparisons go through SymInt so the same checks run in the Meta kernels under torch.compile
// with dynamic shapes (a symbolic comparison becomes a deferred runtime assert, not a guard).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cmath>

namespace yirage {

// The name a PyTorch user writes (torch.<name>), not c10's ("Long", "Float").
inline const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kDouble: return "float64";
    case at::kBool: return "bool";
    case at::kByte: return "uint8";
    case at::kChar: return "int8";
    case at::kShort: return "int16";
    case at::kInt: return "int32";
    case at::kLong: return "int64";
    case at::kComplexFloat: return "complex64";
    case at::kComplexDouble: return "complex128";
    case at::kComplexHalf: return "complex32";
    default: return c10::toString(t);
  }
}

// An optional tensor argument that was given (Tensor? in a schema: absent, or present but undefined).
inline bool has(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }

inline bool is_supported_float(at::ScalarType t) {
  return t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kDouble;
}

inline void check_defined(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.defined(), "yirage.", op, ": ", arg, " must be a tensor, got an undefined tensor");
}

inline void check_float(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK_TYPE(is_supported_float(t.scalar_type()), "yirage.", op, ": ", arg,
                   " must have dtype float32, float16, bfloat16 or float64, got ", dtype_name(t.scalar_type()));
}

inline void check_same_dtype(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg,
                             const at::Tensor& ref) {
  TORCH_CHECK_TYPE(t.scalar_type() == ref.scalar_type(), "yirage.", op, ": ", arg, " must have the dtype of ",
                   ref_arg, " (", dtype_name(ref.scalar_type()), "), got ", dtype_name(t.scalar_type()));
}

inline void check_same_device(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg,
                              const at::Tensor& ref) {
  TORCH_CHECK(t.device() == ref.device(), "yirage.", op, ": ", arg, " must be on the device of ", ref_arg,
              " (", ref.device(), "), got ", t.device());
}

inline void check_same_shape(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg,
                             const at::Tensor& ref) {
  bool same = t.dim() == ref.dim();
  for (int64_t d = 0; same && d < t.dim(); ++d) {
    same = t.sym_size(d).sym_eq(ref.sym_size(d)).expect_true(__FILE__, __LINE__);
  }
  TORCH_CHECK_VALUE(same, "yirage.", op, ": ", arg, " must have the shape of ", ref_arg, " ", ref.sym_sizes(),
                    ", got ", t.sym_sizes());
}

// A per-feature parameter (weight, bias) of a norm over the last dim of x: shape (N,), x's dtype and device.
inline void check_feature_param(const char* op, const char* arg, const at::Tensor& t, const at::Tensor& x) {
  check_same_dtype(op, arg, t, "x", x);
  check_same_device(op, arg, t, "x", x);
  TORCH_CHECK_VALUE(t.dim() == 1 && t.sym_size(0).sym_eq(x.sym_size(-1)).expect_true(__FILE__, __LINE__),
                    "yirage.", op, ": ", arg, " must have shape (N,) = (", x.sym_size(-1),
                    ",) to match the last dim of x, got ", t.sym_sizes());
}

inline void check_eps(const char* op, double eps) {
  TORCH_CHECK_VALUE(std::isfinite(eps) && eps >= 0.0, "yirage.", op,
                    ": eps must be a finite number >= 0, got ", eps);
}

}  // namespace yirage
