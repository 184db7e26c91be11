"""linear, linear_forward and linear_backward against the float64 reference. GEMM outputs are compared with
gemm_tolerance(dtype, K): the fp32 atol grows as sqrt(K / 64) (K-term sums), bf16/fp16 are bounded by
output rounding (see reference.py)."""
import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

from yirage_ext.testing.inputs import linear_inputs
from yirage_ext.testing.reference import ACTIVATIONS, activation_ref, assert_close, assert_gemm_close, linear_ref

from conftest import HAS_CUDA
from _helpers import aten_ops_called, assert_grad_close, dtype_id, portable, reference_grads, run_python, unaligned

OPS = torch.ops.yirage
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# (M, K, N): ones, odd, decode rows (M = 1), K = 1, non-powers of 2, larger than BLAS and epilogue blocks
SHAPES = [(1, 1, 1), (3, 5, 7), (1, 1024, 769), (17, 1, 33), (37, 129, 255), (300, 768, 1000)]


def saved_for(act, out, pre):
    """What linear_backward reads act' from: z for gelu/gelu_tanh/silu, the output for relu."""
    return out if act == "relu" else (pre if pre.numel() or act != "none" else None)


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_forward_values(target, dtype, m, k, n, act):
    inp = linear_inputs((m, k), n, dtype, seed=m + k + n)
    for bias in (inp.bias, None):
        y = OPS.linear(inp.x, inp.weight, bias, act)
        assert y.dtype == dtype and y.shape == (m, n) and y.is_contiguous()
        assert_gemm_close(y, linear_ref(inp.x, inp.weight, bias, act), k, dtype, f"bias={bias is not None}")


@pytest.mark.parametrize("act", ACTIVATIONS)
def test_matches_torch(act):
    inp = linear_inputs((5, 7, 96), 33, torch.float32, seed=1)
    torch.testing.assert_close(OPS.linear(inp.x, inp.weight, inp.bias, act),
                               activation_ref(F.linear(inp.x, inp.weight, inp.bias), act))


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("act", ["none", "gelu", "silu"])
def test_decode_shapes(device, dtype, act):
    # one token (M = 1) and a few (M = 16) through a wide layer
    for m in (1, 16):
        inp = linear_inputs((m, 2048), 1536, dtype, seed=m)
        assert_gemm_close(OPS.linear(inp.x, inp.weight, inp.bias, act),
                          linear_ref(inp.x, inp.weight, inp.bias, act), 2048, dtype)


