"""silu_and_mul, gelu_and_mul, gelu and their backward ops against the float64 reference (the sweep of
test_layer_norm.py), plus torch's own F.silu / F.gelu on ordinary, large and non-finite inputs, the accuracy
of the fp32 GELU, and double backward."""
import dataclasses
import math
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

from yirage_ext.testing.inputs import activation_inputs
from yirage_ext.testing.reference import assert_close, gelu_and_mul_ref, gelu_ref, silu_and_mul_ref

from _helpers import aten_ops_called, assert_grad_close, dtype_id, portable, reference_grads, device_of, unaligned

OPS = torch.ops.yirage
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


@dataclasses.dataclass(frozen=True)
class Gated:
    """One gated op with its arguments: the op, the float64 reference, the unfused torch code, the backward op."""
    name: str
    extra: tuple  # arguments after x (approximate)
    ref: Callable
    unfused: Callable  # (a, b) -> act(a) * b with torch's own F functions
    aten_op: str  # what the portable kernel calls

    def __call__(self, x):
        return (OPS.silu_and_mul if self.name == "silu" else OPS.gelu_and_mul)(x, *self.extra)

    def backward(self, g, x):
        return (OPS.silu_and_mul_backward if self.name == "silu" else OPS.gelu_and_mul_backward)(g, x, *self.extra)

    @property
    def ops(self):
        return (OPS.silu_and_mul, OPS.silu_and_mul_backward) if self.name == "silu" else \
            (OPS.gelu_and_mul, OPS.gelu_and_mul_backward)


GATED = [
    Gated("silu", (), silu_and_mul_ref, lambda a, b: F.silu(a) * b, "aten::silu"),
    Gated("gelu", ("none",), lambda x: gelu_and_mul_ref(x, "none"), lambda a, b: F.gelu(a) * b, "aten::gelu"),
    Gated("gelu_tanh", ("tanh",), lambda x: gelu_and_mul_ref(x, "tanh"),
          lambda a, b: F.gelu(a, approximate="tanh") * b, "aten::gelu"),
]
GATED_IDS = [g.name for g in GATED]
APPROX = ["none", "tanh"]
# (rows, d): x is (rows, 2*d). d = 1, odd, non-power-of-2, wide; 67 x 5125 is split over the threads mid-row.
GATED_SHAPES = [(1, 1), (3, 3), (3, 8), (300, 768), (3, 769), (67, 5125), (16, 8192)]
GELU_SHAPES = [(), (1,), (7,), (3, 769), (300, 768), (67, 5125)]


def halves(x):
    d = x.shape[-1] // 2
    return x[..., :d], x[..., d:]


# ---- forward values ----

