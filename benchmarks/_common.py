"""Shared by the benchmark scripts: timing, the copy roofline, device names and the Markdown report."""
from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import time

import torch

import yirage_ext

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def timeit(fn, device: str, warmup: int, repeats: int) -> tuple[float, float, float]:
    """(median, p20, p80) seconds per call: CUDA events on GPU, perf_counter_ns on CPU."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter_ns()
            fn()
            times.append((time.perf_counter_ns() - t0) / 1e9)
    q = statistics.quantiles(sorted(times), n=5)
    return statistics.median(times), q[0], q[3]


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
        print(f"{op:13s} {shape:>11s} {dtype:9s} {name:8s} {row['ms']:8.3f} ms {row['gbps']:7.2f} GB/s "
              f"({row['roof']:5.1f}% of copy {row['copy']:.2f})  {row['vs_torch']:.2f}x torch", flush=True)


def write_markdown(rows: list, title: str, device: str, out: str | None, bytes_note: str) -> str:
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
        f"- GB/s counts ideal bytes ({bytes_note}); copy = `dst.copy_(src)` of the input's size in the same run "
        "(read + write); median of the repeats, p20-p80 in brackets.",
        "",
        "| op | shape | dtype | provider | ms [p20-p80] | GB/s | % of copy | vs torch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['provider']} | {r['ms']:.3f} "
                     f"[{r['p20']:.3f}-{r['p80']:.3f}] | {r['gbps']:.2f} | {r['roof']:.0f}% (copy {r['copy']:.2f}) "
                     f"| {r['vs_torch']:.2f}x |")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return out


def base_parser(doc: str):
    import argparse

    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "float16", "bfloat16"])
    p.add_argument("--shapes", nargs="+", default=["4096x4096", "16384x1024"], help="ROWSxHIDDEN")
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
