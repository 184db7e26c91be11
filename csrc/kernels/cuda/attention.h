// Flash attention on CUDA tensor cores (torch-free entry points; kernels in attention_fwd.cu and
// attention_bwd.cu): the forward for prefill and decode, and the backward, for fp16 and bf16 with head dims
// 64, 128 and 256 on sm_80 or newer (on Hopper, the prefill forward and the D = 64 / 128 backward use warpgroup
// MMAs when the library holds sm_90a code: attention_fwd_sm90.cuh, attention_bwd_sm90.cuh). Other dtypes, head dims, GPUs and ROCm take the portable kernel (the
// glue decides, with attention_native and attention_layout_ok).
//
// Layout: q (B, Hq, Sq, D), k and v (B, Hk, Sk, D) with Hq % Hk == 0 (GQA: query head h reads key/value
// head h / (Hq / Hk); k and v are never expanded). Any batch, head and sequence strides that keep each row of
// D elements contiguous and 16-byte aligned. Causal masks are aligned bottom-right: query i sees key j
// iff j <= i + Sk - Sq; a query that sees no key gets zeros and lse = -inf.
//
// The G = Hq / Hk query heads of a group are stacked as the rows of one matrix per key/value head (row
// r = h_in_group * Sq + i), so one block's key/value tiles serve every head of the group (decode: a single
// query of each of G heads shares one 16-row MMA tile).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "types.h"

namespace yirage::kernels::cuda {

// One operand: a base pointer and the element strides of its batch, head and sequence dims (the head dim
// has stride 1).
struct AttentionOperand {
  const void* ptr = nullptr;
  int64_t batch_stride = 0, head_stride = 0, seq_stride = 0;
};

struct AttentionShape {
  int64_t batch = 0, heads_q = 0, heads_k = 0, seq_q = 0, seq_k = 0, head_dim = 0;
  float scale = 0.f;  // the softmax scale (any finite value, 0 and negative included)
  bool causal = false;
  DType dtype = DType::bf16;
};

struct AttentionForward {
  AttentionShape shape;
  AttentionOperand q, k, v;
  void* out = nullptr;    // (B, Hq, Sq, D), contiguous
  float* lse = nullptr;   // (B, Hq, Sq), contiguous, natural-log log-sum-exp; nullptr: not written
  // Split-KV (flash-decoding): with num_splits > 1 the keys are divided among num_splits blocks per query
  // tile, each writing a partial result to the workspace; the last block of a tile to finish merges them.
  // split_out: (num_splits, B * Hq * Sq, D) fp32; split_lse: (num_splits, B * Hq * Sq) fp32.
  // split_count: B * Hq * Sq uint32 counters (at least one per query tile), zero on entry and left zero on
  // return (the kernel resets each one it uses), so one zeroed buffer may serve every call of a stream;
  // nullptr: a second kernel merges the splits.
  int num_splits = 1;
  float* split_out = nullptr;
  float* split_lse = nullptr;
  unsigned* split_count = nullptr;
};

struct AttentionBackward {
  AttentionShape shape;
  AttentionOperand q, k, v;
  AttentionOperand out, grad_out;  // the forward's output and its gradient, shaped like q
  const float* lse = nullptr;      // (B, Hq, Sq), contiguous: the forward's log-sum-exp
  void* grad_q = nullptr;          // (B, Hq, Sq, D), contiguous
  void* grad_k = nullptr;          // (B, Hk, Sk, D), contiguous; summed over the query heads of each group
  void* grad_v = nullptr;          // (B, Hk, Sk, D), contiguous
  // Workspace the caller allocates (not initialized): dq_accum (B, Hq, Sq, D) fp32 (the order of a row's elements is
  // the kernels' own; null where attention_backward_needs_dq_accum says so), delta (B, Hq, Sq) fp32.
  float* dq_accum = nullptr;
  float* delta = nullptr;
};

// Whether the tensor-core kernels cover this dtype and head dim (fp16/bf16; D = 64, 128 or 256) on a GPU of
// compute capability `sm` (major * 10 + minor; 80 and newer) that lets a block use `max_smem` bytes of shared
// memory (the opt-in limit: 227 KB on Hopper, 163 KB on A100, 99 KB on sm_86/89, where D = 256 does not fit
// the backward). Always false in a ROCm build.
bool attention_native(DType dtype, int64_t head_dim, int sm, int64_t max_smem);

// The dynamic shared memory the backward's dK/dV kernel needs at least for this head dim (its smallest tile;
// a device that allows more gets a larger one) (0: not covered).
int64_t attention_backward_smem(int64_t head_dim);

// Whether the operand's rows can be copied as 16-byte chunks: base address 16-byte aligned and every stride
// a multiple of 8 elements (of a 16-bit dtype). The glue makes a contiguous copy otherwise.
bool attention_layout_ok(const AttentionOperand& t);

// How many key splits the forward should use for this shape on a GPU with `sm_count` multiprocessors
// (1: none). The caller then allocates the workspace and sets num_splits.
int attention_forward_splits(const AttentionShape& s, int sm_count);

cudaError_t attention_forward(const AttentionForward& p, cudaStream_t stream);

// Whether attention_backward needs the dq_accum workspace for these arguments on the current device (false: head
// dim 256 on Hopper where its dQ kernel runs; dq_accum may then be null). Everything else of `p` set as for the call.
bool attention_backward_needs_dq_accum(const AttentionBackward& p);
cudaError_t attention_backward(const AttentionBackward& p, cudaStream_t stream);

}  // namespace yirage::kernels::cuda
