// matmul: the argument checks every backend runs (CPU, CUDA, portable, Meta), and the output shape.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>

#include "common/checks.h"

namespace yirage {

// a: (..., M, K), b: (..., K, N), 2+ dims each, batch dims broadcasting as torch.matmul; one float dtype, one device.
inline void check_matmul(const char* op, const at::Tensor& a, const at::Tensor& b) {
  check_defined(op, "a", a);
  check_defined(op, "b", b);
  check_float(op, "a", a);
  check_same_dtype(op, "b", b, "a", a);
  check_same_device(op, "b", b, "a", a);
  TORCH_CHECK_VALUE(a.dim() >= 2, "yirage.", op, ": a must have at least 2 dimensions (..., M, K), got a ", a.dim(),
                    "-D tensor (unsqueeze a vector to (1, K))");
  TORCH_CHECK_VALUE(b.dim() >= 2, "yirage.", op, ": b must have at least 2 dimensions (..., K, N), got a ", b.dim(),
                    "-D tensor (unsqueeze a vector to (K, 1))");
  TORCH_CHECK_VALUE(b.sym_size(-2).sym_eq(a.sym_size(-1)).expect_true(__FILE__, __LINE__), "yirage.", op,
                    ": b must have K = a.size(-1) = ", a.sym_size(-1), " rows (..., K, N), got shape ", b.sym_sizes());
  const int64_t batch = std::min(a.dim(), b.dim()) - 2;
  for (int64_t i = 1; i <= batch; ++i) {
    const c10::SymInt& sa = a.sym_size(-2 - i);
    const c10::SymInt& sb = b.sym_size(-2 - i);
    const bool ok = sa.sym_eq(sb).sym_or(sa.sym_eq(1)).sym_or(sb.sym_eq(1)).expect_true(__FILE__, __LINE__);
    TORCH_CHECK_VALUE(ok, "yirage.", op, ": the batch dims of b must broadcast with those of a (each pair equal or 1), "
                      "got a ", a.sym_sizes(), " and b ", b.sym_sizes());
  }
}

// broadcast(a.shape[:-2], b.shape[:-2]) + (M, N)
inline c10::SymDimVector matmul_out_sizes(const at::Tensor& a, const at::Tensor& b) {
  c10::SymDimVector out = at::infer_size_symdimvector(a.sym_sizes().slice(0, a.dim() - 2),
                                                      b.sym_sizes().slice(0, b.dim() - 2));
  out.push_back(a.sym_size(-2));
  out.push_back(b.sym_size(-1));
  return out;
}

}  // namespace yirage
