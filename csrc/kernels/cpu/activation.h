// Activations on the CPU, forward and backward (torch-free): gelu (erf or tanh form) elementwise, and the
// gated silu_and_mul / gelu_and_mul, out = act(a) * b with a = x[..., :d], b = x[..., d:].
//
// Strategy: one streaming pass, fp32 math (fp64 for fp64) rounded once to the output dtype; the gated
// forward reads the a and b halves of each row side by side and writes one output; the gated backward
// writes both halves of grad_x (g*b*act'(a) and g*act(a)) in the same pass. Work is split over flat
// output elements [begin, end) of the rows x cols output (not whole rows), so a few very long rows still
// spread over every thread; a call walks the row segments of its range.
//
// Math (fp32, vectorized per ISA on top of vexp_ftz, the short exponential that flushes results below 2^-125 to
// 0: as a denominator's term it changes nothing; as a factor it turns values of magnitude below about 1e-36 into
// 0 (silu's sigmoid parts for a < -87, gelu's below x = -13); activation_math_impl.h, shared with the GEMM
// epilogue):
//   silu(a)       = a / (1 + e^-a); its derivative s + a*s*(1-s) with a sign-symmetric sigmoid
//                   (m = e^-|a|, s(1-s) = m / (1+m)^2), so nothing overflows or cancels.
//   gelu (erf)    = x * Phi(x), Phi the normal CDF: for |x| < 1 Phi = 1/2 + x*P(x^2) (degree 4), else
//                   Phi(-|x|) = exp(-x^2/2) * t*H(t), t = 1/(1 + 0.28 |x|) (H degree 6), with the forward
//                   taking relu(x) - |x| Phi(-|x|) there (the backward Phi(x) = 1 - Phi(-x) for x > 0); both
//                   branches computed, one selected (NormalCdfFitCpu). Absolute error of Phi about 1e-7 (one ulp
//                   of 1; test_activation.py measures it), and the lower tail keeps its relative accuracy down
//                   to underflow, unlike 1 + erf(x/sqrt 2). The derivative Phi + x exp(-x^2/2)/sqrt(2 pi)
//                   reuses the forward's exponential. Results rounded to bf16 / fp16 take the tail form for
//                   every x (one degree-7 fit on |x| in [0, 14], no near-zero branch; relative error up to
//                   6e-7 just above 0, far below those types' half ulp) with about 25% fewer instructions;
//                   the bf16 forward a degree-5 fit and a degree-4 exponential (relative error about 1e-5,
//                   a tenth of a bf16 half ulp: 1906 of 4M results one ulp off the rounded float64 value,
//                   none more above 2^-126; 1.14-1.19x in one thread, in cache). The bf16 forward of the
//                   activation ops on AVX-512 replaces that, where a group of four vectors lies within |x| < 8,
//                   with a quartic per quarter-unit segment of |x| (activation_impl.h, gelu_bf16_segments).
//   gelu (tanh)   = x/2 * (1 + tanh(u)) = x / (1 + e^-2u), u = sqrt(2/pi) (x + 0.044715 x^3): no tanh, no
//                   cancellation near 0, exact limits for large |x|; the derivative uses the symmetric
//                   sigmoid as silu does.
// Non-finite inputs give what torch gives: act(NaN) = NaN, act(inf) = inf, act(-inf) = NaN, and NaN
// derivatives at +-inf. fp64 uses the same formulas with std::exp and std::erfc.
#pragma once

#include <cstdint>

#include "../activation.h"
#include "types.h"

namespace yirage::kernels::cpu {

// kernels/activation.h: the activation (silu, gelu, gelu_tanh here) and the kernels' parameters
using kernels::Activation;
using kernels::ActivationBackward;
using kernels::ActivationForward;

// Element ranges are flat indices into the rows x cols output (grad_out for the backward): 0 <= begin <= end
// <= rows * cols.
Status activation_forward(const ActivationForward& p, int64_t begin, int64_t end);
Status activation_backward(const ActivationBackward& p, int64_t begin, int64_t end);

}  // namespace yirage::kernels::cpu
