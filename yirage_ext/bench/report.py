"""Reports of a run: the text table (stdout), CSV, a Markdown file and a PNG bar chart per op."""
from __future__ import annotations

import csv
import dataclasses
import math
import os
from typing import Dict, List, Optional, Sequence

from .runner import Result

COLUMNS = ("op", "shape", "dtype", "provider", "time", "p20-p80", "rate", "% roof", "% size copy", "vs torch",
           "accuracy")


def _time(ms: float) -> str:
    if ms != ms:
        return "-"
    return f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.3f} ms"


def _rate(r: Result) -> str:
    if r.tflops == r.tflops and r.roofline != "copy":  # FLOP/s, unless the case is memory-bound (decoding)
        return f"{r.tflops:.3f} TFLOP/s" if r.tflops >= 1 else f"{r.tflops * 1e3:.1f} GFLOP/s"
    if r.gbps == r.gbps:
        return f"{r.gbps:.1f} GB/s"
    return "-"


def _accuracy(r: Result) -> str:
    if r.status == "skip":
        return f"n/a: {r.reason}"
    if r.status == "error":
        return f"ERROR: {r.reason}"
    ulp = f", {r.max_ulp} ulp" if r.max_ulp is not None else ""
    return f"{r.verdict} (rel {r.max_rel:.1e}{ulp})"


# A row whose p20-p80 spread passes this fraction of its median is marked noisy: its median may sit in either of
# two levels (clock changes, other work on the machine), so ratios against it need a second run.
NOISY_SPREAD = 0.10


def noisy(r: Result) -> bool:
    return r.ms == r.ms and r.ms > 0 and (r.p80_ms - r.p20_ms) > NOISY_SPREAD * r.ms


def cells(r: Result) -> List[str]:
    if r.status in ("skip", "error"):
        return [r.op, r.shape, r.dtype, r.provider, "-", "", "", "", "", "", _accuracy(r)]
    spread = f"{_time(r.p20_ms)}-{_time(r.p80_ms)}".replace(" us-", "-").replace(" ms-", "-")
    if noisy(r):
        spread += " noisy"
    roof = f"{r.roofline_pct:.0f}% {r.roofline}" if r.roofline_pct == r.roofline_pct else "-"
    same = f"{r.same_size_copy_pct:.0f}%" if r.same_size_copy_pct == r.same_size_copy_pct else "-"
    vs = f"{r.speedup_vs_torch:.2f}x" if r.speedup_vs_torch == r.speedup_vs_torch else "-"
    return [r.op + (" +bwd" if r.mode != "fwd" else ""), r.shape, r.dtype, r.provider, _time(r.ms), spread,
            _rate(r), roof, same, vs, _accuracy(r)]


def table(rows: Sequence[Result]) -> str:
    body = [cells(r) for r in rows]
    widths = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(COLUMNS)]
    widths[-1] = len(COLUMNS[-1])  # the last column is not padded

    def line(values):
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()
    return "\n".join([line(COLUMNS), line(["-" * w for w in widths])] + [line(b) for b in body])


CSV_FIELDS = [f.name for f in dataclasses.fields(Result)]


def write_csv(rows: Sequence[Result], path: str, env: Optional[Dict[str, str]] = None) -> None:
    """One line per row, every Result field, plus the environment (date, device name, versions) per line."""
    env = env or {}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS + [k for k in env if k not in CSV_FIELDS])
        w.writeheader()
        for r in rows:
            d = dataclasses.asdict(r)
            w.writerow({**{k: ("" if isinstance(v, float) and math.isnan(v) else v) for k, v in d.items()}, **env})


SUMMARY_COLUMNS = ("op", "shape", "dtype", "ours", "% roof", "% size copy", "fastest other", "ours vs it")


