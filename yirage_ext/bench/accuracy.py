"""Accuracy checker: an output (or gradient) against its float64 reference, with the per-dtype tolerances of
yirage_ext.testing.reference (the tests' tolerances: one source of truth).

Metrics, each over the whole tensor: max absolute error, max relative error (where |ref| >= atol / rtol: near
zero only the absolute error means something), L2 relative error ||out - ref|| / ||ref||, max ULP distance
(fp16/bf16: the distance in representable values between the output and the reference rounded to the dtype,
over the elements where |ref| >= atol / rtol, as the relative error: near zero a tiny absolute error spans
thousands of subnormal-scale ULPs),
and the fraction of elements outside ``atol + rtol * |ref|``. A NaN or Inf where the reference has a finite
value never passes (and counts as outside); NaN where the reference is NaN, or the same infinity, matches."""
from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Optional, Tuple

import torch
from torch import Tensor

HALF_TYPES = (torch.float16, torch.bfloat16)


@dataclasses.dataclass
class Accuracy:
    """Worst-case metrics over one or more (output, reference) pairs and the verdict."""
    max_abs: float = 0.0
    max_rel: float = 0.0
    l2_rel: float = 0.0
    max_ulp: Optional[int] = None  # fp16/bf16 only
    frac_outside: float = 0.0
    nonfinite: int = 0  # NaN/Inf where the reference is finite (or a different non-finite value)
    passed: bool = True
    atol: float = 0.0
    rtol: float = 0.0
    note: str = ""  # why it failed, e.g. a shape or dtype mismatch

    def merge(self, other: "Accuracy") -> "Accuracy":
        ulps = [u for u in (self.max_ulp, other.max_ulp) if u is not None]
        return Accuracy(max(self.max_abs, other.max_abs), max(self.max_rel, other.max_rel),
                        max(self.l2_rel, other.l2_rel), max(ulps) if ulps else None,
                        max(self.frac_outside, other.frac_outside), self.nonfinite + other.nonfinite,
                        self.passed and other.passed, max(self.atol, other.atol), max(self.rtol, other.rtol),
                        "; ".join(n for n in (self.note, other.note) if n))

    def verdict(self) -> str:
        if self.passed:
            return "ok"
        if self.note:
            return f"FAIL ({self.note})"
        if self.nonfinite:
            return f"FAIL ({self.nonfinite} non-finite)"
        return f"FAIL ({self.frac_outside:.2%} outside)"


def _ordered_bits(t: Tensor) -> Tensor:
    """fp16/bf16 values as integers ordered like the values (sign-magnitude to two's complement), int32."""
    i = t.contiguous().view(torch.int16).to(torch.int32)
    return torch.where(i < 0, -32768 - i, i)


def ulp_distance(actual: Tensor, expected: Tensor, dtype: torch.dtype) -> Tensor:
    """Elementwise distance in representable `dtype` values between `actual` and `expected` rounded to `dtype`."""
    a = actual.to(dtype)
    e = expected.to(dtype)
    return (_ordered_bits(a) - _ordered_bits(e)).abs()


def compare(actual: Tensor, expected: Tensor, atol: float, rtol: float,
            dtype: Optional[torch.dtype] = None) -> Accuracy:
    """Metrics of `actual` against the float64 `expected` with tolerance ``atol + rtol * |expected|``."""
    dtype = dtype or actual.dtype
    if tuple(actual.shape) != tuple(expected.shape):
        return Accuracy(passed=False, atol=atol, rtol=rtol,
                        note=f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    if actual.dtype != dtype:
        return Accuracy(passed=False, atol=atol, rtol=rtol, note=f"dtype {actual.dtype}, expected {dtype}")
    a = actual.detach().double().cpu()
    e = expected.detach().double().cpu()
    if a.numel() == 0:
        return Accuracy(atol=atol, rtol=rtol, max_ulp=0 if dtype in HALF_TYPES else None)
    e_finite = torch.isfinite(e)
    same_special = (torch.isnan(a) & torch.isnan(e)) | (~e_finite & (a == e))
    bad_nonfinite = ~torch.isfinite(a) & e_finite | (~e_finite & ~same_special)
    both = e_finite & torch.isfinite(a)
    diff = torch.where(both, (a - e).abs(), torch.zeros_like(a))
    floor = atol / rtol if rtol > 0 else 1.0
    rel = diff / e.abs().clamp_min(floor).where(both, torch.ones_like(e))
    outside = bad_nonfinite | (diff > atol + rtol * e.abs().where(both, torch.zeros_like(e)))
    ref_norm = torch.linalg.vector_norm(e.where(both, torch.zeros_like(e))).item()
    err_norm = torch.linalg.vector_norm(diff).item()
    l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    ulp = None
    if dtype in HALF_TYPES:
        d = ulp_distance(actual.detach().cpu(), expected.detach().cpu(), dtype)
        sized = both & (e.abs() >= floor)
        ulp = int(d[sized].max().item()) if sized.any() else 0
    n_bad = int(bad_nonfinite.sum().item())
    n_out = int(outside.sum().item())
    return Accuracy(max_abs=diff.max().item(), max_rel=rel.max().item(), l2_rel=l2, max_ulp=ulp,
                    frac_outside=n_out / a.numel(), nonfinite=n_bad, passed=n_out == 0, atol=atol, rtol=rtol)


def compare_all(pairs: Iterable[Tuple[Tensor, Tensor, Tuple[float, float]]], dtype: torch.dtype) -> Accuracy:
    """compare() over (actual, expected, (atol, rtol)) pairs, merged (worst of each metric)."""
    result = None
    for actual, expected, (atol, rtol) in pairs:
        acc = compare(actual, expected, atol, rtol, dtype)
        result = acc if result is None else result.merge(acc)
    return result if result is not None else Accuracy()
