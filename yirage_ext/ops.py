"""Public Python functions: thin, typed wrappers over ``torch.ops.yirage.*`` (the dispatcher picks the
backend from the tensors' device; autograd and torch.compile work through the ops themselves)."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor


def rms_norm(x: Tensor, weight: Optional[Tensor] = None, eps: float = 1e-6) -> Tensor:
    """RMSNorm over the last dim: ``x / sqrt(mean(x**2, -1) + eps) * weight``, fp32 accumulation.

    Shapes: x ``(..., N)``; weight ``(N,)`` or None; returns ``(..., N)`` (contiguous), x's dtype.
    dtypes: float32, float16, bfloat16 (float64 on CPU); weight has x's dtype. Differentiable in x and weight.
    """
    return torch.ops.yirage.rms_norm(x, weight, eps)


def fused_add_rms_norm(
    x: Tensor, residual: Tensor, weight: Optional[Tensor] = None, eps: float = 1e-6
) -> Tuple[Tensor, Tensor]:
    """Pre-norm residual step in one pass: ``h = x + residual``, returns ``(rms_norm(h, weight, eps), h)``.

    ``h`` is rounded to the input dtype before the norm, exactly as the unfused code does.
    Shapes: x and residual ``(..., N)``; weight ``(N,)`` or None; both outputs ``(..., N)``.
    Differentiable in x, residual and weight.
    """
    return torch.ops.yirage.fused_add_rms_norm(x, residual, weight, eps)


def layer_norm(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    """LayerNorm over the last dim: ``(x - mean) / sqrt(var + eps) * weight + bias`` (biased variance),
    fp32 accumulation.

    Shapes: x ``(..., N)``; weight and bias ``(N,)`` or None; returns ``(..., N)`` (contiguous), x's dtype.
    Differentiable in x, weight and bias.
    """
    return torch.ops.yirage.layer_norm(x, weight, bias, eps)


# ---- softmax family ----


# ---- activations ----


# ---- rotary embedding ----


# ---- GEMM ----


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` with batch broadcasting, as ``torch.matmul`` for tensors of 2+ dims.

    Shapes: a ``(..., M, K)``, b ``(..., K, N)`` with batch dims that broadcast; returns
    ``(*broadcast(a.shape[:-2], b.shape[:-2]), M, N)`` (contiguous). Vectors (1-D) are an error: unsqueeze them.
    dtypes: float32, float16, bfloat16 (float64 on CPU), the same for a and b; bf16/fp16 accumulate in fp32.
    Broadcast batch dims are not materialized. Differentiable in a and b.
    """
    return torch.ops.yirage.matmul(a, b)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "none") -> Tensor:
    """``act(x @ weight.T + bias)``, the bias and activation applied in the GEMM's epilogue (one output
    allocation, no separate pass per op).

    Shapes: x ``(..., K)``; weight ``(N, K)`` as in ``F.linear``; bias ``(N,)`` or None; returns ``(..., N)``
    (contiguous). activation: ``"none"``, ``"relu"``, ``"gelu"`` (erf form), ``"gelu_tanh"`` or ``"silu"``.
    dtypes: float32, float16, bfloat16 (float64 on CPU), one for all tensors; bf16/fp16 accumulate in fp32.
    Differentiable in x, weight and bias.
    """
    return torch.ops.yirage.linear(x, weight, bias, activation)


# ---- attention ----


# Every public function defined above (not the typing names imported at the top).
__all__ = [_n for _n, _f in list(globals().items())
           if callable(_f) and getattr(_f, "__module__", None) == __name__ and not _n.startswith("_")]
