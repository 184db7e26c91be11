// Tensor maps of the attention operands for the Hopper kernels' tensor-memory-accelerator copies (host code,
// torch-free; CUDA only): the forward (attention_fwd.cu) and the backward's dQ kernel (attention_bwd.cu).
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>

#include <cuda.h>          // CUtensorMap
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include "attention.h"

namespace yirage::kernels::cuda {
namespace {

// The driver's cuTensorMapEncodeTiled (through the runtime: no link to the driver library), null if unavailable.
using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return EncodeTiled(nullptr);
    }
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// A tensor map of K or V ((B, Hk, Sk, D) with the operand's strides; `seq` Sk, `heads` Hk) or of Q (Sq, Hq) for
// the Hopper kernels' TMA copies: boxes of 64 columns (one 128-byte swizzled panel) x `rows` rows, rows past the
// sequence read as zeros. False if it cannot be made.
bool tensor_map(CUtensorMap* map, const AttentionOperand& t, const AttentionShape& s, int64_t seq, int64_t heads,
                bool is_bf16, int rows) {
  const EncodeTiled enc = encode_tiled();
  if (enc == nullptr) return false;
  constexpr uint64_t kEs = 2;
  // strides in bytes of dims 1..3, as the operand gives them (0 for an expanded dim: every index reads the same
  // rows; a map that cannot take it falls back), except for a size-1 dim (0 in the operand), where any nonzero
  // multiple of 16 does
  const auto nonzero = [](uint64_t v) { return v > 0 ? v : uint64_t{16}; };
  const uint64_t row = seq > 1 ? t.seq_stride * kEs : s.head_dim * kEs;
  const uint64_t head = heads > 1 ? t.head_stride * kEs : nonzero(row * seq);
  const uint64_t batch = s.batch > 1 ? t.batch_stride * kEs : nonzero(head * heads);
  const cuuint64_t dims[4] = {cuuint64_t(s.head_dim), cuuint64_t(seq), cuuint64_t(heads), cuuint64_t(s.batch)};
  const cuuint64_t strides[3] = {row, head, batch};
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1};
  const cuuint32_t elem[4] = {1, 1, 1, 1};
  return enc(map, is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
             const_cast<void*>(t.ptr), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace
}  // namespace yirage::kernels::cuda

#endif  // !YIRAGE_HIP
