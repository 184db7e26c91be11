"""Non-temporal output stores of the CPU row kernels and rotary_embedding (common/cpu_launch.h,
cpu_stream_outputs): forwards whose inputs and outputs together exceed the last-level cache write their outputs
with streaming stores (AVX-512 variants; the others store as usual). The results must be the same bits as the cached stores give: checked against the same op on a
few rows (too little traffic to stream) and against the float64 references."""
import pytest
import torch

from yirage_ext.testing.reference import (assert_close, fused_add_rms_norm_ref, gelu_and_mul_ref, gelu_ref,
                                          layer_norm_ref, log_softmax_ref, rms_norm_ref, rotary_embedding_ref,
                                          silu_and_mul_ref, softmax_ref)

from _helpers import dtype_id, run_python

OPS = torch.ops.yirage


def rope(fn, t, r, interleaved):
    """rotary_embedding with the rows of t as tokens of q (heads of 64 features where the row allows, else one
    head), r's as k's; neox over whole heads, gpt-j over their first half; both outputs side by side"""
    d = 64 if t.shape[-1] % 64 == 0 else t.shape[-1]
    q, k = t.view(t.shape[0], -1, d), r.view(r.shape[0], -1, d)
    half = d // 2 if not interleaved else d // 4
    angle = 3 * t[:, :half].double()  # a token's angles from its own row: the same for any slice of rows
    qo, ko = fn(q, k, angle.cos().to(t.dtype), angle.sin().to(t.dtype), interleaved)
    return torch.cat([qo.flatten(1), ko.flatten(1)], -1)


def cases(w, b):
    """name -> (op, reference), each taking x and the residual rows that go with them"""
    return {
        "softmax": (lambda t, r: OPS.softmax(t, -1), lambda t, r: softmax_ref(t, -1)),
        "log_softmax": (lambda t, r: OPS.log_softmax(t, -1), lambda t, r: log_softmax_ref(t, -1)),
        "layer_norm": (lambda t, r: OPS.layer_norm(t, w, b, 1e-5), lambda t, r: layer_norm_ref(t, w, b, 1e-5)),
        "rms_norm": (lambda t, r: OPS.rms_norm(t, w, 1e-6), lambda t, r: rms_norm_ref(t, w, 1e-6)),
        "fused_add_rms_norm": (lambda t, r: OPS.fused_add_rms_norm(t, r, w, 1e-6)[0],
                               lambda t, r: fused_add_rms_norm_ref(t, r, w, 1e-6)[0]),
        "silu_and_mul": (lambda t, r: OPS.silu_and_mul(t), lambda t, r: silu_and_mul_ref(t)),
        "gelu_and_mul": (lambda t, r: OPS.gelu_and_mul(t, "none"), lambda t, r: gelu_and_mul_ref(t, "none")),
        "gelu": (lambda t, r: OPS.gelu(t, "tanh"), lambda t, r: gelu_ref(t, "tanh")),
        "rotary_embedding": (lambda t, r: rope(OPS.rotary_embedding, t, r, False),
                             lambda t, r: rope(rotary_embedding_ref, t, r, False)),
        "rotary_embedding_gptj": (lambda t, r: rope(OPS.rotary_embedding, t, r, True),
                                  lambda t, r: rope(rotary_embedding_ref, t, r, True)),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_streamed_outputs_match(isa, dtype):
    # 4096 x 2048: 32 MiB (fp32) / 16 MiB (bf16) in and as much out, past a 32 MiB last-level cache in fp32; the
    # bf16 case streams where the cache is 16 MiB or less, and checks the cached path elsewhere
    gen = torch.Generator().manual_seed(5)
    rows, cols = 4096, 2048
    x = torch.randn(rows, cols, generator=gen).to(dtype)
    w = (torch.rand(cols, generator=gen) + 0.5).to(dtype)
    b = torch.randn(cols, generator=gen).to(dtype)
    r = torch.randn(rows, cols, generator=gen).to(dtype)
    for name, (op, ref) in cases(w, b).items():
        y = op(x, r)
        few = op(x[:8].clone(), r[:8].clone())  # 8 rows: never streamed
        assert torch.equal(y[:8], few), f"{name}: streamed rows differ from the same rows stored through the cache"
        last = slice(rows - 64, rows)  # written by the last task, where streamed
        assert_close(y[last], ref(x[last], r[last]), dtype, msg=name)


SCRIPT = """
import sys, torch, yirage_ext
sys.path.insert(0, {tests!r})
from test_cpu_stream import cases, inputs
out = {{}}
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    for shape in ((64, 1024), (37, 1000)):
        x, w, b, r = inputs(shape, dtype)
        for name, (op, ref) in cases(w, b).items():
            out[(name, str(dtype), shape)] = op(x, r)
torch.save(out, {path!r})
"""


def inputs(shape, dtype):
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(*shape, generator=gen).to(dtype)
    w = (torch.rand(shape[-1], generator=gen) + 0.5).to(dtype)
    b = torch.randn(shape[-1], generator=gen).to(dtype)
    r = torch.randn(*shape, generator=gen).to(dtype)
    return x, w, b, r


def test_forced_stream_same_bits(tmp_path):
    # YIRAGE_CPU_STREAM=1 in a child: every forward streams (fp32, bf16, fp16; rows of 1024 start on 64-byte
    # boundaries, rows of 1000 only every few), against this process, where inputs this small never stream
    import os
    path = str(tmp_path / "streamed.pt")
    tests = os.path.dirname(os.path.abspath(__file__))
    out = run_python(SCRIPT.format(tests=tests, path=path), env_extra={"YIRAGE_CPU_STREAM": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    streamed = torch.load(path)
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for shape in ((64, 1024), (37, 1000)):
            x, w, b, r = inputs(shape, dtype)
            for name, (op, ref) in cases(w, b).items():
                got = streamed[(name, str(dtype), shape)]
                assert torch.equal(got, op(x, r)), f"{name} {dtype} {shape}: streamed stores changed the result"
                assert_close(got, ref(x, r), dtype, msg=name)


def test_bad_stream_value():
    out = run_python("import torch, yirage_ext; torch.ops.yirage.softmax(torch.randn(4, 8), -1)",
                     env_extra={"YIRAGE_CPU_STREAM": "yes"})
    assert out.returncode != 0 and "YIRAGE_CPU_STREAM: expected 0 or 1, got 'yes'" in out.stderr
