// attention: the argument checks every backend runs (CPU, CUDA, portable, Meta), and the default scale.
#pragma once

#include <ATen/core/Tensor.h>

#include <cmath>
#include <optional>

#include "common/checks.h"

namespace yirage {

inline void check_rank4(const char* op, const char* arg, const at::Tensor& t, const char* layout) {
  TORCH_CHECK_VALUE(t.dim() == 4, "yirage.", op, ": ", arg, " must have 4 dimensions ", layout, ", got ", t.dim(),
                    " (shape ", t.sym_sizes(), ")");
}

// q (B, Hq, Sq, D), k and v (B, Hk, Sk, D): floating, one dtype and device, Hk >= 1 divides Hq (GQA),
// D >= 1; scale, when given, a finite number (any sign: 0 averages the visible values uniformly).
inline void check_attention(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            std::optional<double> scale) {
  check_defined(op, "q", q);
  check_defined(op, "k", k);
  check_defined(op, "v", v);
  check_float(op, "q", q);
  check_same_dtype(op, "k", k, "q", q);
  check_same_dtype(op, "v", v, "q", q);
  check_same_device(op, "k", k, "q", q);
  check_same_device(op, "v", v, "q", q);
  check_rank4(op, "q", q, "(B, Hq, Sq, D)");
  check_rank4(op, "k", k, "(B, Hk, Sk, D)");
  check_rank4(op, "v", v, "(B, Hk, Sk, D)");
  const auto eq = [](const c10::SymInt& a, const c10::SymInt& b) {
    return a.sym_eq(b).expect_true(__FILE__, __LINE__);
  };
  TORCH_CHECK_VALUE(eq(k.sym_size(0), q.sym_size(0)) && eq(k.sym_size(3), q.sym_size(3)), "yirage.", op,
                    ": k must have the batch size B = ", q.sym_size(0), " and head dim D = ", q.sym_size(3),
                    " of q ", q.sym_sizes(), ", got ", k.sym_sizes());
  check_same_shape(op, "v", v, "k", k);
  TORCH_CHECK_VALUE(q.sym_size(3).sym_ge(1).expect_true(__FILE__, __LINE__), "yirage.", op,
                    ": q must have a head dim D >= 1, got ", q.sym_sizes());
  TORCH_CHECK_VALUE(k.sym_size(1).sym_ge(1).expect_true(__FILE__, __LINE__), "yirage.", op,
                    ": k must have at least one head, got ", k.sym_sizes());
  TORCH_CHECK_VALUE((q.sym_size(1) % k.sym_size(1)).sym_eq(0).expect_true(__FILE__, __LINE__), "yirage.", op,
                    ": q must have a number of heads divisible by the heads of k and v (GQA), got Hq = ",
                    q.sym_size(1), " query heads and Hk = ", k.sym_size(1), " key/value heads");
  if (scale.has_value()) {
    TORCH_CHECK_VALUE(std::isfinite(*scale), "yirage.", op, ": scale must be a finite number or None, got ", *scale);
  }
}

// The extra arguments of attention_backward: grad_out and out shaped like q, lse (B, Hq, Sq) in the
// accumulation type (float32; float64 for float64 inputs), all on q's device.
inline void check_attention_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                     std::optional<double> scale) {
  const char* op = "attention_backward";
  check_attention(op, q, k, v, scale);
  const auto like_q = [&](const char* name, const at::Tensor& t) {
    check_defined(op, name, t);
    check_same_dtype(op, name, t, "q", q);
    check_same_device(op, name, t, "q", q);
    check_same_shape(op, name, t, "q", q);
  };
  like_q("grad_out", grad_out);
  like_q("out", out);
  check_defined(op, "lse", lse);
  const at::ScalarType acc = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  TORCH_CHECK_TYPE(lse.scalar_type() == acc, "yirage.", op, ": lse must have dtype ", dtype_name(acc),
                   " (the accumulation type of ", dtype_name(q.scalar_type()), " inputs), got ",
                   dtype_name(lse.scalar_type()));
  check_same_device(op, "lse", lse, "q", q);
  bool same = lse.dim() == 3;
  for (int64_t d = 0; same && d < 3; ++d) {
    same = lse.sym_size(d).sym_eq(q.sym_size(d)).expect_true(__FILE__, __LINE__);
  }
  TORCH_CHECK_VALUE(same, "yirage.", op, ": lse must have shape (B, Hq, Sq) = (", q.sym_size(0), ", ",
                    q.sym_size(1), ", ", q.sym_size(2), "), got ", lse.sym_sizes());
}

// 1/sqrt(D) unless the caller gave a scale.
inline double attention_scale(const at::Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}

}  // namespace yirage
