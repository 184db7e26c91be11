"""Benchmark rms_norm and fused add + rms_norm: yirage vs torch eager vs torch.compile, same process.

Reports the median time (p20/p80), GB/s of ideal bytes (each input read once, each output written
once) and % of the copy bandwidth measured in the same run, then writes a Markdown table to
benchmarks/results/. Inputs and the float64 reference are the tests' (yirage_ext.testing).

    python benchmarks/bench_rms_norm.py [--device cpu] [--dtypes float32 bfloat16] [--shapes 4096x4096 16384x1024]
"""
import sys

import torch
import torch.nn.functional as F

import yirage_ext
from _common import base_parser, copy_bandwidth, measure_providers, parse_shape, write_markdown
from yirage_ext.testing.inputs import rms_norm_inputs
from yirage_ext.testing.reference import assert_close, fused_add_rms_norm_ref, rms_norm_ref


def eager_rms_norm(x, w, eps):
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def eager_add_rms_norm(x, r, w, eps):
    h = x + r
    return F.rms_norm(h, (h.shape[-1],), w, eps), h


def main(argv=None) -> int:
    p = base_parser(__doc__)
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")
    compiled_norm = torch.compile(eager_rms_norm, dynamic=False)
    compiled_add = torch.compile(eager_add_rms_norm, dynamic=False)
    rows = []
    for shape_s in args.shapes:
        m, n = parse_shape(p, shape_s)
        for dtype_s in args.dtypes:
            dtype = getattr(torch, dtype_s)
            inp = rms_norm_inputs((m, n), dtype, device=args.device, seed=0)
            x, r, w, eps = inp.x, inp.residual, inp.weight, inp.eps
            copy_bw = copy_bandwidth(x, args.device, args.warmup, args.repeats)
            # correctness before timing
            assert_close(yirage_ext.rms_norm(x, w, eps), rms_norm_ref(x, w, eps), dtype)
            for got, want in zip(yirage_ext.fused_add_rms_norm(x, r, w, eps), fused_add_rms_norm_ref(x, r, w, eps)):
                assert_close(got, want, dtype)
            nbytes = x.numel() * x.element_size()
            cases = {
                "rms_norm": (2 * nbytes, {"yirage": lambda: torch.ops.yirage.rms_norm(x, w, eps),
                                          "torch": lambda: eager_rms_norm(x, w, eps),
                                          "compile": lambda: compiled_norm(x, w, eps)}),
                "add+rms_norm": (4 * nbytes, {"yirage": lambda: torch.ops.yirage.fused_add_rms_norm(x, r, w, eps),
                                              "torch": lambda: eager_add_rms_norm(x, r, w, eps),
                                              "compile": lambda: compiled_add(x, r, w, eps)}),
            }
            for op, (op_bytes, providers) in cases.items():
                if args.no_compile:
                    providers.pop("compile")
                measure_providers(rows, op, f"{m}x{n}", dtype_s, op_bytes, copy_bw, providers, args.device,
                                  args.warmup, args.repeats)
    write_markdown(rows, "rms_norm", args.device, args.out,
                   "rms_norm: read x, write y; add+rms_norm: read x and residual, write y and h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
