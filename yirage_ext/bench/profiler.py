"""Profiler: warm-up, many repeats, median with p20/p80.

On CUDA each repeat is bracketed by CUDA events, with the L2 cache flushed (a 256 MiB buffer read) between repeats,
outside the timed region; with `latency`, by the host's clock around the call and a synchronize (the caller's wait
for a result, launch and checks included; no flush). Elsewhere each repeat is timed with time.perf_counter_ns. The
number of repeats is bounded by a time budget, so a slow provider costs seconds, not minutes. Rooflines are
measured once per run and device: the copy bandwidth (dst.copy_(src) of a buffer larger than the caches, read +
write) for memory-bound ops and the dense GEMM rate (torch.matmul) per dtype for matmul, linear and attention."""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per call: median and the 20th/80th percentiles of `repeats` timed calls."""
    median: float
    p20: float
    p80: float
    repeats: int


def summarize(times: List[float]) -> Timing:
    """Median and p20/p80 (inclusive quantiles: between the two nearest samples) of a list of seconds."""
    if not times:
        raise ValueError("summarize: expected at least one time, got none")
    if len(times) == 1:
        return Timing(times[0], times[0], times[0], 1)
    q = statistics.quantiles(times, n=5, method="inclusive")
    return Timing(statistics.median(times), q[0], q[3], len(times))


_FLUSH_BUFFERS: Dict[str, Tuple[torch.Tensor, torch.Tensor]] = {}


def flush_l2(device: str) -> None:
    """Reads a buffer larger than any L2 cache (256 MiB of zeros, allocated once per device) between CUDA repeats,
    leaving the cache cold and clean. Writing the buffer instead (as this did before 2026-11-27) leaves the L2 full
    of dirty lines that the timed call then writes back to memory: on an H200 about 9 us a call (a one-sequence
    decode over 32K cached keys timed at 47.3 us, 38.6 us after a read), which a short memory-bound call counts
    against itself."""
    bufs = _FLUSH_BUFFERS.get(device)
    if bufs is None:
        bufs = _FLUSH_BUFFERS[device] = (torch.zeros(64 * 2**20, dtype=torch.float32, device=device),
                                         torch.empty((), dtype=torch.float32, device=device))
    torch.sum(bufs[0], dim=0, out=bufs[1])


def _is_cuda(device: str) -> bool:
    return torch.device(device).type == "cuda"


def _time_once(fn: Callable[[], object], device: str, cuda: bool, clock: Callable[[], int],
               latency: bool = False) -> float:
    """Seconds of one call of `fn`: between CUDA events after an L2 flush on CUDA, by `clock` elsewhere. With
    `latency` on CUDA, by `clock` from the call to its result (the call and a device synchronize; no flush): the
    events count only the GPU's part of a call, and the flush ahead of them (about 60 us on an H200) covers the
    host's launch of a short one, whose cost to the caller is then missed."""
    if cuda and latency:
        t0 = clock()
        fn()
        torch.cuda.synchronize(device)
        return (clock() - t0) / 1e9
    if cuda:
        flush_l2(device)
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
        fn()
        ev1.record()
        ev1.synchronize()
        return ev0.elapsed_time(ev1) / 1e3
    t0 = clock()
    fn()
    return (clock() - t0) / 1e9


def _done(times: List[float], spent: float, repeats: int, budget_s: float) -> bool:
    """Whether a series of timed calls stops: `repeats` reached, or the budget spent by at least 3 calls (by 1 when
    that one call took the whole budget; by any number at 3x the budget)."""
    return len(times) >= repeats or spent >= budget_s and (
        len(times) >= 3 or spent >= 3 * budget_s or len(times) == 1 and times[0] >= budget_s)


def _check_counts(what: str, warmup: int, repeats: int) -> None:
    if repeats < 1 or warmup < 0:
        raise ValueError(f"{what}: expected repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")


def profile(fn: Callable[[], object], device: str = "cpu", warmup: int = 5, repeats: int = 50,
            budget_s: float = 1.0, clock: Callable[[], int] = time.perf_counter_ns, latency: bool = False) -> Timing:
    """Times `fn()`: `warmup` untimed calls, then up to `repeats` timed calls (at least 3, or 1 when a single
    call takes the whole budget), stopping once about `budget_s` seconds of timed calls have run.

    `clock` returns nanoseconds (time.perf_counter_ns; a stub in tests); it times CPU repeats and the budget.
    `latency`: CUDA repeats timed by `clock` from the call to its result (_time_once), not by CUDA events.
    """
    _check_counts("profile", warmup, repeats)
    cuda = _is_cuda(device)
    start = clock()
    for i in range(warmup):
        fn()
        if i == 0 and (clock() - start) / 1e9 >= budget_s:
            break  # one call takes the whole budget: no more warm-up
    if cuda:
        torch.cuda.synchronize(device)
    times: List[float] = []
    spent = 0.0
    while not _done(times, spent, repeats, budget_s):
        dt = _time_once(fn, device, cuda, clock, latency)
        times.append(dt)
        spent += dt
    return summarize(times)


