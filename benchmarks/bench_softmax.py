"""Benchmark softmax / log_softmax: yirage vs torch eager vs torch.compile vs the unfused torch code, same process.

Forward (`fwd`) and forward+backward (`fwdbwd`, through autograd: the gradient of x for a random upstream
gradient). Reports the median time (p20/p80), GB/s of ideal bytes (forward: read x, write y; forward+
backward adds read grad and y, write grad_x) and % of the copy bandwidth measured in the same run, then
writes a Markdown table to benchmarks/results/. Inputs and the float64 reference are the tests'
(yirage_ext.testing). A shape may name the softmax dim after `@` (default -1): `4096x4096@0` is a softmax
over dim 0, `32x1024x128@-2` over the middle dim.

    python benchmarks/bench_softmax.py [--ops softmax log_softmax] [--modes fwd fwdbwd]
        [--dtypes float32 bfloat16] [--shapes 4096x4096 16384x1024 4096x4096@0 32x1024x128@-2]
"""
import sys

import torch

import yirage_ext
from _common import base_parser, copy_bandwidth, measure_providers, write_markdown
from yirage_ext.testing.inputs import softmax_inputs
from yirage_ext.testing.reference import assert_close, log_softmax_ref, softmax_ref

EAGER = {"softmax": torch.softmax, "log_softmax": torch.log_softmax}
REFS = {"softmax": softmax_ref, "log_softmax": log_softmax_ref}


def unfused_softmax(x, dim):
    """The code the op replaces: max, subtract, exp, sum, divide as separate tensor ops."""
    e = (x - x.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def unfused_log_softmax(x, dim):
    z = x - x.amax(dim, keepdim=True)
    return z - z.exp().sum(dim, keepdim=True).log()


UNFUSED = {"softmax": unfused_softmax, "log_softmax": unfused_log_softmax}


def parse_case(p, s: str) -> tuple[tuple[int, ...], int]:
    try:
        shape_s, _, dim_s = s.partition("@")
        shape = tuple(int(v) for v in shape_s.lower().split("x"))
        dim = int(dim_s) if dim_s else -1
        if not -len(shape) <= dim < len(shape):
            raise ValueError
        return shape, dim
    except ValueError:
        p.error(f"--shapes: expected SIZExSIZE[x...][@DIM] such as 4096x4096 or 32x1024x128@-2, got {s!r}")


def main(argv=None) -> int:
    p = base_parser(__doc__)
    p.set_defaults(shapes=["4096x4096", "16384x1024", "4096x4096@0", "32x1024x128@-2"])
    p.add_argument("--ops", nargs="+", default=["softmax", "log_softmax"], choices=list(EAGER))
    p.add_argument("--modes", nargs="+", default=["fwd", "fwdbwd"], choices=["fwd", "fwdbwd"])
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")
    rows = []
    for op_name in args.ops:
        yirage_op = getattr(yirage_ext, op_name)
        eager, unfused = EAGER[op_name], UNFUSED[op_name]
        compiled = torch.compile(eager, dynamic=False)
        for case in args.shapes:
            shape, dim = parse_case(p, case)
            label = "x".join(map(str, shape)) + (f"@{dim}" if dim != -1 else "")
            for dtype_s in args.dtypes:
                dtype = getattr(torch, dtype_s)
                x = softmax_inputs(shape, dtype, device=args.device, seed=0)
                copy_bw = copy_bandwidth(x, args.device, args.warmup, args.repeats)
                assert_close(yirage_op(x, dim), REFS[op_name](x, dim), dtype)
                nbytes = x.numel() * x.element_size()
                for mode in args.modes:
                    if mode == "fwd":
                        fns = {"yirage": yirage_op, "torch": eager, "compile": compiled, "unfused": unfused}
                        providers = {k: (lambda f=f: f(x, dim)) for k, f in fns.items()}
                        ideal, name = 2 * nbytes, op_name
                    else:
                        xg = x.detach().clone().requires_grad_()
                        g = torch.randn(shape, device=args.device).to(dtype)
                        fns = {"yirage": yirage_op, "torch": eager, "compile": compiled, "unfused": unfused}
                        providers = {k: (lambda f=f: torch.autograd.grad(f(xg, dim), xg, g)) for k, f in fns.items()}
                        ideal, name = 5 * nbytes, op_name + "+bwd"
                    if args.no_compile:
                        providers.pop("compile")
                    measure_providers(rows, name, label, dtype_s, ideal, copy_bw, providers, args.device,
                                      args.warmup, args.repeats)
    write_markdown(rows, "softmax", args.device, args.out,
                   "forward: read x, write y; +bwd adds read grad_out and y, write grad_x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
