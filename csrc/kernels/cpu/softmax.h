// softmax / log_softmax on the CPU over any dim, forward and backward (torch-free).
//
// Layout: x is viewed as (outer, dim, inner) with the inner elements contiguous and one stride each for
// the outer and the softmax index, so a slice, a broadcast (stride 0) or a padded tensor is read in place;
// the glue makes a contiguous copy of any other layout. Outputs are (outer, dim, inner) contiguous.
//
// Strategy, forward (rows: inner == 1): one row at a time, kept in L1/L2 across three passes: its max
// (the only pass that reads memory), then e = exp(x - max) with their sum (e is written to the output row
// in fp32, to a per-call fp32 scratch row for fp16/bf16), then out = e / sum; log_softmax sums exp(x - max)
// and writes (x - max) - log(sum), with no scratch. Subtracting the max keeps any finite input safe; a
// row whose max is -inf (all -inf) or +inf, or that holds a NaN, gives NaN, as torch does.
// Columns (inner > 1): the same three passes over a block of 1-4 vectors of adjacent inner columns,
// reducing over `dim` with stride `inner` and keeping one max and sum per column in registers; the block
// width is chosen so the block (and its exp values) stays in L2 between passes (about 512 KiB). A very
// long dim (over ~16K fp32 elements per column vector) no longer fits and then streams from L3 / memory.
// No transposed copy. Tasks are (outer index, column block) pairs.
// Backward, from the forward's output: softmax grad_x = out * (g - sum(g * out)), log_softmax grad_x =
// g - exp(out) * sum(g); one reducing pass and one writing pass per row or column block.
// fp32 accumulation (fp64 for fp64); vectorized per ISA (isa.h); exp is Vec's vexp (about 2 ulp).
#pragma once

#include <cstdint>

#include "types.h"

namespace yirage::kernels::cpu {

struct SoftmaxForward {
  const void* x = nullptr;
  int64_t x_outer_stride = 0;  // elements between outer indices of x
  int64_t x_dim_stride = 0;    // elements between indices along the softmax dim (must be 1 when inner == 1)
  void* out = nullptr;         // (outer, dim, inner), contiguous
  int64_t outer = 0, dim = 0, inner = 0;
  bool log = false;            // log_softmax instead of softmax
  DType dtype = DType::f32;
};

struct SoftmaxBackward {
  const void* grad_out = nullptr;  // layout as SoftmaxForward::x
  int64_t grad_out_outer_stride = 0, grad_out_dim_stride = 0;
  const void* out = nullptr;  // the forward's output, layout as SoftmaxForward::x
  int64_t out_outer_stride = 0, out_dim_stride = 0;
  void* grad_x = nullptr;  // (outer, dim, inner), contiguous
  int64_t outer = 0, dim = 0, inner = 0;
  bool log = false;
  DType dtype = DType::f32;
};

// How the work splits: `count` tasks of about `elems` elements each; kernels take tasks [begin, end).
struct SoftmaxTasks {
  int64_t count = 0, elems = 0;
};
SoftmaxTasks softmax_tasks(int64_t outer, int64_t dim, int64_t inner, DType dtype);

Status softmax_forward(const SoftmaxForward& p, int64_t task_begin, int64_t task_end);
Status softmax_backward(const SoftmaxBackward& p, int64_t task_begin, int64_t task_end);

}  // namespace yirage::kernels::cpu
