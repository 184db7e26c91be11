// The activations a linear layer's epilogue applies (torch-free; shared by every backend's kernels and
// by the argument checks, which turn the schema's `str activation` into this enum).
#pragma once

#include <cstdint>
#include <cstring>

#include "dtype.h"

namespace yirage::kernels {

enum class Activation : int {
  none = 0,
  relu = 1,       // max(z, 0)
  gelu = 2,       // z * Phi(z), Phi the normal CDF (erf form), as F.gelu(approximate="none")
  gelu_tanh = 3,  // 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))), as F.gelu(approximate="tanh")
  silu = 4,       // z * sigmoid(z)
};

inline constexpr Activation kActivations[] = {Activation::none, Activation::relu, Activation::gelu,
                                              Activation::gelu_tanh, Activation::silu};
inline constexpr const char* kActivationNames = "none, relu, gelu, gelu_tanh, silu";

inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::silu: return "silu";
  }
  return "unknown";
}

// Parses one of kActivationNames; false for anything else.
inline bool parse_activation(const char* name, Activation* out) {
  for (Activation a : kActivations) {
    if (std::strcmp(name, activation_name(a)) == 0) {
      *out = a;
      return true;
    }
  }
  return false;
}

// Whether the backward needs the pre-activation z (the derivative is not a function of the output).
inline bool activation_needs_pre(Activation a) {
  return a == Activation::gelu || a == Activation::gelu_tanh || a == Activation::silu;
}

// The parameters of the elementwise and gated activation kernels, the same for every backend
// (kernels/cpu/activation.h, kernels/cuda/activation.h). silu, gelu and gelu_tanh here (none and relu are the
// GEMM epilogue's).
struct ActivationForward {
  const void* x = nullptr;
  int64_t x_stride = 0;  // elements between rows of x (the last dim is contiguous)
  void* out = nullptr;   // rows x cols, contiguous
  int64_t rows = 0;
  int64_t cols = 0;      // output row length: d (half of x's row) when gated, else x's row length
  Activation act = Activation::silu;
  bool gated = false;    // out = act(x[:, :cols]) * x[:, cols:2*cols]; else out = act(x)
  DType dtype = DType::f32;
  bool stream_out = false;  // CPU: write out with non-temporal stores (outputs beyond the last-level cache)
};

struct ActivationBackward {
  const void* grad_out = nullptr;  // rows x cols, rows `grad_out_stride` apart
  int64_t grad_out_stride = 0;
  const void* x = nullptr;         // rows x cols, or rows x 2*cols when gated
  int64_t x_stride = 0;
  void* grad_x = nullptr;          // contiguous, x's row length: [g*b*act'(a), g*act(a)] when gated, else g*act'(x)
  int64_t rows = 0, cols = 0;
  Activation act = Activation::silu;
  bool gated = false;
  DType dtype = DType::f32;
};

// The fits of the fp32 normal CDF Phi of CUDA's fp32 gelu (cuda/activation.cu; until 2026-11-26 the CPU kernels'
// too, which now have NormalCdfFitCpu below): Phi(x) = 1/2 + x P(x^2) for |x| < kSplit, and on the tails
// Phi(-|x|) = exp(-x^2/2) t H(t) with t = 1 / (1 + |x| kT). Coefficients from the highest degree down.
struct NormalCdfFit {
  static constexpr float kSplit = 1.3f, kT = 3.535533845e-01f;
  static constexpr float p5 = -6.632304576e-06f, p4 = 1.103859613e-04f, p3 = -1.182997017e-03f,
                         p2 = 9.971847758e-03f, p1 = -6.649012864e-02f, p0 = 3.989422619e-01f;
  static constexpr float h6 = 2.382886410e-02f, h5 = -1.253476292e-01f, h4 = 1.392106265e-01f,
                         h3 = 4.839326814e-02f, h2 = 1.323946267e-01f, h1 = 1.399874091e-01f, h0 = 1.410983205e-01f;
};

// The CPU kernels' fits of the fp32 normal CDF (cpu/activation_math_impl.h gives their accuracy), from the
// highest degree down: Phi(x) = 1/2 + x P(x^2) for |x| < kSplit (P degree 4, minimax relative error 4.1e-8),
// and Phi(-|x|) = exp(-x^2/2) t H(t), t = 1 / (1 + |x| kT), on |x| in [1, 14] (H degree 6, 7.0e-8; kT = 0.28
// is where this degree fits best). For results rounded to bf16 / fp16 a single fit L on all of |x| in [0, 14]
// with t = 1 / (1 + |x| kTLow) (degree 7, 9.4e-8), no near-zero branch; for the bf16 gelu forward a shorter one,
// B with t = 1 / (1 + |x| kTBf16) (degree 5, 4.7e-6: bf16 keeps 8 bits).
struct NormalCdfFitCpu {
  static constexpr float kSplit = 1.f, kT = 2.800000012e-01f, kTLow = 3.050000072e-01f, kTBf16 = 3.100000024e-01f;
  static constexpr float p4 = 9.423524898e-05f, p3 = -1.169353724e-03f, p2 = 9.967196733e-03f,
                         p1 = -6.648958474e-02f, p0 = 3.989422619e-01f;
  static constexpr float h6 = -5.914429948e-02f, h5 = 1.305864155e-01f, h4 = -2.782787662e-03f,
                         h3 = 1.095956564e-01f, h2 = 9.767058492e-02f, h1 = 1.123235971e-01f, h0 = 1.116735786e-01f;
  static constexpr float l7 = 3.669918701e-02f, l6 = -1.529882848e-01f, l5 = 1.857168376e-01f,
                         l4 = -3.797677159e-02f, l3 = 1.210216507e-01f, l2 = 1.034208760e-01f,
                         l1 = 1.224668175e-01f, l0 = 1.216397360e-01f;
  static constexpr float b5 = -7.393074036e-02f, b4 = 1.804538071e-01f, b3 = 1.574239694e-02f,
                         b2 = 1.334300637e-01f, b1 = 1.204414591e-01f, b0 = 1.238606647e-01f;
};

}  // namespace yirage::kernels
