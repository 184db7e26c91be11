"""rms_norm, fused_add_rms_norm and rms_norm_backward against the float64 reference.

Values for every dtype and CPU kernel variant over the sizes that break kernels, non-contiguous and
broadcast inputs, empty tensors, gradients (vs float64 autograd and gradcheck), opcheck, torch.compile,
the portable kernel, and the bad-input matrix with its messages.
"""
import math

import pytest
import torch
from torch.library import opcheck

import yirage_ext
from yirage_ext.testing.inputs import rms_norm_inputs
from yirage_ext.testing.reference import assert_close, fused_add_rms_norm_ref, rms_norm_ref

from _helpers import aten_ops_called, assert_grad_close, device_of, dtype_id, portable, reference_grads, unaligned

OPS = torch.ops.yirage
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# (rows, hidden): sizes 1 / odd / non-power-of-2 / larger than a vector or a cache line; 2560 and 5120: rows of
# whole warps that are not a power of two of threads on CUDA (2560 bf16: two rows of 96 threads per block; with
# 4096+ rows, 160 threads of 2 vectors)
SHAPES = [(1, 1), (3, 1), (3, 8), (1, 768), (1000, 768), (3, 769), (1000, 769), (37, 2560), (4100, 2560), (1, 5120),
          (3, 5120), (3, 5125), (257, 5125), (3, 8192), (64, 8192)]


def weight_of(inp, with_weight):
    return inp.weight if with_weight else None


