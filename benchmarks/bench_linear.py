"""Benchmark linear with its fused activation: yirage vs torch eager `act(F.linear(x, w, b))` (the unfused code
it replaces) vs torch.compile of that code, in the same process; forward, or forward+backward (--backward).

Reports the median time (p20/p80), GFLOP/s (2MNK forward, 6MNK forward+backward), GB/s of ideal bytes (each
tensor read or written once: x, weight, bias, out; forward+backward also grad, z, dx, dweight, dbias, and x and
weight again) and % of the copy bandwidth of a weight-sized tensor measured in the same run (the roofline for a
few rows, where the weight read dominates), then writes a Markdown table to benchmarks/results/. Inputs and the
float64 reference are the tests' (yirage_ext.testing).

    python benchmarks/bench_linear.py [--activations gelu silu] [--dtypes float32 bfloat16] [--backward]
        [--shapes 1x4096x4096 16x4096x4096 128x4096x4096 2048x4096x11008]   # MxKxN: x (M, K), weight (N, K)
"""
import sys

import torch
import torch.nn.functional as F

import yirage_ext
from _common import base_parser, copy_bandwidth, write_markdown
from _gemm import measure, parse_dims
from yirage_ext.testing.inputs import linear_inputs
from yirage_ext.testing.reference import ACTIVATIONS, assert_gemm_close, linear_ref

SHAPES = ["1x4096x4096", "16x4096x4096", "128x4096x4096", "2048x4096x11008"]
ACT_FN = {"none": lambda z: z, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
          "silu": F.silu}


def eager_linear(x, w, b, act: str):
    return ACT_FN[act](F.linear(x, w, b))


def main(argv=None) -> int:
    p = base_parser(__doc__, shapes=SHAPES, shapes_help="MxKxN: x (M, K), weight (N, K)")
    p.add_argument("--activations", nargs="+", default=["gelu"], choices=ACTIVATIONS)
    p.add_argument("--backward", action="store_true", help="time forward+backward (grads of x, weight, bias)")
    p.add_argument("--budget", type=float, default=5.0, help="seconds of timed calls per provider (fewer repeats "
                   "for large shapes)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")
    compiled = torch.compile(eager_linear, dynamic=False)
    rows = []
    for shape_s in args.shapes:
        m, k, n = parse_dims(p, shape_s, 3)
        for dtype_s in args.dtypes:
            dtype = getattr(torch, dtype_s)
            inp = linear_inputs((m, k), n, dtype, device=args.device, seed=0)
            x, w, b = inp.x, inp.weight, inp.bias
            copy_bw = copy_bandwidth(w, args.device, args.warmup, args.repeats)
            es = x.element_size()
            for act in args.activations:
                # correctness on (up to) 64 rows against the float64 reference
                assert_gemm_close(yirage_ext.linear(x[:64], w, b, act), linear_ref(x[:64], w, b, act), k, dtype)
                fns = {"yirage": lambda x, w, b: torch.ops.yirage.linear(x, w, b, act),
                       "torch": lambda x, w, b: eager_linear(x, w, b, act),
                       "compile": lambda x, w, b: compiled(x, w, b, act)}
                if args.no_compile:
                    fns.pop("compile")
                if args.backward:
                    xg, wg, bg = (t.detach().requires_grad_() for t in (x, w, b))
                    g = torch.randn(m, n, device=args.device).to(dtype)
                    providers = {name: (lambda f=f: torch.autograd.grad(f(xg, wg, bg), (xg, wg, bg), g))
                                 for name, f in fns.items()}
                    flops, nbytes = 6 * m * n * k, es * (3 * x.numel() + 3 * w.numel() + 2 * n + 3 * m * n)
                else:
                    providers = {name: (lambda f=f: f(x, w, b)) for name, f in fns.items()}
                    flops, nbytes = 2 * m * n * k, es * (x.numel() + w.numel() + n + m * n)
                op = f"linear[{act}]" + ("+bwd" if args.backward else "")
                measure(rows, op, f"{m}x{k}x{n}", dtype_s, flops, nbytes, copy_bw, providers, args)
    write_markdown(rows, "linear" + ("-fwd-bwd" if args.backward else ""), args.device, args.out, notes=[
        "shape MxKxN: x (M, K), weight (N, K); torch = eager act(F.linear(x, w, b)), the unfused code; compile = "
        "torch.compile of it", "GFLOP/s counts 2MNK forward, 6MNK forward+backward; GB/s counts ideal bytes; copy = "
        "`dst.copy_(src)` of a weight-sized tensor in the same run; median of the repeats, p20-p80 in brackets"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
