"""python -m yirage_ext.bench: check every op against the float64 reference and time each provider.

Prints one table (stdout), writes CSV (--csv), a Markdown report (--markdown) and a PNG bar chart per op
(--plot, with matplotlib). Exit status: 0 when every check passed, 1 when an accuracy check failed or a
provider raised, 2 for a bad argument (a one-line message, never a traceback)."""
from __future__ import annotations

import argparse
import sys
import time
from typing import List, Optional

import torch

import yirage_ext

from . import api, report
from .cases import OPS
from .profiler import Rooflines
from .providers import DEFAULT_PROVIDERS, PROVIDERS
from ..testing.reference import TF32_TOL


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit status 2 (argparse's own errors included)
        self.exit(2, f"{self.prog}: error: {message}\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m yirage_ext.bench", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="ops and their shapes:\n" + "\n".join(
                    f"  {s.name:19s} {s.shape_format:27s} default {' '.join(s.shapes)}" for s in OPS.values()))
    p.add_argument("--ops", nargs="+", metavar="OP", help=f"default: all ({', '.join(OPS)})")
    p.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda if available, else cpu)")
    p.add_argument("--dtype", "--dtypes", dest="dtypes", nargs="+", metavar="DTYPE",
                   help=f"{', '.join(api.DTYPES)} (default: {' '.join(api.DEFAULT_DTYPES)})")
    p.add_argument("--providers", nargs="+", metavar="PROVIDER",
                   help=f"default: each of {', '.join(DEFAULT_PROVIDERS)} that implements the op; those that "
                   "cannot run here say why")
    p.add_argument("--shapes", nargs="+", metavar="SHAPE",
                   help="SHAPE for every selected op, or OP:SHAPE for one (formats below)")
    p.add_argument("--backward", action="store_true", help="time forward + backward, check gradients too")
    p.add_argument("--tf32", action="store_true", help="CUDA: float32 GEMM products (matmul, linear, attention) "
                   "on TF32 tensor cores for every provider and the roofline (torch.backends.cuda.matmul."
                   "allow_tf32), checked with TF32's tolerance")
    p.add_argument("--cuda-graph", action="store_true",
                   help="CUDA: time replays of each call captured in a CUDA graph (the GPU's work without the host's "
                   "launch and autograd time between kernels; a provider that cannot be captured gets an error row)")
    p.add_argument("--latency", action="store_true",
                   help="CUDA: time each call from Python to its result (the host's clock around the call and a "
                   "synchronize, the L2 not flushed): what a short call costs its caller, launch and checks included "
                   "(CUDA events count only the GPU's part); no roofline columns. Elsewhere calls are timed so anyway")
    p.add_argument("--interleave", action="store_true",
                   help="time the providers of each case in turn, one call each per round, rather than one "
                   "provider's repeats after another's (fairer where long calls run the GPU into its power limit)")
    p.add_argument("--csv", metavar="FILE", help="write every row, all metrics, to a CSV file")
    p.add_argument("--markdown", metavar="FILE", help="write the table with date, device and versions")
    p.add_argument("--plot", metavar="FILE", help="PNG bar chart (one file per op: FILE-<op>.png for several)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls per row (default 3)")
    p.add_argument("--repeats", type=int, default=50, help="at most this many timed calls per row (default 50)")
    p.add_argument("--budget", type=float, default=0.1, help="about this many seconds of timed calls per row "
                   "(default 0.1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                   help="progress on stderr: a bar (tqdm) when stderr is a terminal (auto) or always; without a "
                   "terminal, a line per op for runs of 20 rows or more (auto)")
    return p


LONG_RUN_ROWS = 20  # without a terminal, runs of at least this many rows print a line per op to stderr


def _op_lines():
    last = {"op": None}
    t0 = time.perf_counter()

    def update(done, total, row):
        if total >= LONG_RUN_ROWS and row.op != last["op"]:
            last["op"] = row.op
            print(f"bench: {row.op} ({done}/{total} rows, {time.perf_counter() - t0:.0f} s)", file=sys.stderr,
                  flush=True)
    return update


def _progress(mode: str):
    """(callback for api.run, close): a bar on stderr (tqdm) when stderr is a terminal or with `always`; else,
    for long runs, a line per op on stderr (`never`: nothing)."""
    if mode == "never":
        return None, lambda: None
    if mode == "auto" and not sys.stderr.isatty():
        return _op_lines(), lambda: None
    try:
        from tqdm import tqdm
    except ImportError:
        return _op_lines(), lambda: None
    bar = tqdm(total=0, file=sys.stderr, unit="row", leave=False)

    def update(done, total, row):
        bar.total = total
        bar.set_description(f"{row.op} {row.provider}", refresh=False)
        bar.update(1)
    return update, bar.close


