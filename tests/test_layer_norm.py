"""layer_norm and layer_norm_backward against the float64 reference (same sweep as test_rms_norm.py)."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

from yirage_ext.testing.inputs import layer_norm_inputs
from yirage_ext.testing.reference import assert_close, layer_norm_ref

from _helpers import aten_ops_called, assert_grad_close, dtype_id, portable, reference_grads, unaligned

OPS = torch.ops.yirage
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# 2560 and 5120: rows of whole warps that are not a power of two of threads on CUDA
SHAPES = [(1, 1), (3, 2), (3, 8), (1000, 768), (3, 769), (1000, 769), (37, 2560), (5, 5120), (3, 5125), (257, 5125),
          (64, 8192)]


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("rows,hidden", SHAPES)
@pytest.mark.parametrize("affine", ["weight_bias", "weight", "none"])
def test_forward_values(target, dtype, rows, hidden, affine):
    inp = layer_norm_inputs((rows, hidden), dtype, seed=rows + hidden)
    w = inp.weight if affine != "none" else None
    b = inp.bias if affine == "weight_bias" else None
    y = OPS.layer_norm(inp.x, w, b, inp.eps)
    assert y.dtype == dtype and y.shape == inp.x.shape and y.is_contiguous()
    assert_close(y, layer_norm_ref(inp.x, w, b, inp.eps), dtype)


def test_matches_torch_layer_norm():
    inp = layer_norm_inputs((7, 3, 100), torch.float32, seed=1)
    torch.testing.assert_close(OPS.layer_norm(inp.x, inp.weight, inp.bias, 1e-5),
                               F.layer_norm(inp.x, (100,), inp.weight, inp.bias, 1e-5))


def test_large_offset_is_stable(device):
    # a mean of 1e4 with unit spread: E[x^2] - E[x]^2 in fp32 would lose every digit; two passes do not
    x = torch.randn(8, 1024, device=device) + 1e4
    assert_close(OPS.layer_norm(x, None, None, 1e-5), layer_norm_ref(x, None, None, 1e-5), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("hidden", [1024, 4096, 5125, 100003])
def test_outlier_first_element_is_stable(device, dtype, hidden):
    # x[0] tens of standard deviations from the mean (a "massive activation" in the first channel): sums shifted
    # by x[0] lose digits there, the CUDA kernels then re-sum the centred squares; also a row whose x[0] sits
    # about 3 standard deviations out, below that threshold
    x = torch.randn(6, hidden, generator=torch.Generator().manual_seed(hidden))
    # (for 100003 columns outliers of 30-100: one of 1e3 or more holds most of the variance, and fp32 sums
    # of its square with 1e5 small ones lose more than the fp32 tolerance whatever the algorithm)
    x[:3, 0] = torch.tensor([1e3, -3e3, 5e4] if hidden < 10**5 else [30.0, -60.0, 100.0])
    x[3:, 0] = x[3:].mean(-1) + 3.5 * x[3:].std(-1)
    x = x.to(dtype=dtype, device=device).requires_grad_()
    w = torch.rand(hidden, generator=torch.Generator().manual_seed(1)).add(0.5).to(dtype=dtype, device=device)
    y = OPS.layer_norm(x, w, None, 1e-5)
    assert_close(y, layer_norm_ref(x, w, None, 1e-5), dtype)
    g = torch.randn(6, hidden, generator=torch.Generator().manual_seed(2)).to(dtype=dtype, device=device)
    y.backward(g)
    ref = reference_grads(lambda a, c: layer_norm_ref(a, c, None, 1e-5), [x, w], [g])
    assert_grad_close(x.grad, ref[0], dtype, "dx")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("shape", [(2, 3, 769), (65537, 24), (5125,)])
def test_leading_dims_and_many_rows(device, dtype, shape):
    inp = layer_norm_inputs(shape, dtype, device=device, seed=2)
    assert_close(OPS.layer_norm(inp.x, inp.weight, inp.bias, inp.eps),
                 layer_norm_ref(inp.x, inp.weight, inp.bias, inp.eps), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("rows,hidden", [(3, 100003), (2, 262144)])
def test_long_rows(device, dtype, rows, hidden):
    inp = layer_norm_inputs((rows, hidden), dtype, seed=8)
    assert_close(OPS.layer_norm(inp.x, inp.weight, inp.bias, inp.eps),
                 layer_norm_ref(inp.x, inp.weight, inp.bias, inp.eps), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("rows,hidden", [(3, 8), (5, 769), (2, 4096)])
def test_unaligned_inputs(device, dtype, rows, hidden):
    # every operand starts one element past an aligned address: no 16-byte vector load may assume alignment
    inp = layer_norm_inputs((rows, hidden), dtype, seed=9)
    x, w, b = unaligned(inp.x), unaligned(inp.weight), unaligned(inp.bias)
    assert x.data_ptr() % 16 != 0 and w.data_ptr() % 16 != 0
    assert_close(OPS.layer_norm(x, w, b, inp.eps), layer_norm_ref(x, w, b, inp.eps), dtype)
    g = unaligned(torch.randn(rows, hidden).to(dtype=dtype, device=x.device))
    dx, dw, db = OPS.layer_norm_backward(g, x, w, inp.eps, True, True)
    ref = reference_grads(lambda a, c, d: layer_norm_ref(a, c, d, inp.eps),
                          [t.clone().requires_grad_() for t in (x, w, b)], [g])
    for got, want, what in zip((dx, dw, db), ref, ("dx", "dweight", "dbias")):
        assert_grad_close(got, want, dtype, what)


@pytest.mark.parametrize("layout", ["strided", "broadcast"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_noncontiguous_inputs(target, layout, dtype):
    inp = layer_norm_inputs((4, 6, 769), dtype, layout=layout, seed=3)
    assert not inp.x.is_contiguous()
    w = (torch.rand(2 * 769) + 0.5).to(dtype=dtype, device=inp.x.device)[::2]
    y = OPS.layer_norm(inp.x, w, inp.bias, inp.eps)
    assert y.is_contiguous()
    assert_close(y, layer_norm_ref(inp.x, w, inp.bias, inp.eps), dtype)


@pytest.mark.parametrize("shape", [(0, 768), (4, 0), (0,)])
def test_empty(device, shape):
    x = torch.randn(shape, device=device)
    w, b = torch.rand(shape[-1], device=device), torch.rand(shape[-1], device=device)
    assert OPS.layer_norm(x, w, b, 1e-5).shape == x.shape
    dx, dw, db = OPS.layer_norm_backward(x, x, w, 1e-5, True, True)
    assert dx.shape == x.shape and dw.shape == w.shape and db.shape == b.shape
    assert torch.count_nonzero(dw) == 0 and torch.count_nonzero(db) == 0


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
# (4099, 1024): more row groups than a persistent grid holds on current GPUs (fp16/bf16 rows staged through
# shared memory) and a last group of fewer rows
@pytest.mark.parametrize("rows,hidden", [(1, 1), (3, 8), (37, 769), (300, 2048), (4099, 1024)])
@pytest.mark.parametrize("affine", ["weight_bias", "none"])
def test_gradients(target, dtype, rows, hidden, affine):
    inp = layer_norm_inputs((rows, hidden), dtype, seed=4)
    x = inp.x.clone().requires_grad_()
    w = inp.weight.clone().requires_grad_() if affine != "none" else None
    b = inp.bias.clone().requires_grad_() if affine != "none" else None
    g = torch.randn(rows, hidden).to(dtype=dtype, device=x.device)
    OPS.layer_norm(x, w, b, inp.eps).backward(g)
    ref = reference_grads(lambda a, c, d: layer_norm_ref(a, c, d, inp.eps), [x, w, b], [g])
    assert_grad_close(x.grad, ref[0], dtype, "dx")
    if affine != "none":
        assert_grad_close(w.grad, ref[1], dtype, "dweight")
        assert_grad_close(b.grad, ref[2], dtype, "dbias")


def test_gradient_with_strided_and_broadcast_grad(device):
    inp = layer_norm_inputs((8, 129), torch.float32, seed=5)
    x, w, b = (t.clone().requires_grad_() for t in (inp.x, inp.weight, inp.bias))
    OPS.layer_norm(x, w, b, 1e-5).sum().backward()  # an expanded (stride-0) upstream gradient
    ref = reference_grads(lambda a, c, d: layer_norm_ref(a, c, d, 1e-5), [x, w, b],
                          [torch.ones(8, 129, device=device)])
    for got, want, what in zip((x.grad, w.grad, b.grad), ref, ("dx", "dweight", "dbias")):
        assert_grad_close(got, want, torch.float32, what)
    x.grad = w.grad = b.grad = None
    g = torch.randn(129, 8, device=device).t()  # a non-contiguous upstream gradient
    OPS.layer_norm(x, w, b, 1e-5).backward(g)
    ref = reference_grads(lambda a, c, d: layer_norm_ref(a, c, d, 1e-5), [x, w, b], [g])
    for got, want, what in zip((x.grad, w.grad, b.grad), ref, ("dx", "dweight", "dbias")):
        assert_grad_close(got, want, torch.float32, what + " (strided grad)")


def test_gradcheck(device):
    x = torch.randn(3, 7, dtype=torch.float64, device=device, requires_grad=True)
    w = (torch.rand(7, dtype=torch.float64, device=device) + 0.5).requires_grad_()
    b = torch.randn(7, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, c, d: OPS.layer_norm(a, c, d, 1e-5), (x, w, b))
    assert torch.autograd.gradcheck(lambda a: OPS.layer_norm(a, None, None, 1e-5), (x,))


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
def test_opcheck(device, requires_grad):
    for shape, dtype in [((3, 8), torch.float32), ((2, 3, 769), torch.bfloat16), ((5,), torch.float64)]:
        inp = layer_norm_inputs(shape, dtype, seed=6)
        x, w, b = (t.clone().requires_grad_(requires_grad) for t in (inp.x, inp.weight, inp.bias))
        opcheck(OPS.layer_norm.default, (x, w, b, inp.eps))
        opcheck(OPS.layer_norm.default, (x, None, None, inp.eps))
        if not requires_grad:
            opcheck(OPS.layer_norm_backward.default, (x.clone(), x, w, inp.eps, True, True))
            opcheck(OPS.layer_norm_backward.default, (x.clone(), x, None, inp.eps, False, False))


def test_compile_fullgraph_no_recompile(device):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda x, w, b: OPS.layer_norm(x, w, b, 1e-5) * 2.0, backend=counter,
                             fullgraph=True, dynamic=True)
    w = (torch.rand(96, device=device) + 0.5).requires_grad_()
    b = torch.randn(96, device=device, requires_grad=True)
    for batch in (2, 3, 7):
        x = (torch.randn(batch, 96, device=device) + 1.0).requires_grad_()
        out = compiled(x, w, b)
        assert_close(out, layer_norm_ref(x, w, b, 1e-5) * 2.0, torch.float32)
        out.sum().backward()
        ref = reference_grads(lambda a, c, d: layer_norm_ref(a, c, d, 1e-5) * 2.0, [x, w, b],
                              [torch.ones(batch, 96, device=device)])
        assert_grad_close(x.grad, ref[0], torch.float32, "dx")
        w.grad = b.grad = None
    assert counter.frame_count == 1, f"recompiled across batch sizes: {counter.frame_count} frames"


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_portable_kernel(dtype):
    inp = layer_norm_inputs((37, 769), dtype, layout="strided", seed=7)
    x, w, b, eps = inp.x, inp.weight, inp.bias, inp.eps
    assert "aten::mean" in aten_ops_called(lambda: portable(OPS.layer_norm, x, w, b, eps))
    assert "aten::mean" not in aten_ops_called(lambda: OPS.layer_norm(x, w, b, eps))
    assert_close(portable(OPS.layer_norm, x, w, b, eps), layer_norm_ref(x, w, b, eps), dtype)
    g = torch.randn(37, 769).to(dtype)
    dx, dw, db = portable(OPS.layer_norm_backward, g, x, w, eps, True, True)
    ref = reference_grads(lambda a, c, d: layer_norm_ref(a, c, d, eps),
                          [t.clone().requires_grad_() for t in (x, w, b)], [g])
    for got, want, what in zip((dx, dw, db), ref, ("dx", "dweight", "dbias")):
        assert_grad_close(got, want, dtype, "portable " + what)


def test_dispatch_keys_and_schema():
    for op in ("layer_norm", "layer_norm_backward"):
        for key in ("CPU", "Meta", "MPS", "PrivateUse1"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", key), (op, key)
        assert torch.Tag.pt2_compliant_tag in getattr(OPS, op).default.tags
    assert torch._C._dispatch_has_kernel_for_dispatch_key("yirage::layer_norm", "Autograd")
    args = [(a.name, str(a.type), a.default_value) for a in OPS.layer_norm.default._schema.arguments]
    # DESIGN.md: layer_norm(Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor
    assert args == [("x", "Tensor", None), ("weight", "Optional[Tensor]", None), ("bias", "Optional[Tensor]", None),
                    ("eps", "float", 1e-5)]


X = torch.randn(4, 16)
W = torch.rand(16)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: OPS.layer_norm(X.int(), None, None, 1e-5), TypeError,
     r"yirage.layer_norm: x must have dtype float32, float16, bfloat16 or float64, got int32$"),
    (lambda: OPS.layer_norm(X, W, torch.rand(15), 1e-5), ValueError,
     r"yirage.layer_norm: bias must have shape \(N,\) = \(16,\) to match the last dim of x, got \[15\]"),
    (lambda: OPS.layer_norm(X, torch.rand(16, 1), None, 1e-5), ValueError, r"weight must have shape \(N,\) = \(16,\)"),
    (lambda: OPS.layer_norm(X, W, W.half(), 1e-5), TypeError,
     r"yirage.layer_norm: bias must have the dtype of x \(float32\), got float16"),
    (lambda: OPS.layer_norm(X, W.to("meta"), None, 1e-5), RuntimeError,
     r"yirage.layer_norm: weight must be on the device of x \(cpu\), got meta"),
    (lambda: OPS.layer_norm(torch.tensor(2.0), None, None, 1e-5), ValueError, r"x must have at least 1 dimension"),
    (lambda: OPS.layer_norm(X, W, None, math.nan), ValueError, r"yirage.layer_norm: eps must be a finite number >= 0"),
    (lambda: OPS.layer_norm_backward(torch.randn(4, 15), X, W, 1e-5, True, True), ValueError,
     r"yirage.layer_norm_backward: grad_out must have the shape of x \[4, 16\], got \[4, 15\]"),
], ids=["x_dtype", "bias_size", "weight_2d", "bias_dtype", "weight_device", "zero_dim", "eps_nan", "grad_shape"])
def test_bad_input_messages(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
