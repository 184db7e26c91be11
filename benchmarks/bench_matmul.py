"""Benchmark matmul: yirage vs torch.matmul (eager) vs torch.compile of it, in the same process; forward, or
forward+backward (--backward).

Reports the median time (p20/p80), GFLOP/s (2BMNK forward, 6BMNK forward+backward), GB/s of ideal bytes (a, b
read, out written once; forward+backward also grad, da, db, and a and b again) and % of the copy bandwidth of a
b-sized tensor measured in the same run, then writes a Markdown table to benchmarks/results/. Inputs and the
float64 reference are the tests' (yirage_ext.testing).

    python benchmarks/bench_matmul.py [--dtypes float32 bfloat16] [--backward]
        [--shapes 2048x2048x2048 1x4096x4096 32x128x64x128]   # MxKxN or BxMxKxN: a (B, M, K), b (B, K, N)
"""
import sys

import torch

import yirage_ext
from _common import base_parser, copy_bandwidth, write_markdown
from _gemm import measure, parse_dims
from yirage_ext.testing.inputs import matmul_inputs
from yirage_ext.testing.reference import assert_gemm_close, matmul_ref

SHAPES = ["2048x2048x2048", "1x4096x4096", "32x128x64x128"]


def main(argv=None) -> int:
    p = base_parser(__doc__, shapes=SHAPES, shapes_help="MxKxN or BxMxKxN: a (B, M, K), b (B, K, N)")
    p.add_argument("--backward", action="store_true", help="time forward+backward (grads of a and b)")
    p.add_argument("--budget", type=float, default=5.0, help="seconds of timed calls per provider (fewer repeats "
                   "for large shapes)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")
    compiled = torch.compile(torch.matmul, dynamic=False)
    rows = []
    for shape_s in args.shapes:
        dims = parse_dims(p, shape_s, 3)
        batch, (m, k, n) = dims[:-3], dims[-3:]
        for dtype_s in args.dtypes:
            dtype = getattr(torch, dtype_s)
            inp = matmul_inputs((*batch, m, k), (*batch, k, n), dtype, device=args.device, seed=0)
            a, b = inp.a, inp.b
            copy_bw = copy_bandwidth(b, args.device, args.warmup, args.repeats)
            sub = a[..., :64, :]  # correctness on (up to) 64 rows against the float64 reference
            assert_gemm_close(yirage_ext.matmul(sub, b), matmul_ref(sub, b), k, dtype)
            fns = {"yirage": torch.ops.yirage.matmul, "torch": torch.matmul, "compile": compiled}
            if args.no_compile:
                fns.pop("compile")
            nb = a.numel() // (m * k)
            es = a.element_size()
            if args.backward:
                ag, bg = a.detach().requires_grad_(), b.detach().requires_grad_()
                g = torch.randn(*batch, m, n, device=args.device).to(dtype)
                providers = {name: (lambda f=f: torch.autograd.grad(f(ag, bg), (ag, bg), g)) for name, f in fns.items()}
                flops, nbytes = 6 * nb * m * n * k, es * (3 * a.numel() + 3 * b.numel() + 2 * nb * m * n)
            else:
                providers = {name: (lambda f=f: f(a, b)) for name, f in fns.items()}
                flops, nbytes = 2 * nb * m * n * k, es * (a.numel() + b.numel() + nb * m * n)
            measure(rows, "matmul" + ("+bwd" if args.backward else ""), shape_s, dtype_s, flops, nbytes, copy_bw,
                    providers, args)
    write_markdown(rows, "matmul" + ("-fwd-bwd" if args.backward else ""), args.device, args.out, notes=[
        "shape MxKxN or BxMxKxN: a (B, M, K), b (B, K, N); torch = torch.matmul; compile = torch.compile of it",
        "GFLOP/s counts 2BMNK forward, 6BMNK forward+backward; GB/s counts ideal bytes; copy = `dst.copy_(src)` "
        "of a b-sized tensor in the same run; median of the repeats, p20-p80 in brackets"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