# ------------------------------------------------------------------------------------------ values


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("rows,hidden", SHAPES)
@pytest.mark.parametrize("with_weight", [True, False], ids=["weight", "no_weight"])
def test_forward_values(target, dtype, rows, hidden, with_weight):
    inp = rms_norm_inputs((rows, hidden), dtype, seed=rows * 7 + hidden)
    w = weight_of(inp, with_weight)
    y = OPS.rms_norm(inp.x, w, inp.eps)
    assert y.dtype == dtype and y.shape == inp.x.shape and y.is_contiguous()
    assert_close(y, rms_norm_ref(inp.x, w, inp.eps), dtype)

    y2, h = OPS.fused_add_rms_norm(inp.x, inp.residual, w, inp.eps)
    ref_y, ref_h = fused_add_rms_norm_ref(inp.x, inp.residual, w, inp.eps)
    assert torch.equal(h, inp.x + inp.residual), "h must be x + residual rounded to the input dtype, exactly"
    assert_close(y2, ref_y, dtype)
    assert_close(h, ref_h, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("shape", [(2, 3, 769), (2, 2, 3, 64), (5125,)])
def test_leading_dims(device, dtype, shape):
    inp = rms_norm_inputs(shape, dtype, device=device, seed=1)
    assert_close(OPS.rms_norm(inp.x, inp.weight, inp.eps), rms_norm_ref(inp.x, inp.weight, inp.eps), dtype)
    y, h = OPS.fused_add_rms_norm(inp.x, inp.residual, inp.weight, inp.eps)
    assert_close(y, fused_add_rms_norm_ref(inp.x, inp.residual, inp.weight, inp.eps)[0], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_more_than_65535_rows(device, dtype):
    inp = rms_norm_inputs((65537, 24), dtype, device=device, seed=2)
    assert_close(OPS.rms_norm(inp.x, inp.weight, inp.eps), rms_norm_ref(inp.x, inp.weight, inp.eps), dtype)
    y, _ = OPS.fused_add_rms_norm(inp.x, inp.residual, inp.weight, inp.eps)
    assert_close(y, fused_add_rms_norm_ref(inp.x, inp.residual, inp.weight, inp.eps)[0], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("rows,hidden", [(3, 100003), (2, 262144)])
def test_long_rows(device, dtype, rows, hidden):
    inp = rms_norm_inputs((rows, hidden), dtype, seed=13)
    assert_close(OPS.rms_norm(inp.x, inp.weight, inp.eps), rms_norm_ref(inp.x, inp.weight, inp.eps), dtype)
    y, _ = OPS.fused_add_rms_norm(inp.x, inp.residual, inp.weight, inp.eps)
    assert_close(y, fused_add_rms_norm_ref(inp.x, inp.residual, inp.weight, inp.eps)[0], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("rows,hidden", [(3, 8), (5, 769), (2, 4096)])
def test_unaligned_inputs(device, dtype, rows, hidden):
    # every operand starts one element past an aligned address: no 16-byte vector load may assume alignment
    inp = rms_norm_inputs((rows, hidden), dtype, seed=14)
    x, r, w = unaligned(inp.x), unaligned(inp.residual), unaligned(inp.weight)
    assert x.data_ptr() % 16 != 0 and w.data_ptr() % 16 != 0
    assert_close(OPS.rms_norm(x, w, inp.eps), rms_norm_ref(x, w, inp.eps), dtype)
    y, h = OPS.fused_add_rms_norm(x, r, w, inp.eps)
    assert torch.equal(h, x + r)
    assert_close(y, fused_add_rms_norm_ref(x, r, w, inp.eps)[0], dtype)
    g = unaligned(torch.randn(rows, hidden).to(dtype=dtype, device=x.device))
    dx, dw = OPS.rms_norm_backward(g, x, w, inp.eps, None, True)
    ref = reference_grads(lambda a, b: rms_norm_ref(a, b, inp.eps), [x.clone().requires_grad_(),
                                                                    w.clone().requires_grad_()], [g])
    assert_grad_close(dx, ref[0], dtype, "dx")
    assert_grad_close(dw, ref[1], dtype, "dweight")


@pytest.mark.parametrize("eps", [0.0, 1e-6, 1e-2, 3.0])
def test_eps(device, eps):
    inp = rms_norm_inputs((4, 33), torch.float32, eps=eps, seed=3)
    assert_close(OPS.rms_norm(inp.x, inp.weight, eps), rms_norm_ref(inp.x, inp.weight, eps), torch.float32)


def test_bf16_subnormal_results(target):
    """rms_norm and fused_add_rms_norm with weights among bf16's subnormals (every 7th a normal value): each result
    within one ulp of the float64 result rounded to bf16, none flushed to zero (the AVX512-BF16 conversions alone
    would flush them)."""
    from yirage_ext.bench.accuracy import ulp_distance
    gen = torch.Generator().manual_seed(6)
    rows, d = 5, 1000
    w = torch.randint(1, 0x80, (d,), generator=gen, dtype=torch.int32)
    w |= torch.randint(0, 2, (d,), generator=gen, dtype=torch.int32) << 15
    w = w.to(torch.int16).view(torch.bfloat16)
    w[::7] = torch.randn(len(range(0, d, 7)), generator=gen).bfloat16()
    x = torch.randn(rows, d, generator=gen).bfloat16()
    dev = device_of(target)
    got = OPS.rms_norm(x.to(dev), w.to(dev), 1e-6).cpu()
    ref = rms_norm_ref(x.double(), w.double(), 1e-6)
    assert int(ulp_distance(got, ref, torch.bfloat16).max()) <= 1
    assert ((got == 0) == (ref.to(torch.bfloat16) == 0)).all()
    res = torch.randn(rows, d, generator=gen).bfloat16()
    got, _ = OPS.fused_add_rms_norm(x.to(dev), res.to(dev), w.to(dev), 1e-6)
    ref, _ = fused_add_rms_norm_ref(x, res, w, 1e-6)
    assert int(ulp_distance(got.cpu(), ref, torch.bfloat16).max()) <= 1


def test_large_values_do_not_overflow_in_fp16(device):
    # squares of 300 overflow fp16 (max 65504): the kernel must square in fp32
    x = torch.full((2, 64), 300.0, dtype=torch.float16, device=device)
    x[1] = -200.0
    assert_close(OPS.rms_norm(x, None, 1e-6), rms_norm_ref(x, None, 1e-6), torch.float16)


@pytest.mark.parametrize("layout", ["strided", "broadcast"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dtype_id)
def test_noncontiguous_inputs(target, layout, dtype):
    inp = rms_norm_inputs((4, 6, 769), dtype, layout=layout, seed=4)
    assert not inp.x.is_contiguous() and not inp.residual.is_contiguous()
    w_wide = torch.rand(2 * 769, dtype=dtype, device=inp.x.device) + 0.5
    w = w_wide[::2]  # a strided weight
    y = OPS.rms_norm(inp.x, w, inp.eps)
    assert y.is_contiguous()
    assert_close(y, rms_norm_ref(inp.x, w, inp.eps), dtype)
    y2, h = OPS.fused_add_rms_norm(inp.x, inp.residual, w, inp.eps)
    assert y2.is_contiguous() and h.is_contiguous()
    assert torch.equal(h, inp.x + inp.residual)
    assert_close(y2, fused_add_rms_norm_ref(inp.x, inp.residual, w, inp.eps)[0], dtype)


def test_transposed_input(device):
    # the last dim is not contiguous at all: the glue copies, the answer must not change
    x = torch.randn(64, 48, device=device).t()
    w = torch.rand(64, device=device) + 0.5
    assert x.stride(-1) != 1
    assert_close(OPS.rms_norm(x, w, 1e-6), rms_norm_ref(x, w, 1e-6), torch.float32)


@pytest.mark.parametrize("shape", [(0, 768), (4, 0), (2, 0, 16), (0,)])
def test_empty(device, shape):
    x = torch.randn(shape, device=device)
    w = torch.rand(shape[-1], device=device)
    y = OPS.rms_norm(x, w, 1e-6)
    assert y.shape == x.shape
    y2, h = OPS.fused_add_rms_norm(x, x.clone(), w, 1e-6)
    assert y2.shape == x.shape and h.shape == x.shape
    dx, dw = OPS.rms_norm_backward(x, x, w, 1e-6, None, True)
    assert dx.shape == x.shape and dw.shape == w.shape
    assert torch.equal(dw, torch.zeros_like(dw)), "no rows: the weight gradient is zero, not garbage"


# ------------------------------------------------------------------------------------------ gradients


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
# (4099, 1024): more row groups than a persistent grid holds on current GPUs (fp16/bf16 rows staged through
# shared memory, the next row in flight), and a last group of fewer rows
@pytest.mark.parametrize("rows,hidden", [(1, 1), (3, 8), (37, 769), (300, 2048), (4099, 1024)])
@pytest.mark.parametrize("with_weight", [True, False], ids=["weight", "no_weight"])
def test_rms_norm_gradients(target, dtype, rows, hidden, with_weight):
    inp = rms_norm_inputs((rows, hidden), dtype, seed=5)
    x = inp.x.clone().requires_grad_()
    w = inp.weight.clone().requires_grad_() if with_weight else None
    g = torch.randn(rows, hidden).to(dtype=dtype, device=x.device)
    OPS.rms_norm(x, w, inp.eps).backward(g)
    ref = reference_grads(lambda a, b: rms_norm_ref(a, b, inp.eps), [x, w], [g])
    assert_grad_close(x.grad, ref[0], dtype, "dx")
    if with_weight:
        assert w.grad.dtype == dtype and w.grad.shape == w.shape
        assert_grad_close(w.grad, ref[1], dtype, "dweight")


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("used", ["y_and_h", "y_only", "h_only"])
def test_fused_add_rms_norm_gradients(target, dtype, used):
    inp = rms_norm_inputs((37, 769), dtype, seed=6)
    x, r, w = (t.clone().requires_grad_() for t in (inp.x, inp.residual, inp.weight))
    y, h = OPS.fused_add_rms_norm(x, r, w, inp.eps)
    gy = torch.randn_like(y) if used != "h_only" else None
    gh = torch.randn_like(h) if used != "y_only" else None
    torch.autograd.backward([t for t, g in ((y, gy), (h, gh)) if g is not None], [g for g in (gy, gh) if g is not None])
    ref = reference_grads(lambda a, b, c: fused_add_rms_norm_ref(a, b, c, inp.eps), [x, r, w], [gy, gh])
    assert_grad_close(x.grad, ref[0], dtype, "dx")
    assert_grad_close(r.grad, ref[1], dtype, "dresidual")
    if used == "h_only":
        assert w.grad is None or torch.count_nonzero(w.grad) == 0
    else:
        assert_grad_close(w.grad, ref[2], dtype, "dweight")


def test_backward_with_strided_grad_out(device):
    inp = rms_norm_inputs((8, 129), torch.float32, seed=7)
    x, w = inp.x.clone().requires_grad_(), inp.weight.clone().requires_grad_()
    y = OPS.rms_norm(x, w, 1e-6)
    g = torch.randn(129, 8, device=device).t()  # non-contiguous upstream gradient
    y.backward(g)
    ref = reference_grads(lambda a, b: rms_norm_ref(a, b, 1e-6), [x, w], [g])
    assert_grad_close(x.grad, ref[0], torch.float32, "dx")
    assert_grad_close(w.grad, ref[1], torch.float32, "dweight")
    # broadcast gradient: y.sum() backward sends an expanded (stride-0) tensor of ones
    x.grad = w.grad = None
    OPS.rms_norm(x, w, 1e-6).sum().backward()
    ref = reference_grads(lambda a, b: rms_norm_ref(a, b, 1e-6), [x, w], [torch.ones(8, 129, device=device)])
    assert_grad_close(x.grad, ref[0], torch.float32, "dx (sum)")


def test_backward_op_grad_add_and_no_weight_grad(device):
    inp = rms_norm_inputs((5, 40), torch.float32, seed=8)
    g, extra = torch.randn(5, 40, device=device), torch.randn(5, 40, device=device)
    dx, dw = OPS.rms_norm_backward(g, inp.x, inp.weight, 1e-6, extra, False)
    assert dw.shape == (0,)
    ref = reference_grads(lambda a, b: rms_norm_ref(a, b, 1e-6), [inp.x.requires_grad_(), inp.weight], [g])
    assert_grad_close(dx, ref[0] + extra.double(), torch.float32, "dx + grad_add")


@pytest.mark.parametrize("with_weight", [True, False], ids=["weight", "no_weight"])
def test_gradcheck(device, with_weight):
    x = torch.randn(3, 7, dtype=torch.float64, device=device, requires_grad=True)
    r = torch.randn(3, 7, dtype=torch.float64, device=device, requires_grad=True)
    w = (torch.rand(7, dtype=torch.float64, device=device) + 0.5).requires_grad_() if with_weight else None
    assert torch.autograd.gradcheck(lambda a, b: OPS.rms_norm(a, b, 1e-5), (x, w))
    assert torch.autograd.gradcheck(lambda a, b, c: OPS.fused_add_rms_norm(a, b, c, 1e-5), (x, r, w))


# ------------------------------------------------------------------------------------------ opcheck


def opcheck_samples(requires_grad):
    out = []
    for shape, dtype in [((3, 8), torch.float32), ((2, 3, 769), torch.bfloat16), ((5,), torch.float64),
                         ((1, 16), torch.float16)]:
        inp = rms_norm_inputs(shape, dtype, seed=9)
        x, r, w = (t.clone().requires_grad_(requires_grad) for t in (inp.x, inp.residual, inp.weight))
        out.append((x, r, w, inp.eps))
    return out


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
def test_opcheck(device, requires_grad):
    for x, r, w, eps in opcheck_samples(requires_grad):
        opcheck(OPS.rms_norm.default, (x, w, eps))
        opcheck(OPS.rms_norm.default, (x, None, eps))
        opcheck(OPS.fused_add_rms_norm.default, (x, r, w, eps))
        opcheck(OPS.fused_add_rms_norm.default, (x, r, None, eps))


def test_opcheck_backward_op(device):
    for x, r, w, eps in opcheck_samples(False):
        opcheck(OPS.rms_norm_backward.default, (r, x, w, eps, None, True))
        opcheck(OPS.rms_norm_backward.default, (r, x, None, eps, x.clone(), False))


# ------------------------------------------------------------------------------------------ torch.compile


def block(x, r, w):
    y, h = OPS.fused_add_rms_norm(x, r, w, 1e-6)
    return OPS.rms_norm(y * 2.0, w, 1e-6) + h


def block_ref(x, r, w):
    y, h = fused_add_rms_norm_ref(x, r, w, 1e-6)
    return rms_norm_ref(y.to(x.dtype) * 2.0, w, 1e-6) + h


def test_compile_fullgraph_no_recompile_across_batch_sizes(device):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(block, backend=counter, fullgraph=True, dynamic=True)
    w = (torch.rand(96, device=device) + 0.5).requires_grad_()
    for batch in (2, 3, 7, 16):
        x = torch.randn(batch, 5, 96, device=device, requires_grad=True)
        r = torch.randn(batch, 5, 96, device=device)
        out = compiled(x, r, w)
        assert_close(out, block_ref(x, r, w), torch.float32)
        out.sum().backward()
        xe = x.detach().clone().requires_grad_()
        we = w.detach().clone().requires_grad_()
        block(xe, r, we).sum().backward()  # eager through the same ops: compiled gradients must agree
        torch.testing.assert_close(x.grad, xe.grad)
        torch.testing.assert_close(w.grad, we.grad, rtol=1e-5, atol=1e-5)
        w.grad = None
    assert counter.frame_count == 1, f"recompiled across batch sizes: {counter.frame_count} frames"


@pytest.mark.slow
def test_compile_inductor():
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True)
    inp = rms_norm_inputs((4, 33, 64), torch.float32, seed=10)
    w = inp.weight.clone().requires_grad_()
    x = inp.x.clone().requires_grad_()
    out = compiled(x, inp.residual, w)
    assert_close(out, block_ref(inp.x, inp.residual, inp.weight), torch.float32)
    out.sum().backward()
    ref = reference_grads(lambda a, c: block_ref(a, inp.residual, c), [x, w], [torch.ones_like(out)])
    assert_grad_close(x.grad, ref[0], torch.float32, "dx")
    assert_grad_close(w.grad, ref[1], torch.float32, "dweight")


# ------------------------------------------------------------------------------------------ portable kernel


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_portable_kernel(dtype):
    inp = rms_norm_inputs((37, 769), dtype, layout="strided", seed=11)
    x, r, w, eps = inp.x, inp.residual, inp.weight, inp.eps
    # it is the portable kernel that runs (ATen ops inside), not the native CPU one
    assert "aten::mean" in aten_ops_called(lambda: portable(OPS.rms_norm, x, w, eps))
    assert "aten::mean" not in aten_ops_called(lambda: OPS.rms_norm(x, w, eps))
    assert_close(portable(OPS.rms_norm, x, w, eps), rms_norm_ref(x, w, eps), dtype)
    assert_close(portable(OPS.rms_norm, x, None, eps), rms_norm_ref(x, None, eps), dtype)
    y, h = portable(OPS.fused_add_rms_norm, x, r, w, eps)
    ref_y, ref_h = fused_add_rms_norm_ref(x, r, w, eps)
    assert torch.equal(h, x + r)
    assert_close(y, ref_y, dtype)
    g, extra = torch.randn(37, 769).to(dtype), torch.randn(37, 769).to(dtype)
    dx, dw = portable(OPS.rms_norm_backward, g, x, w, eps, extra, True)
    ref = reference_grads(lambda a, b: rms_norm_ref(a, b, eps), [x.clone().requires_grad_(),
                                                                 w.clone().requires_grad_()], [g])
    assert_grad_close(dx, ref[0] + extra.double(), dtype, "portable dx")
    assert_grad_close(dw, ref[1], dtype, "portable dweight")


def test_dispatch_keys_registered():
    for op in ("rms_norm", "fused_add_rms_norm", "rms_norm_backward"):
        for key in ("CPU", "Meta", "MPS", "PrivateUse1"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", key), (op, key)
    for op in ("rms_norm", "fused_add_rms_norm"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", "Autograd"), op
    for op in ("rms_norm", "fused_add_rms_norm", "rms_norm_backward"):
        schema = torch._C._jit_get_schemas_for_operator(f"yirage::{op}")
        assert len(schema) == 1
        assert torch.Tag.pt2_compliant_tag in getattr(OPS, op).default.tags


def signature(op):
    schema = op.default._schema
    return ([(a.name, str(a.type), a.default_value) for a in schema.arguments], [str(r.type) for r in schema.returns])


def test_schemas_match_the_contract():
    # DESIGN.md: rms_norm(Tensor x, Tensor? weight=None, float eps=1e-06) -> Tensor
    assert signature(OPS.rms_norm) == ([("x", "Tensor", None), ("weight", "Optional[Tensor]", None),
                                        ("eps", "float", 1e-6)], ["Tensor"])
    # fused_add_rms_norm(Tensor x, Tensor residual, Tensor? weight=None, float eps=1e-06) -> (Tensor, Tensor)
    assert signature(OPS.fused_add_rms_norm) == ([("x", "Tensor", None), ("residual", "Tensor", None),
                                                  ("weight", "Optional[Tensor]", None), ("eps", "float", 1e-6)],
                                                 ["Tensor", "Tensor"])


# ------------------------------------------------------------------------------------------ bad input

X = torch.randn(4, 16)
W = torch.rand(16)


@pytest.mark.parametrize("bad_dtype", [torch.int32, torch.int64, torch.bool, torch.complex64], ids=dtype_id)
def test_bad_x_dtype(bad_dtype):
    x = torch.ones(4, 16).to(bad_dtype)
    with pytest.raises(TypeError, match=rf"yirage.rms_norm: x must have dtype float32, float16, bfloat16 or float64, got {dtype_id(bad_dtype)}$"):
        OPS.rms_norm(x, None, 1e-6)
    with pytest.raises(TypeError, match=r"yirage.fused_add_rms_norm: x must have dtype"):
        OPS.fused_add_rms_norm(x, x, None, 1e-6)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: OPS.rms_norm(X, torch.rand(15), 1e-6), ValueError,
     r"yirage.rms_norm: weight must have shape \(N,\) = \(16,\) to match the last dim of x, got \[15\]"),
    (lambda: OPS.rms_norm(X, torch.rand(1, 16), 1e-6), ValueError, r"weight must have shape \(N,\) = \(16,\).*got \[1, 16\]"),
    (lambda: OPS.rms_norm(X, W.double(), 1e-6), TypeError,
     r"yirage.rms_norm: weight must have the dtype of x \(float32\), got float64"),
    (lambda: OPS.fused_add_rms_norm(X, X.half(), W, 1e-6), TypeError,
     r"yirage.fused_add_rms_norm: residual must have the dtype of x \(float32\), got float16"),
    (lambda: OPS.fused_add_rms_norm(X, torch.randn(4, 15), W, 1e-6), ValueError,
     r"yirage.fused_add_rms_norm: residual must have the shape of x \[4, 16\], got \[4, 15\]"),
    (lambda: OPS.rms_norm(torch.tensor(1.0), None, 1e-6), ValueError,
     r"yirage.rms_norm: x must have at least 1 dimension \(..., N\), got a 0-dim tensor"),
    (lambda: OPS.rms_norm(X, W, -1e-6), ValueError, r"yirage.rms_norm: eps must be a finite number >= 0, got -1e-06"),
    (lambda: OPS.rms_norm(X, W, math.nan), ValueError, r"yirage.rms_norm: eps must be a finite number >= 0, got nan"),
    (lambda: OPS.fused_add_rms_norm(X, X, W, math.inf), ValueError, r"eps must be a finite number >= 0, got inf"),
    (lambda: OPS.rms_norm(X, W.to("meta"), 1e-6), RuntimeError,
     r"yirage.rms_norm: weight must be on the device of x \(cpu\), got meta"),
    (lambda: OPS.fused_add_rms_norm(X.to("meta"), X, None, 1e-6), RuntimeError,
     r"yirage.fused_add_rms_norm: residual must be on the device of x \(meta\), got cpu"),
    (lambda: OPS.rms_norm_backward(torch.randn(4, 15), X, W, 1e-6, None, True), ValueError,
     r"yirage.rms_norm_backward: grad_out must have the shape of x \[4, 16\], got \[4, 15\]"),
    (lambda: OPS.rms_norm_backward(X.double(), X, W, 1e-6, None, True), TypeError,
     r"yirage.rms_norm_backward: grad_out must have the dtype of x \(float32\), got float64"),
], ids=["weight_size", "weight_2d", "weight_dtype", "residual_dtype", "residual_shape", "zero_dim", "eps_negative",
        "eps_nan", "eps_inf", "weight_device", "residual_device", "grad_shape", "grad_dtype"])
def test_bad_input_messages(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_bad_input_under_compile_has_the_same_message():
    torch._dynamo.reset()
    f = torch.compile(lambda x, w: OPS.rms_norm(x, w, 1e-6), backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match=r"weight must have shape \(N,\) = \(16,\)"):
        f(X, torch.rand(15))


def test_python_wrappers_are_the_ops():
    inp = rms_norm_inputs((3, 10), torch.float32, seed=12)
    torch.testing.assert_close(yirage_ext.rms_norm(inp.x, inp.weight), OPS.rms_norm(inp.x, inp.weight, 1e-6))
    y, h = yirage_ext.fused_add_rms_norm(inp.x, inp.residual, inp.weight, eps=1e-5)
    torch.testing.assert_close(y, OPS.fused_add_rms_norm(inp.x, inp.residual, inp.weight, 1e-5)[0])
