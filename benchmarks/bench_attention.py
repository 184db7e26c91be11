"""Benchmark attention: yirage vs torch eager (scaled_dot_product_attention) vs torch.compile of the unfused
code vs the unfused code itself (softmax(q k^T * scale + mask) v, the Sq x Sk matrix in memory), same process.

Reports the median time (p20/p80), GFLOP/s (forward 4*D FLOPs per visible (query, key) pair and head; forward +
backward 3.5x that: the backward's five GEMMs, recomputation included, as FlashAttention counts them), the % of
torch's GEMM rate (torch.bmm in the row's dtype or fp32, the faster) measured in the same run, GB/s of
ideal bytes (q, k, v read and out written; backward adds grad_out and out read, grads written) and the speedup vs
torch.
--memory adds peak memory vs sequence length (one fresh process per point; the peak resident set above the
inputs, so memory that grows with S x S shows). Inputs and the float64 reference are the tests'
(yirage_ext.testing). Shapes: BxHxSxD (Hk = H, Sk = S) or BxHqxHkxSqxSkxD (GQA, decode).

    python benchmarks/bench_attention.py [--dtypes float32 bfloat16] [--shapes 1x8x2048x128 1x32x8x1x4097x128]
        [--causal] [--backward] [--memory] [--providers yirage torch compile unfused]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

import torch
import torch.nn.functional as F

import yirage_ext
from _common import base_parser, copy_bandwidth, device_name, timeit
from yirage_ext.testing.inputs import attention_inputs
from yirage_ext.testing.reference import attention_ref

PROVIDERS = ("yirage", "torch", "compile", "unfused")


def sdpa(q, k, v, causal, scale):
    # SDPA's is_causal is top-left aligned; the benchmarks use it only where that equals ours (Sq == Sk)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=k.shape[1] != q.shape[1])


def unfused(q, k, v, causal, scale):
    """The code the op replaces: the (Sq, Sk) scores in memory, softmax in fp32, bottom-right causal mask."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = (q @ k.transpose(-1, -2)).float() * (scale if scale is not None else q.shape[-1] ** -0.5)
    if causal:
        sq, sk = q.shape[2], k.shape[2]
        hidden = torch.ones(sq, sk, dtype=torch.bool, device=q.device).triu(sk - sq + 1)
        s = s.masked_fill(hidden, float("-inf"))
    return torch.softmax(s, dim=-1).to(q.dtype) @ v


def parse_attention_shape(p, s: str):
    try:
        n = [int(x) for x in s.lower().split("x")]
    except ValueError:
        n = []
    if len(n) == 4:
        return n[0], n[1], n[1], n[2], n[2], n[3]
    if len(n) == 6:
        return tuple(n)
    p.error(f"--shapes: expected BxHxSxD or BxHqxHkxSqxSkxD such as 1x8x2048x128, got {s!r}")


def visible_pairs(sq: int, sk: int, causal: bool) -> int:
    if not causal:
        return sq * sk
    return sum(min(max(i + sk - sq + 1, 0), sk) for i in range(sq))


def gemm_rate(device: str, dtype: torch.dtype, warmup: int, repeats: int) -> float:
    """FLOP/s of torch's batched GEMM of attention-tile size in `dtype` (the roofline of the GEMM-bound op: bf16
    products run at up to several times the fp32 rate on CPUs with AVX512-BF16 or AMX, and on GPUs)."""
    a, b = torch.randn(8, 512, 128, device=device, dtype=dtype), torch.randn(8, 128, 512, device=device, dtype=dtype)
    c = torch.empty(8, 512, 512, device=device, dtype=dtype)
    # the fastest fifth of the repeats (p20): a roofline, not a typical time
    return 2 * 8 * 512 * 512 * 128 / timeit(lambda: torch.bmm(a, b, out=c), device, warmup, max(repeats, 20))[1]


