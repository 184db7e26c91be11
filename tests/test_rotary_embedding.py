"""rotary_embedding and rotary_embedding_backward against the float64 reference (plain PyTorch rotate_half /
rotate_every_two code), for neox and gpt-j pairs, full and partial rotation, GQA head counts, leading dims,
per-sequence tables and the strided layouts models use (q and k as slices of a fused qkv projection)."""
import pytest
import torch
from torch.library import opcheck

from yirage_ext.testing.inputs import rotary_embedding_inputs, rotary_tables
from yirage_ext.testing.reference import assert_close, rotary_embedding_ref

from _helpers import aten_ops_called, assert_grad_close, dtype_id, portable, reference_grads, unaligned

OPS = torch.ops.yirage
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
MODES = pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
# (S, Hq, Hk, D, R): one token and one pair; odd head counts and GQA/MQA; R < D (partial rotary, the rest
# copied); odd R/2 and D (vector tails in both halves); head dims past a vector width and large ones
CASES = [(1, 1, 1, 2, 2), (3, 1, 1, 8, 8), (5, 3, 1, 64, 64), (7, 5, 3, 128, 64), (9, 4, 2, 65, 34),
         (33, 7, 1, 80, 80), (17, 2, 2, 100, 98), (6, 3, 3, 512, 512)]


def case_id(c):
    return "S{}-H{}x{}-D{}-R{}".format(*c)


def rope_grads(inp, interleaved, grads):
    """(q, k, cos, sin) leaves that require grad, our gradients, and the float64 reference gradients."""
    leaves = [t.clone().requires_grad_() for t in (inp.q, inp.k, inp.cos, inp.sin)]
    outs = OPS.rotary_embedding(*leaves, interleaved)
    torch.autograd.backward([o for o, g in zip(outs, grads) if g is not None], [g for g in grads if g is not None])
    ref = reference_grads(lambda *a: rotary_embedding_ref(*a, interleaved), leaves, grads)
    return [t.grad for t in leaves], ref


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@MODES
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_forward_values(target, dtype, interleaved, case):
    s, hq, hk, d, r = case
    inp = rotary_embedding_inputs((s, hq, d), kv_heads=hk, rot_dim=r, dtype=dtype, seed=s + d)
    out_q, out_k = OPS.rotary_embedding(inp.q, inp.k, inp.cos, inp.sin, interleaved)
    assert out_q.dtype == dtype and out_q.shape == inp.q.shape and out_q.is_contiguous()
    assert out_k.dtype == dtype and out_k.shape == inp.k.shape and out_k.is_contiguous()
    ref_q, ref_k = rotary_embedding_ref(inp.q, inp.k, inp.cos, inp.sin, interleaved)
    assert_close(out_q, ref_q, dtype, "q")
    assert_close(out_k, ref_k, dtype, "k")
    # the features past R are copied bit for bit
    assert torch.equal(out_q[..., r:], inp.q[..., r:]) and torch.equal(out_k[..., r:], inp.k[..., r:])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=dtype_id)
@MODES
def test_float32_tables_with_half_inputs(device, dtype, interleaved):
    # long positions: fp32 tables keep angles a half-precision table would round (the reference uses them as given)
    inp = rotary_embedding_inputs((2, 300, 4, 64), kv_heads=2, dtype=dtype, cos_dtype=torch.float32,
                                  per_sequence=True, seed=1)
    out_q, out_k = OPS.rotary_embedding(inp.q, inp.k, inp.cos, inp.sin, interleaved)
    assert out_q.dtype == dtype and out_k.dtype == dtype
    ref_q, ref_k = rotary_embedding_ref(inp.q, inp.k, inp.cos, inp.sin, interleaved)
    assert_close(out_q, ref_q, dtype)
    assert_close(out_k, ref_k, dtype)
    gq = torch.randn(inp.q.shape).to(dtype=dtype, device=device)
    (dq, dk, dcos, dsin), ref = rope_grads(inp, interleaved, [gq, None])
    assert dcos.dtype == torch.float32 and dsin.dtype == torch.float32 and dk is None
    for got, want, what in zip((dq, dcos, dsin), (ref[0], ref[2], ref[3]), ("dq", "dcos", "dsin")):
        assert_grad_close(got, want, dtype, what)


