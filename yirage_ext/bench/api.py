"""`run`: the grid of ops x shapes x dtypes x providers on one device, as a list of Result rows.

Arguments are checked before anything runs: an unknown op, provider, device or dtype, or a malformed shape,
raises ValueError naming the argument, what was expected and what was given (the CLI turns it into a
one-line message and exit status 2)."""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from .cases import OPS
from .profiler import Rooflines, profile_interleaved
from .providers import DEFAULT_PROVIDERS, PROVIDERS
from .runner import Result, _reference, finish_row, prepare_case, run_case, timing_failed

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
DEFAULT_DTYPES = ("bfloat16",)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device: str) -> str:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"--device: expected a torch device such as cpu or cuda, got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device: {device!r} was asked for, but no CUDA GPU is available here")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"--device: expected a CUDA index below {torch.cuda.device_count()}, got {device!r}")
    if dev.type not in ("cpu", "cuda"):
        try:
            torch.empty(1, device=dev)
        except Exception:  # noqa: BLE001
            raise ValueError(f"--device: expected cpu or cuda (or a device with tensors here), got {device!r}") from None
    return device


def check_tf32(tf32: Optional[bool], device: str) -> None:
    if tf32 and torch.device(device).type != "cuda":
        raise ValueError(f"--tf32: TF32 tensor cores are a CUDA setting, expected a cuda device, got {device!r}")


def _choose(what: str, given: Optional[Iterable[str]], known: Sequence[str], default: Sequence[str]) -> List[str]:
    chosen = list(default if given is None else given)
    for name in chosen:
        if name not in known:
            raise ValueError(f"--{what}: expected one of {', '.join(known)}, got {name!r}")
    if not chosen:
        raise ValueError(f"--{what}: expected at least one of {', '.join(known)}, got none")
    return list(dict.fromkeys(chosen))


def plan_shapes(ops: Sequence[str], shapes: Optional[Iterable[str]]) -> Dict[str, List[str]]:
    """Shapes per op: the op's default grid, or --shapes: `SHAPE` for every selected op, `OP:SHAPE` for one.
    Each shape is parsed for its op here, so a malformed one fails before anything runs."""
    if shapes is None:
        return {op: list(OPS[op].shapes) for op in ops}
    plan: Dict[str, List[str]] = {op: [] for op in ops}
    for text in shapes:
        op, sep, shape = text.partition(":")
        targets = [op] if sep else list(ops)
        if not sep:
            shape = text
        elif op not in ops:
            raise ValueError(f"--shapes: {text!r} names op {op!r}, expected one of the selected ops "
                             f"({', '.join(ops)})")
        for target in targets:
            OPS[target].parse_shape(shape)
            plan[target].append(shape)
    return {op: s or list(OPS[op].shapes) for op, s in plan.items()}


def run(ops: Optional[Iterable[str]] = None, device: Optional[str] = None, dtypes: Optional[Iterable[str]] = None,
        providers: Optional[Iterable[str]] = None, shapes: Optional[Iterable[str]] = None, backward: bool = False,
        warmup: int = 3, repeats: int = 50, budget_s: float = 0.1, seed: int = 0,
        progress: Optional[Callable[[int, int, Result], None]] = None,
        rooflines: Optional[Rooflines] = None, tf32: Optional[bool] = None, cuda_graph: bool = False,
        interleave: bool = False, latency: bool = False) -> List[Result]:
    """Checks every case against the float64 reference and times it; returns one Result per (op, shape, dtype,
    provider). Defaults: every op, `cuda` if available else `cpu`, bfloat16, every provider that
    implements the op (those that cannot run here give rows with their reason; providers named explicitly get a
    row for every op), each op's default shape. `progress(done, total, row)`
    is called after each row; `rooflines` (for `device`) is measured on first use, or made here. `tf32`: True or
    False sets torch.backends.cuda.matmul.allow_tf32 for the run (every provider and the float32 GEMM roofline; put
    back afterwards; CUDA devices only), None leaves torch's setting; float32 rows of GEMM-based ops run with TF32
    allowed are checked with TF32's tolerance (testing.reference.TF32_TOL). `cuda_graph` (CUDA devices only): each
    row times replays of its call captured in a CUDA graph (runner.run_case) instead of the call itself.
    `interleave`: the providers of each case are checked first, then timed in turn, one call each per round
    (profiler.profile_interleaved), instead of one provider's repeats after another's; rows come in the same order,
    all of a case's rows once its timing ends. `latency` (not with `cuda_graph`): each call timed from Python to its
    result by the host's clock (a synchronize after the call, the L2 not flushed; profiler.profile), what a short
    call costs its caller; such rows have no roofline."""
    ops = _choose("ops", ops, list(OPS), list(OPS))
    device = check_device(device or default_device())
    dtype_names = _choose("dtype", dtypes, list(DTYPES), DEFAULT_DTYPES)
    names = _choose("providers", providers, list(PROVIDERS), [p for p in DEFAULT_PROVIDERS if p in PROVIDERS])
    plan = plan_shapes(ops, shapes)
    if warmup < 0 or repeats < 1 or budget_s <= 0:
        raise ValueError(f"expected warmup >= 0, repeats >= 1 and budget > 0, got warmup={warmup}, "
                         f"repeats={repeats}, budget={budget_s}")
    check_tf32(tf32, device)
    check_cuda_graph(cuda_graph, device, latency)
    latency = latency and torch.device(device).type == "cuda"  # elsewhere every call is timed so already
    with _tf32(tf32):
        return _run(ops, device, dtype_names, names, providers, plan, backward, warmup, repeats, budget_s, seed,
                    progress, rooflines, cuda_graph, interleave, latency)


