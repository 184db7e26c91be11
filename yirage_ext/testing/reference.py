"""Float64 references and per-dtype tolerances, shared by the tests, the benchmarks and the demo.

Plain PyTorch in float64, independent of the library (never calls torch.ops.yirage)."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

# (atol, rtol) per dtype for outputs of the norm ops (values O(1)): the kernels accumulate in fp32 and
# round once to the output dtype, so the bound is about one ulp of the output dtype plus fp32 noise.
TOLERANCES = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}


def assert_close(actual: Tensor, expected: Tensor, dtype: Optional[torch.dtype] = None, msg: str = "") -> None:
    """Compare in float64 with the tolerances of `dtype` (default: actual's dtype)."""
    atol, rtol = TOLERANCES[dtype or actual.dtype]
    torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=True,
                               msg=(lambda m: f"{msg}\n{m}") if msg else None)


def rms_norm_ref(x: Tensor, weight: Optional[Tensor] = None, eps: float = 1e-6) -> Tensor:
    """x / sqrt(mean(x^2, -1) + eps) * weight, in float64."""
    xd = x.double()
    y = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    return y * weight.double() if weight is not None else y


def fused_add_rms_norm_ref(x: Tensor, residual: Tensor, weight: Optional[Tensor] = None,
                           eps: float = 1e-6) -> Tuple[Tensor, Tensor]:
    """(rms_norm(h), h) with h = x + residual rounded to the input dtype (as the unfused code does)."""
    h = (x.double() + residual.double()).to(x.dtype)
    return rms_norm_ref(h, weight, eps), h.double()


def layer_norm_ref(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
                   eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased variance), in float64."""
    xd = x.double()
    centered = xd - xd.mean(-1, keepdim=True)
    y = centered * torch.rsqrt(centered.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.double()
    return y + bias.double() if bias is not None else y


# ---- softmax family ----


# ---- activations ----


# ---- rotary embedding ----


# ---- GEMM ----

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu")


def gemm_tolerance(dtype: torch.dtype, k: int) -> Tuple[float, float]:
    """(atol, rtol) for GEMM outputs of size O(1) (the input factories scale b and weight by 1/sqrt(K)).

    The per-dtype TOLERANCES, with the float32/float64 atol grown by sqrt(K / 64): a K-term sum rounds
    K times, and those errors add up like a random walk. bf16/fp16 results accumulate in fp32, so their
    error is the output rounding (at most about 1 ulp: the product may be rounded before the bias and
    activation are applied, as in unfused torch code), independent of K."""
    atol, rtol = TOLERANCES[dtype]
    if dtype in (torch.float32, torch.float64):
        atol *= max(1.0, (k / 64) ** 0.5)
    return atol, rtol


def assert_gemm_close(actual: Tensor, expected: Tensor, k: int, dtype: Optional[torch.dtype] = None,
                      msg: str = "") -> None:
    """assert_close with gemm_tolerance(dtype, k)."""
    atol, rtol = gemm_tolerance(dtype or actual.dtype, k)
    torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=True,
                               msg=(lambda m: f"{msg}\n{m}") if msg else None)


def matmul_ref(a: Tensor, b: Tensor) -> Tensor:
    """a @ b with batch broadcasting, in float64."""
    return torch.matmul(a.double(), b.double())


def activation_ref(z: Tensor, activation: str = "none") -> Tensor:
    """The activations of linear, in z's dtype (float64 for the reference)."""
    if activation == "none":
        return z
    if activation == "relu":
        return torch.relu(z)
    if activation == "gelu":
        return torch.nn.functional.gelu(z)
    if activation == "gelu_tanh":
        return torch.nn.functional.gelu(z, approximate="tanh")
    if activation == "silu":
        return torch.nn.functional.silu(z)
    raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


def linear_ref(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "none") -> Tensor:
    """act(x @ weight.T + bias), in float64."""
    z = torch.matmul(x.double(), weight.double().t())
    if bias is not None:
        z = z + bias.double()
    return activation_ref(z, activation)


# ---- attention ----