def test_matches_complex_multiplication(device):
    # an independent statement: gpt-j pairs are complex numbers times e^(i theta); neox is gpt-j on the
    # features reordered (0, R/2, 1, R/2 + 1, ...)
    inp = rotary_embedding_inputs((2, 11, 3, 16), kv_heads=1, dtype=torch.float64, per_sequence=True, seed=2)
    rot = torch.polar(torch.ones_like(inp.cos), torch.atan2(inp.sin, inp.cos)).unsqueeze(-2)
    for x, got in zip((inp.q, inp.k), OPS.rotary_embedding(inp.q, inp.k, inp.cos, inp.sin, True)):
        want = torch.view_as_real(torch.view_as_complex(x.reshape(*x.shape[:-1], 8, 2).contiguous()) * rot)
        torch.testing.assert_close(got, want.flatten(-2))
    order = torch.arange(16, device=device).reshape(2, 8).t().flatten()  # neox feature order as gpt-j pairs
    gptj_q, gptj_k = OPS.rotary_embedding(inp.q[..., order], inp.k[..., order], inp.cos, inp.sin, True)
    neox_q, neox_k = OPS.rotary_embedding(inp.q, inp.k, inp.cos, inp.sin, False)
    torch.testing.assert_close(neox_q[..., order], gptj_q)
    torch.testing.assert_close(neox_k[..., order], gptj_k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("table", ["shared", "batch", "inner", "per_sequence", "outer_one"])
@MODES
def test_leading_dims_and_tables(device, dtype, table, interleaved):
    # q (2, 3, S, H, D); cos/sin (S, R/2) or with leading dims that broadcast to (2, 3)
    inp = rotary_embedding_inputs((2, 3, 19, 4, 48), kv_heads=2, rot_dim=32, dtype=dtype, device=device, seed=3)
    lead = {"shared": (), "batch": (2, 1), "inner": (3,), "per_sequence": (2, 3), "outer_one": (1, 1)}[table]
    gen = torch.Generator().manual_seed(4)
    positions = torch.arange(19) + torch.randint(0, 500, (*lead, 1), generator=gen)
    cos, sin = rotary_tables(positions, 32, dtype=dtype, device=device)
    out = OPS.rotary_embedding(inp.q, inp.k, cos, sin, interleaved)
    for got, want in zip(out, rotary_embedding_ref(inp.q, inp.k, cos, sin, interleaved)):
        assert_close(got, want, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_many_tokens(device, dtype):
    # more than 65535 tokens, one head each
    inp = rotary_embedding_inputs((70001, 1, 8), dtype=dtype, device=device, seed=5)
    for interleaved in (False, True):
        out = OPS.rotary_embedding(inp.q, inp.k, inp.cos, inp.sin, interleaved)
        for got, want in zip(out, rotary_embedding_ref(inp.q, inp.k, inp.cos, inp.sin, interleaved)):
            assert_close(got, want, dtype)


@pytest.mark.parametrize("layout", ["qkv", "transposed", "strided", "broadcast"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@MODES
def test_noncontiguous_inputs(target, layout, dtype, interleaved):
    inp = rotary_embedding_inputs((2, 3, 13, 6, 72), kv_heads=2, rot_dim=40, dtype=dtype, layout=layout, seed=6)
    assert not inp.q.is_contiguous() and not inp.k.is_contiguous()
    run = lambda: OPS.rotary_embedding(inp.q, inp.k, inp.cos, inp.sin, interleaved)  # noqa: E731
    out = run()
    for got, want in zip(out, rotary_embedding_ref(inp.q, inp.k, inp.cos, inp.sin, interleaved)):
        assert got.is_contiguous()
        assert_close(got, want, dtype)
    # every layout but the broadcast one (two leading dims that share no stride) is read in place
    assert ("aten::clone" in aten_ops_called(run)) == (layout == "broadcast")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dtype_id)
@MODES
@pytest.mark.parametrize("case", [(3, 2, 1, 8, 8), (5, 3, 1, 65, 34), (4, 2, 2, 128, 128)], ids=case_id)
def test_unaligned_inputs(device, dtype, interleaved, case):
    # q, k, cos, sin and the gradients start one element past an aligned address: no vector load may assume
    # alignment
    s, hq, hk, d, r = case
    inp = rotary_embedding_inputs((s, hq, d), kv_heads=hk, rot_dim=r, dtype=dtype, seed=21)
    q, k, cos, sin = (unaligned(t) for t in (inp.q, inp.k, inp.cos, inp.sin))
    assert q.data_ptr() % 16 != 0 and cos.data_ptr() % 16 != 0
    for got, want in zip(OPS.rotary_embedding(q, k, cos, sin, interleaved),
                         rotary_embedding_ref(q, k, cos, sin, interleaved)):
        assert_close(got, want, dtype)
    gq, gk = (unaligned(torch.randn(t.shape).to(dtype=dtype, device=t.device)) for t in (q, k))
    got = OPS.rotary_embedding_backward(gq, gk, q, k, cos, sin, interleaved, True)
    ref = reference_grads(lambda *a: rotary_embedding_ref(*a, interleaved),
                          [t.clone().requires_grad_() for t in (q, k, cos, sin)], [gq, gk])
    for g, w, what in zip(got, ref, ("dq", "dk", "dcos", "dsin")):
        assert_grad_close(g, w, dtype, what)


@pytest.mark.parametrize("table", ["rows_of_full_table", "stride0_positions", "transposed"])
@MODES
def test_strided_tables(device, table, interleaved):
    inp = rotary_embedding_inputs((9, 3, 32), dtype=torch.float32, seed=7)
    if table == "rows_of_full_table":  # the first half of a Hugging Face style (S, R) table
        cos, sin = (torch.cat((t, t), -1)[:, :16] for t in (inp.cos, inp.sin))
    elif table == "stride0_positions":  # every token at one position (decoding several sequences)
        cos, sin = (t[4:5].expand(9, 16) for t in (inp.cos, inp.sin))
    else:  # last dim not contiguous: read through a copy
        cos, sin = (t.t().contiguous().t() for t in (inp.cos, inp.sin))
    assert not cos.is_contiguous()
    out = OPS.rotary_embedding(inp.q, inp.k, cos, sin, interleaved)
    for got, want in zip(out, rotary_embedding_ref(inp.q, inp.k, cos, sin, interleaved)):
        assert_close(got, want, torch.float32)


def test_rot_dim_zero_copies(device):
    q, k = torch.randn(3, 2, 5, device=device), torch.randn(3, 1, 5, device=device)
    cos = sin = torch.empty(3, 0, device=device)
    out_q, out_k = OPS.rotary_embedding(q, k, cos, sin)
    assert torch.equal(out_q, q) and torch.equal(out_k, k) and out_q.data_ptr() != q.data_ptr()


@pytest.mark.parametrize("q_shape,k_shape,half", [((0, 2, 8), (0, 2, 8), 4), ((4, 0, 8), (4, 0, 8), 4),
                                                  ((0, 3, 2, 8), (0, 3, 1, 8), 4), ((3, 2, 0), (3, 2, 0), 0)],
                         ids=["S0", "H0", "batch0", "D0"])
def test_empty(device, q_shape, k_shape, half):
    q, k = torch.randn(q_shape, device=device), torch.randn(k_shape, device=device)
    cos, sin = torch.rand(q_shape[-3], half, device=device), torch.rand(q_shape[-3], half, device=device)
    out_q, out_k = OPS.rotary_embedding(q, k, cos, sin)
    assert out_q.shape == q.shape and out_k.shape == k.shape
    dq, dk, dcos, dsin = OPS.rotary_embedding_backward(q, k, q, k, cos, sin, False, True)
    assert dq.shape == q.shape and dk.shape == k.shape and dcos.shape == cos.shape and dsin.shape == sin.shape
    assert torch.count_nonzero(dcos) == 0 and torch.count_nonzero(dsin) == 0


def test_empty_heads_rotates_the_other_input(device):
    inp = rotary_embedding_inputs((5, 3, 8), seed=8)
    q0 = inp.q[:, :0]
    out_q, out_k = OPS.rotary_embedding(q0, inp.k, inp.cos, inp.sin)
    assert out_q.shape == q0.shape
    assert_close(out_k, rotary_embedding_ref(q0, inp.k, inp.cos, inp.sin)[1], torch.float32)


GRAD_CASES = [((1, 1, 1, 2, 2), (), False), ((7, 5, 3, 64, 64), (), False), ((9, 4, 2, 65, 34), (2,), True),
              ((33, 8, 2, 128, 64), (3,), False)]


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@MODES
@pytest.mark.parametrize("case,lead,per_sequence", GRAD_CASES, ids=["tiny", "gqa", "partial_per_seq", "batch_shared"])
def test_gradients(target, dtype, interleaved, case, lead, per_sequence):
    # every floating input: q and k, and cos and sin (summed over heads and, for "batch_shared", over the batch)
    s, hq, hk, d, r = case
    inp = rotary_embedding_inputs((*lead, s, hq, d), kv_heads=hk, rot_dim=r, dtype=dtype, per_sequence=per_sequence,
                                  seed=9)
    gen = torch.Generator().manual_seed(10)
    grads = [torch.randn(t.shape, generator=gen).to(dtype=dtype, device=t.device) for t in (inp.q, inp.k)]
    got, ref = rope_grads(inp, interleaved, grads)
    for g, w, what in zip(got, ref, ("dq", "dk", "dcos", "dsin")):
        assert g.dtype == dtype and g.shape == w.shape
        assert_grad_close(g, w, dtype, what)


@pytest.mark.parametrize("used", ["q", "k"])
@MODES
def test_gradients_one_output_used(device, used, interleaved):
    inp = rotary_embedding_inputs((2, 6, 4, 24), kv_heads=2, rot_dim=16, per_sequence=True, seed=11)
    g = torch.randn(inp.q.shape if used == "q" else inp.k.shape, device=device)
    got, ref = rope_grads(inp, interleaved, [g, None] if used == "q" else [None, g])
    unused = 1 if used == "q" else 0
    assert got[unused] is None and ref[unused] is None
    for i, what in [(1 - unused, "d" + used), (2, "dcos"), (3, "dsin")]:
        assert_grad_close(got[i], ref[i], torch.float32, what)


def test_gradients_fixed_tables_and_expanded_grad(device):
    # cos/sin without grad (the usual training case); .sum() sends a stride-0 upstream gradient
    inp = rotary_embedding_inputs((4, 5, 3, 40), kv_heads=1, rot_dim=24, seed=12)
    q, k = inp.q.clone().requires_grad_(), inp.k.clone().requires_grad_()
    out_q, out_k = OPS.rotary_embedding(q, k, inp.cos, inp.sin, False)
    (out_q.sum() + out_k.sum()).backward()
    ref = reference_grads(lambda a, b: rotary_embedding_ref(a, b, inp.cos, inp.sin), [q, k],
                          [torch.ones(q.shape, device=device), torch.ones(k.shape, device=device)])
    assert_grad_close(q.grad, ref[0], torch.float32, "dq")
    assert_grad_close(k.grad, ref[1], torch.float32, "dk")


@MODES
def test_gradcheck(device, interleaved):
    inp = rotary_embedding_inputs((2, 3, 2, 7), kv_heads=1, rot_dim=4, dtype=torch.float64, per_sequence=True,
                                  seed=13)
    leaves = [t.clone().requires_grad_() for t in (inp.q, inp.k, inp.cos, inp.sin)]
    assert torch.autograd.gradcheck(lambda *a: OPS.rotary_embedding(*a, interleaved), leaves)
    shared = rotary_embedding_inputs((2, 3, 2, 6), kv_heads=3, dtype=torch.float64, seed=14)  # cos (S, R/2) over B
    leaves = [t.clone().requires_grad_() for t in (shared.q, shared.k, shared.cos, shared.sin)]
    assert torch.autograd.gradcheck(lambda *a: OPS.rotary_embedding(*a, interleaved), leaves)
    assert torch.autograd.gradcheck(lambda a: OPS.rotary_embedding(a, shared.k, shared.cos, shared.sin, interleaved),
                                    (leaves[0],))


def opcheck_samples():
    yield rotary_embedding_inputs((5, 3, 8), kv_heads=1, dtype=torch.float32, seed=15), False
    yield rotary_embedding_inputs((2, 4, 2, 65), rot_dim=34, dtype=torch.bfloat16, per_sequence=True, seed=16), True
    yield rotary_embedding_inputs((3, 1, 4), dtype=torch.float64, layout="qkv", seed=17), True
    yield rotary_embedding_inputs((3, 4, 2, 16), kv_heads=2, rot_dim=8, dtype=torch.float16, cos_dtype=torch.float32,
                                  seed=18), False


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
def test_opcheck(device, requires_grad):
    for inp, interleaved in opcheck_samples():
        q, k, cos, sin = (t.clone().requires_grad_(requires_grad) for t in (inp.q, inp.k, inp.cos, inp.sin))
        opcheck(OPS.rotary_embedding.default, (q, k, cos, sin, interleaved))
        opcheck(OPS.rotary_embedding.default, (q, k, cos.detach(), sin.detach(), interleaved))
        if not requires_grad:
            gq, gk = torch.randn_like(q), torch.randn_like(k)
            for args in [(gq, gk, q, k, True), (gq, gk, None, None, False), (None, gk, None, k, True),
                         (gq, None, q, None, True), (None, None, q, k, True)]:
                opcheck(OPS.rotary_embedding_backward.default, (*args[:4], cos, sin, interleaved, args[4]))


def test_compile_fullgraph_no_recompile(device):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    fn = lambda q, k, c, s: [o * 2.0 for o in OPS.rotary_embedding(q, k, c, s, False)]  # noqa: E731
    compiled = torch.compile(fn, backend=counter, fullgraph=True, dynamic=True)
    for batch, seq in ((3, 5), (5, 9), (6, 17)):  # first sizes all distinct (no duck-sizing guards)
        inp = rotary_embedding_inputs((batch, seq, 4, 24), kv_heads=2, rot_dim=16, per_sequence=True, seed=seq)
        leaves = [t.clone().requires_grad_() for t in (inp.q, inp.k, inp.cos, inp.sin)]
        out = compiled(*leaves)
        want = [o * 2.0 for o in rotary_embedding_ref(*leaves)]
        for got, w in zip(out, want):
            assert_close(got, w, torch.float32)
        (out[0].sum() + out[1].sum()).backward()
        ref = reference_grads(lambda *a: tuple(o * 2.0 for o in rotary_embedding_ref(*a)), leaves,
                              [torch.ones(inp.q.shape, device=device), torch.ones(inp.k.shape, device=device)])
        for t, w, what in zip(leaves, ref, ("dq", "dk", "dcos", "dsin")):
            assert_grad_close(t.grad, w, torch.float32, what)
    assert counter.frame_count == 1, f"recompiled across shapes: {counter.frame_count} frames"


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@MODES
def test_portable_kernel(dtype, interleaved):
    inp = rotary_embedding_inputs((2, 13, 3, 40), kv_heads=1, rot_dim=24, dtype=dtype, layout="qkv",
                                  per_sequence=True, seed=19)
    args = (inp.q, inp.k, inp.cos, inp.sin, interleaved)
    assert "aten::mul" in aten_ops_called(lambda: portable(OPS.rotary_embedding, *args))
    assert "aten::mul" not in aten_ops_called(lambda: OPS.rotary_embedding(*args))
    for got, want in zip(portable(OPS.rotary_embedding, *args), rotary_embedding_ref(*args)):
        assert_close(got, want, dtype)
    gen = torch.Generator().manual_seed(20)
    gq, gk = torch.randn(inp.q.shape, generator=gen).to(dtype), torch.randn(inp.k.shape, generator=gen).to(dtype)
    got = portable(OPS.rotary_embedding_backward, gq, gk, inp.q, inp.k, inp.cos, inp.sin, interleaved, True)
    ref = reference_grads(lambda *a: rotary_embedding_ref(*a, interleaved),
                          [t.clone().requires_grad_() for t in (inp.q, inp.k, inp.cos, inp.sin)], [gq, gk])
    for g, w, what in zip(got, ref, ("dq", "dk", "dcos", "dsin")):
        assert_grad_close(g, w, dtype, "portable " + what)
    # an absent gradient: a (0,) result, and cos/sin gradients from the other output only
    dq, dk, dcos, _ = portable(OPS.rotary_embedding_backward, None, gk, None, inp.k, inp.cos, inp.sin, interleaved,
                               True)
    ref = reference_grads(lambda *a: rotary_embedding_ref(*a, interleaved),
                          [t.clone().requires_grad_() for t in (inp.q, inp.k, inp.cos, inp.sin)], [None, gk])
    assert dq.shape == (0,)
    assert_grad_close(dk, ref[1], dtype, "portable dk alone")
    assert_grad_close(dcos, ref[2], dtype, "portable dcos from k alone")


def test_dispatch_keys_and_schema():
    for op in ("rotary_embedding", "rotary_embedding_backward"):
        for key in ("CPU", "Meta", "MPS", "PrivateUse1"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", key), (op, key)
        assert torch.Tag.pt2_compliant_tag in getattr(OPS, op).default.tags
    assert torch._C._dispatch_has_kernel_for_dispatch_key("yirage::rotary_embedding", "Autograd")
    schema = OPS.rotary_embedding.default._schema
    args = [(a.name, str(a.type), a.default_value) for a in schema.arguments]
    # DESIGN.md: rotary_embedding(Tensor q, Tensor k, Tensor cos, Tensor sin, bool interleaved=False)
    #   -> (Tensor, Tensor)
    assert args == [("q", "Tensor", None), ("k", "Tensor", None), ("cos", "Tensor", None), ("sin", "Tensor", None),
                    ("interleaved", "bool", False)]
    assert [str(r.type) for r in schema.returns] == ["Tensor", "Tensor"]


Q = torch.randn(2, 5, 4, 16)
K = torch.randn(2, 5, 2, 16)
C = torch.rand(5, 8)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: OPS.rotary_embedding(Q.int(), K, C, C), TypeError,
     r"yirage.rotary_embedding: q must have dtype float32, float16, bfloat16 or float64, got int32$"),
    (lambda: OPS.rotary_embedding(Q, K.double(), C, C), TypeError,
     r"yirage.rotary_embedding: k must have the dtype of q \(float32\), got float64$"),
    (lambda: OPS.rotary_embedding(Q, K, C.half(), C.half()), TypeError,
     r"yirage.rotary_embedding: cos must have the dtype of q \(float32\), got float16$"),
    (lambda: OPS.rotary_embedding(Q.bfloat16(), K.bfloat16(), C.half(), C.half()), TypeError,
     r"yirage.rotary_embedding: cos must have the dtype of q \(bfloat16\) or float32, got float16$"),
    (lambda: OPS.rotary_embedding(Q, K, C, C.double()), TypeError,
     r"yirage.rotary_embedding: sin must have the dtype of cos \(float32\), got float64$"),
    (lambda: OPS.rotary_embedding(Q[0, 0], K[0, 0], C, C), ValueError,
     r"yirage.rotary_embedding: q must have at least 3 dimensions \(..., S, H, D\), got \[4, 16\]$"),
    (lambda: OPS.rotary_embedding(Q, K[:, :4], C, C), ValueError,
     r"yirage.rotary_embedding: k must have shape \(..., S, H, D\) with the leading dims, S and D of q "
     r"\[2, 5, 4, 16\] \(any H\), got \[2, 4, 2, 16\]$"),
    (lambda: OPS.rotary_embedding(Q, K[:1], C, C), ValueError, r"k must have shape .* got \[1, 5, 2, 16\]$"),
    (lambda: OPS.rotary_embedding(Q, K[..., :8], C, C), ValueError, r"k must have shape .* got \[2, 5, 2, 8\]$"),
    (lambda: OPS.rotary_embedding(Q, K[0], C, C), ValueError, r"k must have shape .* got \[5, 2, 16\]$"),
    (lambda: OPS.rotary_embedding(Q, K, C[:4], C[:4]), ValueError,
     r"yirage.rotary_embedding: cos must have shape \(S, R/2\) or \(..., S, R/2\) with S = 5 and leading dims that "
     r"broadcast to those of q \[2, 5, 4, 16\], got \[4, 8\]$"),
    (lambda: OPS.rotary_embedding(Q, K, torch.rand(5, 9), torch.rand(5, 9)), ValueError,
     r"yirage.rotary_embedding: cos must have shape \(..., S, R/2\) with R <= D = 16 \(the head dim of q\), "
     r"got \[5, 9\] \(R = 18\)$"),
    (lambda: OPS.rotary_embedding(Q, K, torch.rand(3, 5, 8), torch.rand(3, 5, 8)), ValueError,
     r"cos must have shape \(S, R/2\) or \(..., S, R/2\) .* got \[3, 5, 8\]$"),
    (lambda: OPS.rotary_embedding(Q, K, torch.rand(1, 2, 5, 8), torch.rand(1, 2, 5, 8)), ValueError,
     r"cos must have shape \(S, R/2\) or \(..., S, R/2\) .* got \[1, 2, 5, 8\]$"),
    (lambda: OPS.rotary_embedding(Q, K, torch.rand(8), torch.rand(8)), ValueError,
     r"cos must have shape .* got \[8\]$"),
    (lambda: OPS.rotary_embedding(Q, K, C, C[:, :4]), ValueError,
     r"yirage.rotary_embedding: sin must have the shape of cos \[5, 8\], got \[5, 4\]$"),
    (lambda: OPS.rotary_embedding(Q, K, C.to("meta"), C), RuntimeError,
     r"yirage.rotary_embedding: cos must be on the device of q \(cpu\), got meta$"),
    (lambda: OPS.rotary_embedding(Q, K, C, C.to("meta")), RuntimeError,
     r"yirage.rotary_embedding: sin must be on the device of q \(cpu\), got meta$"),
    (lambda: OPS.rotary_embedding(Q, K.to("meta"), C, C), RuntimeError,
     r"yirage.rotary_embedding: k must be on the device of q \(cpu\), got meta$"),
    (lambda: OPS.rotary_embedding_backward(Q[:, :4], K, Q, K, C, C, False, True), ValueError,
     r"yirage.rotary_embedding_backward: .*must have shape \(..., S, H, D\) with the leading dims, S and D of grad_q"),
    (lambda: OPS.rotary_embedding_backward(Q[:, :, :3], K, Q, K, C, C, False, True), ValueError,
     r"yirage.rotary_embedding_backward: grad_q must have the shape of q \[2, 5, 4, 16\], got \[2, 5, 3, 16\]$"),
    (lambda: OPS.rotary_embedding_backward(Q, K, None, K, C, C, False, True), ValueError,
     r"yirage.rotary_embedding_backward: q must be a tensor when grad_q is given and cos_sin_grad is true, got None$"),
    (lambda: OPS.rotary_embedding_backward(None, K, Q, None, C, C, False, True), ValueError,
     r"yirage.rotary_embedding_backward: k must be a tensor when grad_k is given and cos_sin_grad is true, got None$"),
    (lambda: OPS.rotary_embedding_backward(Q, K.half(), None, None, C, C, False, False), TypeError,
     r"yirage.rotary_embedding_backward: grad_k must have the dtype of grad_q \(float32\), got float16$"),
    (lambda: OPS.rotary_embedding_backward(None, None, None, None, C, C[:2], False, True), ValueError,
     r"yirage.rotary_embedding_backward: sin must have the shape of cos \[5, 8\], got \[2, 8\]$"),
], ids=["q_dtype", "k_dtype", "cos_dtype", "cos_dtype_half", "sin_dtype", "q_dims", "k_seq", "k_batch", "k_head_dim",
        "k_dims", "cos_seq", "rot_dim_gt_head_dim", "cos_lead_mismatch", "cos_more_dims", "cos_1d", "sin_shape",
        "cos_device", "sin_device", "k_device", "grad_seq", "grad_q_shape", "bwd_missing_q", "bwd_missing_k",
        "bwd_grad_dtype", "bwd_tables_only"])
def test_bad_input_messages(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