# Few rows: on CUDA (fp16/bf16, K a multiple of 8, sm_80+) one kernel with the bias and activation in its
# epilogue, up to 16 rows (17: cuBLASLt again); N = 1, 15 and 50 leave partial blocks of 16 columns; K = 8 is less
# than one step of 32, 4104 ends in a partial step.
@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=dtype_id)
def test_skinny_shapes(device, dtype, act):
    # N = 5000 and 13000: the kernel's 32- and 16-column launch shapes for many columns (on a GPU of 132 SMs)
    for m, k, n in [(1, 8, 1), (7, 40, 15), (9, 136, 50), (16, 4104, 50), (17, 264, 33), (5, 72, 5000), (3, 48, 13000)]:
        inp = linear_inputs((m, k), n, dtype, seed=m * n + k)
        for bias in (inp.bias, None):
            what = f"M={m} K={k} N={n} bias={bias is not None}"
            want = linear_ref(inp.x, inp.weight, bias, act)
            assert_gemm_close(OPS.linear(inp.x, inp.weight, bias, act), want, k, dtype, what)
            out, pre = OPS.linear_forward(inp.x, inp.weight, bias, act)
            assert_gemm_close(out, want, k, dtype, what)
            if act in ("gelu", "gelu_tanh", "silu"):
                assert_gemm_close(pre, linear_ref(inp.x, inp.weight, bias, "none"), k, dtype, what + " pre")
        # rows of x and weight further apart than K (slices of wider tensors): read in place
        wide_x = torch.randn(m, k + 24, dtype=dtype, device=device)
        wide_w = torch.randn(n, k + 8, dtype=dtype, device=device) / k ** 0.5
        x, w = wide_x[:, 8:8 + k], wide_w[:, :k]
        assert_gemm_close(OPS.linear(x, w, inp.bias, act), linear_ref(x, w, inp.bias, act), k, dtype, "strided")


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU and yirage's CUDA kernels")
def test_skinny_rows_setting(monkeypatch):
    # YIRAGE_LINEAR_SKINNY_MAX_ROWS=0 sends few-row products to cuBLASLt (same results); a bad value is a clear error
    code = """
import torch, yirage_ext
from yirage_ext.testing.inputs import linear_inputs
from yirage_ext.testing.reference import assert_gemm_close, linear_ref
inp = linear_inputs((3, 264), 50, torch.bfloat16, device="cuda", seed=3)
y = torch.ops.yirage.linear(inp.x, inp.weight, inp.bias, "gelu")
assert_gemm_close(y, linear_ref(inp.x, inp.weight, inp.bias, "gelu"), 264, torch.bfloat16)
print("ok")
"""
    monkeypatch.setenv("YIRAGE_LINEAR_SKINNY_MAX_ROWS", "0")
    r = run_python(code)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    monkeypatch.setenv("YIRAGE_LINEAR_SKINNY_MAX_ROWS", "four")
    r = run_python(code)
    assert r.returncode != 0 and "YIRAGE_LINEAR_SKINNY_MAX_ROWS must be an integer >= 0, got 'four'" in r.stderr, r.stderr


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("x_shape", [(2, 3, 96), (4, 1, 5, 64), (96,), (1, 1, 40)])
def test_leading_dims(device, dtype, x_shape):
    inp = linear_inputs(x_shape, 50, dtype, seed=2)
    y = OPS.linear(inp.x, inp.weight, inp.bias, "gelu_tanh")
    assert y.shape == (*x_shape[:-1], 50)
    assert_gemm_close(y, linear_ref(inp.x, inp.weight, inp.bias, "gelu_tanh"), x_shape[-1], dtype)