def profile_interleaved(fns: Sequence[Callable[[], object]], device: str = "cpu", warmup: int = 5,
                        repeats: int = 50, budget_s: float = 1.0,
                        clock: Callable[[], int] = time.perf_counter_ns,
                        latency: bool = False) -> List[Union[Timing, Exception]]:
    """Times several callables in turn: rounds of one timed call each (the warm-up too, `warmup` rounds), each
    callable stopping on its own as `profile` stops (`repeats`, `budget_s`). Each then sees the same GPU clocks and
    temperature: timed one after another, a compute-bound call that runs the GPU into its power limit slows the
    ones timed after it. A callable whose first warm-up call takes the whole budget gets no more warm-up (as in
    `profile`). Returns one entry per callable, its Timing, or the exception it raised (it is dropped
    from the rounds; the others go on). `latency` as in `profile`."""
    _check_counts("profile_interleaved", warmup, repeats)
    cuda = _is_cuda(device)
    results: List[Union[Timing, Exception, None]] = [None] * len(fns)
    times: List[List[float]] = [[] for _ in fns]
    spent = [0.0] * len(fns)

    def guarded(i: int, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as e:  # noqa: BLE001 -- the caller turns it into that callable's row
            results[i] = e

    warm = [warmup] * len(fns)  # warm-up calls left: none after a first call that took the whole budget
    for _ in range(warmup):
        for i, fn in enumerate(fns):
            if results[i] is None and warm[i] > 0:
                t0 = clock()
                guarded(i, fn)
                warm[i] = 0 if warm[i] == warmup and (clock() - t0) / 1e9 >= budget_s else warm[i] - 1
    if cuda:
        torch.cuda.synchronize(device)
    active = [i for i in range(len(fns)) if results[i] is None]
    while active:
        for i in active:
            def timed(i=i):
                dt = _time_once(fns[i], device, cuda, clock, latency)
                times[i].append(dt)
                spent[i] += dt
            guarded(i, timed)
        for i in active:
            if results[i] is None and _done(times[i], spent[i], repeats, budget_s):
                results[i] = summarize(times[i])
        active = [i for i in active if results[i] is None]
    return results  # type: ignore[return-value]


class Rooflines:
    """The copy bandwidth (bytes/s) of a device and its dense GEMM rate (FLOP/s) per dtype, each measured
    once (the first time it is asked for) and reused by every row of the run."""

    def __init__(self, device: str, budget_s: float = 0.5):
        self.device = device
        self.budget_s = budget_s
        self._copy: Optional[float] = None
        self._same: Dict[int, float] = {}
        self._gemm: Dict[torch.dtype, Tuple[float, str]] = {}

    @property
    def device_is_cuda(self) -> bool:
        return _is_cuda(self.device)

    def copy_bandwidth(self) -> float:
        if self._copy is None:
            # fp32 elements of a 512 MiB (GPU) / 256 MiB (CPU) buffer: beyond any cache. On CPU a 32 MiB buffer
            # (until 2026-11-27) sat at the edge of a 32 MiB L3 and measured 54-130 GB/s from run to run on one
            # 2-core VM; 256 MiB, 73-77 GB/s there.
            n = (512 if _is_cuda(self.device) else 256) * 2**20 // 4
            src = torch.randn(n, device=self.device)
            dst = torch.empty_like(src)
            t = profile(lambda: dst.copy_(src), self.device, warmup=3, repeats=50, budget_s=self.budget_s)
            self._copy = 2 * n * 4 / t.median
        return self._copy

    def same_size_copy(self, nbytes: int, budget_s: Optional[float] = None) -> float:
        """Bytes/s of dst.copy_(src) moving `nbytes` (half read, half written), timed as the rows are (L2 flushed
        first on CUDA), once per size: the rate a memory-bound call of that size could reach. A call of tens of MB
        cannot reach the roof's rate (launch and ramp cost a few us: on an H200, 85 MB copied at 92% of it).
        From the roof's own traffic up (1 GiB on CUDA, 512 MiB elsewhere), the roof's rate: no second copy of a
        large case is allocated."""
        if nbytes >= 2 * (512 if self.device_is_cuda else 256) * 2**20:
            return self.copy_bandwidth()
        n = max(1, int(nbytes) // 2)
        if n not in self._same:
            src = torch.zeros(n, dtype=torch.uint8, device=self.device)
            dst = torch.empty_like(src)
            t = profile(lambda: dst.copy_(src), self.device, warmup=3, repeats=50,
                        budget_s=self.budget_s if budget_s is None else budget_s)
            self._same[n] = 2 * n / t.median
        return self._same[n]

    def gemm_rate(self, dtype: torch.dtype) -> Tuple[float, str]:
        """(FLOP/s, description) of torch.matmul of square matrices in `dtype` (fp32 accumulation for half types),
        or in fp32 where that is faster: a half-precision product can always run as an fp32 one, and torch's CPU
        fp16 matmul has no fast kernel on CPUs without AVX512-FP16 / AMX-FP16 (about 1% of the fp32 rate on an
        AVX-512 EPYC), which would make a roofline of nothing."""
        if dtype not in self._gemm:
            n = 4096 if _is_cuda(self.device) else 512
            gen = torch.Generator().manual_seed(0)
            a = torch.randn(n, n, generator=gen).to(dtype=dtype, device=self.device)
            b = torch.randn(n, n, generator=gen).to(dtype=dtype, device=self.device)
            c = torch.empty(n, n, dtype=dtype, device=self.device)
            t = profile(lambda: torch.matmul(a, b, out=c), self.device, warmup=2, repeats=30, budget_s=self.budget_s)
            name = str(dtype).replace('torch.', '')
            rate, what = 2 * n**3 / t.p20, f"torch.matmul {n}x{n}x{n} {name}"
            if dtype in (torch.float16, torch.bfloat16):
                rate32, what32 = self.gemm_rate(torch.float32)
                if rate32 > rate:
                    rate, what = rate32, f"{what32} (faster than {name} here)"
            self._gemm[dtype] = (rate, what)
        return self._gemm[dtype]