@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("rows,d", GATED_SHAPES)
@pytest.mark.parametrize("op", GATED, ids=GATED_IDS)
def test_gated_forward_values(target, dtype, rows, d, op):
    x = activation_inputs((rows, 2 * d), dtype, seed=rows + d)
    y = op(x)
    assert y.dtype == dtype and y.shape == (rows, d) and y.is_contiguous()
    assert_close(y, op.ref(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("shape", GELU_SHAPES, ids=str)
@pytest.mark.parametrize("approximate", APPROX)
def test_gelu_forward_values(target, dtype, shape, approximate):
    x = activation_inputs(shape, dtype, seed=len(shape) + 3)
    y = OPS.gelu(x, approximate)
    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
    assert_close(y, gelu_ref(x, approximate), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_matches_torch_functional(dtype):
    # against F.silu / F.gelu themselves; bf16: the unfused code rounds act(a) before the product, we do not
    x = activation_inputs((7, 3, 2 * 100), dtype, seed=1)
    tol = {} if dtype == torch.float32 else dict(atol=1.6e-2, rtol=1.6e-2)
    for op in GATED:
        torch.testing.assert_close(op(x), op.unfused(*halves(x)), **tol)
    for approximate in APPROX:
        torch.testing.assert_close(OPS.gelu(x, approximate), F.gelu(x, approximate=approximate), **tol)


SPECIAL = [-math.inf, math.inf, math.nan, -100.0, -20.0, -5.5, -1.3, -0.0, 0.0, 1e-30, 1.3, 5.5, 20.0, 100.0, 3e4]


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_nonfinite_and_large_inputs_match_torch(target, dtype):
    """inf/-inf/NaN and |x| up to 100 (3e4 = a large fp16): values and gradients as torch's F functions (gated
    ops) and the float64 formula (gelu) give them: NaN at act(-inf) and for every derivative at +-inf."""
    a = torch.tensor(SPECIAL, dtype=dtype, device=device_of(target))
    # row 0: special values in the activated half; row 1: in the multiplied half
    x = torch.stack([torch.cat([a, torch.full_like(a, 1.5)]), torch.cat([torch.full_like(a, 1.5), a])])
    for op in GATED:
        xo, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
        yo, yt = op(xo), op.unfused(*halves(xt))
        assert_close(yo, yt, dtype, msg=op.name)
        g = torch.ones_like(yo)
        yo.backward(g)
        yt.backward(g)
        assert_close(xo.grad, xt.grad, dtype, msg=op.name + " grad")
    for approximate in APPROX:
        xo, xt = a.clone().requires_grad_(), a.clone().requires_grad_()
        # the float64 formula, not F.gelu: torch 2.11's vectorized fp32 gelu gives NaN at +inf on an AVX-512 CPU
        yo, yt = OPS.gelu(xo, approximate), gelu_ref(xt, approximate)
        assert_close(yo, yt, dtype, msg=approximate)
        yo.backward(torch.ones_like(yo))
        yt.backward(torch.ones_like(yt))
        assert_close(xo.grad, xt.grad, dtype, msg=approximate + " grad")


def test_fp32_gelu_accuracy(target):
    """The vectorized fp32 normal CDF: relative error of gelu(x) about one ulp for x > 0, a few ulp on the
    lower tail down to -5.5 (where 1 + erf(x/sqrt 2) would have lost every digit), tiny absolute error
    below (Phi(x) < 2e-8 there)."""
    x = torch.cat([torch.linspace(-8, 8, 400_001), torch.logspace(-30, 0.5, 2000), -torch.logspace(-30, 0.5, 2000)])
    x = x.to(device_of(target))
    for approximate in APPROX:
        ref = gelu_ref(x, approximate)
        err = (OPS.gelu(x, approximate).double() - ref).abs()
        rel = err / ref.abs()
        assert rel[x > 0].max() < 3e-7, (approximate, rel[x > 0].max())
        lower = (x < 0) & (x > -5.5)
        assert rel[lower].max() < 4e-6, (approximate, rel[lower].max())
        assert err[x <= -5.5].max() < 4e-8, (approximate, err[x <= -5.5].max())


def _ordered(t):
    """fp16 / bf16 values as integers in their order (neighbouring values one apart), for distances in ulps."""
    b = t.view(torch.int16).to(torch.int32)
    return torch.where(b < 0, -(b & 0x7FFF), b)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=dtype_id)
def test_half_gelu_rounding(target, dtype):
    """gelu of every fp16 / bf16 value between -20 and 20 against the float64 formula rounded to the type: at most
    one ulp off, and off at all on under 1% of the inputs (CUDA's cheaper fit for these types misses 3 bf16 and 140
    fp16 inputs of the erf form; torch's CPU gelu 175 and 454). Results below 2^-120 are left out: those below 2^-126
    flush to zero."""
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    x = x[x.float().abs() < 20]  # no inf or NaN
    for approximate in APPROX:
        ref = gelu_ref(x, approximate).to(dtype)
        got = OPS.gelu(x.to(device_of(target)), approximate).cpu()
        keep = ref.float().abs() >= 2.0**-120
        dist = (_ordered(got) - _ordered(ref)).abs()[keep]
        assert dist.max() <= 1, (approximate, int(dist.max()))
        assert (dist > 0).double().mean() < 0.01, (approximate, int((dist > 0).sum()), dist.numel())


@pytest.mark.parametrize("gated", [False, True], ids=["gelu", "gelu_and_mul"])
def test_bf16_gelu_groups_with_far_values(target, gated):
    """bf16 gelu (erf): rows of values within |x| < 4 with one value near or past 8, infinite or NaN, at every
    position of a 200-element row (three 64-element groups and a tail): AVX-512 takes its segment fit only where a
    whole group lies within |x| < 8, and a far value in any lane must send its group to the full formula. Each result
    within one ulp of the float64 gelu rounded to bf16 (times b for gelu_and_mul), NaN where that is NaN."""
    gen = torch.Generator().manual_seed(11)
    n = 200
    specials = [8.0, -8.0, 8.0625, -9.0, 7.96875, -7.96875, -5.5, 30.0, -30.0, math.inf, -math.inf, math.nan]
    a = (torch.randn(n, n, generator=gen) * 1.5).clamp(-3.9, 3.9)
    for r in range(n):
        a[r, r] = specials[r % len(specials)]
    a = a.bfloat16()
    b = (torch.rand(n, n, generator=gen) + 0.5).bfloat16()
    x = torch.cat([a, b], -1) if gated else a
    got = (OPS.gelu_and_mul(x.to(device_of(target)), "none") if gated else
           OPS.gelu(x.to(device_of(target)), "none")).cpu()
    ref64 = gelu_ref(a.double(), "none") * (b.double() if gated else 1.0)
    ref = ref64.to(torch.bfloat16)
    nan = ref64.isnan()
    assert (got.isnan() == nan).all()
    dist = (_ordered(got) - _ordered(ref)).abs()[~nan]
    assert dist.max() <= 1, int(dist.max())


def test_bf16_subnormal_results(target):
    """silu(a) * b with b among bf16's subnormals (every 7th a normal value, so vectors mix both): each result within
    one ulp of the float64 product rounded to bf16, none flushed to zero (the AVX512-BF16 conversions alone would
    flush them)."""
    gen = torch.Generator().manual_seed(5)
    rows, d = 5, 1000  # whole vectors, pairs of them and a partial tail per row
    bits = torch.randint(1, 0x80, (rows, d), generator=gen, dtype=torch.int32)
    bits |= torch.randint(0, 2, (rows, d), generator=gen, dtype=torch.int32) << 15
    b = bits.to(torch.int16).view(torch.bfloat16)
    b[:, ::7] = torch.randn(rows, len(range(0, d, 7)), generator=gen).bfloat16()
    x = torch.cat([torch.randn(rows, d, generator=gen).bfloat16(), b], -1)
    got = OPS.silu_and_mul(x.to(device_of(target))).cpu()
    ref = silu_and_mul_ref(x.double()).to(torch.bfloat16)
    dist = (_ordered(got) - _ordered(ref)).abs()
    assert dist.max() <= 1, int(dist.max())
    assert ((got == 0) == (ref == 0)).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("shape", [(2, 3, 2 * 769), (65537, 2 * 12), (2 * 70001,)], ids=str)
def test_leading_dims_and_many_rows(device, dtype, shape):
    x = activation_inputs(shape, dtype, device=device, seed=2)
    for op in GATED:
        y = op(x)
        assert y.shape == (*shape[:-1], shape[-1] // 2)
        assert_close(y, op.ref(x), dtype, msg=op.name)
    for approximate in APPROX:
        assert_close(OPS.gelu(x, approximate), gelu_ref(x, approximate), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("rows,d", [(3, 100003), (2, 131072)])
def test_long_rows(device, dtype, rows, d):
    x = activation_inputs((rows, 2 * d), dtype, seed=10)
    for op in GATED:
        assert_close(op(x), op.ref(x), dtype, msg=op.name)
    assert_close(OPS.gelu(x, "tanh"), gelu_ref(x, "tanh"), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("rows,d", [(3, 3), (5, 769), (2, 2048)])
def test_unaligned_inputs(device, dtype, rows, d):
    # x and the gradients start one element past an aligned address: vector loads may not assume alignment
    x = unaligned(activation_inputs((rows, 2 * d), dtype, seed=11))
    g = unaligned(torch.randn(rows, d).to(dtype=dtype, device=x.device))
    gx = unaligned(torch.randn(rows, 2 * d).to(dtype=dtype, device=x.device))
    assert x.data_ptr() % 16 != 0 and g.data_ptr() % 16 != 0
    for op in GATED:
        assert_close(op(x), op.ref(x), dtype, msg=op.name)
        ref = reference_grads(op.ref, [x.clone().requires_grad_()], [g])[0]
        assert_grad_close(op.backward(g, x), ref, dtype, "d" + op.name)
    for approximate in APPROX:
        assert_close(OPS.gelu(x, approximate), gelu_ref(x, approximate), dtype)
        ref = reference_grads(lambda t: gelu_ref(t, approximate), [x.clone().requires_grad_()], [gx])[0]
        assert_grad_close(OPS.gelu_backward(gx, x, approximate), ref, dtype, "dgelu")


@pytest.mark.parametrize("layout", ["strided", "broadcast", "transposed"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_noncontiguous_inputs(target, layout, dtype):
    if layout == "transposed":  # rows without a single stride: copied to a contiguous tensor first
        x = activation_inputs((2 * 769, 6), dtype, seed=3).t()
    else:
        x = activation_inputs((4, 6, 2 * 769), dtype, layout=layout, seed=3)
    assert not x.is_contiguous()
    for op in GATED:
        y = op(x)
        assert y.is_contiguous()
        assert_close(y, op.ref(x), dtype, msg=op.name)
    y = OPS.gelu(x, "none")
    assert y.is_contiguous()
    assert_close(y, gelu_ref(x, "none"), dtype)
    # column slices: rows of one element with a stride
    col = activation_inputs((300, 7), dtype, seed=4)[:, 2:3]
    assert_close(OPS.gelu(col, "tanh"), gelu_ref(col, "tanh"), dtype)


def test_empty(device):
    for shape in [(0, 8), (4, 0), (0,)]:
        x = torch.randn(shape, device=device)
        want = (*shape[:-1], shape[-1] // 2)
        for op in GATED:
            assert op(x).shape == want
            assert op.backward(torch.randn(want, device=device), x).shape == x.shape
    for shape in [(0,), (3, 0), (0, 5)]:
        x = torch.randn(shape, device=device)
        assert OPS.gelu(x, "none").shape == x.shape
        assert OPS.gelu_backward(x, x, "tanh").shape == x.shape


# ---- gradients ----

@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("rows,d", [(1, 1), (3, 8), (37, 769), (61, 2049)])
@pytest.mark.parametrize("op", GATED, ids=GATED_IDS)
def test_gated_gradients(target, dtype, rows, d, op):
    x = activation_inputs((rows, 2 * d), dtype, seed=5).requires_grad_()
    g = torch.randn(rows, d).to(dtype=dtype, device=x.device)
    op(x).backward(g)
    assert x.grad.dtype == dtype and x.grad.shape == x.shape
    assert_grad_close(x.grad, reference_grads(op.ref, [x], [g])[0], dtype, "dx")


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("shape", [(), (5,), (37, 769), (61, 4099)], ids=str)
@pytest.mark.parametrize("approximate", APPROX)
def test_gelu_gradients(target, dtype, shape, approximate):
    x = activation_inputs(shape, dtype, seed=6).requires_grad_()
    g = torch.randn(shape).to(dtype=dtype, device=x.device)
    OPS.gelu(x, approximate).backward(g)
    ref = reference_grads(lambda t: gelu_ref(t, approximate), [x], [g])[0]
    assert_grad_close(x.grad, ref, dtype, "dx")


def test_gradient_with_strided_and_broadcast_grad(device):
    x = activation_inputs((8, 2 * 129), torch.float32, layout="strided", seed=7).requires_grad_()
    for op in GATED:
        x.grad = None
        op(x).sum().backward()  # an expanded (stride-0) upstream gradient
        ref = reference_grads(op.ref, [x], [torch.ones(8, 129, device=device)])[0]
        assert_grad_close(x.grad, ref, torch.float32, op.name)
    x.grad = None
    OPS.gelu(x, "none").sum().backward()
    ref = reference_grads(lambda t: gelu_ref(t, "none"), [x], [torch.ones(8, 2 * 129, device=device)])[0]
    assert_grad_close(x.grad, ref, torch.float32, "gelu")


def test_gradcheck_and_gradgradcheck(device):
    # double backward runs through the backward ops' Autograd kernels (differentiable ATen composites)
    x = (torch.randn(3, 2 * 7, dtype=torch.float64, device=device) * 2).requires_grad_()
    for op in GATED:
        assert torch.autograd.gradcheck(op, (x,))
        assert torch.autograd.gradgradcheck(op, (x,))
    for approximate in APPROX:
        fn = lambda t: OPS.gelu(t, approximate)  # noqa: E731
        assert torch.autograd.gradcheck(fn, (x,))
        assert torch.autograd.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
def test_opcheck(device, requires_grad):
    # each case checks silu_and_mul, one gelu_and_mul and one gelu variant (alternating approximate), with
    # their backward ops
    cases = [((3, 8), torch.float32, "none"), ((2, 3, 2 * 69), torch.bfloat16, "tanh"), ((6,), torch.float64, "none")]
    for shape, dtype, approximate in cases:
        x = activation_inputs(shape, dtype, seed=8).requires_grad_(requires_grad)
        g = torch.randn(*shape[:-1], shape[-1] // 2).to(dtype=dtype, device=device).requires_grad_(requires_grad)
        for op in (GATED[0], GATED[1] if approximate == "none" else GATED[2]):
            fwd, bwd = op.ops
            opcheck(fwd.default, (x, *op.extra))
            opcheck(bwd.default, (g, x, *op.extra))
        gx = torch.randn(shape).to(dtype=dtype, device=device).requires_grad_(requires_grad)
        opcheck(OPS.gelu.default, (x, approximate))
        opcheck(OPS.gelu_backward.default, (gx, x, approximate))
    opcheck(OPS.gelu.default, (torch.tensor(0.5, device=device, requires_grad=requires_grad), "tanh"))


def test_compile_fullgraph_no_recompile(device):
    from torch._dynamo.testing import CompileCounterWithBackend

    def model(x):
        half = OPS.gelu(x, "none")[..., ::2]
        return OPS.silu_and_mul(x) * 2.0 + OPS.gelu_and_mul(x, "tanh") + half

    def model_ref(x):
        return silu_and_mul_ref(x) * 2.0 + gelu_and_mul_ref(x, "tanh") + gelu_ref(x, "none")[..., ::2]

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(model, backend=counter, fullgraph=True, dynamic=True)
    for batch, d in ((2, 48), (3, 48), (7, 80)):
        x = activation_inputs((batch, 2 * d), torch.float32, seed=batch).requires_grad_()
        out = compiled(x)
        assert_close(out, model_ref(x), torch.float32)
        out.sum().backward()
        ref = reference_grads(model_ref, [x], [torch.ones(batch, d, device=device)])[0]
        assert_grad_close(x.grad, ref, torch.float32, "dx")
    assert counter.frame_count == 1, f"recompiled across shapes: {counter.frame_count} frames"


# ---- the portable (ATen) kernels ----

@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_portable_kernel(dtype):
    x = activation_inputs((37, 2 * 769), dtype, layout="strided", seed=9)
    g = torch.randn(37, 769).to(dtype)
    for op in GATED:
        fwd, bwd = op.ops
        assert op.aten_op in aten_ops_called(lambda: portable(fwd, x, *op.extra))
        assert op.aten_op not in aten_ops_called(lambda: op(x))
        assert_close(portable(fwd, x, *op.extra), op.ref(x), dtype, msg="portable " + op.name)
        ref = reference_grads(op.ref, [x.clone().requires_grad_()], [g])[0]
        assert_grad_close(portable(bwd, g, x, *op.extra), ref, dtype, "portable d" + op.name)
    gx = torch.randn(x.shape).to(dtype)
    for approximate in APPROX:
        assert "aten::gelu" in aten_ops_called(lambda: portable(OPS.gelu, x, approximate))
        assert "aten::gelu" not in aten_ops_called(lambda: OPS.gelu(x, approximate))
        assert_close(portable(OPS.gelu, x, approximate), gelu_ref(x, approximate), dtype)
        ref = reference_grads(lambda t: gelu_ref(t, approximate), [x.clone().requires_grad_()], [gx])[0]
        assert_grad_close(portable(OPS.gelu_backward, gx, x, approximate), ref, dtype, "portable dgelu")


# ---- registration and errors ----

def test_dispatch_keys_and_schema():
    ops = ("silu_and_mul", "gelu_and_mul", "gelu", "silu_and_mul_backward", "gelu_and_mul_backward", "gelu_backward")
    for op in ops:
        for key in ("CPU", "Meta", "MPS", "PrivateUse1", "Autograd"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", key), (op, key)
        assert torch.Tag.pt2_compliant_tag in getattr(OPS, op).default.tags

    def args(op):
        return [(a.name, str(a.type), a.default_value) for a in getattr(OPS, op).default._schema.arguments]

    # DESIGN.md: silu_and_mul(Tensor x) -> Tensor; gelu_and_mul / gelu(Tensor x, str approximate="none") -> Tensor
    assert args("silu_and_mul") == [("x", "Tensor", None)]
    assert args("gelu_and_mul") == [("x", "Tensor", None), ("approximate", "str", "none")]
    assert args("gelu") == [("x", "Tensor", None), ("approximate", "str", "none")]
    for op in ops:
        assert [str(r.type) for r in getattr(OPS, op).default._schema.returns] == ["Tensor"]


def test_meta_kernels_shapes_and_checks():
    x = torch.empty(5, 3, 2 * 7, device="meta", dtype=torch.bfloat16)
    g = torch.empty(5, 3, 7, device="meta", dtype=torch.bfloat16)
    for out, shape in [(OPS.silu_and_mul(x), (5, 3, 7)), (OPS.gelu_and_mul(x, "tanh"), (5, 3, 7)),
                       (OPS.gelu(x, "none"), x.shape), (OPS.silu_and_mul_backward(g, x), x.shape),
                       (OPS.gelu_and_mul_backward(g, x, "none"), x.shape), (OPS.gelu_backward(x, x, "tanh"), x.shape)]:
        assert out.shape == shape and out.dtype == torch.bfloat16 and out.device.type == "meta"
    with pytest.raises(ValueError, match=r"^yirage.silu_and_mul: x must have an even last dim"):
        OPS.silu_and_mul(torch.empty(2, 5, device="meta"))
    with pytest.raises(ValueError, match=r'^yirage.gelu: approximate must be "none" or "tanh", got "x"$'):
        OPS.gelu(x, "x")
    with pytest.raises(ValueError, match=r"^yirage.gelu_and_mul_backward: grad_out must have shape"):
        OPS.gelu_and_mul_backward(x, x, "none")


X = torch.randn(4, 16)
G = torch.randn(4, 8)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: OPS.silu_and_mul(X.int()), TypeError,
     r"^yirage.silu_and_mul: x must have dtype float32, float16, bfloat16 or float64, got int32$"),
    (lambda: OPS.gelu_and_mul(X.to(torch.complex64)), TypeError,
     r"^yirage.gelu_and_mul: x must have dtype float32, float16, bfloat16 or float64, got complex64$"),
    (lambda: OPS.gelu(X.long(), "none"), TypeError, r"^yirage.gelu: x must have dtype .*, got int64$"),
    (lambda: OPS.silu_and_mul(torch.randn(4, 7)), ValueError,
     r"^yirage.silu_and_mul: x must have an even last dim \(\.\.\., 2\*d\), got shape \[4, 7\]$"),
    (lambda: OPS.gelu_and_mul(torch.randn(3), "tanh"), ValueError,
     r"^yirage.gelu_and_mul: x must have an even last dim \(\.\.\., 2\*d\), got shape \[3\]$"),
    (lambda: OPS.silu_and_mul(torch.tensor(2.0)), ValueError,
     r"^yirage.silu_and_mul: x must have at least 1 dimension \(\.\.\., 2\*d\), got a 0-dim tensor$"),
    (lambda: OPS.gelu_and_mul(torch.tensor(2.0)), ValueError, r"gelu_and_mul: x must have at least 1 dimension"),
    (lambda: OPS.gelu(X, "erf"), ValueError,
     r'^yirage.gelu: approximate must be "none" or "tanh", got "erf"$'),
    (lambda: OPS.gelu_and_mul(X, "Tanh"), ValueError,
     r'^yirage.gelu_and_mul: approximate must be "none" or "tanh", got "Tanh"$'),
    (lambda: OPS.gelu_backward(X, X, ""), ValueError,
     r'^yirage.gelu_backward: approximate must be "none" or "tanh", got ""$'),
    (lambda: OPS.gelu_and_mul_backward(G, X, "sigmoid"), ValueError,
     r'^yirage.gelu_and_mul_backward: approximate must be "none" or "tanh", got "sigmoid"$'),
    (lambda: OPS.silu_and_mul_backward(X, X), ValueError,
     r"^yirage.silu_and_mul_backward: grad_out must have shape \(\.\.\., d\) = \[4, 8\] for x of shape \[4, 16\], "
     r"got \[4, 16\]$"),
    (lambda: OPS.gelu_and_mul_backward(G.view(2, 2, 8), X, "none"), ValueError,
     r"gelu_and_mul_backward: grad_out must have shape \(\.\.\., d\) = \[4, 8\]"),
    (lambda: OPS.silu_and_mul_backward(G.half(), X), TypeError,
     r"^yirage.silu_and_mul_backward: grad_out must have the dtype of x \(float32\), got float16$"),
    (lambda: OPS.silu_and_mul_backward(G, torch.randn(4, 15)), ValueError, r"x must have an even last dim"),
    (lambda: OPS.gelu_backward(G, X, "none"), ValueError,
     r"^yirage.gelu_backward: grad_out must have the shape of x \[4, 16\], got \[4, 8\]$"),
    (lambda: OPS.gelu_backward(X.double(), X, "tanh"), TypeError,
     r"^yirage.gelu_backward: grad_out must have the dtype of x \(float32\), got float64$"),
    (lambda: OPS.gelu_backward(X.to("meta"), X, "none"), RuntimeError,
     r"^yirage.gelu_backward: grad_out must be on the device of x \(cpu\), got meta$"),
    (lambda: OPS.gelu_and_mul_backward(G.to("meta"), X, "none"), RuntimeError,
     r"gelu_and_mul_backward: grad_out must be on the device of x \(cpu\), got meta"),
], ids=["x_int", "x_complex", "gelu_x_long", "odd_dim", "odd_1d", "zero_dim", "zero_dim_gelu_and_mul",
        "approx_gelu", "approx_gated", "approx_backward", "approx_gated_backward", "grad_shape_gated",
        "grad_dims_gated", "grad_dtype_gated", "odd_backward", "grad_shape_gelu", "grad_dtype_gelu",
        "grad_device_gelu", "grad_device_gated"])
def test_bad_input_messages(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
