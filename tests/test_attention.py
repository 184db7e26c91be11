"""attention, attention_forward and attention_backward against the float64 reference and torch's SDPA."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

from yirage_ext.testing.inputs import attention_inputs
from yirage_ext.testing.reference import TOLERANCES, assert_close, attention_lse_ref, attention_ref

from _helpers import aten_ops_called, assert_grad_close, dtype_id, portable, reference_grads, run_python

OPS = torch.ops.yirage
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# (B, Hq, Hk, Sq, Sk, D): sizes 1, odd and not multiples of the blocks (query blocks of 32/64/256 rows, key
# blocks of 512), GQA, Sq != Sk both ways, decode (Sq = 1) against a long Sk, several query and key blocks.
SHAPES = [
    (1, 1, 1, 1, 1, 1),
    (2, 3, 3, 17, 17, 8),
    (1, 4, 2, 33, 65, 64),
    (2, 2, 1, 300, 301, 80),
    (1, 2, 2, 70, 40, 16),
    (1, 3, 1, 1, 4097, 128),
    (1, 2, 2, 129, 600, 256),
    (1, 1, 1, 777, 1030, 32),
]
LSE_TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 1e-5, torch.bfloat16: 1e-5}


def shape_id(s):
    return "x".join(map(str, s))


def leaves(inp, requires_grad=True):
    return [t.detach().clone().requires_grad_(requires_grad) for t in (inp.q, inp.k, inp.v)]


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_forward_values(isa, dtype, shape, causal):
    inp = attention_inputs(*shape, dtype=dtype, causal=causal, seed=sum(shape))
    out = OPS.attention(inp.q, inp.k, inp.v, causal, None)
    assert out.dtype == dtype and out.shape == inp.q.shape and out.is_contiguous()
    assert_close(out, attention_ref(inp.q, inp.k, inp.v, causal), dtype)
    out2, lse = OPS.attention_forward(inp.q, inp.k, inp.v, causal, None)
    assert torch.equal(out2, out)
    assert lse.dtype == (torch.float64 if dtype == torch.float64 else torch.float32) and lse.shape == shape[:2] + shape[3:4]
    tol = LSE_TOL[dtype]
    torch.testing.assert_close(lse.double(), attention_lse_ref(inp.q, inp.k, causal), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_matches_sdpa(dtype):
    inp = attention_inputs(2, 8, 2, 100, 100, 64, dtype=dtype, seed=1)
    q, k, v = inp.q, inp.k, inp.v
    for causal in (False, True):
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal, enable_gqa=True)
        assert_close(OPS.attention(q, k, v, causal, None), want, dtype)
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), scale=0.3, enable_gqa=True)
    assert_close(OPS.attention(q, k, v, False, 0.3), want, dtype)


@pytest.mark.parametrize("head_dim", [1, 8, 64, 80, 128, 256, 320])
def test_head_dims(head_dim):
    # any head dim works (the tiles go through GEMMs); 320 > 256 included
    inp = attention_inputs(1, 2, 1, 19, 45, head_dim, dtype=torch.float32, seed=head_dim)
    for causal in (False, True):
        assert_close(OPS.attention(inp.q, inp.k, inp.v, causal, None), attention_ref(inp.q, inp.k, inp.v, causal))


@pytest.mark.parametrize("scale", [0.0, -0.7, 3.0])
def test_explicit_scale(scale):
    inp = attention_inputs(1, 2, 2, 21, 33, 16, seed=2)
    assert_close(OPS.attention(inp.q, inp.k, inp.v, True, scale), attention_ref(inp.q, inp.k, inp.v, True, scale))


def test_causal_rows_without_keys():
    # bottom-right alignment with Sq > Sk: query i sees keys j <= i - 5, so rows 0..4 see none
    inp = attention_inputs(1, 2, 1, 12, 7, 16, seed=3)
    q, k, v = leaves(inp)
    out, lse = OPS.attention_forward(q, k, v, True, None)
    assert torch.count_nonzero(out[:, :, :5]) == 0 and torch.isneginf(lse[:, :, :5]).all()
    assert torch.isfinite(lse[:, :, 5:]).all()
    assert_close(out, attention_ref(inp.q, inp.k, inp.v, True))
    out.backward(torch.randn_like(out))
    assert torch.count_nonzero(q.grad[:, :, :5]) == 0 and torch.isfinite(q.grad).all()
    # every query row hidden: zeros, and zero gradients everywhere
    q, k, v = leaves(attention_inputs(1, 1, 1, 4, 3, 8, seed=4))
    out = OPS.attention(q, k[:, :, :0], v[:, :, :0], True, None)
    assert out.shape == (1, 1, 4, 8) and torch.count_nonzero(out) == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=dtype_id)
def test_large_logits(dtype):
    # logits in the thousands: the running max keeps exp() in range, no inf/NaN anywhere
    inp = attention_inputs(1, 2, 1, 40, 300, 64, dtype=dtype, seed=5)
    q = (inp.q.float() * 40).to(dtype)
    logit_max = attention_lse_ref(q, inp.k).abs().max().item()
    assert logit_max > 100
    # Loosened for this test only: fp32 logits of size L carry rounding errors of about L * 2^-24 (the
    # conditioning of softmax at large logits, not the kernel), so the tolerance grows with L.
    tol = max(TOLERANCES[dtype][0], 16 * 2.0 ** -24 * logit_max)
    for causal in (False, True):
        out, lse = OPS.attention_forward(q, inp.k, inp.v, causal, None)
        assert torch.isfinite(out).all() and torch.isfinite(lse).all()
        torch.testing.assert_close(out.double(), attention_ref(q, inp.k, inp.v, causal), atol=tol, rtol=tol)
    qg, k, v = leaves(inp)
    qs = (qg.float() * 40).to(dtype)
    OPS.attention(qs, k, v, True, None).backward(torch.ones(qs.shape, dtype=dtype))
    assert all(torch.isfinite(t.grad).all() for t in (qg, k, v))


@pytest.mark.parametrize("layout", ["bshd", "broadcast"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_noncontiguous_inputs(isa, layout, dtype):
    inp = attention_inputs(2, 4, 2, 45, 70, 40, dtype=dtype, layout=layout, seed=6)
    assert not inp.q.is_contiguous() and not inp.k.is_contiguous()
    for causal in (False, True):
        out = OPS.attention(inp.q, inp.k, inp.v, causal, None)
        assert out.is_contiguous()
        assert_close(out, attention_ref(inp.q, inp.k, inp.v, causal), dtype)
    # a last dim that is not contiguous, and rows of stride 0 (one query repeated over Sq)
    q = inp.q.transpose(-1, -2).contiguous().transpose(-1, -2)
    assert q.stride(-1) != 1
    assert_close(OPS.attention(q, inp.k, inp.v, True, None), attention_ref(q, inp.k, inp.v, True), dtype)
    q = inp.q[:, :, :1].expand(inp.q.shape)
    assert_close(OPS.attention(q, inp.k, inp.v, False, None), attention_ref(q, inp.k, inp.v, False), dtype)
    # decoding rows of a GQA group stacked by head stride: padded heads, and one head expanded (stride 0)
    for q in (inp.q[:, :, 3:4], inp.q[:, :1, 3:4].expand(2, 4, 1, 40)):
        assert_close(OPS.attention(q, inp.k, inp.v, True, None), attention_ref(q, inp.k, inp.v, True), dtype)


@pytest.mark.parametrize("shape", [(0, 2, 1, 5, 6, 8), (2, 0, 1, 5, 6, 8), (1, 2, 1, 0, 6, 8), (1, 2, 1, 5, 0, 8)],
                         ids=["B0", "Hq0", "Sq0", "Sk0"])
def test_empty(shape):
    inp = attention_inputs(*shape, seed=7)
    q, k, v = leaves(inp)
    for causal in (False, True):
        out, lse = OPS.attention_forward(q, k, v, causal, None)
        assert out.shape == q.shape and lse.shape == q.shape[:3]
        assert torch.count_nonzero(out) == 0 and torch.isneginf(lse).all()  # no key seen (or nothing at all)
        out.sum().backward()
        assert q.grad.shape == q.shape and k.grad.shape == k.shape and v.grad.shape == v.shape
        assert all(torch.count_nonzero(t.grad) == 0 for t in (q, k, v))
        q.grad = k.grad = v.grad = None


GRAD_SHAPES = [(1, 1, 1, 1, 1, 1), (2, 2, 2, 17, 17, 8), (1, 4, 2, 33, 70, 64), (1, 2, 1, 300, 260, 80),
               (1, 2, 1, 1, 700, 64)]


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("shape", GRAD_SHAPES, ids=shape_id)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gradients(isa, dtype, shape, causal):
    inp = attention_inputs(*shape, dtype=dtype, causal=causal, seed=8)
    q, k, v = leaves(inp)
    g = torch.randn(inp.q.shape).to(dtype)
    OPS.attention(q, k, v, causal, None).backward(g)
    ref = reference_grads(lambda a, b, c: attention_ref(a, b, c, causal), [q, k, v], [g])
    for got, want, what in zip((q.grad, k.grad, v.grad), ref, ("dq", "dk", "dv")):
        assert got.dtype == dtype and got.shape == want.shape
        assert_grad_close(got, want, dtype, what)


@pytest.mark.parametrize("layout", ["bshd", "broadcast"])
def test_gradients_noncontiguous_and_expanded_grad(layout):
    inp = attention_inputs(2, 4, 2, 40, 50, 32, layout=layout, seed=9)
    q, k, v = (t.detach().requires_grad_() for t in (inp.q, inp.k, inp.v))
    OPS.attention(q, k, v, True, None).sum().backward()  # an expanded (stride-0) upstream gradient
    ref = reference_grads(lambda a, b, c: attention_ref(a, b, c, True), [q, k, v], [torch.ones(q.shape)])
    for got, want, what in zip((q.grad, k.grad, v.grad), ref, ("dq", "dk", "dv")):
        assert_grad_close(got, want, torch.float32, what)


@pytest.mark.parametrize("threads", [1, 3])
def test_thread_counts(threads):
    # the work split depends on the thread count: GQA groups split in the forward, query blocks split over
    # tasks (partial dK/dV sums) in the backward; results must not
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for shape, causal in [((1, 4, 1, 2, 300, 32), True), ((1, 2, 1, 700, 500, 16), True), ((2, 1, 1, 90, 90, 8), False)]:
            inp = attention_inputs(*shape, seed=15)
            q, k, v = leaves(inp)
            out = OPS.attention(q, k, v, causal, None)
            assert_close(out, attention_ref(inp.q, inp.k, inp.v, causal))
            g = torch.randn(q.shape)
            out.backward(g)
            ref = reference_grads(lambda a, b, c: attention_ref(a, b, c, causal), [q, k, v], [g])
            for got, want, what in zip((q.grad, k.grad, v.grad), ref, ("dq", "dk", "dv")):
                assert_grad_close(got, want, torch.float32, what)
    finally:
        torch.set_num_threads(before)


def check_bf16_case(shape, causal, seed):
    """bf16 forward (out, lse) and gradients of one shape against the float64 references."""
    inp = attention_inputs(*shape, dtype=torch.bfloat16, causal=causal, seed=seed)
    q, k, v = leaves(inp)
    out, lse = OPS.attention_forward(q, k, v, causal, None)
    assert_close(out, attention_ref(inp.q, inp.k, inp.v, causal), torch.bfloat16)
    tol = LSE_TOL[torch.bfloat16]
    torch.testing.assert_close(lse.double(), attention_lse_ref(inp.q, inp.k, causal), atol=tol, rtol=tol)
    g = torch.randn(q.shape).to(torch.bfloat16)
    OPS.attention(q, k, v, causal, None).backward(g)
    ref = reference_grads(lambda a, b, c: attention_ref(a, b, c, causal), [q, k, v], [g])
    for got, want, what in zip((q.grad, k.grad, v.grad), ref, ("dq", "dk", "dv")):
        assert got.dtype == torch.bfloat16
        assert_grad_close(got, want, torch.bfloat16, what)


# bf16 on AVX512-BF16 CPUs runs its products bf16 x bf16 -> fp32 on packed tiles (P and dS rounded to bf16): odd head
# dims, odd key-tile lengths (Sk past a multiple of the 256/512-key tiles by an odd count) and odd stacked row
# counts (GQA groups of 3, a last query block of 45 rows) pad the products' inner dims with zeros; threads = 3
# splits the backward's query blocks over tasks (fp32 partial dK / dV sums). Every CPU variant runs them.
BF16_ODD_SHAPES = [(1, 1, 1, 301, 517, 7), (1, 3, 1, 45, 263, 33), (2, 2, 2, 64, 300, 128)]


@pytest.mark.parametrize("shape", BF16_ODD_SHAPES, ids=shape_id)
@pytest.mark.parametrize("threads", [1, 3])
def test_bf16_odd_tiles_and_thread_counts(isa, shape, threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for causal in (False, True):
            check_bf16_case(shape, causal, seed=21)
    finally:
        torch.set_num_threads(before)


ENGINE_SCRIPT = """
import sys, torch, yirage_ext
sys.path.insert(0, {tests!r})
from test_attention import BF16_ODD_SHAPES, check_bf16_case
print("ISA", yirage_ext.cpu_isa())
for shape in BF16_ODD_SHAPES:
    for causal in (False, True):
        check_bf16_case(shape, causal, seed=23)
