"""Benchmark silu_and_mul, gelu_and_mul and gelu: yirage vs torch eager vs torch.compile, same process.

For the gated ops, `torch` is the unfused code they replace (`F.silu(a) * b`, `F.gelu(a, approximate=...) * b`
with `a, b = x.chunk(2, -1)`) and `compile` is torch.compile of that code; for gelu they are F.gelu and its
compiled form. Shapes are x's (ROWSxHIDDEN; the gated ops read HIDDEN = 2*d and write d). `--backward` also
times forward+backward (torch.autograd.grad of the output with a fixed upstream gradient).

Reports the median time (p20/p80), GB/s of ideal bytes and % of the copy bandwidth measured in the same run,
then writes a Markdown table to benchmarks/results/ (or --out). Inputs and the float64 references are the
tests' (yirage_ext.testing).

    python benchmarks/bench_activation.py [--ops silu_and_mul gelu] [--dtypes float32 bfloat16] [--shapes 4096x4096] [--backward]
"""
import sys

import torch
import torch.nn.functional as F

import yirage_ext  # noqa: F401  (loads the ops)
from _common import base_parser, copy_bandwidth, measure_providers, parse_shape, write_markdown
from yirage_ext.testing.inputs import activation_inputs
from yirage_ext.testing.reference import assert_close, gelu_and_mul_ref, gelu_ref, silu_and_mul_ref

# name -> (yirage op, the torch code it replaces, float64 reference, gated)
OPS = {
    "silu_and_mul": (lambda x: torch.ops.yirage.silu_and_mul(x),
                     lambda x: F.silu(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1], silu_and_mul_ref, True),
    "gelu_and_mul": (lambda x: torch.ops.yirage.gelu_and_mul(x, "none"),
                     lambda x: F.gelu(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1],
                     lambda x: gelu_and_mul_ref(x, "none"), True),
    "gelu_and_mul_tanh": (lambda x: torch.ops.yirage.gelu_and_mul(x, "tanh"),
                          lambda x: F.gelu(x.chunk(2, -1)[0], approximate="tanh") * x.chunk(2, -1)[1],
                          lambda x: gelu_and_mul_ref(x, "tanh"), True),
    "gelu": (lambda x: torch.ops.yirage.gelu(x, "none"), lambda x: F.gelu(x), lambda x: gelu_ref(x, "none"), False),
    "gelu_tanh": (lambda x: torch.ops.yirage.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: gelu_ref(x, "tanh"), False),
}


def ideal_bytes(numel: int, elsize: int, gated: bool, backward: bool) -> int:
    # gated, per d outputs: forward reads 2d, writes d; backward reads g (d) and x (2d), writes grad_x (2d).
    # elementwise, per element: forward reads 1, writes 1; backward reads g and x, writes grad_x.
    fwd = (numel + numel // 2) if gated else 2 * numel
    bwd = (numel // 2 + 2 * numel) if gated else 3 * numel
    return (fwd + (bwd if backward else 0)) * elsize


def with_backward(fn, x, g):
    def run():
        return torch.autograd.grad(fn(x), x, g)
    return run


def main(argv=None) -> int:
    p = base_parser(__doc__)
    p.add_argument("--ops", nargs="+", default=list(OPS), choices=list(OPS))
    p.add_argument("--backward", action="store_true", help="also time forward+backward")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")
    rows = []
    for name in args.ops:
        ours, unfused, ref, gated = OPS[name]
        compiled = torch.compile(unfused, dynamic=False)
        for shape_s in args.shapes:
            m, n = parse_shape(p, shape_s)
            if gated and n % 2:
                p.error(f"--shapes: {name} needs an even HIDDEN (2*d), got {shape_s}")
            for dtype_s in args.dtypes:
                dtype = getattr(torch, dtype_s)
                x = activation_inputs((m, n), dtype, device=args.device, seed=0)
                copy_bw = copy_bandwidth(x, args.device, args.warmup, args.repeats)
                assert_close(ours(x), ref(x), dtype)
                providers = {"yirage": lambda: ours(x), "torch": lambda: unfused(x), "compile": lambda: compiled(x)}
                if args.no_compile:
                    providers.pop("compile")
                measure_providers(rows, name, f"{m}x{n}", dtype_s, ideal_bytes(x.numel(), x.element_size(), gated, False),
                                  copy_bw, providers, args.device, args.warmup, args.repeats)
                if not args.backward:
                    continue
                xg = x.clone().requires_grad_()
                g = torch.randn(m, n // 2 if gated else n, device=args.device).to(dtype)
                providers = {k: with_backward(f, xg, g) for k, f in
                             (("yirage", ours), ("torch", unfused), ("compile", compiled))}
                if args.no_compile:
                    providers.pop("compile")
                measure_providers(rows, name + " fwd+bwd", f"{m}x{n}", dtype_s,
                                  ideal_bytes(x.numel(), x.element_size(), gated, True), copy_bw, providers,
                                  args.device, args.warmup, args.repeats)
    write_markdown(rows, "activation", args.device, args.out,
                   "gated: read x, write y (3 x d per row); gelu: read x, write y; fwd+bwd adds read grad_out and "
                   "x, write grad_x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
