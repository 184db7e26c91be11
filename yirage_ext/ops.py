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


# ---- attention ----


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None) -> Tensor:
    """Scaled dot-product attention, ``softmax(q @ k.T * scale + mask) @ v`` per head, without forming the
    ``Sq x Sk`` score matrix (flash-style online softmax over key blocks, fp32 accumulation).

    Shapes: q ``(B, Hq, Sq, D)``; k and v ``(B, Hk, Sk, D)`` with ``Hq % Hk == 0`` (grouped-query attention:
    query head ``h`` uses key/value head ``h // (Hq // Hk)``); returns ``(B, Hq, Sq, D)`` (contiguous), q's dtype.
    ``scale`` defaults to ``1 / sqrt(D)`` (any finite value is accepted). ``causal`` masks bottom-right
    aligned: query ``i`` sees keys ``j <= i + Sk - Sq`` (SDPA's ``is_causal`` when ``Sq == Sk``; the KV-cache
    decoding convention otherwise); a query row that sees no key gives zeros (and zero gradients).
    dtypes: float32, float16, bfloat16 (float64 on CPU), the same for q, k, v. Any strides (e.g. a
    ``(B, S, H, D)`` tensor transposed). Differentiable in q, k and v.
    """
    return torch.ops.yirage.attention(q, k, v, causal, scale)


# Every public function defined above (not the typing names imported at the top).
__all__ = [_n for _n, _f in list(globals().items())
           if callable(_f) and getattr(_f, "__module__", None) == __name__ and not _n.startswith("_")]
