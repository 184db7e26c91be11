"""Input factories, one per op, shared by the tests, the benchmarks and the demo: the benchmark
measures exactly what the tests check. Values are seeded random normals (never zeros)."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Optional, Sequence

import torch
from torch import Tensor

LAYOUTS = ("contiguous", "strided", "broadcast")

# Where the factories put their tensors when no device is given: "cpu", or the device a test suite runs
# on (tests switch it with default_device(), so one test body runs on every device).
_default_device = "cpu"


def _dev(device):
    return _default_device if device is None else device


@contextlib.contextmanager
def default_device(device):
    """Within the block, factories called without `device` create their tensors on `device`."""
    global _default_device
    before, _default_device = _default_device, str(torch.device(device))
    try:
        yield
    finally:
        _default_device = before


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


def rms_norm_inputs(shape: Sequence[int], dtype: torch.dtype = torch.float32, device=None, weight: bool = True,
                    layout: str = "contiguous", eps: float = 1e-6, seed: int = 0) -> RmsNormInputs:
    """x and residual of `shape` (..., N) and a weight (N,) around 1, for rms_norm / fused_add_rms_norm."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=gen).to(dtype=dtype, device=_dev(device))
    r = torch.randn(*shape, generator=gen).to(dtype=dtype, device=_dev(device))
    w = (torch.rand(shape[-1], generator=gen) + 0.5).to(dtype=dtype, device=_dev(device)) if weight else None
    return RmsNormInputs(x=_layout(x, layout, gen), residual=_layout(r, layout, gen), weight=w, eps=eps)


@dataclasses.dataclass
class LayerNormInputs:
    x: Tensor
    weight: Optional[Tensor]
    bias: Optional[Tensor]
    eps: float


def layer_norm_inputs(shape: Sequence[int], dtype: torch.dtype = torch.float32, device=None, affine: bool = True,
                      layout: str = "contiguous", eps: float = 1e-5, seed: int = 0) -> LayerNormInputs:
    """x of `shape` (..., N) with a non-zero mean (so centering matters), weight around 1 and bias (N,)."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, generator=gen) * 2 + 0.5).to(dtype=dtype, device=_dev(device))
    w = (torch.rand(shape[-1], generator=gen) + 0.5).to(dtype=dtype, device=_dev(device)) if affine else None
    b = torch.randn(shape[-1], generator=gen).to(dtype=dtype, device=_dev(device)) if affine else None
    return LayerNormInputs(x=_layout(x, layout, gen), weight=w, bias=b, eps=eps)


# ---- softmax family ----


def softmax_inputs(shape: Sequence[int], dtype: torch.dtype = torch.float32, device=None, scale: float = 2.0,
                   offset: float = 0.0, masked: float = 0.0, layout: str = "contiguous", seed: int = 0) -> Tensor:
    """Logits x of `shape`: normals times `scale` plus `offset`; a fraction `masked` of the entries set to
    -inf (as attention masks do). Layouts as the other factories ("strided": padded last dim)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=gen) * scale + offset
    if masked > 0:
        x = x.masked_fill(torch.rand(*shape, generator=gen) < masked, float("-inf"))
    return _layout(x.to(dtype=dtype, device=_dev(device)), layout, gen)


# ---- activations ----


