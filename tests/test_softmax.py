"""softmax, log_softmax and their backward ops against the float64 reference.

Values for every dtype and CPU kernel variant over row lengths that break kernels and every dim of 3-D and
4-D tensors (odd inner sizes: the column path's tails), large values, -inf masks and all -inf rows, NaN and
+inf, 0-dim and empty tensors, non-contiguous and broadcast inputs, gradients (vs float64 autograd and
gradcheck), opcheck, torch.compile, the portable kernel, and the bad-input matrix with its messages.
"""
import pytest
import torch
from torch.library import opcheck

import yirage_ext
from yirage_ext.testing.inputs import softmax_inputs
from yirage_ext.testing.reference import assert_close, log_softmax_ref, softmax_ref

from _helpers import aten_ops_called, assert_grad_close, dtype_id, portable, reference_grads, unaligned

OPS = torch.ops.yirage
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# name -> (op, float64 reference, backward op, torch's own function)
KINDS = {
    "softmax": (OPS.softmax, softmax_ref, OPS.softmax_backward, torch.softmax),
    "log_softmax": (OPS.log_softmax, log_softmax_ref, OPS.log_softmax_backward, torch.log_softmax),
}
KIND_IDS = list(KINDS)
# (rows, N) for the last dim: sizes 1 / odd / non-power-of-2 / larger than a vector or a cache line; on CUDA
# 16384 and 32768 are the block kernel's 4 and 8 vectors per thread (bf16/fp16; 8 and global for fp32), and rows of
# 1024 vectors (4096 fp32, 8192 bf16/fp16) its forward's 4 a thread where 2 would fit
ROW_SHAPES = [(1, 1), (3, 2), (3, 8), (5, 31), (200, 768), (3, 769), (3, 4096), (67, 5125), (4, 8192), (2, 16384),
              (3, 32768), (2, 100003)]
# 3-D / 4-D shapes for every dim: inner sizes 1, < one vector, vector + tail, several column blocks (for the
# fp32 AVX2 kernel: 2 x 600 x 72 is blocks of 32 + 32 + 8 columns; 1 x 4500 x 24, blocks of 8 columns)
ND_SHAPES = [(3, 5, 7), (2, 3, 17, 5), (4, 33, 20), (2, 700, 3), (2, 600, 72), (1, 4500, 24)]


def run(kind, x, dim):
    op, ref, _, _ = KINDS[kind]
    return op(x, dim), ref(x, dim)