def main(argv: Optional[List[str]] = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            p.error(f"--plot: needs matplotlib (pip install matplotlib), which is not installed; got {args.plot!r}")
    for name, value, low in (("--warmup", args.warmup, 0), ("--repeats", args.repeats, 1)):
        if value < low:
            p.error(f"{name}: expected an integer >= {low}, got {value}")
    if not args.budget > 0:
        p.error(f"--budget: expected seconds > 0, got {args.budget}")
    try:  # every argument checked before anything runs
        ops = api._choose("ops", args.ops, list(OPS), list(OPS))
        device = api.check_device(args.device or api.default_device())
        api._choose("dtype", args.dtypes, list(api.DTYPES), api.DEFAULT_DTYPES)
        api._choose("providers", args.providers, list(PROVIDERS), list(DEFAULT_PROVIDERS))
        api.plan_shapes(ops, args.shapes)
        api.check_tf32(args.tf32, device)
        api.check_cuda_graph(args.cuda_graph, device, args.latency)
    except ValueError as e:
        p.error(str(e))
    # TF32 in effect for float32 products: asked for, or already allowed by the caller's torch settings
    tf32 = torch.device(device).type == "cuda" and (args.tf32 or torch.backends.cuda.matmul.allow_tf32)
    rooflines = Rooflines(device)
    update, close = _progress(args.progress)
    t0 = time.perf_counter()
    try:
        rows = api.run(ops=ops, device=device, dtypes=args.dtypes, providers=args.providers, shapes=args.shapes,
                       backward=args.backward, warmup=args.warmup, repeats=args.repeats, budget_s=args.budget,
                       seed=args.seed, progress=update, rooflines=rooflines, tf32=True if args.tf32 else None,
                       cuda_graph=args.cuda_graph, interleave=args.interleave, latency=args.latency)
    finally:
        close()
    env = api.environment(device)
    if torch.device(device).type == "cuda":
        env["tf32"] = "on" if tf32 else "off"
    notes = _notes(rooflines, time.perf_counter() - t0)
    if args.cuda_graph:
        notes.insert(1, "timing: replays of each call captured in a CUDA graph (the L2 flushed before each replay, "
                     "outside the graph): the GPU's work without the host's launch and autograd time between kernels")
    if args.latency and torch.device(device).type == "cuda":
        notes.insert(1, "timing: each call from Python to its result, by the host's clock around the call and a "
                     "synchronize, the L2 not flushed (--latency): launch and checks included; no roofline")
    if args.interleave:
        notes.insert(1, "timing: the providers of each case timed in turn, one call each per round (--interleave)")
    if tf32 and "float32" in (args.dtypes or api.DEFAULT_DTYPES):
        notes.insert(1, f"float32 GEMM products (matmul, linear, attention) on TF32 tensor cores for every provider "
                     f"and the gemm roofline (torch.backends.cuda.matmul.allow_tf32); those rows checked with TF32's "
                     f"tolerance, atol = rtol = {TF32_TOL:g}")
    info = yirage_ext.load_info()
    print(f"yirage_ext {env['yirage_ext']} with torch {env['torch']}; library: {info.kind} ({info.path})"
          + (f", JIT because: {info.reason}" if info.reason else ""))
    print(f"device: {device} ({env['device_name']}), CPU kernel variant {env['cpu_variant']}")
    print(report.table(rows))
    for n in notes:
        print(n)
    if args.csv:
        report.write_csv(rows, args.csv, env)
        print(f"wrote {args.csv}")
    if args.markdown:
        report.write_markdown(rows, args.markdown, env, notes)
        print(f"wrote {args.markdown}")
    if args.plot:
        for path in report.write_plots(rows, args.plot, f"{env['device_name']}, torch {env['torch']}"):
            print(f"wrote {path}")
    failed = [r for r in rows if r.failed]
    if failed:
        print(f"{len(failed)} of {len(rows)} rows failed: " + "; ".join(
            f"{r.op} {r.shape} {r.dtype} {r.provider}: {r.reason}" for r in failed[:5]), file=sys.stderr)
        return 1
    return 0


def _notes(rooflines: Rooflines, seconds: float) -> List[str]:
    notes = ["time: median of the repeats, p20-p80 beside it (`noisy`: a spread over "
             f"{report.NOISY_SPREAD:.0%} of the median; compare such rows across runs); rate: GB/s of ideal bytes "
             "(each input read once, each output written once) or FLOP/s; accuracy: vs the float64 reference with "
             "the tests' per-dtype tolerance (max relative error, max ULP distance for fp16/bf16)"]
    if rooflines._copy is not None:
        notes.append(f"% roof copy: of the copy bandwidth measured in this run, {rooflines._copy / 1e9:.1f} GB/s "
                     f"(dst.copy_(src) of a {'512' if rooflines.device_is_cuda else '256'} MiB buffer, read + write)")
    if rooflines._same:
        notes.append("% size copy: of a copy moving the row's ideal bytes (half read, half written), timed the same "
                     "way in this run (from the roof's size up, the roof's rate): the rate a memory-bound call of that "
                     "size could reach, launch and ramp included")
    for dtype, (rate, what) in rooflines._gemm.items():
        shown = f"{rate / 1e12:.1f} TFLOP/s" if rate >= 1e12 else f"{rate / 1e9:.1f} GFLOP/s"
        notes.append(f"% roof gemm ({str(dtype).replace('torch.', '')}): of {what}, {shown}, "
                     "measured in this run")
    notes.append(f"run time: {seconds:.1f} s")
    return notes


if __name__ == "__main__":
    sys.exit(main())