def memory_probe(args) -> int:
    """Child process of --memory: peak resident bytes above the inputs of one call (Linux)."""
    provider, seq, dtype, backward, causal = args.probe[0], int(args.probe[1]), getattr(torch, args.probe[2]), \
        args.probe[3] == "1", args.probe[4] == "1"
    inp = attention_inputs(1, 4, 4, seq, seq, 64, dtype=dtype, seed=0)
    q, k, v = (t.requires_grad_(backward) for t in (inp.q, inp.k, inp.v))
    fn = {"yirage": lambda: torch.ops.yirage.attention(q, k, v, causal, None), "torch": lambda: sdpa(q, k, v, causal, None),
          "unfused": lambda: unfused(q, k, v, causal, None)}[provider]
    g = torch.randn(q.shape).to(dtype)

    def status(key):
        with open("/proc/self/status") as f:
            return int(re.search(key + r":\s+(\d+)", f.read()).group(1)) * 1024

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the high-water mark to the current resident set
    before = status("VmRSS")
    out = fn()
    if backward:
        torch.autograd.grad(out, (q, k, v), g)
    print(json.dumps({"peak": status("VmHWM") - before}))
    return 0


def memory_sweep(args, dtype_s: str) -> list:
    rows = []
    for backward in ([False, True] if args.backward else [False]):
        for seq in (1024, 2048, 4096, 8192):
            row = {"seq": seq, "mode": "fwd+bwd" if backward else "fwd"}
            for provider in ("yirage", "torch", "unfused"):
                cmd = [sys.executable, os.path.abspath(__file__), "--probe", provider, str(seq), dtype_s,
                       "1" if backward else "0", "1" if args.causal else "0"]
                r = subprocess.run(cmd, capture_output=True, text=True)
                row[provider] = json.loads(r.stdout.strip().splitlines()[-1])["peak"] if r.returncode == 0 else None
            rows.append(row)
            print(f"memory {row['mode']:7s} 1x4x{seq}x64 {dtype_s:9s} " + "  ".join(
                f"{p} {row[p] / 2**20:7.1f} MiB" if row[p] is not None else f"{p} failed"
                for p in ("yirage", "torch", "unfused")), flush=True)
    return rows


