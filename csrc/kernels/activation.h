// The activations a linear layer's epilogue applies (torch-free; shared by every backend's kernels and
// by the argument checks, which turn the schema's `str activation` into this enum).
#pragma once

#include <cstring>

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

}  // namespace yirage::kernels
