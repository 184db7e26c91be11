"""Our Triton versions of rms_norm, softmax (last dim) and silu_and_mul: the `triton` provider.

One program per row, the whole row in one block (BLOCK = next power of two >= N), fp32 math, one rounding
to the output dtype. Forward only. They run on CUDA tensors, and on CPU tensors under TRITON_INTERPRET=1
(Triton's interpreter, slow: for correctness tests). The module imports Triton, so import it only when
Triton is installed (providers.py does)."""
from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(X, W, Y, stride_x, stride_y, N, eps, HAS_W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * (1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps))
    if HAS_W:
        y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_kernel(X, Y, stride_x, stride_y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * stride_y + cols, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _silu_and_mul_kernel(X, Y, stride_x, stride_y, D, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    a = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(X + row * stride_x + D + cols, mask=mask, other=0.0).to(tl.float32)
    y = a / (1.0 + tl.exp(-a)) * b
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=mask)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """x as (rows, N) with a contiguous last dim (a view when the layout allows, else a copy)."""
    if x.dim() == 0:
        raise ValueError(f"x: expected at least 1 dim, got a 0-dim tensor")
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


def rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor] = None, eps: float = 1e-6) -> torch.Tensor:
    x2 = _rows(x)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    if x2.numel():
        _rms_norm_kernel[(x2.shape[0],)](x2, weight if weight is not None else x2, y, x2.stride(0), y.stride(0),
                                         x2.shape[1], eps, HAS_W=weight is not None,
                                         BLOCK=triton.next_power_of_2(x2.shape[1]))
    return y.view(x.shape)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    if dim not in (-1, x.dim() - 1):
        raise NotImplementedError(f"dim: the Triton softmax supports the last dim only, got dim={dim} "
                                  f"for a {x.dim()}-dim x")
    x2 = _rows(x)
    y = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    if x2.numel():
        _softmax_kernel[(x2.shape[0],)](x2, y, x2.stride(0), y.stride(0), x2.shape[1],
                                        BLOCK=triton.next_power_of_2(x2.shape[1]))
    return y.view(x.shape)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    if x.shape[-1] % 2:
        raise ValueError(f"x: expected an even last dim (2*d), got {x.shape[-1]}")
    x2 = _rows(x)
    d = x2.shape[1] // 2
    y = torch.empty(x2.shape[0], d, dtype=x.dtype, device=x.device)
    if y.numel():
        _silu_and_mul_kernel[(x2.shape[0],)](x2, y, x2.stride(0), y.stride(0), d, BLOCK=triton.next_power_of_2(d))
    return y.view(*x.shape[:-1], d)
