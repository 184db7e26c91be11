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


def softmax_ref(x: Tensor, dim: int = -1) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) over `dim`, in float64 (NaN for a slice of all -inf)."""
    xd = x.double()
    e = (xd - xd.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def log_softmax_ref(x: Tensor, dim: int = -1) -> Tensor:
    """(x - max) - log(sum(exp(x - max))) over `dim`, in float64."""
    xd = x.double()
    z = xd - xd.amax(dim, keepdim=True)
    return z - z.exp().sum(dim, keepdim=True).log()


# ---- activations ----


# ---- rotary embedding ----


# ---- GEMM ----


# ---- attention ----
