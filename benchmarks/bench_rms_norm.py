"""Benchmark rms_norm and fused add + rms_norm: yirage vs torch eager vs torch.compile, same process.

Reports the median time (p20/p80), GB/s of ideal bytes (each input read once, each output written
once) and % of the copy bandwidth measured in the same run (``dst.copy_(src)`` into a preallocated
tensor of the same size), then writes a Markdown table to benchmarks/results/.

    python benchmarks/bench_rms_norm.py [--device cpu] [--dtypes float32 bfloat16] [--shapes 4096x4096 16384x1024]
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import yirage_ext
from yirage_ext.testing.inputs import rms_norm_inputs
from yirage_ext.testing.reference import assert_close, fused_add_rms_norm_ref, rms_norm_ref

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def timeit(fn, device: str, warmup: int, repeats: int) -> tuple[float, float, float]:
    """(median, p20, p80) seconds per call."""
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
    times.sort()
    q = statistics.quantiles(times, n=5)
    return statistics.median(times), q[0], q[3]


def eager_rms_norm(x, w, eps):
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def eager_add_rms_norm(x, r, w, eps):
    h = x + r
    return F.rms_norm(h, (h.shape[-1],), w, eps), h


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "float16", "bfloat16"])
    p.add_argument("--shapes", nargs="+", default=["4096x4096", "16384x1024"])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-compile", action="store_true", help="skip the torch.compile provider")
    p.add_argument("--out", default=None, help="Markdown file (default: benchmarks/results/<device>-<date>.md)")
    args = p.parse_args(argv)
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")

    compiled_norm = torch.compile(eager_rms_norm, dynamic=False)
    compiled_add = torch.compile(eager_add_rms_norm, dynamic=False)
    rows = []
    for shape_s in args.shapes:
        m, n = (int(v) for v in shape_s.lower().split("x"))
        for dtype_s in args.dtypes:
            dtype = getattr(torch, dtype_s)
            inp = rms_norm_inputs((m, n), dtype, device=dev, seed=0)
            x, r, w, eps = inp.x, inp.residual, inp.weight, inp.eps
            esize = x.element_size()
            # copy roofline: read + write of one tensor of x's size
            src, dst = torch.randn_like(x), torch.empty_like(x)
            copy_t = timeit(lambda: dst.copy_(src), dev, args.warmup, args.repeats)[0]
            copy_bw = 2 * x.numel() * esize / copy_t
            # correctness before timing
            assert_close(yirage_ext.rms_norm(x, w, eps), rms_norm_ref(x, w, eps), dtype)
            y, h = yirage_ext.fused_add_rms_norm(x, r, w, eps)
            ry, rh = fused_add_rms_norm_ref(x, r, w, eps)
            assert_close(y, ry, dtype)
            assert_close(h, rh, dtype)
            cases = {
                "rms_norm": (2, {
                    "yirage": lambda: torch.ops.yirage.rms_norm(x, w, eps),
                    "torch": lambda: eager_rms_norm(x, w, eps),
                    "compile": lambda: compiled_norm(x, w, eps),
                }),
                "add+rms_norm": (4, {
                    "yirage": lambda: torch.ops.yirage.fused_add_rms_norm(x, r, w, eps),
                    "torch": lambda: eager_add_rms_norm(x, r, w, eps),
                    "compile": lambda: compiled_add(x, r, w, eps),
                }),
            }
            for op, (passes, providers) in cases.items():
                nbytes = passes * x.numel() * esize
                base = None
                for prov, fn in providers.items():
                    if prov == "compile" and args.no_compile:
                        continue
                    med, p20, p80 = timeit(fn, dev, args.warmup, args.repeats)
                    base = med if prov == "torch" else base
                    rows.append(dict(op=op, shape=f"{m}x{n}", dtype=dtype_s, provider=prov, ms=med * 1e3,
                                     p20=p20 * 1e3, p80=p80 * 1e3, gbps=nbytes / med / 1e9,
                                     roof=100 * nbytes / med / copy_bw, copy=copy_bw / 1e9))
                    print(f"{op:13s} {m}x{n:<6d} {dtype_s:9s} {prov:8s} {med*1e3:8.3f} ms "
                          f"{nbytes/med/1e9:7.2f} GB/s ({100*nbytes/med/copy_bw:5.1f}% of copy {copy_bw/1e9:.2f})",
                          flush=True)
                for row in rows:  # speedups vs eager torch of this (op, shape, dtype)
                    if (row["op"], row["shape"], row["dtype"]) == (op, f"{m}x{n}", dtype_s) and base:
                        row["vs_torch"] = base / (row["ms"] / 1e3)

    write_markdown(rows, dev, args.out)
    return 0


def write_markdown(rows, dev: str, out: str | None) -> None:
    today = datetime.date.today().isoformat()
    device_name = torch.cuda.get_device_name() if dev == "cuda" else cpu_name()
    out = out or os.path.join(RESULTS_DIR, f"rms_norm-{dev}-{today}.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    lines = [
        f"# rms_norm benchmark ({dev})",
        "",
        f"- date: {today}",
        f"- device: {device_name}, {torch.get_num_threads()} threads" if dev == "cpu" else f"- device: {device_name}",
        f"- torch {torch.__version__}, yirage_ext {yirage_ext.__version__} ({yirage_ext.load_info().kind}), "
        f"CPU kernel variant {yirage_ext.cpu_isa()}",
        f"- python {platform.python_version()}; command: `python {' '.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])}`",
        "- GB/s counts ideal bytes (rms_norm: read x, write y; add+rms_norm: read x and residual, write y and h);"
        " copy = `dst.copy_(src)` of x's size in the same run (read + write); median of the repeats, p20-p80 in brackets.",
        "",
        "| op | shape | dtype | provider | ms [p20-p80] | GB/s | % of copy | vs torch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['op']} | {r['shape']} | {r['dtype']} | {r['provider']} | {r['ms']:.3f} "
                     f"[{r['p20']:.3f}-{r['p80']:.3f}] | {r['gbps']:.2f} | {r['roof']:.0f}% (copy {r['copy']:.2f}) "
                     f"| {r.get('vs_torch', float('nan')):.2f}x |")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
