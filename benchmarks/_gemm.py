"""Shared by bench_matmul.py and bench_linear.py: MxKxN shapes, repeats bounded by a time budget, and a
report with GFLOP/s beside the GB/s of ideal bytes and % of the copy bandwidth (GEMMs are compute-bound
except for a few rows, where the weight read is the roofline)."""
from __future__ import annotations

import time

from _common import timeit


def parse_dims(p, s: str, n: int) -> tuple[int, ...]:
    """'2048x4096x11008' -> (2048, 4096, 11008); `n` numbers (or n + 1 with a leading batch)."""
    try:
        dims = tuple(int(v) for v in s.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) not in (n, n + 1):
        p.error(f"--shapes: expected {'x'.join('MKN'[:n])} (optionally with a leading batch), got {s!r}")
    return dims


def budgeted(fn, device: str, warmup: int, repeats: int, budget_s: float) -> tuple[float, float, float]:
    """timeit with at most `repeats` repeats and about `budget_s` seconds of timed calls (at least 3); a
    provider whose first call alone takes the whole budget (e.g. torch's scalar bf16 GEMM fallback on a CPU
    without AVX-512) is reported from that one call."""
    fn()  # compiles, caches, first-touch page faults
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first >= budget_s:
        return first, first, first
    reps = max(3, min(repeats, int(budget_s / max(first, 1e-9))))
    return timeit(fn, device, min(warmup, max(1, reps // 3)), reps)


def measure(rows: list, op: str, shape: str, dtype: str, flops: float, nbytes: int, copy_bw: float,
            providers: dict, args) -> None:
    """Times each provider; appends a row per provider with GFLOP/s, GB/s, % of copy and speedup vs `torch`."""
    results = {name: budgeted(fn, args.device, args.warmup, args.repeats, args.budget) for name, fn in providers.items()}
    base = results.get("torch", (None,))[0]
    for name, (med, p20, p80) in results.items():
        row = dict(op=op, shape=shape, dtype=dtype, provider=name, ms=med * 1e3, p20=p20 * 1e3, p80=p80 * 1e3,
                   gflops=flops / med / 1e9, gbps=nbytes / med / 1e9, roof=100 * nbytes / med / copy_bw,
                   copy=copy_bw / 1e9, vs_torch=base / med if base else float("nan"))
        rows.append(row)
        print(f"{op:18s} {shape:>16s} {dtype:9s} {name:8s} {row['ms']:9.3f} ms {row['gflops']:8.1f} GFLOP/s "
              f"{row['gbps']:7.2f} GB/s ({row['roof']:5.1f}% of copy)  {row['vs_torch']:.2f}x torch", flush=True)
