"""Input factories, one per op, shared by the tests, the benchmarks and the demo: the benchmark
measures exactly what the tests check. Values are seeded random normals (never zeros)."""
from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

import torch
from torch import Tensor

LAYOUTS = ("contiguous", "strided", "broadcast")


@dataclasses.dataclass
class RmsNormInputs:
    x: Tensor
    residual: Tensor
    weight: Optional[Tensor]
    eps: float


def _layout(t: Tensor, layout: str, gen: torch.Generator) -> Tensor:
    if layout == "contiguous":
        return t
    if layout == "strided":  # rows padded: a slice of a wider tensor (last dim contiguous, row stride > N)
        wide = torch.randn(*t.shape[:-1], t.shape[-1] + 3, generator=gen, dtype=torch.float32).to(t.dtype)
        wide = wide.to(t.device)
        wide[..., : t.shape[-1]] = t
        return wide[..., : t.shape[-1]]
    if layout == "broadcast":  # the first leading dim is a stride-0 expand of one slice
        if t.dim() < 2:
            return t
        return t[:1].expand(t.shape)
    raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def rms_norm_inputs(shape: Sequence[int], dtype: torch.dtype = torch.float32, device="cpu", weight: bool = True,
                    layout: str = "contiguous", eps: float = 1e-6, seed: int = 0) -> RmsNormInputs:
    """x and residual of `shape` (..., N) and a weight (N,) around 1, for rms_norm / fused_add_rms_norm."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=gen).to(dtype=dtype, device=device)
    r = torch.randn(*shape, generator=gen).to(dtype=dtype, device=device)
    w = (torch.rand(shape[-1], generator=gen) + 0.5).to(dtype=dtype, device=device) if weight else None
    return RmsNormInputs(x=_layout(x, layout, gen), residual=_layout(r, layout, gen), weight=w, eps=eps)


@dataclasses.dataclass
class LayerNormInputs:
    x: Tensor
    weight: Optional[Tensor]
    bias: Optional[Tensor]
    eps: float


def layer_norm_inputs(shape: Sequence[int], dtype: torch.dtype = torch.float32, device="cpu", affine: bool = True,
                      layout: str = "contiguous", eps: float = 1e-5, seed: int = 0) -> LayerNormInputs:
    """x of `shape` (..., N) with a non-zero mean (so centering matters), weight around 1 and bias (N,)."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, generator=gen) * 2 + 0.5).to(dtype=dtype, device=device)
    w = (torch.rand(shape[-1], generator=gen) + 0.5).to(dtype=dtype, device=device) if affine else None
    b = torch.randn(shape[-1], generator=gen).to(dtype=dtype, device=device) if affine else None
    return LayerNormInputs(x=_layout(x, layout, gen), weight=w, bias=b, eps=eps)


# ---- softmax family ----


# ---- activations ----


# ---- rotary embedding ----


# ---- GEMM ----


# ---- attention ----

ATTENTION_LAYOUTS = ("contiguous", "bshd", "broadcast")


@dataclasses.dataclass
class AttentionInputs:
    q: Tensor
    k: Tensor
    v: Tensor
    causal: bool
    scale: Optional[float]


def attention_inputs(batch: int, heads_q: int, heads_kv: int, seq_q: int, seq_kv: int, head_dim: int,
                     dtype: torch.dtype = torch.float32, device="cpu", causal: bool = False,
                     scale: Optional[float] = None, layout: str = "contiguous", seed: int = 0) -> AttentionInputs:
    """q (B, Hq, Sq, D), k and v (B, Hk, Sk, D), standard normal. Layouts: "contiguous"; "bshd", views of
    (B, S, H, D) tensors transposed to (B, H, S, D) (the layout projections produce); "broadcast", k and v one
    batch entry expanded over B (stride 0) and q a padded slice (row stride > D)."""
    if layout not in ATTENTION_LAYOUTS:
        raise ValueError(f"layout must be one of {ATTENTION_LAYOUTS}, got {layout!r}")
    gen = torch.Generator().manual_seed(seed)

    def make(h, s, is_kv):
        if layout == "bshd":
            return torch.randn(batch, s, h, head_dim, generator=gen).to(dtype=dtype, device=device).transpose(1, 2)
        if layout == "broadcast" and is_kv:
            one = torch.randn(1, h, s, head_dim, generator=gen).to(dtype=dtype, device=device)
            return one.expand(batch, h, s, head_dim)
        if layout == "broadcast":
            return torch.randn(batch, h, s, head_dim + 5, generator=gen).to(dtype=dtype, device=device)[..., :head_dim]
        return torch.randn(batch, h, s, head_dim, generator=gen).to(dtype=dtype, device=device)

    return AttentionInputs(q=make(heads_q, seq_q, False), k=make(heads_kv, seq_kv, True),
                           v=make(heads_kv, seq_kv, True), causal=causal, scale=scale)
