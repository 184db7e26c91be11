"""Shared by the per-op benchmark scripts: timing (the comparison framework's profiler), the copy roofline,
device names and the Markdown report. `python -m yirage_ext.bench` is the main comparison; these scripts keep
the deeper per-op sweeps (dims, modes, memory)."""
from __future__ import annotations

import datetime
import math
import os
import platform
import sys

import torch

import yirage_ext
from yirage_ext.bench.profiler import profile

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def timeit(fn, device: str, warmup: int, repeats: int) -> tuple[float, float, float]:
    """(median, p20, p80) seconds per call of exactly `repeats` timed calls: the comparison framework's profiler
    (CUDA events with an L2 flush between repeats on GPU, perf_counter_ns on CPU)."""
    t = profile(fn, device, warmup, repeats, budget_s=math.inf)
    return t.median, t.p20, t.p80


def copy_bandwidth(like: torch.Tensor, device: str, warmup: int, repeats: int) -> float:
    """Bytes/s of dst.copy_(src) (read + write) for a tensor like `like`, into a preallocated dst."""
    src, dst = torch.randn_like(like), torch.empty_like(like)
    return 2 * like.numel() * like.element_size() / timeit(lambda: dst.copy_(src), device, warmup, repeats)[0]


def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + f", {torch.get_num_threads()} threads"
    except OSError:
        pass
    return (platform.processor() or platform.machine()) + f", {torch.get_num_threads()} threads"


def measure_providers(rows: list, op: str, shape: str, dtype: str, nbytes: int, copy_bw: float,
                      providers: dict, device: str, warmup: int, repeats: int) -> None:
    """Times each provider, appends a row per provider with GB/s, % of copy and speedup vs `torch`."""
    results = {name: timeit(fn, device, warmup, repeats) for name, fn in providers.items()}
    base = results.get("torch", (None,))[0]
    for name, (med, p20, p80) in results.items():
        row = dict(op=op, shape=shape, dtype=dtype, provider=name, ms=med * 1e3, p20=p20 * 1e3, p80=p80 * 1e3,
                   gbps=nbytes / med / 1e9, roof=100 * nbytes / med / copy_bw, copy=copy_bw / 1e9,
                   vs_torch=base / med if base else float("nan"))
        rows.append(row)
        print(f"{op:18s} {shape:>13s} {dtype:9s} {name:8s} {row['ms']:8.3f} ms {row['gbps']:7.2f} GB/s "
              f"({row['roof']:5.1f}% of copy {row['copy']:.2f})  {row['vs_torch']:.2f}x torch", flush=True)


def write_markdown(rows: list, title: str, device: str, out: str | None, bytes_note: str | None = None,
                   notes: list[str] = ()) -> str:
    """Writes the rows as a Markdown table under a header with the date, device, torch and yirage_ext versions
    and the command line; a GFLOP/s column when the rows have one. `bytes_note` says what GB/s counts."""
    today = datetime.date.today().isoformat()
    out = out or os.path.join(RESULTS_DIR, f"{title}-{device}-{today}.md")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    command = " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    lines = [
        f"# {title} benchmark ({device})",
        "",
        f"- date: {today}",
        f"- device: {device_name(device)}",
        f"- torch {torch.__version__}, yirage_ext {yirage_ext.__version__} ({yirage_ext.load_info().kind}), "
        f"CPU kernel variant {yirage_ext.cpu_isa()}",
        f"- python {platform.python_version()}; command: `python {command}`",
    ]
    if bytes_note is not None:
        lines.append(f"- GB/s counts ideal bytes ({bytes_note}); copy = `dst.copy_(src)` of the input's size in the "
                     "same run (read + write); median of the repeats, p20-p80 in brackets.")
    lines += [f"- {n}" for n in notes]
    flops = any("gflops" in r for r in rows)
    cols = ["op", "shape", "dtype", "provider", "ms [p20-p80]"] + ["GFLOP/s"] * flops + ["GB/s", "% of copy", "vs torch"]
    lines += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [r["op"], r["shape"], r["dtype"], r["provider"], f"{r['ms']:.3f} [{r['p20']:.3f}-{r['p80']:.3f}]"]
        if flops:
            cells.append(f"{r['gflops']:.1f}")
        cells += [f"{r['gbps']:.2f}", f"{r['roof']:.0f}% (copy {r['copy']:.2f})", f"{r['vs_torch']:.2f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return out


def base_parser(doc: str, shapes: list[str] = ("4096x4096", "16384x1024"), shapes_help: str = "ROWSxHIDDEN"):
    import argparse

    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "float16", "bfloat16"])
    p.add_argument("--shapes", nargs="+", default=list(shapes), help=shapes_help)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile provider")
    p.add_argument("--out", default=None, help="Markdown file (default: benchmarks/results/<op>-<device>-<date>.md)")
    return p


def parse_shape(p, s: str) -> tuple[int, int]:
    try:
        m, n = (int(v) for v in s.lower().split("x"))
        return m, n
    except ValueError:
        p.error(f"--shapes: expected ROWSxHIDDEN such as 4096x4096, got {s!r}")
