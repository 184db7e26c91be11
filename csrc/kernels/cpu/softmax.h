// softmax / log_softmax on the CPU over any dim, forward and backward (torch-free).
//
// Layout: x is viewed as (outer, dim, inner) with the inner elements contiguous and one stride each for
// the outer and the softmax index, so a slice, a broadcast (stride 0) or a padded tensor is read in place;
// the glue makes a contiguous copy of any other layout. Outputs are (outer, dim, inner) contiguous.
//
// Strategy (rows: inner == 1). Rows are processed in groups of about 16 KiB of fp32 (one row when a row is
// longer): pass 1 reads each row once from memory, copies it to an fp32 scratch padded to whole vectors
// and takes its max; pass 2 computes e = exp(x - max) in the scratch with its sum (log_softmax only sums),
// prefetching the next group's rows meanwhile; pass 3 writes e / sum, or (x - max) - log(sum). Passes 2-3
// run from L1/L2. Subtracting the max keeps any finite input safe; a row whose max is -inf (all -inf) or
// +inf, or that holds a NaN, gives NaN, as torch does.
// Columns (inner > 1): the same passes over a block of 1-4 vectors of adjacent inner columns; pass 1 reads
// the block's `dim` strided rows once and packs them into fp32 runs, one per column vector, so the later
// passes neither re-read memory nor suffer the cache-set conflicts of power-of-2 strides. The block width
// keeps the packed block within about 512 KiB (L2); a dim longer than about 4K-8K elements (by ISA) exceeds
// it and the later passes then stream from L3. No transposed copy of x. Tasks are (outer, block) pairs.
// Backward, from the forward's output: softmax grad_x = out * (g - sum(g * out)), log_softmax grad_x =
// g - exp(out) * sum(g); pass 1 packs g and out and reduces, pass 2 writes, in the same groups / blocks.
// Limits: fp32 accumulation (fp64 for fp64); exp is Vec's vexp_ftz (about 1 ulp), so exp(x - max) below
// 2^-125 (x - max < -86.98) is 0 where torch would give a subnormal (fp64 uses std::exp throughout).
// Vectorized per ISA (isa.h).
#pragma once

#include <cstdint>

#include "../softmax.h"
#include "types.h"

namespace yirage::kernels::cpu {

using kernels::SoftmaxBackward;  // ../softmax.h
using kernels::SoftmaxForward;

// How the work splits: `count` tasks of about `elems` elements each; kernels take tasks [begin, end).
struct SoftmaxTasks {
  int64_t count = 0, elems = 0;
};
SoftmaxTasks softmax_tasks(int64_t outer, int64_t dim, int64_t inner, DType dtype);

Status softmax_forward(const SoftmaxForward& p, int64_t task_begin, int64_t task_end);
Status softmax_backward(const SoftmaxBackward& p, int64_t task_begin, int64_t task_end);

}  // namespace yirage::kernels::cpu
