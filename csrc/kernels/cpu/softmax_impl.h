// The softmax / log_softmax loops, written once over a vector type V. No include guard: softmax.cpp
// includes this through per_isa.h, once per ISA. See softmax.h for the algorithm.
//
// This file holds the helpers both paths share and the entry points; the row path (inner == 1) is in
// softmax_rows_impl.h, the column path (inner > 1) in softmax_columns_impl.h, included below.

template <typename V>
inline typename V::acc_t neg_inf() {
  return -std::numeric_limits<typename V::acc_t>::infinity();
}

// Scalar widening / narrowing between a storage type and the accumulator (fp32, or fp64 for fp64).
template <typename T>
inline float to_acc(T v) { return to_float(v); }
inline double to_acc(double v) { return v; }

template <typename T, typename A>
inline T from_acc(A v) {
  if constexpr (std::is_same_v<T, A>) return v; else return from_float<T>(v);
}

// The last m < W lanes of a row or column block: through a W-lane buffer, element by element.
template <typename V, typename T>
inline void store_tail(const V& v, T* p, int64_t m) {
  typename V::acc_t lanes[V::W];
  v.store(lanes);
  for (int k = 0; k < V::W; ++k)
    if (k < m) p[k] = from_acc<T>(lanes[k]);
}

template <typename V>
inline V log_lanes(V v) {
  typename V::acc_t lanes[V::W];
  v.store(lanes);
  for (int k = 0; k < V::W; ++k) lanes[k] = std::log(lanes[k]);
  return V::load(lanes);
}

// Columns per task when inner > 1: 4, 2 or 1 vectors, the most whose packed scratch (`dim` fp32 values per
// column, twice that in backward: grad_out and out) fits kBlockBytes, so the passes after the first run
// in L2 (512 KiB: half of a 1 MiB L2).
constexpr int64_t kBlockBytes = int64_t{512} << 10;

template <typename V>
inline int64_t block_cols(int64_t dim) {
  const int64_t per_vec = 2 * dim * V::W * int64_t(sizeof(typename V::acc_t));
  int64_t nv = 4;
  while (nv > 1 && nv * per_vec > kBlockBytes) nv /= 2;
  return nv * V::W;
}

template <typename V>
inline SoftmaxTasks tasks_for(int64_t outer, int64_t dim, int64_t inner) {
  if (inner == 1) return {outer, dim};
  const int64_t cols = block_cols<V>(dim);
  return {outer * ((inner + cols - 1) / cols), dim * (cols < inner ? cols : inner)};
}

// ---------------------------------------------------------------------------------- rows, columns

#include "softmax_rows_impl.h"
#include "softmax_columns_impl.h"

// --------------------------------------------------------------------------------------- dispatch

inline bool valid_shape(int64_t outer, int64_t dim, int64_t inner, int64_t unit_stride) {
  return outer >= 0 && dim >= 0 && inner >= 1 && (inner > 1 || dim <= 1 || unit_stride == 1);
}

template <typename V, typename T>
Status softmax_forward_typed(const SoftmaxForward& p, int64_t begin, int64_t end) {
  if (!valid_shape(p.outer, p.dim, p.inner, p.x_dim_stride)) return Status::invalid_argument;
  return p.inner == 1 ? softmax_rows<V, T>(p, begin, end) : softmax_columns<V, T>(p, begin, end);
}

template <typename V, typename T>
Status softmax_backward_typed(const SoftmaxBackward& p, int64_t begin, int64_t end) {
  if (!valid_shape(p.outer, p.dim, p.inner, p.grad_out_dim_stride) ||
      !valid_shape(p.outer, p.dim, p.inner, p.out_dim_stride))
    return Status::invalid_argument;
  return p.inner == 1 ? softmax_backward_rows<V, T>(p, begin, end) : softmax_backward_columns<V, T>(p, begin, end);
}

inline Status softmax_forward_dispatch(const SoftmaxForward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return softmax_forward_typed<Vec, float>(p, begin, end);
    case DType::f16: return softmax_forward_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return softmax_forward_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}

inline Status softmax_backward_dispatch(const SoftmaxBackward& p, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::f32: return softmax_backward_typed<Vec, float>(p, begin, end);
    case DType::f16: return softmax_backward_typed<Vec, f16>(p, begin, end);
    case DType::bf16: return softmax_backward_typed<Vec, bf16>(p, begin, end);
    default: return Status::unsupported_dtype;
  }
}

inline SoftmaxTasks softmax_tasks_dispatch(int64_t outer, int64_t dim, int64_t inner) {
  return tasks_for<Vec>(outer, dim, inner);
}
