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

GEMM_LAYOUTS = LAYOUTS + ("transposed",)


def _gemm_layout(t: Tensor, layout: str, gen: torch.Generator) -> Tensor:
    """`layout` for a matrix operand: "transposed" is a .mT view of the transposed storage (column-major
    matrices), the others as _layout (padded rows, or a stride-0 first dim)."""
    if layout == "transposed":
        return t.mT.contiguous().mT
    return _layout(t, layout, gen)


@dataclasses.dataclass
class MatmulInputs:
    a: Tensor
    b: Tensor


def matmul_inputs(a_shape: Sequence[int], b_shape: Sequence[int], dtype: torch.dtype = torch.float32, device="cpu",
                  layout: str = "contiguous", seed: int = 0) -> MatmulInputs:
    """a (..., M, K) ~ N(0, 1) and b (..., K, N) ~ N(0, 1/K), so a @ b is O(1) whatever K. `layout`, one of
    GEMM_LAYOUTS, applies to both: contiguous, strided (padded rows), broadcast (first dim a stride-0 expand),
    transposed (column-major matrices)."""
    gen = torch.Generator().manual_seed(seed)
    k = a_shape[-1]
    a = torch.randn(*a_shape, generator=gen).to(dtype=dtype, device=device)
    b = (torch.randn(*b_shape, generator=gen) / max(k, 1) ** 0.5).to(dtype=dtype, device=device)
    return MatmulInputs(a=_gemm_layout(a, layout, gen), b=_gemm_layout(b, layout, gen))


@dataclasses.dataclass
class LinearInputs:
    x: Tensor
    weight: Tensor
    bias: Optional[Tensor]


def linear_inputs(x_shape: Sequence[int], n: int, dtype: torch.dtype = torch.float32, device="cpu", bias: bool = True,
                  layout: str = "contiguous", seed: int = 0) -> LinearInputs:
    """x (..., K) ~ N(0, 1), weight (N, K) ~ N(0, 1/K) (as nn.Linear's scale, so z is O(1) and of both signs),
    bias (N,) ~ N(0, 1/4). `layout`, one of GEMM_LAYOUTS, applies to x and weight: strided (padded rows),
    broadcast (x's first dim a stride-0 expand), transposed (x and weight column-major: weight is the .t() of
    a (K, N) tensor)."""
    gen = torch.Generator().manual_seed(seed)
    k = x_shape[-1]
    x = torch.randn(*x_shape, generator=gen).to(dtype=dtype, device=device)
    w = (torch.randn(n, k, generator=gen) / max(k, 1) ** 0.5).to(dtype=dtype, device=device)
    b = (torch.randn(n, generator=gen) * 0.5).to(dtype=dtype, device=device) if bias else None
    x = _gemm_layout(x, layout, gen) if x.dim() >= 2 or layout != "transposed" else x
    w = w if layout == "broadcast" else _gemm_layout(w, layout, gen)
    return LinearInputs(x=x, weight=w, bias=b)


# ---- attention ----
