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


CHUNK = 1 << 18  # elements per pass: the float64 temporaries stay in cache


def compare(actual: Tensor, expected: Tensor, atol: float, rtol: float,
            dtype: Optional[torch.dtype] = None) -> Accuracy:
    """Metrics of `actual` against the float64 `expected` with tolerance ``atol + rtol * |expected|``."""
    dtype = dtype or actual.dtype
    if tuple(actual.shape) != tuple(expected.shape):
        return Accuracy(passed=False, atol=atol, rtol=rtol,
                        note=f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    if actual.dtype != dtype:
        return Accuracy(passed=False, atol=atol, rtol=rtol, note=f"dtype {actual.dtype}, expected {dtype}")
    half = dtype in HALF_TYPES
    flat_a = actual.detach().cpu().reshape(-1)
    flat_e = expected.detach().cpu().reshape(-1)
    n = flat_a.numel()
    floor = atol / rtol if rtol > 0 else 1.0
    max_abs = max_rel = err_sq = ref_sq = 0.0
    max_ulp = n_bad = n_out = 0
    all_finite = bool(torch.isfinite(flat_a).all()) and bool(torch.isfinite(flat_e).all())
    for start in range(0, n, CHUNK):
        a = flat_a[start:start + CHUNK].double()
        e = flat_e[start:start + CHUNK].double()
        if all_finite:  # the common case, in fewer passes
            e_abs = e.abs()
            diff = a.sub_(e).abs_()
            both = None
        else:
            e_finite = torch.isfinite(e)
            a_finite = torch.isfinite(a)
            both = e_finite & a_finite
            same_special = (torch.isnan(a) & torch.isnan(e)) | (~e_finite & (a == e))
            bad = (~a_finite & e_finite) | (~e_finite & ~same_special)
            n_bad += int(bad.sum().item())
            n_out += int(bad.sum().item())
            e_abs = torch.where(both, e.abs(), 0.0)
            diff = torch.where(both, (a - e).abs(), 0.0)
        n_out += int((diff > e_abs * rtol + atol).sum().item())
        max_abs = max(max_abs, diff.max().item())
        max_rel = max(max_rel, (diff / e_abs.clamp_min(floor)).max().item())
        err_sq += torch.dot(diff, diff).item()
        ref_sq += torch.dot(e_abs, e_abs).item()
        if half:
            sized = e_abs >= floor if both is None else both & (e_abs >= floor)
            if sized.any():
                d = ulp_distance(flat_a[start:start + CHUNK], flat_e[start:start + CHUNK], dtype)
                max_ulp = max(max_ulp, int(d[sized].max().item()))
    err_norm, ref_norm = math.sqrt(err_sq), math.sqrt(ref_sq)
    l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    return Accuracy(max_abs=max_abs, max_rel=max_rel, l2_rel=l2, max_ulp=max_ulp if half else None,
                    frac_outside=n_out / n if n else 0.0, nonfinite=n_bad, passed=n_out == 0, atol=atol, rtol=rtol)


def compare_all(pairs: Iterable[Tuple], dtype: torch.dtype) -> Accuracy:
    """compare() over (actual, expected, (atol, rtol)[, label]) tuples, merged (worst of each metric); a failing
    pair's label (e.g. "grad[1]") goes into the note, so the verdict says which tensor failed."""
    result = None
    for actual, expected, (atol, rtol), *label in pairs:
        acc = compare(actual, expected, atol, rtol, dtype)
        if not acc.passed and label and not acc.note:
            what = f"{acc.nonfinite} non-finite" if acc.nonfinite else f"{acc.frac_outside:.2%} outside"
            acc.note = f"{label[0]}: {what}"
        result = acc if result is None else result.merge(acc)
    return result if result is not None else Accuracy()
