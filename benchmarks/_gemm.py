"""Shared by bench_matmul.py and bench_linear.py: MxKxN shapes, repeats bounded by a time budget, and a
report with GFLOP/s beside the GB/s of ideal bytes and % of the copy bandwidth (GEMMs are compute-bound
except for a few rows, where the weight read is the roofline)."""
from __future__ import annotations

import datetime
import os
import platform
import sys
import time

import torch

import yirage_ext
from _common import RESULTS_DIR, device_name, timeit


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


def write_markdown(rows: list, title: str, device: str, out: str | None, notes: list[str]) -> str:
    today = datetime.date.today().isoformat()
    out = out or os.path.join(RESULTS_DIR, f"{title}-{device}-{today}.md")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    command = " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    lines = [f"# {title} benchmark ({device})", "", f"- date: {today}", f"- device: {device_name(device)}",
             f"- torch {torch.__version__}, yirage_ext {yirage_ext.__version__} ({yirage_ext.load_info().kind}), "
             f"CPU kernel variant {yirage_ext.cpu_isa()}",
             f"- python {platform.python_version()}; command: `python {command}`"]
    lines += [f"- {n}" for n in notes]
    lines += ["", "| op | shape | dtype | provider | ms [p20-p80] | GFLOP/s | GB/s | % of copy | vs torch |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['provider']} | {r['ms']:.3f} "
                     f"[{r['p20']:.3f}-{r['p80']:.3f}] | {r['gflops']:.1f} | {r['gbps']:.2f} | "
                     f"{r['roof']:.0f}% (copy {r['copy']:.2f}) | {r['vs_torch']:.2f}x |")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return out
