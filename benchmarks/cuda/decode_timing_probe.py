"""The bench's CUDA timing on decode attention: each provider's median time sequentially (profiler.profile) and in
turns (profiler.profile_interleaved), with and without a GPU spin of about 100 us (torch.cuda._sleep) queued after
the L2 flush, and the median host time of each call (the Python call, no synchronize). Where the host takes longer
to launch a call than the flush takes on the GPU, the CUDA events count the GPU's wait for it; the spin hides it.

Usage (a GPU machine, the library importable): python benchmarks/cuda/decode_timing_probe.py SHAPE [SHAPE ...]
with the bench's attention shapes, e.g. 1x32x8x1x1024x128-full 64x32x8x1x32768x128-full. Two rounds of the four
combinations; bf16; providers yirage, torch (SDPA's default), flash, cudnn, efficient (those with a kernel).
Results: benchmarks/results/cuda-attention-decode-timing-h200-2026-11-28.md."""
import statistics
import sys
import time

import torch

from yirage_ext.bench import profiler
from yirage_ext.bench.cases import OPS
from yirage_ext.bench.providers import PROVIDERS
from yirage_ext.bench.runner import prepare_case

spec = OPS["attention"]
names = ["yirage", "torch", "flash", "cudnn", "efficient"]
orig_flush = profiler.flush_l2


def spaced_flush(device):
    orig_flush(device)
    torch.cuda._sleep(200_000)  # about 100 us of GPU time: the host enqueues the timed call meanwhile


for shape in sys.argv[1:]:
    case = spec.case(shape, torch.bfloat16, "cuda", 0)
    prepared = [prepare_case(spec, PROVIDERS[n], case) for n in names]
    fns, host = [], []
    for n, (row, fn) in zip(names, prepared):
        if fn is None:
            print(shape, n, "skipped:", row.reason)
            continue
        h = []

        def wrapped(fn=fn, h=h):
            t0 = time.perf_counter()
            fn()
            h.append(time.perf_counter() - t0)
        fns.append((n, wrapped))
        host.append(h)
    for rnd in range(2):
        for spacer in (False, True):
            profiler.flush_l2 = spaced_flush if spacer else orig_flush
            for mode in ("seq", "inter"):
                for h in host:
                    h.clear()
                if mode == "seq":
                    ts = [profiler.profile(f, "cuda", 5, 50, 1.0) for _, f in fns]
                else:
                    ts = profiler.profile_interleaved([f for _, f in fns], "cuda", 5, 50, 1.0)
                cells = [f"{n} {t.median * 1e6:.1f}us (host {statistics.median(h) * 1e6:.0f})"
                         for (n, _), t, h in zip(fns, ts, host)]
                print(f"{shape} r{rnd} spacer={int(spacer)} {mode}: " + " | ".join(cells), flush=True)
    profiler.flush_l2 = orig_flush
    del case, prepared, fns
    torch.cuda.empty_cache()