def main(argv=None) -> int:
    p = base_parser(__doc__, shapes=["1x8x2048x128", "1x32x8x1x4097x128"], shapes_help="BxHxSxD or BxHqxHkxSqxSkxD")
    p.set_defaults(repeats=10, warmup=2)
    p.add_argument("--causal", action="store_true", help="causal mask (bottom-right aligned)")
    p.add_argument("--backward", action="store_true", help="also time forward + backward")
    p.add_argument("--memory", action="store_true", help="peak memory at S = 1024 .. 8192 (1x4xSx64)")
    p.add_argument("--providers", nargs="+", default=list(PROVIDERS), choices=PROVIDERS)
    p.add_argument("--probe", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        return memory_probe(args)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")
    providers = [x for x in args.providers if not (x == "compile" and args.no_compile)]
    compiled = torch.compile(unfused, dynamic=False)
    impl = {"yirage": lambda q, k, v, c: torch.ops.yirage.attention(q, k, v, c, None),
            "torch": lambda q, k, v, c: sdpa(q, k, v, c, None),
            "compile": lambda q, k, v, c: compiled(q, k, v, c, None),
            "unfused": lambda q, k, v, c: unfused(q, k, v, c, None)}
    # the faster of torch's GEMM in the row's dtype and in fp32 (fp16 products can always run as fp32 ones: torch's
    # CPU fp16 bmm has no fast kernel on CPUs without AVX512-FP16 / AMX-FP16)
    f32_rate = gemm_rate(args.device, torch.float32, args.warmup, args.repeats)
    gemm = {d: max(f32_rate, gemm_rate(args.device, getattr(torch, d), args.warmup, args.repeats))
            if d != "float32" else f32_rate for d in args.dtypes}
    rows, memory = [], {}
    for shape_s in args.shapes:
        b, hq, hk, sq, sk, d = parse_attention_shape(p, shape_s)
        for dtype_s in args.dtypes:
            dtype = getattr(torch, dtype_s)
            inp = attention_inputs(b, hq, hk, sq, sk, d, dtype=dtype, device=args.device, causal=args.causal, seed=0)
            q, k, v, causal = inp.q, inp.k, inp.v, inp.causal
            torch.testing.assert_close(yirage_ext.attention(q, k, v, causal).double(), attention_ref(q, k, v, causal),
                                       atol=2e-2, rtol=2e-2)
            copy_bw = copy_bandwidth(k, args.device, args.warmup, args.repeats)
            flops = 4 * b * hq * visible_pairs(sq, sk, causal) * d
            io = (q.numel() * 2 + k.numel() * 2) * q.element_size()
            names = [x for x in providers if x != "torch" or sq == sk or not causal]  # SDPA aligns top-left
            modes = [("fwd", 1.0, io)]
            if args.backward:
                modes.append(("fwd+bwd", 3.5, 3 * io))
            for mode, scale, nbytes in modes:
                leaves = [t.detach().clone().requires_grad_(mode != "fwd") for t in (q, k, v)]
                g = torch.randn(q.shape, device=args.device).to(dtype)

                def run(name):
                    if mode == "fwd":
                        return lambda: impl[name](*leaves, causal)
                    return lambda: torch.autograd.grad(impl[name](*leaves, causal), leaves, g)

                results = {n: timeit(run(n), args.device, args.warmup, args.repeats) for n in names}
                base = results.get("torch", (None,))[0]
                for name, (med, p20, p80) in results.items():
                    row = dict(shape=shape_s, dtype=dtype_s, mode=mode, causal=causal, provider=name, ms=med * 1e3,
                               p20=p20 * 1e3, p80=p80 * 1e3, gflops=flops * scale / med / 1e9,
                               gemm=100 * flops * scale / med / gemm[dtype_s], gbps=nbytes / med / 1e9,
                               copy=100 * nbytes / med / copy_bw, vs_torch=base / med if base else math.nan)
                    rows.append(row)
                    print(f"{mode:7s} {shape_s:>17s} {dtype_s:9s} {name:8s} {row['ms']:9.3f} ms {row['gflops']:7.1f} "
                          f"GFLOP/s ({row['gemm']:5.1f}% of GEMM) {row['gbps']:6.2f} GB/s ({row['copy']:5.1f}% of copy)"
                          f"  {row['vs_torch']:.2f}x torch", flush=True)
    if args.memory:
        for dtype_s in args.dtypes:
            memory[dtype_s] = memory_sweep(args, dtype_s)
    write_report(rows, memory, args, gemm)
    return 0


def write_report(rows, memory, args, gemm) -> None:
    import datetime
    import platform

    from _common import RESULTS_DIR

    today = datetime.date.today().isoformat()
    out = args.out or os.path.join(RESULTS_DIR, f"attention-{args.device}-{today}.md")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    lines = [
        f"# attention benchmark ({args.device})", "",
        f"- date: {today}",
        f"- device: {device_name(args.device)}",
        f"- torch {torch.__version__}, yirage_ext {yirage_ext.__version__} ({yirage_ext.load_info().kind}), "
        f"CPU kernel variant {yirage_ext.cpu_isa()}",
        f"- python {platform.python_version()}; command: `python {' '.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])}`",
        f"- GFLOP/s: 4*D per visible (query, key) pair and head forward, 3.5x that forward+backward; GEMM = "
        f"the faster of torch.bmm in the row's dtype and in fp32 (8x512x128 @ 8x128x512, p20 of the repeats) in the "
        f"same run (above 100% where our products outrun torch's BLAS): "
        + ", ".join(f"{d} {r / 1e9:.1f}" for d, r in gemm.items()) + " GFLOP/s; GB/s of ideal bytes vs "
        "dst.copy_(src) of k's size; torch = F.scaled_dot_product_attention (not shown for causal Sq != Sk: it "
        "aligns the mask top-left); compile = torch.compile of the unfused code; median, p20-p80 in brackets.", "",
        "| mode | shape | dtype | causal | provider | ms [p20-p80] | GFLOP/s | % of GEMM | GB/s | % of copy | vs torch |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['shape']} | {r['dtype']} | {r['causal']} | {r['provider']} | {r['ms']:.3f} "
                     f"[{r['p20']:.3f}-{r['p80']:.3f}] | {r['gflops']:.1f} | {r['gemm']:.0f}% | {r['gbps']:.2f} | "
                     f"{r['copy']:.0f}% | {r['vs_torch']:.2f}x |")
    for dtype_s, sweep in memory.items():
        lines += ["", f"## Peak memory above the inputs, 1x4xSx64, {dtype_s}{', causal' if args.causal else ''} (MiB)", "",
                  "| mode | S | yirage | torch | unfused |", "|---|---|---|---|---|"]
        for r in sweep:
            cells = [f"{r[x] / 2**20:.1f}" if r[x] is not None else "failed" for x in ("yirage", "torch", "unfused")]
            lines.append(f"| {r['mode']} | {r['seq']} | " + " | ".join(cells) + " |")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
