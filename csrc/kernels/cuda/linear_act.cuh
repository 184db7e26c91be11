// The activations of linear in device code, shared by the element-wise epilogue (linear_epilogue.cu) and the
// skinny GEMM's fused epilogue (linear_skinny.cu): act(z) and d act / dz in the accumulation type A (fp32; fp64
// for fp64), with torch's formulas (relu keeps NaN; gelu is the erf form, gelu_tanh the tanh approximation).
#pragma once

#include "common.cuh"
#include "linear_epilogue.h"

namespace yirage::kernels::cuda {

template <typename A>
__device__ __forceinline__ A linear_act(Activation act, A z) {
  switch (act) {
    case Activation::relu: return z < A(0) ? A(0) : z;  // NaN stays NaN, as torch.relu
    case Activation::gelu: return A(0.5) * z * (A(1) + erf(z * A(0.70710678118654752440)));
    case Activation::gelu_tanh: {
      const A inner = A(0.79788456080286535588) * (z + A(0.044715) * z * z * z);
      return A(0.5) * z * (A(1) + tanh(inner));
    }
    case Activation::silu: return z / (A(1) + exp(-z));
    default: return z;
  }
}

// d act / dz, from z (gelu, gelu_tanh, silu) or from the output (relu).
template <typename A>
__device__ __forceinline__ A linear_act_grad_of(Activation act, A s) {
  switch (act) {
    case Activation::relu: return s > A(0) ? A(1) : A(0);
    case Activation::gelu: {
      const A cdf = A(0.5) * (A(1) + erf(s * A(0.70710678118654752440)));
      const A pdf = exp(A(-0.5) * s * s) * A(0.39894228040143267794);
      return cdf + s * pdf;
    }
    case Activation::gelu_tanh: {
      const A k0 = A(0.79788456080286535588), k1 = A(0.044715);
      const A t = tanh(k0 * (s + k1 * s * s * s));
      return A(0.5) * (A(1) + t) + A(0.5) * s * (A(1) - t * t) * k0 * (A(1) + A(3) * k1 * s * s);
    }
    case Activation::silu: {
      const A sg = A(1) / (A(1) + exp(-s));
      return sg * (A(1) + s * (A(1) - sg));
    }
    default: return A(1);
  }
}

}  // namespace yirage::kernels::cuda
