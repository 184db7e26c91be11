// rotary_embedding: the argument checks every backend runs (CPU, CUDA, portable, Meta), and the
// (batch, seq, head) strides of each input that the CPU and CUDA glue hand their kernels.
//
// q (..., S, Hq, D) and k (..., S, Hk, D): floating, k with q's dtype, device, leading dims, S and D (the
// head counts may differ). cos and sin (S, R/2) or (..., S, R/2) with R = 2 * (R/2) <= D: q's dtype, or
// float32 when q is float16/bfloat16 (tables kept in full precision); sin with cos's dtype and shape; any
// leading dims broadcast to q's (aligned right, each 1 or equal), e.g. (B, S, R/2) for per-sequence positions.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/accumulate.h>

#include <optional>
#include <vector>

#include "common/checks.h"

namespace yirage {

namespace rotary_detail {

inline bool sym_eq(const c10::SymInt& a, const c10::SymInt& b) {
  return a.sym_eq(b).expect_true(__FILE__, __LINE__);
}

}  // namespace rotary_detail

// One of q, k (or a gradient of an output): a floating tensor (..., S, H, D).
inline void check_rotary_heads(const char* op, const char* arg, const at::Tensor& x) {
  check_defined(op, arg, x);
  check_float(op, arg, x);
  TORCH_CHECK_VALUE(x.dim() >= 3, "yirage.", op, ": ", arg, " must have at least 3 dimensions (..., S, H, D), got ",
                    x.sym_sizes());
}

// t against ref (both (..., S, H, D)): ref's dtype, device, leading dims, S and D; any head count.
inline void check_rotary_like(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg,
                              const at::Tensor& ref) {
  check_defined(op, arg, t);
  check_same_dtype(op, arg, t, ref_arg, ref);
  check_same_device(op, arg, t, ref_arg, ref);
  bool same = t.dim() == ref.dim() && rotary_detail::sym_eq(t.sym_size(-1), ref.sym_size(-1));
  for (int64_t d = 0; same && d < t.dim() - 2; ++d) same = rotary_detail::sym_eq(t.sym_size(d), ref.sym_size(d));
  TORCH_CHECK_VALUE(same, "yirage.", op, ": ", arg,
                    " must have shape (..., S, H, D) with the leading dims, S and D of ", ref_arg, " ",
                    ref.sym_sizes(), " (any H), got ", t.sym_sizes());
}

// cos and sin against x (q, or what stands for it): see the header comment for the rules.
inline void check_rotary_tables(const char* op, const at::Tensor& cos, const at::Tensor& sin, const char* x_arg,
                                const at::Tensor& x) {
  check_defined(op, "cos", cos);
  check_defined(op, "sin", sin);
  const at::ScalarType xt = x.scalar_type(), ct = cos.scalar_type();
  const bool half = xt == at::kHalf || xt == at::kBFloat16;
  TORCH_CHECK_TYPE(ct == xt || (half && ct == at::kFloat), "yirage.", op, ": cos must have the dtype of ", x_arg, " (",
                   dtype_name(xt), half ? ") or float32" : ")", ", got ", dtype_name(ct));
  check_same_dtype(op, "sin", sin, "cos", cos);
  check_same_device(op, "cos", cos, x_arg, x);
  check_same_device(op, "sin", sin, x_arg, x);
  const int64_t lead = x.dim() - 3;
  bool ok = cos.dim() >= 2 && cos.dim() - 2 <= lead && rotary_detail::sym_eq(cos.sym_size(-2), x.sym_size(-3));
  for (int64_t i = 0; ok && i < cos.dim() - 2; ++i) {  // cos dim -3-i against x dim -4-i
    const c10::SymInt& c = cos.sym_size(-3 - i);
    ok = c.sym_eq(1).sym_or(c.sym_eq(x.sym_size(-4 - i))).expect_true(__FILE__, __LINE__);
  }
  TORCH_CHECK_VALUE(ok, "yirage.", op, ": cos must have shape (S, R/2) or (..., S, R/2) with S = ", x.sym_size(-3),
                    " and leading dims that broadcast to those of ", x_arg, " ", x.sym_sizes(), ", got ",
                    cos.sym_sizes());
  const c10::SymInt rot = cos.sym_size(-1) * 2;
  TORCH_CHECK_VALUE(rot.sym_le(x.sym_size(-1)).expect_true(__FILE__, __LINE__), "yirage.", op,
                    ": cos must have shape (..., S, R/2) with R <= D = ", x.sym_size(-1), " (the head dim of ", x_arg,
                    "), got ", cos.sym_sizes(), " (R = ", rot, ")");
  check_same_shape(op, "sin", sin, "cos", cos);
}

inline void check_rotary_embedding(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                   const at::Tensor& sin) {
  check_rotary_heads(op, "q", q);
  check_rotary_like(op, "k", k, "q", q);
  check_rotary_tables(op, cos, sin, "q", q);
}

// The backward op's tensors: grad_q and q share one shape, grad_k and k another; each may be absent.
// Returns the first given of (grad_q, q, grad_k, k), the tensor the others and cos/sin are checked
// against (nullptr when none is given).
inline const at::Tensor* check_rotary_embedding_backward(const std::optional<at::Tensor>& grad_q,
                                                         const std::optional<at::Tensor>& grad_k,
                                                         const std::optional<at::Tensor>& q,
                                                         const std::optional<at::Tensor>& k, const at::Tensor& cos,
                                                         const at::Tensor& sin, bool cos_sin_grad) {
  const char* op = "rotary_embedding_backward";
  const std::pair<const char*, const std::optional<at::Tensor>*> all[] = {
      {"grad_q", &grad_q}, {"q", &q}, {"grad_k", &grad_k}, {"k", &k}};
  const char* ref_arg = nullptr;
  const at::Tensor* ref = nullptr;
  for (const auto& [arg, t] : all) {
    if (!has(*t)) continue;
    if (ref == nullptr) {
      ref_arg = arg;
      ref = &**t;
      check_rotary_heads(op, arg, *ref);
    } else {
      check_rotary_like(op, arg, **t, ref_arg, *ref);
    }
  }
  if (has(grad_q) && has(q)) check_same_shape(op, "grad_q", *grad_q, "q", *q);
  if (has(grad_k) && has(k)) check_same_shape(op, "grad_k", *grad_k, "k", *k);
  if (cos_sin_grad) {
    TORCH_CHECK_VALUE(!has(grad_q) || has(q), "yirage.", op,
                      ": q must be a tensor when grad_q is given and cos_sin_grad is true, got None");
    TORCH_CHECK_VALUE(!has(grad_k) || has(k), "yirage.", op,
                      ": k must be a tensor when grad_k is given and cos_sin_grad is true, got None");
  }
  if (ref != nullptr) {
    check_rotary_tables(op, cos, sin, ref_arg, *ref);
  } else {
    check_defined(op, "cos", cos);
    check_defined(op, "sin", sin);
    check_float(op, "cos", cos);
    check_same_dtype(op, "sin", sin, "cos", cos);
    check_same_device(op, "sin", sin, "cos", cos);
    check_same_shape(op, "sin", sin, "cos", cos);
  }
  return ref;
}

// The stride of dims [0, lead) of t collapsed into one index, if they collapse (size-1 dims are skipped,
// broadcast stride-0 dims collapse with each other).
inline bool rotary_collapse_leading(const at::Tensor& t, int64_t lead, int64_t* stride) {
  int64_t next = -1;
  *stride = 0;
  for (int64_t d = lead - 1; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (next < 0) {
      *stride = t.stride(d);
      next = t.stride(d) * t.size(d);
    } else if (t.stride(d) == next) {
      next *= t.size(d);
    } else {
      return false;
    }
  }
  return true;
}

// A tensor as (batch, <dims>, last) with a contiguous last dim and one stride for the collapsed leading
// dims: the tensor itself where its layout allows, else a contiguous copy. `inner` = dims after batch.
struct RotaryStrided {
  at::Tensor t;
  int64_t stride_b = 0;
};

inline RotaryStrided rotary_strided(const at::Tensor& x, int64_t inner) {
  int64_t sb = 0;
  if ((x.size(-1) <= 1 || x.stride(-1) == 1) && rotary_collapse_leading(x, x.dim() - inner, &sb)) return {x, sb};
  at::Tensor c = x.contiguous();
  rotary_collapse_leading(c, c.dim() - inner, &sb);
  return {c, sb};
}

// cos/sin broadcast to x's (..., S, R/2): stride 0 over the leading dims they lack or have as 1.
inline RotaryStrided rotary_table(const at::Tensor& t, const at::Tensor& x) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end() - 2);
  sizes.push_back(t.size(-1));
  return rotary_strided(t.expand(sizes), 2);
}

inline int64_t rotary_tokens(const at::Tensor& x) {  // the product of (..., S)
  return c10::multiply_integers(x.sizes().begin(), x.sizes().end() - 2);
}

}  // namespace yirage