def check_cuda_graph(cuda_graph: bool, device: str, latency: bool = False) -> None:
    """CUDA graph timing needs a CUDA device: a clear error elsewhere, not a silent eager run; and it leaves out the
    host's time that --latency is there to count."""
    if cuda_graph and torch.device(device).type != "cuda":
        raise ValueError(f"--cuda-graph: CUDA graph replays need a cuda device, got '{device}'")
    if cuda_graph and latency:
        raise ValueError("--latency and --cuda-graph: expected one of them (--latency counts the host's launch "
                         "time, graph replays leave it out)")


@contextlib.contextmanager
def _tf32(setting: Optional[bool]):
    """torch.backends.cuda.matmul.allow_tf32 = setting inside (None: unchanged), put back on the way out."""
    if setting is None:
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = bool(setting)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def _run(ops, device, dtype_names, names, providers, plan, backward, warmup, repeats, budget_s, seed, progress,
         rooflines, cuda_graph=False, interleave=False, latency=False) -> List[Result]:
    rooflines = rooflines or Rooflines(device)
    # the rooflines first, before compiles and the cases' allocations disturb the machine (none for latency rows)
    if not latency and any(OPS[op].may_be_memory_bound for op in ops):
        rooflines.copy_bandwidth()
    if not latency and any(OPS[op].flops is not None for op in ops):
        for dtype_name in dtype_names:
            rooflines.gemm_rate(DTYPES[dtype_name])
    total = sum(len(plan[op]) * len(dtype_names) * sum(1 for n in names if providers is not None
                                                         or op in PROVIDERS[n].impls) for op in ops)
    rows: List[Result] = []

    def emit(row: Result) -> Result:
        rows.append(row)
        if progress is not None:
            progress(len(rows), total, row)
        return row
    for op in ops:
        spec = OPS[op]
        for shape in plan[op]:
            for dtype_name in dtype_names:
                case = spec.case(shape, DTYPES[dtype_name], device, seed)
                try:
                    reference = _reference(spec, case, backward, seed)
                except Exception:  # noqa: BLE001 -- each row then reports the failure
                    reference = None
                # the default set: only providers that implement the op get rows
                chosen = [PROVIDERS[n] for n in names if providers is not None or spec.name in PROVIDERS[n].impls]
                if interleave:  # every row of the case at once, when its timing ends
                    group = [emit(r) for r in _interleaved(spec, chosen, case, backward, warmup, repeats, budget_s,
                                                           rooflines, seed, reference, cuda_graph, latency)]
                else:
                    group = [emit(run_case(spec, p, case, backward, warmup, repeats, budget_s, rooflines, seed,
                                           reference, cuda_graph, latency)) for p in chosen]
                base = next((r.ms for r in group if r.provider == "torch" and r.ms == r.ms), None)
                for r in group:
                    if base is not None and r.ms == r.ms:
                        r.speedup_vs_torch = base / r.ms
                del case, reference
    return rows


def _interleaved(spec, providers, case, backward, warmup, repeats, budget_s, rooflines, seed, reference,
                 cuda_graph, latency=False) -> List[Result]:
    """The rows of one case: every provider checked (runner.prepare_case), then the runnable ones timed in turn."""
    prepared = [prepare_case(spec, p, case, backward, seed, reference, cuda_graph) for p in providers]
    runnable = [i for i, (_, timed) in enumerate(prepared) if timed is not None]
    timings = profile_interleaved([prepared[i][1] for i in runnable], case.device, warmup, repeats, budget_s,
                                  latency=latency)
    rooflines = None if latency else rooflines
    rows = [row for row, _ in prepared]
    for i, t in zip(runnable, timings):
        rows[i] = (timing_failed(rows[i], t) if isinstance(t, Exception)
                   else finish_row(rows[i], spec, case, backward, t, rooflines, budget_s))
    return rows


# The options naming output files: a report records what was run, not where its copies were written.
OUTPUT_OPTIONS = ("--csv", "--markdown", "--plot")


def command_line(argv: Sequence[str]) -> str:
    """The CLI arguments as recorded in a report, without the output-file options and their paths."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in OUTPUT_OPTIONS:
            skip = True
        elif not a.startswith(tuple(o + "=" for o in OUTPUT_OPTIONS)):
            out.append(a)
    return " ".join(out)


def environment(device: str) -> Dict[str, str]:
    """What a report records: date, device name, torch and yirage_ext versions, library kind, CPU variant."""
    import platform

    import yirage_ext

    if torch.device(device).type == "cuda":
        name = torch.cuda.get_device_name(torch.device(device))
    else:
        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as f:
                name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
        except (OSError, StopIteration):
            pass
        name += f", {torch.get_num_threads()} threads"
    load = f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs" if hasattr(os, "getloadavg") else "unknown"
    return {"date": time.strftime("%Y-%m-%d"), "device": device, "device_name": name, "torch": torch.__version__,
            "yirage_ext": yirage_ext.__version__, "library": yirage_ext.load_info().kind,
            "cpu_variant": yirage_ext.cpu_isa(), "python": platform.python_version(),
            "argv": command_line(sys.argv[1:]), "load_average": load}

