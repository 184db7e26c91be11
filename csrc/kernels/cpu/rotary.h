// Rotary position embedding on the CPU, forward and backward (torch-free).
//
// Layout: tokens t = b * seq + s of a (batch, seq) grid; per token, `heads` rows of head_dim features for
// each input (q, then k). The first R = 2 * half features of a row are rotated by the token's angles,
// the rest are copied. neox pairs (i, i + half); gpt-j (interleaved) pairs (2i, 2i + 1):
//   y1 = x1 * cos - x2 * sin,  y2 = x2 * cos + x1 * sin.
//
// Strategy: one pass over tokens [token_begin, token_end), every input row read once and every output row
// written once. Per token, the cos/sin row is widened to the accumulation type once into a small buffer
// and reused for every head of q and k. neox rotates W pairs per step from the two contiguous halves of a
// row; gpt-j rotates W lanes per step as x * c' + swap_pairs(x) * s', with c' = (c0 c0 c1 c1 ...) and
// s' = (-s0 s0 -s1 s1 ...) expanded in the token's buffer. The pass-through features are a memcpy.
// Backward: the rotation by -theta of the incoming gradient (the same loop with sin negated), and when
// asked the token's cos/sin gradients, sum over the heads of both inputs of g1*x1 + g2*x2 and g2*x1 - g1*x2
// (x the forward input), written as one row per token in the accumulation type; the caller sums them
// over the leading dims that cos/sin broadcast over. fp32 math (fp64 for fp64), vectorized per ISA
// (isa.h). Cost: memory-bound; the rotation adds no time over a row copy on AVX2 (measured: R = 0 runs as
// fast as R = D). Limits: any head_dim, half and row strides, with the last dim of every input contiguous
// (the glue copies otherwise); a call allocates 4 * round_up(R, 16) accumulators of scratch, once.
#pragma once

#include <cstdint>

#include "../rotary.h"
#include "types.h"

namespace yirage::kernels::cpu {

using kernels::RotaryInput;  // ../rotary.h
using kernels::RotaryParams;

Status rotary_forward(const RotaryParams& p, int64_t token_begin, int64_t token_end);
Status rotary_backward(const RotaryParams& p, int64_t token_begin, int64_t token_end);

}  // namespace yirage::kernels::cpu