# ------------------------------------------------------------------------------------------ values


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("rows,n", ROW_SHAPES)
def test_forward_values(target, kind, dtype, rows, n):
    x = softmax_inputs((rows, n), dtype, seed=rows * 7 + n)
    y, want = run(kind, x, -1)
    assert y.dtype == dtype and y.shape == x.shape and y.is_contiguous()
    assert_close(y, want, dtype)


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("shape", ND_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_dim(target, kind, dtype, shape):
    x = softmax_inputs(shape, dtype, seed=sum(shape))
    for dim in range(-len(shape), len(shape)):
        y, want = run(kind, x, dim)
        assert y.shape == x.shape and y.is_contiguous()
        assert_close(y, want, dtype, msg=f"dim={dim}")


@pytest.mark.parametrize("kind", KIND_IDS)
def test_matches_torch(kind):
    op, _, _, torch_fn = KINDS[kind]
    for shape, dim in [((7, 3, 100), -1), ((7, 3, 100), 1), ((2, 3, 4, 5), 0)]:
        x = softmax_inputs(shape, torch.float32, seed=1)
        torch.testing.assert_close(op(x, dim), torch_fn(x, dim))


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("dim", [-1, 0])
def test_large_values(target, kind, dtype, dim):
    # a common offset of 1e4 (exp would overflow without the max shift) and a spread of 1e4 (one-hot rows)
    for offset, scale in [(1e4, 2.0), (-1e4, 2.0), (0.0, 1e4)]:
        x = softmax_inputs((64, 513), dtype, offset=offset, scale=scale, seed=2)
        y, want = run(kind, x, dim)
        assert torch.isfinite(y).all()
        assert_close(y, want, dtype, msg=f"offset={offset} scale={scale}")


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=dtype_id)
@pytest.mark.parametrize("dim", [-1, 1, 0])
def test_masked_entries_and_all_masked_rows(target, kind, dtype, dim):
    x = softmax_inputs((40, 37, 21), dtype, masked=0.4, seed=3)
    # slices along `dim` that are entirely -inf (attention rows that see no key): NaN, as torch gives
    index = [slice(None)] * 3
    index[dim] = slice(None)
    index[(dim + 1) % 3] = 5
    x[tuple(index)] = float("-inf")
    y, want = run(kind, x, dim)
    assert_close(y, want, dtype)
    torch.testing.assert_close(y, KINDS[kind][3](x, dim), equal_nan=True, atol=2e-2, rtol=2e-2)
    assert torch.isnan(y[tuple(index)]).all()
    live = torch.isfinite(x) & ~torch.isnan(y)
    masked = torch.isneginf(x) & ~torch.isnan(y)
    assert masked.any() and live.any()
    if kind == "softmax":
        assert (y[masked] == 0).all()
    else:
        assert torch.isneginf(y[masked]).all()


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("n", [8192, 16384])
def test_long_rows_uneven_regions(target, kind, dtype, n):
    # rows long enough for the CUDA block kernel's 4 or 8 vectors a thread, whose warps each reduce their own part
    # of a row before the parts are merged: parts whose maxima lie far apart, parts that are entirely -inf next to
    # finite ones, a row that is -inf but for a few entries, an all -inf row (NaN) and a row holding +inf (NaN)
    x = softmax_inputs((7, n), dtype, seed=n)
    x[0, n // 2:] += 40.0  # the second half dominates: the first half's exps underflow against it
    x[1, : n // 2] = float("-inf")
    x[2, 100:] = float("-inf")
    x[3] = float("-inf")
    x[4, ::3] = float("-inf")
    x[4, 1::3] -= 60.0
    x[5, n - 1] = float("inf")
    y, want = run(kind, x, -1)
    assert_close(y, want, dtype)
    torch.testing.assert_close(y, KINDS[kind][3](x, -1), equal_nan=True, atol=2e-2, rtol=2e-2)
    assert torch.isnan(y[3]).all() and torch.isnan(y[5]).all() and not torch.isnan(y[[0, 1, 2, 4, 6]]).any()
    if kind == "softmax":
        assert (y[1, : n // 2] == 0).all() and (y[2, 100:] == 0).all()
        torch.testing.assert_close(y[:3].double().sum(-1), torch.ones(3, dtype=torch.float64, device=y.device),
                                   atol=1e-2 if dtype == torch.bfloat16 else 1e-5, rtol=0)


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dim", [-1, 0])
def test_nan_and_inf_rows(target, kind, dim):
    x = softmax_inputs((6, 45), torch.float32, seed=4)
    if dim == 0:
        x = x.t().contiguous()
    rows = x if dim == -1 else x.t()
    rows[1, 7] = float("nan")
    rows[2, 44] = float("inf")
    rows[3, :] = float("inf")
    y = KINDS[kind][0](x, dim)
    torch.testing.assert_close(y, KINDS[kind][3](x, dim), equal_nan=True)
    yr = y if dim == -1 else y.t()
    assert torch.isnan(yr[1:4]).all() and not torch.isnan(yr[[0, 4, 5]]).any()


@pytest.mark.parametrize("kind", KIND_IDS)
def test_zero_dim_as_torch(kind):
    # torch treats a 0-dim tensor as one element with dim in [-1, 0]: softmax 1, log_softmax 0
    op, ref, _, torch_fn = KINDS[kind]
    for v in [2.0, -1e4, float("-inf"), float("nan")]:
        x = torch.tensor(v)
        for dim in (0, -1):
            y = op(x, dim)
            assert y.shape == () and y.dtype == x.dtype
            torch.testing.assert_close(y, torch_fn(x, dim), equal_nan=True)
    x = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    op(x, 0).backward()
    assert x.grad.shape == () and x.grad.item() == 0.0
    with pytest.raises(IndexError, match=rf"yirage.{kind}: dim must be in the range \[-1, 0\] for x with 0 "
                                         r"dimensions, got 1"):
        op(torch.tensor(1.0), 1)


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("shape,dim", [((2, 3, 769), -1), ((65537, 24), -1), ((65537, 24), 0), ((5125,), 0),
                                       ((2, 1, 3, 1, 1), 1)])
def test_leading_dims_and_many_rows(device, kind, dtype, shape, dim):
    x = softmax_inputs(shape, dtype, device=device, seed=5)
    y, want = run(kind, x, dim)
    assert_close(y, want, dtype)


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("shape,dim", [((2, 262144), -1), ((3, 100003), -1), ((100003, 3), 0)])
def test_long_rows(device, kind, dtype, shape, dim):
    op, ref, _, _ = KINDS[kind]
    x = softmax_inputs(shape, dtype, seed=13).requires_grad_()
    y = op(x, dim)
    assert_close(y, ref(x, dim), dtype)
    g = torch.randn(shape).to(dtype=dtype, device=x.device)
    y.backward(g)
    (want,) = reference_grads(lambda a: ref(a, dim), [x], [g])
    assert_grad_close(x.grad, want, dtype, "dx")


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("shape,dim", [((3, 8), -1), ((5, 769), -1), ((2, 4096), -1), ((33, 7), 0)])
def test_unaligned_inputs(device, kind, dtype, shape, dim):
    # x, out and grad_out start one element past an aligned address: vector loads may not assume alignment
    op, ref, bwd, _ = KINDS[kind]
    x = unaligned(softmax_inputs(shape, dtype, seed=14))
    assert x.data_ptr() % 16 != 0
    y = op(x, dim)
    assert_close(y, ref(x, dim), dtype)
    g = unaligned(torch.randn(shape).to(dtype=dtype, device=x.device))
    (want,) = reference_grads(lambda a: ref(a, dim), [x.clone().requires_grad_()], [g])
    assert_grad_close(bwd(g, unaligned(y), dim), want, dtype, "dx")


def _noncontiguous(layout, dtype):
    base = softmax_inputs((4, 6, 77), dtype, seed=6)
    if layout == "strided":  # padded last dim: a slice of a wider tensor
        return softmax_inputs((4, 6, 77), dtype, layout="strided", seed=6)
    if layout == "broadcast":  # stride 0 on the first dim
        return softmax_inputs((4, 6, 77), dtype, layout="broadcast", seed=6)
    if layout == "transposed":  # inner dims not contiguous at all
        return base.transpose(0, 2)
    if layout == "expand_last":  # stride 0 on the last dim
        return base[..., :1].expand(4, 6, 77)
    return base[:, ::2, 1:]  # a strided middle dim and an offset


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("layout", ["strided", "broadcast", "transposed", "expand_last", "sliced"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
def test_noncontiguous_inputs(target, kind, layout, dtype):
    x = _noncontiguous(layout, dtype)
    assert not x.is_contiguous()
    for dim in range(x.dim()):
        y, want = run(kind, x, dim)
        assert y.is_contiguous() and y.shape == x.shape
        assert_close(y, want, dtype, msg=f"{layout} dim={dim}")


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("shape,dim", [((0, 8), -1), ((0, 8), 0), ((4, 0), -1), ((4, 0), 0), ((0,), 0),
                                       ((2, 0, 3), 1), ((2, 0, 3), 2)])
def test_empty(device, kind, shape, dim):
    op, _, bwd, _ = KINDS[kind]
    x = torch.randn(shape, device=device)
    assert op(x, dim).shape == x.shape
    assert bwd(x, x, dim).shape == x.shape
    xr = x.clone().requires_grad_()
    op(xr, dim).sum().backward()
    assert xr.grad.shape == x.shape


# --------------------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("shape,dim", [((1, 1), -1), ((3, 8), -1), ((37, 769), -1), ((64, 2048), -1),
                                       ((3, 16384), -1), ((37, 769), 0), ((3, 33, 20), 1), ((2, 700, 3), 1), ((1, 4500, 24), 1)])
def test_gradients(target, kind, dtype, shape, dim):
    op, ref, _, _ = KINDS[kind]
    x = softmax_inputs(shape, dtype, seed=7).requires_grad_()
    g = torch.randn(shape).to(dtype=dtype, device=x.device)
    op(x, dim).backward(g)
    (want,) = reference_grads(lambda a: ref(a, dim), [x], [g])
    assert x.grad.dtype == dtype and x.grad.shape == x.shape
    assert_grad_close(x.grad, want, dtype, f"dx dim={dim}")


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dim", [-1, 0])
def test_gradient_with_broadcast_grad_and_masks(device, kind, dim):
    op, ref, _, _ = KINDS[kind]
    x = softmax_inputs((8, 129), torch.float32, masked=0.3, seed=8).requires_grad_()
    op(x, dim).sum().backward()  # an expanded (stride-0) upstream gradient
    assert torch.isfinite(x.grad).all()
    (want,) = reference_grads(lambda a: ref(a, dim), [x], [torch.ones(8, 129, device=device)])
    assert_grad_close(x.grad, want, torch.float32, "dx")


def test_saves_output_not_input(device):
    x = softmax_inputs((4, 9), torch.float64, seed=9).requires_grad_()
    for op in (OPS.softmax, OPS.log_softmax):
        packed = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
            y = op(x, -1)
        assert len(packed) == 1 and torch.equal(packed[0], y) and not torch.equal(packed[0], x)


def test_gradcheck(device):
    for shape, dim in [((3, 7), -1), ((3, 7), 0), ((2, 3, 5), 1)]:
        x = torch.randn(*shape, dtype=torch.float64, device=device, requires_grad=True)
        for op in (OPS.softmax, OPS.log_softmax):
            assert torch.autograd.gradcheck(lambda a: op(a, dim), (x,))


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
def test_opcheck(device, requires_grad):
    for shape, dtype, dim in [((3, 8), torch.float32, -1), ((2, 3, 19), torch.bfloat16, 1),
                              ((5,), torch.float64, 0), ((4, 6, 10), torch.float16, 0)]:
        x = softmax_inputs(shape, dtype, seed=10).requires_grad_(requires_grad)
        for kind in KIND_IDS:
            op, _, bwd, _ = KINDS[kind]
            opcheck(op.default, (x, dim))
            if not requires_grad:
                opcheck(bwd.default, (torch.randn(shape).to(dtype=dtype, device=device), op(x, dim), dim))


def test_compile_fullgraph_no_recompile(device):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda x: OPS.softmax(x, -1) * 2.0 + OPS.log_softmax(x, 0), backend=counter,
                             fullgraph=True, dynamic=True)

    def ref(a):
        return softmax_ref(a, -1) * 2.0 + log_softmax_ref(a, 0)

    for batch in (2, 3, 7):
        x = softmax_inputs((batch, 96), torch.float32, seed=batch).requires_grad_()
        out = compiled(x)
        assert_close(out, ref(x), torch.float32)
        g = torch.randn(batch, 96, device=device)
        out.backward(g)
        (want,) = reference_grads(ref, [x], [g])
        assert_grad_close(x.grad, want, torch.float32, "dx")
    assert counter.frame_count == 1, f"recompiled across batch sizes: {counter.frame_count} frames"


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_portable_kernel(kind, dtype):
    op, ref, bwd, _ = KINDS[kind]
    x = softmax_inputs((37, 769), dtype, layout="strided", masked=0.1, seed=11)
    for dim in (-1, 0):
        assert "aten::amax" in aten_ops_called(lambda: portable(op, x, dim))
        assert "aten::amax" not in aten_ops_called(lambda: op(x, dim))
        y = portable(op, x, dim)
        assert y.is_contiguous() and y.dtype == dtype
        assert_close(y, ref(x, dim), dtype)
        g = torch.randn(37, 769).to(dtype)
        (want,) = reference_grads(lambda a: ref(a, dim), [x.clone().requires_grad_()], [g])
        assert_grad_close(portable(bwd, g, op(x, dim), dim), want, dtype, f"portable dx dim={dim}")


def test_dispatch_keys_and_schema():
    for op in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward"):
        for key in ("CPU", "Meta", "MPS", "PrivateUse1"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", key), (op, key)
        assert torch.Tag.pt2_compliant_tag in getattr(OPS, op).default.tags
    for op in ("softmax", "log_softmax"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", "Autograd")
        args = [(a.name, str(a.type), a.default_value) for a in getattr(OPS, op).default._schema.arguments]
        # DESIGN.md: softmax(Tensor x, int dim=-1) -> Tensor, log_softmax(Tensor x, int dim=-1) -> Tensor
        assert args == [("x", "Tensor", None), ("dim", "int", -1)]
        assert [str(r.type) for r in getattr(OPS, op).default._schema.returns] == ["Tensor"]
    for op in ("softmax_backward", "log_softmax_backward"):
        args = [(a.name, str(a.type), a.default_value) for a in getattr(OPS, op).default._schema.arguments]
        assert args == [("grad_out", "Tensor", None), ("out", "Tensor", None), ("dim", "int", -1)]
    assert yirage_ext.softmax is not None and yirage_ext.log_softmax is not None


def test_python_wrappers():
    x = softmax_inputs((3, 5, 9), torch.float32, seed=12)
    assert torch.equal(yirage_ext.softmax(x), OPS.softmax(x, -1))
    assert torch.equal(yirage_ext.log_softmax(x, dim=1), OPS.log_softmax(x, 1))


X = torch.randn(4, 16)


@pytest.mark.parametrize("kind", KIND_IDS)
@pytest.mark.parametrize("call,exc,pattern", [
    (lambda op, bwd: op(X.int(), -1), TypeError,
     r"yirage.{op}: x must have dtype float32, float16, bfloat16 or float64, got int32$"),
    (lambda op, bwd: op(X.to(torch.complex64), -1), TypeError, r"x must have dtype .*, got complex64$"),
    (lambda op, bwd: op(X, 2), IndexError,
     r"yirage.{op}: dim must be in the range \[-2, 1\] for x with 2 dimensions, got 2$"),
    (lambda op, bwd: op(X, -3), IndexError, r"yirage.{op}: dim must be in the range \[-2, 1\] .* got -3$"),
    (lambda op, bwd: op(X[0], 1), IndexError,
     r"yirage.{op}: dim must be in the range \[-1, 0\] for x with 1 dimension, got 1$"),
    (lambda op, bwd: bwd(torch.randn(4, 15), X, -1), ValueError,
     r"yirage.{op}_backward: grad_out must have the shape of out \[4, 16\], got \[4, 15\]"),
    (lambda op, bwd: bwd(X.half(), X, -1), TypeError,
     r"yirage.{op}_backward: grad_out must have the dtype of out \(float32\), got float16"),
    (lambda op, bwd: bwd(X.to("meta"), X, -1), RuntimeError,
     r"yirage.{op}_backward: grad_out must be on the device of out \(cpu\), got meta"),
    (lambda op, bwd: bwd(X.long(), X.long(), -1), TypeError, r"yirage.{op}_backward: out must have dtype"),
    (lambda op, bwd: bwd(X, X, 5), IndexError, r"yirage.{op}_backward: dim must be in the range \[-2, 1\]"),
], ids=["x_dtype", "x_complex", "dim_high", "dim_low", "dim_1d", "grad_shape", "grad_dtype", "grad_device",
        "out_dtype", "bwd_dim"])
def test_bad_input_messages(kind, call, exc, pattern):
    op, _, bwd, _ = KINDS[kind]
    with pytest.raises(exc, match=pattern.format(op=kind)):
        call(op, bwd)


@pytest.mark.parametrize("kind", KIND_IDS)
def test_bad_input_on_meta(kind):
    # the Meta kernels (torch.compile's view of the op) run the same checks
    op, _, bwd, _ = KINDS[kind]
    with pytest.raises(IndexError, match=rf"yirage.{kind}: dim must be in the range \[-2, 1\]"):
        op(X.to("meta"), 2)
    with pytest.raises(ValueError, match=rf"yirage.{kind}_backward: grad_out must have the shape of out"):
        bwd(torch.empty(4, 15, device="meta"), X.to("meta"), -1)