print("OK")
"""


def test_bf16_matrix_engine():
    # YIRAGE_CPU_AMX=1: the bf16-product loops multiply through torch's oneDNN brgemm (the AMX path of CPUs with
    # AMX-BF16; oneDNN runs it on AVX512-BF16 elsewhere), odd tiles and GQA as above, 2 threads
    import os
    tests = os.path.dirname(os.path.abspath(__file__))
    out = run_python(ENGINE_SCRIPT.format(tests=tests), env_extra={"YIRAGE_CPU_AMX": "1"})
    if "ISA avx512_bf16" not in out.stdout:
        pytest.skip("the bf16-product loops need the avx512_bf16 CPU variant: " + out.stdout.split("\n")[0])
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout + out.stderr


def test_bad_matrix_engine_value():
    out = run_python("import torch, yirage_ext; q = torch.randn(1, 1, 4, 8).bfloat16(); "
                     "torch.ops.yirage.attention(q, q, q, False, None)", env_extra={"YIRAGE_CPU_AMX": "on"})
    assert out.returncode != 0 and "YIRAGE_CPU_AMX: expected 0 or 1, got 'on'" in out.stderr


def test_gradcheck():
    for shape, causal in [((1, 2, 1, 3, 5, 4), False), ((1, 2, 1, 3, 5, 4), True), ((2, 1, 1, 6, 4, 3), True)]:
        inp = attention_inputs(*shape, dtype=torch.float64, seed=10)
        q, k, v = leaves(inp)
        assert torch.autograd.gradcheck(lambda a, b, c: OPS.attention(a, b, c, causal, None), (q, k, v))
        assert torch.autograd.gradcheck(lambda a, b, c: OPS.attention(a, b, c, causal, 0.6), (q, k, v))


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
def test_opcheck(requires_grad):
    for shape, dtype, causal in [((1, 2, 1, 5, 7, 8), torch.float32, True), ((2, 2, 2, 3, 3, 16), torch.bfloat16, False),
                                 ((1, 1, 1, 4, 2, 4), torch.float64, True)]:
        inp = attention_inputs(*shape, dtype=dtype, seed=11)
        q, k, v = leaves(inp, requires_grad)
        opcheck(OPS.attention.default, (q, k, v, causal, None))
        opcheck(OPS.attention.default, (q, k, v, causal, 0.5))
        opcheck(OPS.attention_forward.default, (q, k, v, causal, None))
        out, lse = (t.detach() for t in OPS.attention_forward(q, k, v, causal, None))
        # attention_backward has no derivative of its own (test_double_backward.py): checked on plain inputs
        g = torch.randn(q.shape).to(dtype)
        opcheck(OPS.attention_backward.default, (g, q.detach(), k.detach(), v.detach(), out, lse, causal, None))


def test_compile_fullgraph_no_recompile():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda q, k, v: OPS.attention(q, k, v, True, None) * 2.0, backend=counter,
                             fullgraph=True, dynamic=True)
    for sq, sk in ((5, 9), (7, 12), (11, 11)):
        q, k, v = leaves(attention_inputs(1, 4, 2, sq, sk, 16, seed=sq))
        out = compiled(q, k, v)
        assert_close(out, attention_ref(q, k, v, True) * 2.0, torch.float32)
        out.sum().backward()
        ref = reference_grads(lambda a, b, c: attention_ref(a, b, c, True) * 2.0, [q, k, v], [torch.ones(q.shape)])
        for got, want, what in zip((q.grad, k.grad, v.grad), ref, ("dq", "dk", "dv")):
            assert_grad_close(got, want, torch.float32, what)
    assert counter.frame_count == 1, f"recompiled across sequence lengths: {counter.frame_count} frames"


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_portable_kernel(dtype):
    inp = attention_inputs(1, 4, 2, 37, 600, 24, dtype=dtype, layout="bshd", seed=12)
    q, k, v = inp.q, inp.k, inp.v
    assert "aten::amax" in aten_ops_called(lambda: portable(OPS.attention, q, k, v, True, None))
    assert "aten::amax" not in aten_ops_called(lambda: OPS.attention(q, k, v, True, None))
    for causal in (False, True):
        assert_close(portable(OPS.attention, q, k, v, causal, None), attention_ref(q, k, v, causal), dtype)
    out, lse = portable(OPS.attention_forward, q, k, v, True, None)
    torch.testing.assert_close(lse.double(), attention_lse_ref(q, k, True), atol=LSE_TOL[dtype], rtol=LSE_TOL[dtype])
    g = torch.randn(q.shape).to(dtype)
    grads = portable(OPS.attention_backward, g, q, k, v, out, lse, True, None)
    ref = reference_grads(lambda a, b, c: attention_ref(a, b, c, True), [t.clone().requires_grad_() for t in (q, k, v)],
                          [g])
    for got, want, what in zip(grads, ref, ("dq", "dk", "dv")):
        assert_grad_close(got, want, dtype, "portable " + what)
    # rows without keys, and the empty cases, in the portable kernel too
    q0 = attention_inputs(1, 2, 1, 9, 4, 8, dtype=dtype, seed=13)
    out, lse = portable(OPS.attention_forward, q0.q, q0.k, q0.v, True, None)
    assert torch.count_nonzero(out[:, :, :5]) == 0 and torch.isneginf(lse[:, :, :5]).all()
    assert_close(out, attention_ref(q0.q, q0.k, q0.v, True), dtype)
    empty = portable(OPS.attention, q0.q, q0.k[:, :, :0], q0.v[:, :, :0], False, None)
    assert empty.shape == q0.q.shape and torch.count_nonzero(empty) == 0


def test_dispatch_keys_and_schema():
    for op in ("attention", "attention_forward", "attention_backward"):
        for key in ("CPU", "Meta", "MPS", "PrivateUse1"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", key), (op, key)
        assert torch.Tag.pt2_compliant_tag in getattr(OPS, op).default.tags
    for op in ("attention", "attention_forward"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", "Autograd")
    args = [(a.name, str(a.type), a.default_value) for a in OPS.attention.default._schema.arguments]
    # DESIGN.md: attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None) -> Tensor
    assert args == [("q", "Tensor", None), ("k", "Tensor", None), ("v", "Tensor", None), ("causal", "bool", False),
                    ("scale", "Optional[float]", None)]
    assert [str(r.type) for r in OPS.attention.default._schema.returns] == ["Tensor"]


def test_python_wrapper():
    import yirage_ext

    inp = attention_inputs(1, 2, 1, 6, 9, 8, seed=14)
    assert torch.equal(yirage_ext.attention(inp.q, inp.k, inp.v, causal=True), OPS.attention(inp.q, inp.k, inp.v, True))


Q = torch.randn(2, 4, 8, 16)
K = torch.randn(2, 2, 10, 16)
LSE = torch.zeros(2, 4, 8)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: OPS.attention(Q.int(), K, K, False, None), TypeError,
     r"yirage.attention: q must have dtype float32, float16, bfloat16 or float64, got int32$"),
    (lambda: OPS.attention(Q, K.half(), K, False, None), TypeError,
     r"yirage.attention: k must have the dtype of q \(float32\), got float16"),
    (lambda: OPS.attention(Q, K, K.double(), False, None), TypeError, r"v must have the dtype of q \(float32\)"),
    (lambda: OPS.attention(Q, K.to("meta"), K, False, None), RuntimeError,
     r"yirage.attention: k must be on the device of q \(cpu\), got meta"),
    (lambda: OPS.attention(Q[0], K, K, False, None), ValueError,
     r"yirage.attention: q must have 4 dimensions \(B, Hq, Sq, D\), got 3"),
    (lambda: OPS.attention(Q, K[0], K, False, None), ValueError, r"k must have 4 dimensions \(B, Hk, Sk, D\), got 3"),
    (lambda: OPS.attention(Q, K[:1], K[:1], False, None), ValueError,
     r"yirage.attention: k must have the batch size B = 2 and head dim D = 16 of q \[2, 4, 8, 16\], got \[1, 2, 10, 16\]"),
    (lambda: OPS.attention(Q, K[..., :8], K[..., :8], False, None), ValueError, r"k must have the batch size B = 2 and head dim D = 16"),
    (lambda: OPS.attention(Q, K, K[:, :, :9], False, None), ValueError,
     r"yirage.attention: v must have the shape of k \[2, 2, 10, 16\], got \[2, 2, 9, 16\]"),
    (lambda: OPS.attention(Q[:, :3], K, K, False, None), ValueError,
     r"yirage.attention: q must have a number of heads divisible by the heads of k and v \(GQA\), got Hq = 3 query "
     r"heads and Hk = 2 key/value heads"),
    (lambda: OPS.attention(Q, K[:, :0], K[:, :0], False, None), ValueError, r"k must have at least one head"),
    (lambda: OPS.attention(Q[..., :0], K[..., :0], K[..., :0], False, None), ValueError, r"q must have a head dim D >= 1"),
    (lambda: OPS.attention(Q, K, K, False, math.nan), ValueError,
     r"yirage.attention: scale must be a finite number or None, got nan"),
    (lambda: OPS.attention(Q, K, K, False, math.inf), ValueError, r"scale must be a finite number or None, got inf"),
    (lambda: OPS.attention_forward(Q, K, K.half(), False, None), TypeError, r"yirage.attention_forward: v must have"),
    (lambda: OPS.attention_backward(Q[:, :, :7], Q, K, K, Q, LSE, False, None), ValueError,
     r"yirage.attention_backward: grad_out must have the shape of q \[2, 4, 8, 16\], got \[2, 4, 7, 16\]"),
    (lambda: OPS.attention_backward(Q, Q, K, K, Q.half(), LSE, False, None), TypeError,
     r"yirage.attention_backward: out must have the dtype of q \(float32\), got float16"),
    (lambda: OPS.attention_backward(Q, Q, K, K, Q, LSE.double(), False, None), TypeError,
     r"yirage.attention_backward: lse must have dtype float32 \(the accumulation type of float32 inputs\), got float64"),
    (lambda: OPS.attention_backward(Q, Q, K, K, Q, LSE[:, :, :7], False, None), ValueError,
     r"yirage.attention_backward: lse must have shape \(B, Hq, Sq\) = \(2, 4, 8\), got \[2, 4, 7\]"),
    (lambda: OPS.attention_backward(Q, Q, K, K, Q, LSE.to("meta"), False, None), RuntimeError,
     r"yirage.attention_backward: lse must be on the device of q \(cpu\), got meta"),
], ids=["q_dtype", "k_dtype", "v_dtype", "k_device", "q_rank", "k_rank", "batch", "head_dim", "v_shape", "gqa",
        "no_kv_heads", "head_dim_0", "scale_nan", "scale_inf", "forward_op", "grad_shape", "out_dtype", "lse_dtype",
        "lse_shape", "lse_device"])
def test_bad_input_messages(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


@pytest.mark.parametrize("device", ["meta"])
def test_meta_checks(device):
    # the Meta kernel runs the same checks (torch.compile sees them) and gives the same shapes
    q, k = Q.to(device), K.to(device)
    assert OPS.attention(q, k, k, True, None).shape == q.shape
    out, lse = OPS.attention_forward(q, k, k, True, None)
    assert out.shape == q.shape and lse.shape == (2, 4, 8) and lse.dtype == torch.float32
    with pytest.raises(ValueError, match=r"yirage.attention: q must have a number of heads divisible"):
        OPS.attention(q[:, :3], k, k, False, None)