def summary(rows: Sequence[Result], ours: str = "yirage") -> List[List[str]]:
    """One line per case (op, shape, dtype, mode) where `ours` and another provider both ran and passed their
    checks: our time and rooflines, the fastest other provider that passed (name, time) and the ratio of its time to
    ours (above 1: ours is faster); `noisy` where either row is."""
    cases: Dict[tuple, List[Result]] = {}
    for r in rows:
        cases.setdefault((r.op, r.shape, r.dtype, r.mode), []).append(r)
    lines = []
    for (op, shape, dtype, mode), group in cases.items():
        mine = next((r for r in group if r.provider == ours and r.status == "ok" and r.ms == r.ms), None)
        others = [r for r in group if r.provider != ours and r.status == "ok" and r.ms == r.ms]
        if mine is None or not others:
            continue
        best = min(others, key=lambda r: r.ms)
        roof = f"{mine.roofline_pct:.0f}% {mine.roofline}" if mine.roofline_pct == mine.roofline_pct else "-"
        same = f"{mine.same_size_copy_pct:.0f}%" if mine.same_size_copy_pct == mine.same_size_copy_pct else "-"
        ratio = f"{best.ms / mine.ms:.2f}x" + (" noisy" if noisy(mine) or noisy(best) else "")
        lines.append([op + (" +bwd" if mode != "fwd" else ""), shape, dtype, _time(mine.ms), roof, same,
                      f"{best.provider} {_time(best.ms)}", ratio])
    return lines


def write_markdown(rows: Sequence[Result], path: str, env: Dict[str, str], notes: Sequence[str] = ()) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lines = [f"# Comparison run ({env['device']})", "",
             f"- date: {env['date']}",
             f"- device: {env['device_name']}",
             f"- torch {env['torch']}, yirage_ext {env['yirage_ext']} ({env['library']}), CPU kernel variant "
             f"{env['cpu_variant']}, python {env['python']}",
             f"- command: `python -m yirage_ext.bench {env['argv']}`",
             f"- load average (1 min) at the end of the run: {env.get('load_average', 'unknown')} (other work on the "
             "machine shows up as noisy times)"]
    lines += [f"- {n}" for n in notes]
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in cells(r)) + " |" for r in rows]
    best = summary(rows)
    if best:
        lines += ["", "## Ours against the fastest other provider", "",
                  "Per case, the fastest provider other than ours whose check passed; `ours vs it`: its time over "
                  "ours (above 1: ours is faster).", "",
                  "| " + " | ".join(SUMMARY_COLUMNS) + " |", "|" + "---|" * len(SUMMARY_COLUMNS)]
        lines += ["| " + " | ".join(line) + " |" for line in best]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def plot_paths(path: str, ops: Sequence[str]) -> Dict[str, str]:
    """The PNG file per op: `path` itself for one op, else `<stem>-<op><ext>` beside it."""
    if len(ops) == 1:
        return {ops[0]: path}
    stem, ext = os.path.splitext(path)
    return {op: f"{stem}-{op}{ext or '.png'}" for op in ops}


def write_plots(rows: Sequence[Result], path: str, title: str = "") -> List[str]:
    """A bar chart per op: for each case a bar per provider that ran, its rate from the median time (GB/s, or
    GFLOP/s for compute-bound ops; higher is better, comparable across shapes). Needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = list(dict.fromkeys(r.op for r in rows))
    written = []
    for op, out in plot_paths(path, ops).items():
        mine = [r for r in rows if r.op == op]
        groups = list(dict.fromkeys(f"{r.shape}\n{r.dtype}" + (" +bwd" if r.mode != "fwd" else "") for r in mine))
        providers = list(dict.fromkeys(r.provider for r in mine if r.ms == r.ms))
        fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(groups) * max(1, len(providers)) / 2), 3.6))
        width = 0.8 / max(1, len(providers))
        compute = any(r.tflops == r.tflops for r in mine)
        for j, p in enumerate(providers):
            xs, ys = [], []
            for i, g in enumerate(groups):
                r = next((r for r in mine if r.provider == p and f"{r.shape}\n{r.dtype}"
                          + (" +bwd" if r.mode != "fwd" else "") == g and r.ms == r.ms), None)
                if r is not None:
                    xs.append(i + (j - (len(providers) - 1) / 2) * width)
                    ys.append(r.tflops * 1e3 if compute else r.gbps)
            ax.bar(xs, ys, width, label=p)
        ax.set_xticks(range(len(groups)), groups, fontsize=8)
        ax.set_ylabel(("GFLOP/s" if compute else "GB/s of ideal bytes") + " (median; higher is better)")
        ax.set_title(f"{op}{chr(10) + title if title else ''}", fontsize=9)  # two lines: a long title is not clipped
        ax.legend(fontsize=8)
        fig.tight_layout()
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        fig.savefig(out, dpi=100)
        plt.close(fig)
        written.append(out)
    return written
