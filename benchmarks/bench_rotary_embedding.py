"""Benchmark rotary_embedding: yirage vs torch eager vs torch.compile, same process.

torch is the unfused code the op replaces: the usual Hugging Face style `x * cos + rotate_half(x) * sin`
(neox) or its rotate_every_two form (gpt-j), with cos/sin (S, R/2) expanded to the head dim; compile is
torch.compile of that code. Forward (fwd) and forward+backward (fwd+bwd: q and k require grad, cos/sin do
not, as in training with fixed tables). Reports the median time (p20/p80), GB/s of ideal bytes and % of
the copy bandwidth measured in the same run, then writes a Markdown table to benchmarks/results/.
Inputs and the float64 reference are the tests' (yirage_ext.testing).

Shapes are SxHxD (k with H heads) or SxHqxHkxD (GQA).

    python benchmarks/bench_rotary_embedding.py [--dtypes float32 bfloat16] [--shapes 4096x32x128 4096x32x8x128]
        [--modes neox gptj] [--no-backward]
"""
import sys

import torch

import yirage_ext
from _common import base_parser, copy_bandwidth, measure_providers, write_markdown
from yirage_ext.testing.inputs import rotary_embedding_inputs
from yirage_ext.testing.reference import assert_close, rotary_embedding_ref


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def eager_neox(q, k, cos, sin):
    cos, sin = torch.cat((cos, cos), -1).unsqueeze(-2), torch.cat((sin, sin), -1).unsqueeze(-2)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def eager_gptj(q, k, cos, sin):
    cos, sin = cos.repeat_interleave(2, -1).unsqueeze(-2), sin.repeat_interleave(2, -1).unsqueeze(-2)
    return q * cos + rotate_every_two(q) * sin, k * cos + rotate_every_two(k) * sin


def parse_rope_shape(p, s: str):
    try:
        dims = [int(v) for v in s.lower().split("x")]
        if len(dims) == 3:
            return dims[0], dims[1], dims[1], dims[2]
        if len(dims) == 4:
            return tuple(dims)
    except ValueError:
        pass
    p.error(f"--shapes: expected SxHxD or SxHqxHkxD such as 4096x32x128, got {s!r}")


def fwd_bwd(fn, q, k, cos, sin, gq, gk):
    def run():
        q.grad = k.grad = None
        out_q, out_k = fn(q, k, cos, sin)
        torch.autograd.backward((out_q, out_k), (gq, gk))
    return run


def main(argv=None) -> int:
    p = base_parser(__doc__, shapes=["4096x32x128", "4096x32x8x128"], shapes_help="SxHxD or SxHqxHkxD")
    p.add_argument("--modes", nargs="+", default=["neox", "gptj"], choices=["neox", "gptj"])
    p.add_argument("--no-backward", action="store_true", help="forward only")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA GPU is available")
    eager = {"neox": eager_neox, "gptj": eager_gptj}
    rows = []
    for shape_s in args.shapes:
        s, hq, hk, d = parse_rope_shape(p, shape_s)
        # compiled afresh per shape: a shape change would otherwise leave dynamo's automatic-dynamic graphs
        torch._dynamo.reset()
        compiled = {m: torch.compile(f, dynamic=False) for m, f in eager.items()}
        for dtype_s in args.dtypes:
            dtype = getattr(torch, dtype_s)
            inp = rotary_embedding_inputs((s, hq, d), kv_heads=hk, dtype=dtype, device=args.device, seed=0)
            q, k, cos, sin = inp.q, inp.k, inp.cos, inp.sin
            copy_bw = copy_bandwidth(q, args.device, args.warmup, args.repeats)
            esize = q.element_size()
            io = (q.numel() + k.numel()) * esize  # q and k (or their gradients) once
            tables = (cos.numel() + sin.numel()) * cos.element_size()
            for mode in args.modes:
                il = mode == "gptj"
                for got, want in zip(yirage_ext.rotary_embedding(q, k, cos, sin, il),
                                     rotary_embedding_ref(q, k, cos, sin, il)):
                    assert_close(got, want, dtype)
                ops = {"yirage": lambda a, b, c, e, il=il: torch.ops.yirage.rotary_embedding(a, b, c, e, il),
                       "torch": eager[mode], "compile": compiled[mode]}
                if args.no_compile:
                    ops.pop("compile")
                shape = f"{s}x{hq}x{hk}x{d}" if hk != hq else f"{s}x{hq}x{d}"
                # fwd: read q, k, cos, sin, write both outputs
                measure_providers(rows, f"rope {mode} fwd", shape, dtype_s, 2 * io + tables, copy_bw,
                                  {n: (lambda f=f: f(q, k, cos, sin)) for n, f in ops.items()}, args.device,
                                  args.warmup, args.repeats)
                if args.no_backward:
                    continue
                qg, kg = q.clone().requires_grad_(), k.clone().requires_grad_()
                gq, gk = torch.randn_like(q), torch.randn_like(k)
                # + bwd: read both output gradients, cos, sin, write both input gradients
                measure_providers(rows, f"rope {mode} fwd+bwd", shape, dtype_s, 4 * io + 2 * tables, copy_bw,
                                  {n: fwd_bwd(f, qg, kg, cos, sin, gq, gk) for n, f in ops.items()}, args.device,
                                  args.warmup, args.repeats)
    write_markdown(rows, "rotary_embedding", args.device, args.out,
                   "fwd: read q, k, cos, sin, write both outputs; fwd+bwd adds read both output gradients, "
                   "cos, sin, write the q and k gradients")
    return 0


if __name__ == "__main__":
    sys.exit(main())
