"""Runner: one provider on one case, every failure turned into a row with its reason; and `run`, the grid.

For each case the runner checks the provider can run it (device, op, dtype, gradients), calls it on the case's
tensors as they are (nothing is moved: outputs on another device or of another dtype are a failure), after
poisoning the memory the outputs are likely to reuse (NaN-filled blocks of the outputs' size, freed just
before the call), validates every output (and with backward every gradient) against the float64 reference,
then times it. An exception at any step becomes the row's `error`, so one broken provider never stops the run."""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, List, Optional, Sequence, Tuple

import torch

from . import accuracy as A
from .cases import OPS, Case, OpSpec
from .profiler import Rooflines, Timing, profile
from .providers import PROVIDERS, Provider, Unsupported, unavailable
from ..testing.reference import GRAD_TOL, TF32_TOL


@dataclasses.dataclass
class Result:
    """One row: op, shape, dtype, device, mode and provider; timing, rate and roofline; accuracy; status.

    status is "ok" (ran, within tolerance), "fail" (ran, outside tolerance or invalid output), "error" (raised)
    or "skip" (cannot run here: `reason` says why)."""
    op: str
    shape: str
    dtype: str
    device: str
    mode: str  # "fwd" or "fwd+bwd"
    provider: str
    status: str = "skip"
    reason: str = ""
    ms: float = math.nan
    p20_ms: float = math.nan
    p80_ms: float = math.nan
    repeats: int = 0
    gbps: float = math.nan
    tflops: float = math.nan
    roofline: str = ""  # "copy" or "gemm"
    roofline_pct: float = math.nan
    same_size_copy_pct: float = math.nan  # memory-bound rows: of a copy moving the same bytes, timed in the run
    speedup_vs_torch: float = math.nan
    max_abs: float = math.nan
    max_rel: float = math.nan
    l2_rel: float = math.nan
    max_ulp: Optional[int] = None
    frac_outside: float = math.nan
    atol: float = math.nan
    rtol: float = math.nan
    verdict: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "error")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _outputs(out) -> Tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def poison(nbytes: int, device: str) -> None:
    """Fills and frees NaN blocks of `nbytes`, so an output allocated next likely starts as NaN, not zeros or
    an earlier correct result (an output element the kernel never writes then fails the check)."""
    if nbytes > 0:
        blocks = [torch.full((max(1, nbytes // 4),), math.nan, dtype=torch.float32, device=device) for _ in range(2)]
        del blocks


def _leaves(case: Case, spec: OpSpec) -> tuple:
    """The case's arguments with the differentiated ones as fresh leaves (same device, dtype and values)."""
    return tuple(a.detach().clone().requires_grad_(True) if i in spec.grad_args and isinstance(a, torch.Tensor)
                 else a for i, a in enumerate(case.args))


def _upstream(outs: Sequence[torch.Tensor], seed: int) -> List[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed + 1)
    return [torch.randn(o.shape, generator=gen).to(dtype=o.dtype, device=o.device) for o in outs]


def _reference(spec: OpSpec, case: Case, backward: bool, seed: int):
    """(outputs, gradients or None) of the float64 reference on the case's arguments."""
    if not backward:
        with torch.no_grad():
            return _outputs(spec.reference(*case.args)), None
    leaves = tuple(a.detach().double().requires_grad_(True) if i in spec.grad_args and isinstance(a, torch.Tensor)
                   else a for i, a in enumerate(case.args))
    outs = _outputs(spec.reference(*leaves))
    # the providers' upstream gradients exactly: drawn in fp32, rounded to the case's dtype
    ups = [u.to(case.dtype).double() for u in _upstream([o.detach().float() for o in outs], seed)]
    diff = [leaves[i] for i in spec.grad_args]
    grads = torch.autograd.grad(outs, diff, ups, allow_unused=True)
    return tuple(o.detach() for o in outs), grads


def tf32_applies(spec: OpSpec, case: Case) -> bool:
    """Whether the case's float32 products may run on TF32 tensor cores: a CUDA float32 case of a GEMM-based op
    (one with a FLOP count) while torch allows TF32 for matmuls (--tf32, or the caller's own setting)."""
    return (case.dtype == torch.float32 and spec.flops is not None and torch.device(case.device).type == "cuda"
            and torch.backends.cuda.matmul.allow_tf32)


def _check(spec: OpSpec, case: Case, outs, grads, ref_outs, ref_grads) -> A.Accuracy:
    if len(outs) != len(ref_outs):
        return A.Accuracy(passed=False, note=f"{len(outs)} outputs, expected {len(ref_outs)}")
    want = torch.device(case.device)
    for o in outs:
        if o.device.type != want.type or (want.index is not None and o.device.index != want.index):
            return A.Accuracy(passed=False, note=f"output on {o.device}, expected {case.device}")
    tf32 = tf32_applies(spec, case)
    tol = (TF32_TOL, TF32_TOL) if tf32 else spec.tolerance(case.args, case.dtype)
    grad_tol = TF32_TOL if tf32 else GRAD_TOL[case.dtype]
    pairs = [(o, r, tol, f"out[{j}]" if len(outs) > 1 else "out") for j, (o, r) in enumerate(zip(outs, ref_outs))]
    if grads is not None:
        for i, g, rg in zip(spec.grad_args, grads, ref_grads):
            if rg is None:
                continue
            if g is None:
                return A.Accuracy(passed=False, note=f"no gradient for argument {i}")
            scale = max(1.0, rg.abs().max().item()) if rg.numel() else 1.0
            pairs.append((g, rg, (grad_tol * scale, grad_tol), f"grad of argument {i}"))
    return A.compare_all(pairs, case.dtype)


def _reason(e: Exception, context: str = "") -> str:
    """'TypeName: first line of the message' (one line for the table)."""
    text = str(e).strip()
    return f"{type(e).__name__}{context}" + (f": {text.splitlines()[0]}" if text else "")


def graphed(call: Callable[[], object], device: str) -> Callable[[], None]:
    """`call` captured in a CUDA graph (after two warm-up calls on a side stream, as capture requires); returns the
    graph's replay. Its outputs live in the graph's private memory pool and are overwritten by each replay."""
    dev = torch.device(device)
    side = torch.cuda.Stream(dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        for _ in range(2):
            call()
    torch.cuda.current_stream(dev).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph.replay


def run_case(spec: OpSpec, provider: Provider, case: Case, backward: bool = False, warmup: int = 3,
             repeats: int = 50, budget_s: float = 0.1, rooflines: Optional[Rooflines] = None, seed: int = 0,
             reference=None, cuda_graph: bool = False, latency: bool = False) -> Result:
    """One row: `provider` on `case`; never raises for a provider's failure (the row says what went wrong).
    `cuda_graph` (CUDA devices): the checked call is captured once in a CUDA graph and its replays are timed, so
    that the time is the GPU's work without the host's launch and autograd overhead between kernels; a provider
    whose call cannot be captured gets an error row saying so. `latency`: each call timed from Python to its result
    (profiler.profile); the row then has no roofline (the roofs are timed by CUDA events)."""
    row, timed = prepare_case(spec, provider, case, backward, seed, reference, cuda_graph)
    if timed is None:
        return row
    try:
        t = profile(timed, case.device, warmup, repeats, budget_s, latency=latency)
    except Exception as e:  # noqa: BLE001
        return timing_failed(row, e)
    return finish_row(row, spec, case, backward, t, None if latency else rooflines, budget_s)


def timing_failed(row: Result, e: Exception) -> Result:
    row.status, row.reason, row.verdict = "error", _reason(e, " while timing"), "error"
    return row


def prepare_case(spec: OpSpec, provider: Provider, case: Case, backward: bool = False, seed: int = 0,
                 reference=None, cuda_graph: bool = False) -> Tuple[Result, Optional[Callable[[], object]]]:
    """run_case up to the timing: (the row with its accuracy, the call to time), or (the row saying why it cannot
    run or what failed, None)."""
    row = Result(case.op, case.shape, _dtype_name(case.dtype), case.device, "fwd+bwd" if backward else "fwd",
                 provider.name)
    why = unavailable(provider, spec.name, case.device, case.dtype, backward, case.args)
    if why:
        row.reason = why
        return row, None
    try:
        fn = provider.function(spec)
        if backward:
            leaves = _leaves(case, spec)
            diff = [leaves[i] for i in spec.grad_args]
            ups: List[torch.Tensor] = []

            def call():
                outs = _outputs(fn(*leaves))
                if not ups:
                    ups.extend(_upstream(outs, seed))
                return outs, torch.autograd.grad(outs, diff, ups[:len(outs)], allow_unused=True)
        else:
            def call():
                return _outputs(fn(*case.args)), None
        ref_outs, ref_grads = reference if reference is not None else _reference(spec, case, backward, seed)
        poison(sum(r.numel() for r in ref_outs) * torch.empty((), dtype=case.dtype).element_size(), case.device)
        outs, grads = call()
        acc = _check(spec, case, outs, grads, ref_outs, ref_grads)
        del outs, grads
    except Unsupported as e:  # the provider found it has no kernel for this case
        row.reason = str(e)
        return row, None
    except Exception as e:  # noqa: BLE001 -- any failure is the row's reason
        row.status, row.reason, row.verdict = "error", _reason(e), "error"
        return row, None
    row.max_abs, row.max_rel, row.l2_rel, row.max_ulp = acc.max_abs, acc.max_rel, acc.l2_rel, acc.max_ulp
    row.frac_outside, row.atol, row.rtol, row.verdict = acc.frac_outside, acc.atol, acc.rtol, acc.verdict()
    row.status = "ok" if acc.passed else "fail"
    if not acc.passed:
        row.reason = acc.verdict()
    timed: Callable[[], object] = call
    if cuda_graph and torch.device(case.device).type == "cuda":
        try:
            timed = graphed(call, case.device)
        except Exception as e:  # noqa: BLE001
            row.status, row.reason, row.verdict = "error", _reason(e, " while capturing a CUDA graph"), "error"
            return row, None
    return row, timed


def finish_row(row: Result, spec: OpSpec, case: Case, backward: bool, t: Timing,
               rooflines: Optional[Rooflines] = None, budget_s: Optional[float] = None) -> Result:
    """The row's time, rate and roofline from its Timing (a memory-bound row's same-size copy timed with
    `budget_s`)."""
    row.ms, row.p20_ms, row.p80_ms, row.repeats = t.median * 1e3, t.p20 * 1e3, t.p80 * 1e3, t.repeats
    row.gbps = spec.nbytes(case.args, backward) / t.median / 1e9
    memory_bound = spec.memory_bound(case.args)
    if spec.flops is not None:
        flops = spec.flops(case.args, backward)
        row.tflops = flops / t.median / 1e12
    if spec.flops is not None and not memory_bound:
        if rooflines is not None:
            rate, _ = rooflines.gemm_rate(case.dtype)
            row.roofline, row.roofline_pct = "gemm", 100 * flops / t.median / rate
    elif rooflines is not None:
        row.roofline, row.roofline_pct = "copy", 100 * row.gbps * 1e9 / rooflines.copy_bandwidth()
        try:
            same = rooflines.same_size_copy(spec.nbytes(case.args, backward), budget_s)
            row.same_size_copy_pct = 100 * row.gbps * 1e9 / same
        except torch.OutOfMemoryError:  # no room for the copy beside the case: the column stays empty
            pass
    return row
