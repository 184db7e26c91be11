"""One small case per CUDA kernel, forward and backward, for compute-sanitizer:

    compute-sanitizer --tool memcheck  python tests/sanitize.py
    compute-sanitizer --tool racecheck python tests/sanitize.py

Every op with a CUDA kernel (rms_norm, fused_add_rms_norm, layer_norm, softmax, log_softmax, silu_and_mul,
gelu_and_mul, gelu, rotary_embedding, matmul, linear, attention) runs forward and backward (its backward op, through
autograd) in float32 and bfloat16, on a small case and on an odd-size case whose every operand starts one element
past an aligned address (a view at storage offset 1); rms_norm and layer_norm also on 4099x1024 (the register paths,
their backward with more row groups than the persistent grid and a partial last group), rms_norm on 9x1000 (rows
whose last vectors leave some threads idle: a load hoisted above its guard would read past the tensor), softmax and
log_softmax also on 3x2048, 2x8192 and 2x16384 (the block-level register kernel with 16-byte vectors, 2, 4 and 4-8
a thread).
attention (and attention_causal, attention_dims, attention_decode) runs in bfloat16 and float16 instead (its
tensor-core kernels; float32 takes the portable path): B=1, Hq=4, Hk=2, Sq=70, Sk=130, D=64, full and causal,
aligned and unaligned (the copy path), D=128 and 256 causal and Hq=Hk=2 at each D (attention_dims), and decode
cases Sq=1 with Sk=600 (D=64), 1500 (D=128) and 700 (D=256). Results are compared with the float64 references;
the script prints one line per case and exits 1 on any mismatch or error, 2 without a GPU or without yirage's CUDA
kernels. Ops that have no CUDA kernel yet are reported and skipped (--strict: fail). Not run unless named in --ops:
attention_long and attention_long_causal, B=1, H=32, Sq=1024, D=128 against 1100 keys (full) and 4200 (causal), the
Hopper forward's 176-key tiles (256 blocks: minutes under racecheck).

Not collected by pytest (the name does not start with test_); sizes are small so that racecheck, which
runs kernels many times slower, finishes in minutes. Options: --ops a,b (a subset), --dtypes float32.
"""
import argparse
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import yirage_ext  # noqa: E402,F401  (loads the library: registers torch.ops.yirage)
from yirage_ext.testing import inputs as fx  # noqa: E402
from yirage_ext.testing.reference import (assert_close, assert_gemm_close, attention_ref,  # noqa: E402
                                          fused_add_rms_norm_ref, gelu_and_mul_ref, gelu_ref, layer_norm_ref,
                                          linear_ref, log_softmax_ref, matmul_ref, rms_norm_ref, rotary_embedding_ref, silu_and_mul_ref,
                                          softmax_ref)

from _helpers import assert_grad_close, reference_grads, unaligned  # noqa: E402

OPS = torch.ops.yirage


def _rope(shape, kv, rot):
    def make(dtype, seed):
        inp = fx.rotary_embedding_inputs(shape, kv_heads=kv, rot_dim=rot, dtype=dtype, device="cuda", seed=seed)
        return [inp.q, inp.k, inp.cos, inp.sin]
    return make


def _norm(factory, shape, names):
    def make(dtype, seed):
        inp = factory(shape, dtype, device="cuda", seed=seed)
        return [getattr(inp, n) for n in names]
    return make


def _one(factory, shape):
    return lambda dtype, seed: [factory(shape, dtype, device="cuda", seed=seed)]


def _mm(a_shape, b_shape):
    def make(dtype, seed):
        inp = fx.matmul_inputs(a_shape, b_shape, dtype, device="cuda", seed=seed)
        return [inp.a, inp.b]
    return make


def _attn(b, hq, hk, sq, sk, d):
    def make(dtype, seed):
        inp = fx.attention_inputs(b, hq, hk, sq, sk, d, dtype=dtype, device="cuda", seed=seed)
        return [inp.q, inp.k, inp.v]
    return make


_ATTN = ("attention", "attention_forward", "attention_backward")
_ATTN_SMALL = [("B1-H4x2-S70x130-D64", _attn(1, 4, 2, 70, 130, 64), False),
               ("B1-H4x2-S70x130-D64 unaligned", _attn(1, 4, 2, 70, 130, 64), True)]


