"""Float64 references and per-dtype tolerances, shared by the tests, the benchmarks and the demo.

Plain PyTorch in float64, independent of the library (never calls torch.ops.yirage)."""
from __future__ import annotations

import math
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


# ---- attention ----


def _attention_scores_ref(q: Tensor, k: Tensor, causal: bool, scale: Optional[float]) -> Tuple[Tensor, Tensor]:
    """(scores, visible): scale * q k^T in float64 with each key/value head repeated over its group of query
    heads, and the (Sq, Sk) mask of keys each query sees (bottom-right causal alignment)."""
    qd, kd = q.double(), k.double()
    kd = kd.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (qd @ kd.transpose(-1, -2)) * scale
    sq, sk = q.shape[2], k.shape[2]
    visible = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        visible = torch.arange(sk, device=q.device)[None, :] <= i + (sk - sq)
    return s.masked_fill(~visible, float("-inf")), visible


def attention_ref(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None) -> Tensor:
    """softmax(q k^T * scale, hidden keys masked) v in float64, GQA by repeating each key/value head over its
    Hq/Hk query heads. A query row that sees no key gives zeros (and, through this code, zero gradients)."""
    s, visible = _attention_scores_ref(q, k, causal, scale)
    has_key = visible.any(-1, keepdim=True)
    # rows without a key: softmax of zeros (finite, no NaN gradients), then multiplied by 0
    p = torch.softmax(torch.where(has_key, s, torch.zeros_like(s)), dim=-1) * has_key
    return p @ v.double().repeat_interleave(q.shape[1] // k.shape[1], dim=1)


def attention_lse_ref(q: Tensor, k: Tensor, causal: bool = False, scale: Optional[float] = None) -> Tensor:
    """logsumexp over the visible keys of scale * q k^T, (B, Hq, Sq) float64; -inf for a row that sees none."""
    return torch.logsumexp(_attention_scores_ref(q, k, causal, scale)[0], dim=-1)