def activation_inputs(shape: Sequence[int], dtype: torch.dtype = torch.float32, device=None,
                      layout: str = "contiguous", scale: float = 2.0, seed: int = 0) -> Tensor:
    """x of `shape` for silu_and_mul / gelu_and_mul ((..., 2*d)) and gelu (any shape): normals times
    `scale`, so both branches of the activations (|x| below and above ~1.3) are exercised."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(tuple(shape), generator=gen) * scale).to(dtype=dtype, device=_dev(device))
    return _layout(x, layout, gen) if x.dim() > 0 else x


# ---- rotary embedding ----

ROTARY_LAYOUTS = ("contiguous", "qkv", "transposed", "strided", "broadcast")


@dataclasses.dataclass
class RotaryInputs:
    q: Tensor
    k: Tensor
    cos: Tensor
    sin: Tensor


def rotary_tables(positions: Tensor, rot_dim: int, base: float = 10000.0, dtype: torch.dtype = torch.float32,
                  device=None) -> tuple[Tensor, Tensor]:
    """cos and sin (..., S, R/2) of the angles positions * base^(-2i/R), computed in float64."""
    inv_freq = base ** (-torch.arange(0, rot_dim, 2, dtype=torch.float64) / rot_dim)
    angles = positions.double().unsqueeze(-1) * inv_freq
    return angles.cos().to(dtype=dtype, device=_dev(device)), angles.sin().to(dtype=dtype, device=_dev(device))


def rotary_embedding_inputs(shape: Sequence[int], kv_heads: Optional[int] = None, rot_dim: Optional[int] = None,
                            dtype: torch.dtype = torch.float32, cos_dtype: Optional[torch.dtype] = None, device=None,
                            layout: str = "contiguous", per_sequence: bool = False, base: float = 10000.0,
                            seed: int = 0) -> RotaryInputs:
    """q of `shape` (..., S, Hq, D), k (..., S, kv_heads, D) (default Hq), and cos/sin of rot_dim R (default
    D, rounded down to even): (S, R/2) for positions 0..S-1, or (..., S, R/2) with a random position offset
    per leading index when per_sequence. cos_dtype defaults to dtype.

    layout: "contiguous"; "qkv" (q and k are head slices of one fused (..., S, Hq + 2 * Hk, D) projection,
    the usual layout in models); "transposed" ((..., H, S, D) storage seen as (..., S, H, D)); "strided" (rows
    padded: a slice of a wider last dim); "broadcast" (the first leading dim a stride-0 expand)."""
    *lead, seq, heads, dim = shape
    kv_heads = heads if kv_heads is None else kv_heads
    rot_dim = dim - dim % 2 if rot_dim is None else rot_dim
    gen = torch.Generator().manual_seed(seed)
    if layout == "qkv":
        qkv = torch.randn(*lead, seq, heads + 2 * kv_heads, dim, generator=gen).to(dtype=dtype, device=_dev(device))
        q, k = qkv[..., :heads, :], qkv[..., heads:heads + kv_heads, :]
    elif layout == "transposed":
        q = torch.randn(*lead, heads, seq, dim, generator=gen).to(dtype=dtype, device=_dev(device)).transpose(-3, -2)
        k = torch.randn(*lead, kv_heads, seq, dim, generator=gen).to(dtype=dtype, device=_dev(device)).transpose(-3, -2)
    elif layout in LAYOUTS:
        q = _layout(torch.randn(*lead, seq, heads, dim, generator=gen).to(dtype=dtype, device=_dev(device)), layout, gen)
        k = _layout(torch.randn(*lead, seq, kv_heads, dim, generator=gen).to(dtype=dtype, device=_dev(device)), layout, gen)
    else:
        raise ValueError(f"layout must be one of {ROTARY_LAYOUTS}, got {layout!r}")
    positions = torch.arange(seq, dtype=torch.float64)
    if per_sequence:
        positions = positions + torch.randint(0, 1000, (*lead, 1), generator=gen).double()
    cos, sin = rotary_tables(positions, rot_dim, base, cos_dtype or dtype, device)
    return RotaryInputs(q=q, k=k, cos=cos, sin=sin)


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


def matmul_inputs(a_shape: Sequence[int], b_shape: Sequence[int], dtype: torch.dtype = torch.float32, device=None,
                  layout: str = "contiguous", seed: int = 0) -> MatmulInputs:
    """a (..., M, K) ~ N(0, 1) and b (..., K, N) ~ N(0, 1/K), so a @ b is O(1) whatever K. `layout`, one of
    GEMM_LAYOUTS, applies to both: contiguous, strided (padded rows), broadcast (first dim a stride-0 expand),
    transposed (column-major matrices)."""
    gen = torch.Generator().manual_seed(seed)
    k = a_shape[-1]
    a = torch.randn(*a_shape, generator=gen).to(dtype=dtype, device=_dev(device))
    b = (torch.randn(*b_shape, generator=gen) / max(k, 1) ** 0.5).to(dtype=dtype, device=_dev(device))
    return MatmulInputs(a=_gemm_layout(a, layout, gen), b=_gemm_layout(b, layout, gen))


@dataclasses.dataclass
class LinearInputs:
    x: Tensor
    weight: Tensor
    bias: Optional[Tensor]


def linear_inputs(x_shape: Sequence[int], n: int, dtype: torch.dtype = torch.float32, device=None, bias: bool = True,
                  layout: str = "contiguous", seed: int = 0) -> LinearInputs:
    """x (..., K) ~ N(0, 1), weight (N, K) ~ N(0, 1/K) (as nn.Linear's scale, so z is O(1) and of both signs),
    bias (N,) ~ N(0, 1/4). `layout`, one of GEMM_LAYOUTS, applies to x and weight: strided (padded rows),
    broadcast (x's first dim a stride-0 expand), transposed (x and weight column-major: weight is the .t() of
    a (K, N) tensor)."""
    gen = torch.Generator().manual_seed(seed)
    k = x_shape[-1]
    x = torch.randn(*x_shape, generator=gen).to(dtype=dtype, device=_dev(device))
    w = (torch.randn(n, k, generator=gen) / max(k, 1) ** 0.5).to(dtype=dtype, device=_dev(device))
    b = (torch.randn(n, generator=gen) * 0.5).to(dtype=dtype, device=_dev(device)) if bias else None
    x = _gemm_layout(x, layout, gen) if x.dim() >= 2 or layout != "transposed" else x
    w = w if layout == "broadcast" else _gemm_layout(w, layout, gen)
    return LinearInputs(x=x, weight=w, bias=b)


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
                     dtype: torch.dtype = torch.float32, device=None, causal: bool = False,
                     scale: Optional[float] = None, layout: str = "contiguous", seed: int = 0) -> AttentionInputs:
    """q (B, Hq, Sq, D), k and v (B, Hk, Sk, D), standard normal. Layouts: "contiguous"; "bshd", views of
    (B, S, H, D) tensors transposed to (B, H, S, D) (the layout projections produce); "broadcast", k and v one
    batch entry expanded over B (stride 0) and q a padded slice (row stride > D)."""
    if layout not in ATTENTION_LAYOUTS:
        raise ValueError(f"layout must be one of {ATTENTION_LAYOUTS}, got {layout!r}")
    gen = torch.Generator().manual_seed(seed)

    def make(h, s, is_kv):
        if layout == "bshd":
            return torch.randn(batch, s, h, head_dim, generator=gen).to(dtype=dtype, device=_dev(device)).transpose(1, 2)
        if layout == "broadcast" and is_kv:
            one = torch.randn(1, h, s, head_dim, generator=gen).to(dtype=dtype, device=_dev(device))
            return one.expand(batch, h, s, head_dim)
        if layout == "broadcast":
            return torch.randn(batch, h, s, head_dim + 5, generator=gen).to(dtype=dtype, device=_dev(device))[..., :head_dim]
        return torch.randn(batch, h, s, head_dim, generator=gen).to(dtype=dtype, device=_dev(device))

    return AttentionInputs(q=make(heads_q, seq_q, False), k=make(heads_kv, seq_kv, True),
                           v=make(heads_kv, seq_kv, True), causal=causal, scale=scale)
