// matmul: the argument checks every backend runs (CPU, CUDA, portable, Meta), the output shape, and the
// batch folding (sizes, views) that the CPU and CUDA glue share.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

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

// The sizes of a product: (M, K) @ (K, N) over the broadcast batch dims, and the shapes a and b expand to.
struct MatmulShape {
  int64_t m = 0, k = 0, n = 0, nbatch = 1;
  std::vector<int64_t> batch, out_sizes, a_sizes, b_sizes;  // batch + (M, N), + (M, K), + (K, N)
};

inline MatmulShape matmul_shape(const at::Tensor& a, const at::Tensor& b) {
  MatmulShape s;
  s.m = a.size(-2);
  s.k = a.size(-1);
  s.n = b.size(-1);
  s.batch = at::infer_size(a.sizes().slice(0, a.dim() - 2), b.sizes().slice(0, b.dim() - 2));
  for (int64_t x : s.batch) s.nbatch *= x;
  s.out_sizes = s.a_sizes = s.b_sizes = s.batch;
  s.out_sizes.insert(s.out_sizes.end(), {s.m, s.n});
  s.a_sizes.insert(s.a_sizes.end(), {s.m, s.k});
  s.b_sizes.insert(s.b_sizes.end(), {s.k, s.n});
  return s;
}

// t as a view of `shape` when its strides allow one (broadcast stride-0 dims included), else nothing.
inline std::optional<at::Tensor> matmul_view_as(const at::Tensor& t, at::IntArrayRef shape) {
  auto strides = at::detail::computeStride(t.sizes(), t.strides(), shape);
  if (!strides) return std::nullopt;
  return t.as_strided(shape, *strides, t.storage_offset());
}

// b shared by every output matrix (no batch of its own): a's (batch, M) rows as one (B*M, K) view, when
// they collapse to one stride; the product is then one (B*M, K) @ b.reshape({K, N}) into
// out.view({B*M, N}).
inline std::optional<at::Tensor> matmul_shared_b_rows(const at::Tensor& a, const at::Tensor& b,
                                                      const MatmulShape& s) {
  if (b.numel() != s.k * s.n) return std::nullopt;
  return matmul_view_as(a.expand(s.a_sizes), {s.nbatch * s.m, s.k});
}

}  // namespace yirage