def _lin(x_shape, n):
    def make(dtype, seed):
        inp = fx.linear_inputs(x_shape, n, dtype, device="cuda", seed=seed)
        return [inp.x, inp.weight, inp.bias]
    return make


# name -> (yirage ops that must have a CUDA kernel, call, float64 reference, K for GEMM tolerances or None,
#          [(case name, input maker, make every operand unaligned)])
OPS_TABLE = {
    "rms_norm": (("rms_norm", "rms_norm_backward"), lambda x, w: OPS.rms_norm(x, w, 1e-6),
                 lambda x, w: rms_norm_ref(x, w, 1e-6), None,
                 [("5x33", _norm(fx.rms_norm_inputs, (5, 33), ("x", "weight")), False),
                  ("3x769 unaligned", _norm(fx.rms_norm_inputs, (3, 769), ("x", "weight")), True),
                  ("4099x1024", _norm(fx.rms_norm_inputs, (4099, 1024), ("x", "weight")), False),
                  ("9x1000", _norm(fx.rms_norm_inputs, (9, 1000), ("x", "weight")), False)]),
    "fused_add_rms_norm": (("fused_add_rms_norm", "rms_norm_backward"),
                           lambda x, r, w: OPS.fused_add_rms_norm(x, r, w, 1e-6),
                           lambda x, r, w: fused_add_rms_norm_ref(x, r, w, 1e-6), None,
                           [("5x33", _norm(fx.rms_norm_inputs, (5, 33), ("x", "residual", "weight")), False),
                            ("3x769 unaligned", _norm(fx.rms_norm_inputs, (3, 769), ("x", "residual", "weight")),
                             True)]),
    "layer_norm": (("layer_norm", "layer_norm_backward"), lambda x, w, b: OPS.layer_norm(x, w, b, 1e-5),
                   lambda x, w, b: layer_norm_ref(x, w, b, 1e-5), None,
                   [("5x33", _norm(fx.layer_norm_inputs, (5, 33), ("x", "weight", "bias")), False),
                    ("3x769 unaligned", _norm(fx.layer_norm_inputs, (3, 769), ("x", "weight", "bias")), True),
                    ("4099x1024", _norm(fx.layer_norm_inputs, (4099, 1024), ("x", "weight", "bias")), False)]),
    "softmax": (("softmax", "softmax_backward"), lambda x: OPS.softmax(x, -1), lambda x: softmax_ref(x, -1), None,
                [("5x33", _one(fx.softmax_inputs, (5, 33)), False),
                 ("3x769 unaligned", _one(fx.softmax_inputs, (3, 769)), True),
                 ("3x2048", _one(fx.softmax_inputs, (3, 2048)), False),
                 ("2x8192", _one(fx.softmax_inputs, (2, 8192)), False),
                 ("2x16384", _one(fx.softmax_inputs, (2, 16384)), False)]),
    "softmax_dim0": (("softmax", "softmax_backward"), lambda x: OPS.softmax(x, 0), lambda x: softmax_ref(x, 0),
                     None, [("33x5", _one(fx.softmax_inputs, (33, 5)), False),
                            ("67x3 unaligned", _one(fx.softmax_inputs, (67, 3)), True)]),
    "log_softmax": (("log_softmax", "log_softmax_backward"), lambda x: OPS.log_softmax(x, -1),
                    lambda x: log_softmax_ref(x, -1), None,
                    [("5x33", _one(fx.softmax_inputs, (5, 33)), False),
                     ("3x769 unaligned", _one(fx.softmax_inputs, (3, 769)), True),
                     ("3x2048", _one(fx.softmax_inputs, (3, 2048)), False),
                     ("2x8192", _one(fx.softmax_inputs, (2, 8192)), False),
                     ("2x16384", _one(fx.softmax_inputs, (2, 16384)), False)]),
    "silu_and_mul": (("silu_and_mul", "silu_and_mul_backward"), lambda x: OPS.silu_and_mul(x), silu_and_mul_ref,
                     None, [("5x66", _one(fx.activation_inputs, (5, 66)), False),
                            ("3x770 unaligned", _one(fx.activation_inputs, (3, 770)), True)]),
    "gelu_and_mul": (("gelu_and_mul", "gelu_and_mul_backward"), lambda x: OPS.gelu_and_mul(x, "tanh"),
                     lambda x: gelu_and_mul_ref(x, "tanh"), None,
                     [("5x66", _one(fx.activation_inputs, (5, 66)), False),
                      ("3x770 unaligned", _one(fx.activation_inputs, (3, 770)), True)]),
    "gelu": (("gelu", "gelu_backward"), lambda x: OPS.gelu(x, "none"), lambda x: gelu_ref(x, "none"), None,
             [("5x33", _one(fx.activation_inputs, (5, 33)), False),
              ("3x769 unaligned", _one(fx.activation_inputs, (3, 769)), True)]),
    "rotary_embedding": (("rotary_embedding", "rotary_embedding_backward"),
                         lambda q, k, c, s: OPS.rotary_embedding(q, k, c, s, False),
                         lambda q, k, c, s: rotary_embedding_ref(q, k, c, s, False), None,
                         [("S5-H3x1-D16", _rope((5, 3, 16), 1, 16), False),
                          ("S3-H2x1-D65-R34 unaligned", _rope((3, 2, 65), 1, 34), True)]),
    "rotary_embedding_gptj": (("rotary_embedding", "rotary_embedding_backward"),
                              lambda q, k, c, s: OPS.rotary_embedding(q, k, c, s, True),
                              lambda q, k, c, s: rotary_embedding_ref(q, k, c, s, True), None,
                              [("S5-H3x1-D16", _rope((5, 3, 16), 1, 16), False),
                               ("S3-H2x1-D65-R34 unaligned", _rope((3, 2, 65), 1, 34), True)]),
    "matmul": (("matmul",), lambda a, b: OPS.matmul(a, b), matmul_ref, "k",
               [("5x33x7", _mm((5, 33), (33, 7)), False),
                ("2x17x65x9 unaligned", _mm((2, 17, 65), (65, 9)), True)]),
    "linear": (("linear", "linear_forward", "linear_backward"), lambda x, w, b: OPS.linear(x, w, b, "gelu"),
               lambda x, w, b: linear_ref(x, w, b, "gelu"), "k",
               [("5x33->7", _lin((5, 33), 7), False), ("3x65->9 unaligned", _lin((3, 65), 9), True),
                # the skinny kernel (fp16/bf16, K a multiple of 8, M <= 16): partial column blocks and k steps
                ("5x136->50", _lin((5, 136), 50), False), ("16x264->33", _lin((16, 264), 33), False)]),
    "attention": (_ATTN, lambda q, k, v: OPS.attention(q, k, v, False, None),
                  lambda q, k, v: attention_ref(q, k, v, False), None, _ATTN_SMALL),
    "attention_causal": (_ATTN, lambda q, k, v: OPS.attention(q, k, v, True, None),
                         lambda q, k, v: attention_ref(q, k, v, True), None, _ATTN_SMALL),
    # the other head dims' kernels (their backward tiles differ), causal; and one query head per key/value head at
    # each head dim, where the Hopper backward copies Q and dO by the tensor memory accelerator (rows past Sq filled)
    "attention_dims": (_ATTN, lambda q, k, v: OPS.attention(q, k, v, True, None),
                       lambda q, k, v: attention_ref(q, k, v, True), None,
                       [("B1-H4x2-S70x130-D128", _attn(1, 4, 2, 70, 130, 128), False),
                        ("B1-H4x2-S70x130-D256", _attn(1, 4, 2, 70, 130, 256), False)] +
                       [(f"B1-H2x2-S70x130-D{d}", _attn(1, 2, 2, 70, 130, d), False) for d in (64, 128, 256)]),
    # not in the default set (minutes under racecheck): the Hopper forward's 176-key tiles, D = 128 over more than
    # 1024 keys without a mask and more than 4096 causal, with enough query tiles (256 blocks) that the keys are not
    # split over blocks
    "attention_long": (_ATTN, lambda q, k, v: OPS.attention(q, k, v, False, None),
                       lambda q, k, v: attention_ref(q, k, v, False), None,
                       [("B1-H32x32-S1024x1100-D128", _attn(1, 32, 32, 1024, 1100, 128), False)]),
    "attention_long_causal": (_ATTN, lambda q, k, v: OPS.attention(q, k, v, True, None),
                              lambda q, k, v: attention_ref(q, k, v, True), None,
                              [("B1-H32x32-S1024x4200-D128", _attn(1, 32, 32, 1024, 4200, 128), False)]),
    # decode: one query per head against 600 keys (2 key splits, merged by the last block of each tile); D = 128
    # against 1500 keys (more than 1024: the wide-tile decode configuration on GPUs with the shared memory for it);
    # D = 256 against 700 keys
    "attention_decode": (_ATTN, lambda q, k, v: OPS.attention(q, k, v, True, None),
                         lambda q, k, v: attention_ref(q, k, v, True), None,
                         [("B1-H4x2-S1x600-D64", _attn(1, 4, 2, 1, 600, 64), False),
                          ("B1-H4x2-S1x1500-D128", _attn(1, 4, 2, 1, 1500, 128), False),
                          ("B1-H4x2-S1x700-D256", _attn(1, 4, 2, 1, 700, 256), False)]),
}
# the dtypes each op runs in when --dtypes is not given (default: DEFAULT_DTYPES)
DEFAULT_DTYPES = "float32,bfloat16"
LONG_OPS = ("attention_long", "attention_long_causal")  # minutes under racecheck: only when named in --ops
OP_DTYPES = {name: "bfloat16,float16"
             for name in ("attention", "attention_causal", "attention_dims", "attention_decode") + LONG_OPS}
