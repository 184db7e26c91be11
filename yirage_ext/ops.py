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


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax over ``dim``: ``exp(x - max) / sum(exp(x - max))``, fp32 accumulation (fp64 for float64).

    Shapes: x any shape (a 0-dim x is one element, as in ``torch.softmax``); ``dim`` in
    ``[-x.dim(), x.dim() - 1]``; returns x's shape (contiguous) and dtype. dtypes: float32, float16,
    bfloat16 (float64 on CPU). Safe for large values and ``-inf`` entries (masked positions give 0); a
    slice that is all ``-inf`` (or holds NaN or ``+inf``) gives NaN, as torch does. Differentiable in x;
    the backward uses the saved output, not x.
    """
    return torch.ops.yirage.softmax(x, dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Log-softmax over ``dim``: ``(x - max) - log(sum(exp(x - max)))``, fp32 accumulation.

    Shapes, dtypes and edge cases as :func:`softmax` (masked ``-inf`` entries give ``-inf``).
    Differentiable in x; the backward uses the saved output, not x.
    """
    return torch.ops.yirage.log_softmax(x, dim)


# ---- activations ----


def silu_and_mul(x: Tensor) -> Tensor:
    """SwiGLU: ``silu(x[..., :d]) * x[..., d:]`` with ``d = x.shape[-1] // 2``, in one pass, rounded once.

    Shapes: x ``(..., 2*d)`` (last dim even, at least 1 dim); returns ``(..., d)`` (contiguous), x's dtype.
    dtypes: float32, float16, bfloat16 (float64 on CPU); fp32 math. Differentiable in x.
    """
    return torch.ops.yirage.silu_and_mul(x)


def gelu_and_mul(x: Tensor, approximate: str = "none") -> Tensor:
    """GeGLU: ``gelu(x[..., :d], approximate) * x[..., d:]`` with ``d = x.shape[-1] // 2``, in one pass.

    ``approximate`` is ``"none"`` (exact, erf) or ``"tanh"``, as ``torch.nn.functional.gelu``.
    Shapes: x ``(..., 2*d)`` (last dim even, at least 1 dim); returns ``(..., d)`` (contiguous), x's dtype.
    dtypes: float32, float16, bfloat16 (float64 on CPU); fp32 math. Differentiable in x.
    """
    return torch.ops.yirage.gelu_and_mul(x, approximate)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU, as ``torch.nn.functional.gelu``: ``x * Phi(x)`` (``"none"``) or its tanh approximation (``"tanh"``).

    Shapes: any, 0-dim included; returns x's shape (contiguous) and dtype.
    dtypes: float32, float16, bfloat16 (float64 on CPU); fp32 math. Differentiable in x.
    """
    return torch.ops.yirage.gelu(x, approximate)


# ---- rotary embedding ----


def rotary_embedding(
    q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = False
) -> Tuple[Tensor, Tensor]:
    """Rotary position embedding of q and k in one pass; returns new tensors ``(q_rot, k_rot)``.

    The first ``R = 2 * cos.size(-1)`` features of every head are rotated pairwise by the token's angles,
    ``y1 = x1*cos - x2*sin``, ``y2 = x2*cos + x1*sin``; features ``R..D`` pass through unchanged (partial
    rotary). Pairs are ``(i, i + R/2)`` (neox, ``interleaved=False``) or ``(2i, 2i+1)`` (gpt-j,
    ``interleaved=True``).

    Shapes: q ``(..., S, Hq, D)``, k ``(..., S, Hk, D)`` with the same leading dims, S and D (Hq and Hk may
    differ: GQA/MQA); cos and sin ``(S, R/2)``, or ``(..., S, R/2)`` with leading dims that broadcast to q's
    (e.g. ``(B, S, R/2)`` for per-sequence positions); ``R <= D``. Outputs have q's and k's shapes
    (contiguous) and dtype. q and k may be strided views (e.g. slices of a fused qkv projection).
    dtypes: float32, float16, bfloat16 (float64 on CPU); k has q's dtype; cos and sin have q's dtype or,
    for float16/bfloat16 q, float32. Differentiable in q, k, cos and sin.
    """
    return torch.ops.yirage.rotary_embedding(q, k, cos, sin, interleaved)


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
