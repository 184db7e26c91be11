"""Benchmark layer_norm: yirage vs torch eager (F.layer_norm) vs torch.compile, same process.

Reports the median time (p20/p80), GB/s of ideal bytes (read x, write y) and % of the copy bandwidth
measured in the same run, then writes a Markdown table to benchmarks/results/. Inputs and the float64
reference are the tests' (yirage_ext.testing).

    python benchmarks/bench_layer_norm.py [--device cpu] [--dtypes float32 bfloat16] [--shapes 4096x4096 16384x1024]
"""
import sys

import torch
import torch.nn.functional as F

import yirage_ext
from _common import base_parser, copy_bandwidth, measure_providers, parse_shape, write_markdown
from yirage_ext.testing.inputs import layer_norm_inputs
from yirage_ext.testing.reference import assert_close, layer_norm_ref


def eager_layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def main(argv=None) -> int:
    p = base_parser(__doc__)
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")
    compiled = torch.compile(eager_layer_norm, dynamic=False)
    rows = []
    for shape_s in args.shapes:
        m, n = parse_shape(p, shape_s)
        for dtype_s in args.dtypes:
            dtype = getattr(torch, dtype_s)
            inp = layer_norm_inputs((m, n), dtype, device=args.device, seed=0)
            x, w, b, eps = inp.x, inp.weight, inp.bias, inp.eps
            copy_bw = copy_bandwidth(x, args.device, args.warmup, args.repeats)
            assert_close(yirage_ext.layer_norm(x, w, b, eps), layer_norm_ref(x, w, b, eps), dtype)
            providers = {"yirage": lambda: torch.ops.yirage.layer_norm(x, w, b, eps),
                         "torch": lambda: eager_layer_norm(x, w, b, eps),
                         "compile": lambda: compiled(x, w, b, eps)}
            if args.no_compile:
                providers.pop("compile")
            measure_providers(rows, "layer_norm", f"{m}x{n}", dtype_s, 2 * x.numel() * x.element_size(), copy_bw,
                              providers, args.device, args.warmup, args.repeats)
    write_markdown(rows, "layer_norm", args.device, args.out, "read x, write y")
    return 0


if __name__ == "__main__":
    sys.exit(main())