# the ops run when --ops is not given
DEFAULT_OPS = [name for name in OPS_TABLE if name not in LONG_OPS]


def _tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def run_case(fn, ref, gemm, make, align_off, dtype):
    leaves = make(dtype, 0)
    if align_off:
        leaves = [unaligned(t) for t in leaves]
        assert all(t.data_ptr() % 16 != 0 for t in leaves), "the operands should be unaligned"
    k = leaves[0].shape[-1]
    leaves = [t.requires_grad_() for t in leaves]
    outs = _tuple(fn(*leaves))
    gen = torch.Generator().manual_seed(1)
    gouts = [torch.randn(o.shape, generator=gen).to(dtype=dtype, device=o.device) for o in outs]
    if align_off:
        gouts = [unaligned(g) for g in gouts]
    grads = torch.autograd.grad(outs, leaves, gouts, allow_unused=True)
    torch.cuda.synchronize()
    for i, (got, want) in enumerate(zip(outs, _tuple(ref(*leaves)))):
        if gemm:
            assert_gemm_close(got.detach(), want, k, dtype, f"output {i}")
        else:
            assert_close(got.detach(), want, dtype, msg=f"output {i}")
    for i, (got, want) in enumerate(zip(grads, reference_grads(ref, leaves, gouts))):
        if got is None:
            assert want is None or torch.count_nonzero(want) == 0, f"no gradient for input {i}"
        else:
            assert_grad_close(got, want, dtype, f"gradient of input {i}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=",".join(DEFAULT_OPS),
                        help="comma-separated subset of: " + ", ".join(OPS_TABLE)
                        + f" (default: all but {' and '.join(LONG_OPS)})")
    parser.add_argument("--dtypes", help=f"comma-separated (default: {DEFAULT_DTYPES}; for attention "
                        f"{OP_DTYPES['attention']})")
    parser.add_argument("--strict", action="store_true", help="an op without a CUDA kernel is a failure")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("sanitize: no GPU here (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    if not torch._C._dispatch_has_kernel_for_dispatch_key("yirage::rms_norm", "CUDA"):
        print("sanitize: this yirage_ext build has no CUDA kernels", file=sys.stderr)
        return 2
    failed = skipped = passed = 0
    for name in args.ops.split(","):
        needed, fn, ref, gemm, cases = OPS_TABLE[name]
        missing = [op for op in needed if not torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", "CUDA")]
        if missing:
            print(f"SKIP {name}: no CUDA kernel for {', '.join(missing)}", flush=True)
            skipped += 1
            failed += args.strict
            continue
        dtypes = args.dtypes or OP_DTYPES.get(name, DEFAULT_DTYPES)
        for dtype in [getattr(torch, d) for d in dtypes.split(",")]:
            for case, make, align_off in cases:
                what = f"{name} {str(dtype).replace('torch.', '')} {case}"
                try:
                    run_case(fn, ref, gemm, make, align_off, dtype)
                    torch.cuda.synchronize()
                except Exception:  # a mismatch (AssertionError) or a CUDA error: report it, go on
                    failed += 1
                    print(f"FAIL {what}\n{traceback.format_exc()}", flush=True)
                else:
                    passed += 1
                    print(f"ok   {what}", flush=True)
    print(f"sanitize: {passed} passed, {failed} failed, {skipped} ops skipped", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