@pytest.mark.parametrize("layout", ["transposed", "strided", "broadcast"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("act", ["relu", "silu"])
def test_noncontiguous_inputs(target, layout, dtype, act):
    inp = linear_inputs((4, 60, 96), 80, dtype, layout=layout, seed=3)
    assert not inp.x.is_contiguous()
    assert layout == "broadcast" or not inp.weight.is_contiguous()
    y = OPS.linear(inp.x, inp.weight, inp.bias, act)
    assert y.is_contiguous()
    assert_gemm_close(y, linear_ref(inp.x, inp.weight, inp.bias, act), 96, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("act", ["none", "gelu_tanh", "silu"])
@pytest.mark.parametrize("m,k,n", [(3, 5, 7), (37, 129, 65)])
def test_unaligned_inputs(device, dtype, act, m, k, n):
    # x, weight, bias and the gradient start one element past an aligned address (as a view at offset 1 does)
    inp = linear_inputs((m, k), n, dtype, seed=12)
    x, w, b = (unaligned(t).requires_grad_() for t in (inp.x, inp.weight, inp.bias))
    assert x.data_ptr() % 16 != 0 and w.data_ptr() % 16 != 0 and b.data_ptr() % 16 != 0
    y = OPS.linear(x, w, b, act)
    assert_gemm_close(y, linear_ref(x, w, b, act), k, dtype)
    g = unaligned(torch.randn(m, n).to(dtype=dtype, device=device))
    y.backward(g)
    ref = reference_grads(lambda p, q, r: linear_ref(p, q, r, act), [x, w, b], [g])
    for got, want, what in zip((x.grad, w.grad, b.grad), ref, ("dx", "dweight", "dbias")):
        assert_grad_close(got, want, dtype, what)


def test_broadcast_weight_and_bias(device):
    # stride-0 weight rows and bias (expanded views), and a bias slice with stride 2
    x = torch.randn(7, 64, device=device)
    w = (torch.randn(1, 64, device=device) / 8).expand(30, 64)
    for b in (torch.randn(1, device=device).expand(30), torch.randn(60, device=device)[::2]):
        assert_gemm_close(OPS.linear(x, w, b, "gelu"), linear_ref(x, w, b, "gelu"), 64, torch.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_activation_edges(device, dtype, act):
    # K = 0: z is exactly the bias, so this checks the epilogue's activation against the float64 one on
    # special and large values (NaN and infinities included: gelu/silu of -inf are NaN, as in torch)
    special = [0.0, 1e-3, -1e-3, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 5.5, -5.5, 12.0, -12.0, 30.0, -30.0, 100.0, -100.0,
               float("inf"), float("-inf"), float("nan")]
    b = torch.tensor(special, dtype=torch.float64).to(dtype=dtype, device=device)
    x, w = torch.randn(3, 0, dtype=dtype, device=device), torch.randn(len(special), 0, dtype=dtype, device=device)
    y = OPS.linear(x, w, b, act)
    assert_close(y, activation_ref(b.double(), act).expand(3, -1), dtype)
    # the derivative: grad_bias = sum over rows of act'(z)
    b = b[:-3].clone().requires_grad_()  # finite values
    OPS.linear(x, w[:-3], b, act).sum().backward()
    ref = reference_grads(lambda c: activation_ref(c, act), [b], [torch.full((len(b),), 3.0, device=device)])
    assert_grad_close(b.grad, ref[0], dtype, "dbias")


@pytest.mark.parametrize("x_shape,n", [((0, 5), 4), ((3, 5), 0), ((3, 0), 4), ((2, 0, 5), 4), ((0,), 3)])
@pytest.mark.parametrize("act", ["none", "gelu"])
def test_empty(device, x_shape, n, act):
    x = torch.randn(x_shape, device=device)
    w = torch.randn(n, x_shape[-1], device=device)
    b = torch.randn(n, device=device)
    y = OPS.linear(x, w, b, act)
    assert y.shape == (*x_shape[:-1], n)
    assert_close(y, linear_ref(x, w, b, act), torch.float32)  # K = 0: act(bias) on every row
    xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))
    OPS.linear(xg, wg, bg, act).sum().backward()
    ref = reference_grads(lambda p, q, r: linear_ref(p, q, r, act), [xg, wg, bg], [torch.ones(y.shape, device=device)])
    for got, want in zip((xg.grad, wg.grad, bg.grad), ref):
        assert got.shape == want.shape
        if want.numel() > 0:  # zeros where a sum over no rows or no features
            assert_grad_close(got, want, torch.float32, "empty")


# fp32 forward and backward through the library's own GEMM on AMD CPUs with AVX-512 (x @ weight.T packs the
# weight by 16 x 16 transposes; grad_weight = grad^T x reads A transposed): sizes past its blocks, and the
# few-rows path
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("x_shape,n", [((7, 600), 1100), ((300, 1030), 130), ((2, 40, 520), 90)])
def test_fp32_blocked_gemm(isa, layout, x_shape, n):
    inp = linear_inputs(x_shape, n, torch.float32, layout=layout, seed=12)
    x, w, b = (t.clone().requires_grad_() for t in (inp.x, inp.weight, inp.bias))
    y = OPS.linear(x, w, b, "gelu")
    assert_gemm_close(y, linear_ref(inp.x, inp.weight, inp.bias, "gelu"), x_shape[-1], torch.float32)
    g = torch.randn(y.shape)
    y.backward(g)
    ref = reference_grads(lambda p, q, r: linear_ref(p, q, r, "gelu"), [x, w, b], [g])
    for got, want, what in zip((x.grad, w.grad, b.grad), ref, ("dx", "dw", "db")):
        assert_grad_close(got, want, torch.float32, what)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("x_shape,n", [((1, 1), 1), ((2, 19, 65), 33), ((300, 256), 200)])
def test_gradients(target, dtype, act, x_shape, n):
    inp = linear_inputs(x_shape, n, dtype, seed=4)
    for with_bias in (True, False):
        x, w = inp.x.clone().requires_grad_(), inp.weight.clone().requires_grad_()
        b = inp.bias.clone().requires_grad_() if with_bias else None
        y = OPS.linear(x, w, b, act)
        g = torch.randn(y.shape).to(dtype=dtype, device=y.device)
        y.backward(g)
        if act == "relu":
            # relu' jumps at 0: take the mask from our forward (z rounded near 0 may land on either side, and
            # one flipped element changes a whole row of dx); the forward's values are test_forward_values'
            mask = (y.detach() > 0).double()
            ref = reference_grads(lambda p, q, r: linear_ref(p, q, r) * mask, [x, w, b], [g])
        else:
            ref = reference_grads(lambda p, q, r: linear_ref(p, q, r, act), [x, w, b], [g])
        assert_grad_close(x.grad, ref[0], dtype, "dx")
        assert_grad_close(w.grad, ref[1], dtype, "dweight")
        if with_bias:
            assert_grad_close(b.grad, ref[2], dtype, "dbias")


def test_gradient_subsets_and_broadcast_grad(device):
    # only some inputs require grad; the upstream gradient is an expanded (stride-0) tensor
    inp = linear_inputs((8, 3, 40), 24, torch.float32, seed=5)
    for wanted in ((True, False, False), (False, True, False), (False, False, True)):
        x, w, b = (t.clone().requires_grad_(r) for t, r in zip((inp.x, inp.weight, inp.bias), wanted))
        OPS.linear(x, w, b, "silu").sum().backward()
        ref = reference_grads(lambda p, q, r: linear_ref(p, q, r, "silu"), [x, w, b],
                              [torch.ones(8, 3, 24, device=device)])
        for t, r, want in zip((x, w, b), wanted, ref):
            assert (t.grad is not None) == r
            if r:
                assert_grad_close(t.grad, want, torch.float32, "grad")


def test_backward_op_flags(device):
    inp = linear_inputs((6, 40), 24, torch.float32, seed=6)
    out, pre = OPS.linear_forward(inp.x, inp.weight, inp.bias, "gelu")
    g = torch.randn(6, 24, device=device)
    dx, dw, db = OPS.linear_backward(g, inp.x, inp.weight, pre, "gelu", False, True, False)
    assert dx.shape == (0,) and dw.shape == (24, 40) and db.shape == (0,)
    ref = reference_grads(lambda p, q, r: linear_ref(p, q, r, "gelu"),
                          [t.clone().requires_grad_() for t in (inp.x, inp.weight, inp.bias)], [g])
    assert_grad_close(dw, ref[1], torch.float32, "dweight")
    # what linear_forward saves: z = x W^T + b for gelu/gelu_tanh/silu, nothing for none/relu
    assert_gemm_close(pre, linear_ref(inp.x, inp.weight, inp.bias, "none"), 40, torch.float32)
    assert OPS.linear_forward(inp.x, inp.weight, inp.bias, "relu")[1].shape == (0,)
    assert OPS.linear_forward(inp.x, inp.weight, None, "none")[1].shape == (0,)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("m,k,n", [(64, 512, 1024), (700, 300, 96)])
def test_forward_op_saves_pre(device, dtype, act, m, k, n):
    # products this size are split over threads (by columns, then by rows): each block writes its part of z
    inp = linear_inputs((m, k), n, dtype, seed=11)
    out, pre = OPS.linear_forward(inp.x, inp.weight, inp.bias, act)
    assert_gemm_close(out, linear_ref(inp.x, inp.weight, inp.bias, act), k, dtype)
    if act in ("gelu", "gelu_tanh", "silu"):
        assert_gemm_close(pre, linear_ref(inp.x, inp.weight, inp.bias, "none"), k, dtype)
    else:
        assert pre.shape == (0,)


def test_gradcheck(device):
    x = torch.randn(3, 2, 7, dtype=torch.float64, device=device, requires_grad=True)
    w = torch.randn(5, 7, dtype=torch.float64, device=device, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, device=device, requires_grad=True)
    for act in ACTIVATIONS:
        assert torch.autograd.gradcheck(lambda p, q, r: OPS.linear(p, q, r, act), (x, w, b))
        assert torch.autograd.gradcheck(lambda p, q: OPS.linear(p, q, None, act), (x, w))


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
def test_opcheck(device, requires_grad):
    cases = [((3, 8), 5, torch.float32, "gelu"), ((2, 3, 40), 24, torch.bfloat16, "silu"),
             ((5,), 6, torch.float64, "relu"), ((4, 33), 20, torch.float16, "gelu_tanh"), ((2, 8), 3, torch.float32, "none")]
    for x_shape, n, dtype, act in cases:
        inp = linear_inputs(x_shape, n, dtype, seed=7)
        x, w, b = (t.clone().requires_grad_(requires_grad) for t in (inp.x, inp.weight, inp.bias))
        opcheck(OPS.linear.default, (x, w, b, act))
        opcheck(OPS.linear.default, (x, w, None, act))
        if not requires_grad:
            opcheck(OPS.linear_forward.default, (x, w, b, act))
            out, pre = OPS.linear_forward(x, w, b, act)
            g = torch.randn(out.shape).to(dtype=dtype, device=device)
            opcheck(OPS.linear_backward.default, (g, x, w, saved_for(act, out, pre), act, True, True, True))
            opcheck(OPS.linear_backward.default, (g, x, w, saved_for(act, out, pre), act, False, True, False))


def test_compile_fullgraph_no_recompile(device):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda x, w, b: OPS.linear(x, w, b, "gelu") * 2.0, backend=counter, fullgraph=True,
                             dynamic=True)
    inp = linear_inputs((1, 48), 40, torch.float32, seed=8)
    w, b = inp.weight.clone().requires_grad_(), inp.bias.clone().requires_grad_()
    for batch in (2, 3, 7):
        x = torch.randn(batch, 5, 48, device=device, requires_grad=True)
        out = compiled(x, w, b)
        assert_gemm_close(out, linear_ref(x, w, b, "gelu") * 2.0, 48, torch.float32)
        out.sum().backward()
        ref = reference_grads(lambda p, q, r: linear_ref(p, q, r, "gelu") * 2.0, [x, w, b],
                              [torch.ones(batch, 5, 40, device=device)])
        for got, want, what in zip((x.grad, w.grad, b.grad), ref, ("dx", "dweight", "dbias")):
            assert_grad_close(got, want, torch.float32, what)
        w.grad = b.grad = None
    assert counter.frame_count == 1, f"recompiled across batch sizes: {counter.frame_count} frames"


def test_epilogue_is_fused():
    # the CPU kernel allocates the output once and applies bias and activation itself: no separate
    # activation, add or linear/addmm op runs
    inp = linear_inputs((64, 256), 128, torch.float32, seed=9)
    separate = {"aten::gelu", "aten::silu", "aten::relu", "aten::add", "aten::add_", "aten::addmm", "aten::linear",
                "aten::empty_like", "aten::clone", "aten::copy_"}
    for act in ACTIVATIONS:
        called = aten_ops_called(lambda: OPS.linear(inp.x, inp.weight, inp.bias, act))
        assert not called & separate, (act, called & separate)
        assert [n for n in called if n.startswith("aten::empty")] == ["aten::empty"], called


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("act", ["none", "relu", "gelu_tanh"])
def test_portable_kernel(dtype, act):
    inp = linear_inputs((3, 37, 65), 19, dtype, layout="strided", seed=10)
    x, w, b = inp.x, inp.weight, inp.bias
    assert "aten::linear" in aten_ops_called(lambda: portable(OPS.linear, x, w, b, act))
    assert "aten::linear" not in aten_ops_called(lambda: OPS.linear(x, w, b, act))
    y = portable(OPS.linear, x, w, b, act)
    assert y.dtype == dtype and y.is_contiguous()
    assert_gemm_close(y, linear_ref(x, w, b, act), 65, dtype)
    out, pre = portable(OPS.linear_forward, x, w, b, act)
    assert torch.equal(out, y)
    g = torch.randn(out.shape).to(dtype)
    dx, dw, db = portable(OPS.linear_backward, g, x, w, saved_for(act, out, pre), act, True, True, True)
    ref = reference_grads(lambda p, q, r: linear_ref(p, q, r, act),
                          [t.clone().requires_grad_() for t in (x, w, b)], [g])
    for got, want, what in zip((dx, dw, db), ref, ("dx", "dweight", "dbias")):
        assert_grad_close(got, want, dtype, "portable " + what)


def test_dispatch_keys_and_schema():
    for op in ("linear", "linear_forward", "linear_backward"):
        for key in ("CPU", "Meta", "MPS", "PrivateUse1"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", key), (op, key)
        assert torch.Tag.pt2_compliant_tag in getattr(OPS, op).default.tags
    assert torch._C._dispatch_has_kernel_for_dispatch_key("yirage::linear", "Autograd")
    # DESIGN.md: linear(Tensor x, Tensor weight, Tensor? bias=None, str activation="none") -> Tensor
    args = [(a.name, str(a.type), a.default_value) for a in OPS.linear.default._schema.arguments]
    assert args == [("x", "Tensor", None), ("weight", "Tensor", None), ("bias", "Optional[Tensor]", None),
                    ("activation", "str", "none")]


X = torch.randn(4, 16)
W = torch.randn(8, 16)
B = torch.randn(8)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: OPS.linear(X.int(), W.int(), None, "none"), TypeError,
     r"yirage.linear: x must have dtype float32, float16, bfloat16 or float64, got int32$"),
    (lambda: OPS.linear(X, W.half(), None, "none"), TypeError,
     r"yirage.linear: weight must have the dtype of x \(float32\), got float16"),
    (lambda: OPS.linear(X, W, B.double(), "none"), TypeError,
     r"yirage.linear: bias must have the dtype of x \(float32\), got float64"),
    (lambda: OPS.linear(X, W.to("meta"), None, "none"), RuntimeError,
     r"yirage.linear: weight must be on the device of x \(cpu\), got meta"),
    (lambda: OPS.linear(X, W, B.to("meta"), "none"), RuntimeError, r"yirage.linear: bias must be on the device of x"),
    (lambda: OPS.linear(X, torch.randn(16), None, "none"), ValueError,
     r"yirage.linear: weight must have 2 dimensions \(N, K\), got shape \[16\]"),
    (lambda: OPS.linear(X, torch.randn(8, 15), None, "none"), ValueError,
     r"yirage.linear: x must have K = weight.size\(1\) = 15 features in its last dim, got shape \[4, 16\]"),
    (lambda: OPS.linear(X, W, torch.randn(7), "none"), ValueError,
     r"yirage.linear: bias must have shape \(N,\) = \(8,\) to match weight.size\(0\), got \[7\]"),
    (lambda: OPS.linear(X, W, torch.randn(1, 8), "none"), ValueError, r"bias must have shape \(N,\) = \(8,\)"),
    (lambda: OPS.linear(X, W, None, "tanh"), ValueError,
     r"yirage.linear: activation must be one of none, relu, gelu, gelu_tanh, silu, got 'tanh'"),
    (lambda: OPS.linear(torch.tensor(1.0), W, None, "none"), ValueError, r"x must have at least 1 dimension"),
    (lambda: OPS.linear_backward(torch.randn(4, 7), X, W, None, "none"), ValueError,
     r"yirage.linear_backward: grad_out must have the output's shape x.shape\[:-1\] \+ \(N,\) = \[4, 8\], got \[4, 7\]"),
    (lambda: OPS.linear_backward(torch.randn(4, 8), X, W, None, "gelu"), ValueError,
     r"yirage.linear_backward: saved must be a tensor \(the pre-activation z\) for activation 'gelu', got None"),
    (lambda: OPS.linear_backward(torch.randn(4, 8), X, W, torch.randn(4, 8).half(), "relu"), TypeError,
     r"yirage.linear_backward: saved must have the dtype of x \(float32\), got float16"),
], ids=["x_dtype", "weight_dtype", "bias_dtype", "weight_device", "bias_device", "weight_1d", "k_mismatch",
        "bias_size", "bias_2d", "activation", "zero_dim", "grad_shape", "saved_missing", "saved_dtype"])
def test_bad_input_messages(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_bad_input_on_meta():
    with pytest.raises(ValueError, match=r"activation must be one of none, relu, gelu, gelu_tanh, silu, got 'elu'"):
        OPS.linear(X.to("meta"), W.to("meta"), None, "elu")
