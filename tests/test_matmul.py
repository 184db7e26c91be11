"""matmul against the float64 reference. GEMM outputs are compared with gemm_tolerance(dtype, K): the fp32
atol grows as sqrt(K / 64) (K-term sums), bf16/fp16 are bounded by output rounding (see reference.py)."""
import pytest
import torch
from torch.library import opcheck

from yirage_ext.testing.inputs import matmul_inputs
from yirage_ext.testing.reference import assert_gemm_close, matmul_ref

from _helpers import aten_ops_called, assert_grad_close, dtype_id, portable, reference_grads, unaligned

OPS = torch.ops.yirage
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
# (M, K, N): ones, odd, non-powers of 2, a row vector (M = 1), K = 1, larger than BLAS blocks
SHAPES = [(1, 1, 1), (3, 5, 7), (1, 769, 33), (64, 1, 100), (37, 129, 255), (300, 1000, 257), (513, 2048, 384)]


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_forward_values(target, dtype, m, k, n):
    inp = matmul_inputs((m, k), (k, n), dtype, seed=m + k + n)
    y = OPS.matmul(inp.a, inp.b)
    assert y.dtype == dtype and y.shape == (m, n) and y.is_contiguous()
    assert_gemm_close(y, matmul_ref(inp.a, inp.b), k, dtype)


# fp32 on AMD CPUs with AVX-512 runs on the library's own GEMM (kernels/cpu/sgemm.h; elsewhere torch's BLAS, and
# these check that): blocks of 512 K x 1024 N x 72 M, B unpacked for up to 24 rows. Shapes past several blocks each
# way with partial tiles, the few-rows path (7, 24) and the first packed size (25), in every operand layout; the
# batch shapes take the per-matrix path that replaces bmm there.
SGEMM_SHAPES = [((7, 300), (300, 1100)), ((24, 33), (33, 70)), ((25, 600), (600, 70)), ((300, 1030), (1030, 1100)),
                ((145, 259), (259, 1030)), ((3, 40, 520), (3, 520, 90)), ((2, 30, 64), (64, 80))]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "broadcast"])
@pytest.mark.parametrize("a_shape,b_shape", SGEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fp32_blocked_gemm(isa, layout, a_shape, b_shape):
    inp = matmul_inputs(a_shape, b_shape, torch.float32, layout=layout, seed=11)
    y = OPS.matmul(inp.a, inp.b)
    assert y.is_contiguous()
    assert_gemm_close(y, matmul_ref(inp.a, inp.b), a_shape[-1], torch.float32)


def test_matches_torch_matmul():
    inp = matmul_inputs((5, 7, 96), (96, 33), torch.float32, seed=1)
    torch.testing.assert_close(OPS.matmul(inp.a, inp.b), torch.matmul(inp.a, inp.b))


# batch layouts: b shared (folded into rows), both batched (bmm), a shared, broadcast on both sides
# (per-matrix products), size-1 batch dims, more dims on b than on a
BATCHES = [((4, 50, 70), (70, 40)), ((4, 50, 70), (4, 70, 40)), ((50, 70), (3, 70, 40)),
           ((2, 1, 9, 33), (3, 33, 17)), ((4, 1, 3, 5, 16), (5, 1, 16, 6)), ((1, 9, 8), (1, 8, 7)),
           ((3, 20, 64), (2, 1, 64, 20)), ((6, 300, 200), (6, 200, 100))]


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("a_shape,b_shape", BATCHES)
def test_batch_broadcast(device, dtype, a_shape, b_shape):
    inp = matmul_inputs(a_shape, b_shape, dtype, seed=2)
    y = OPS.matmul(inp.a, inp.b)
    ref = matmul_ref(inp.a, inp.b)
    assert y.shape == ref.shape and y.is_contiguous()
    assert_gemm_close(y, ref, a_shape[-1], dtype)


@pytest.mark.parametrize("layout", ["transposed", "strided", "broadcast"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("a_shape,b_shape", [((3, 40, 96), (3, 96, 50)), ((3, 200, 96), (96, 150))])
def test_noncontiguous_inputs(device, layout, dtype, a_shape, b_shape):
    inp = matmul_inputs(a_shape, b_shape, dtype, layout=layout, seed=3)
    assert not inp.a.is_contiguous()
    y = OPS.matmul(inp.a, inp.b)
    assert y.is_contiguous()
    assert_gemm_close(y, matmul_ref(inp.a, inp.b), a_shape[-1], dtype)


def test_mixed_layouts(device):
    # a transposed, b with padded rows, and a column-major b with a stride-0 batch
    k = 64
    a = torch.randn(3, k, 20, device=device).mT
    b = torch.randn(k, 30 + 5, device=device)[:, :30] / 8
    assert_gemm_close(OPS.matmul(a, b), matmul_ref(a, b), k, torch.float32)
    b2 = (torch.randn(30, k, device=device) / 8).t().expand(3, k, 30)
    assert_gemm_close(OPS.matmul(a, b2), matmul_ref(a, b2), k, torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=dtype_id)
@pytest.mark.parametrize("a_shape,b_shape", [((3, 5), (5, 7)), ((37, 129), (129, 65)), ((2, 33, 64), (64, 17))])
def test_unaligned_inputs(device, dtype, a_shape, b_shape):
    # a, b and the gradient start one element past an aligned address (as a view at offset 1 does)
    inp = matmul_inputs(a_shape, b_shape, dtype, seed=8)
    a, b = unaligned(inp.a), unaligned(inp.b)
    assert a.data_ptr() % 16 != 0 and b.data_ptr() % 16 != 0
    assert_gemm_close(OPS.matmul(a, b), matmul_ref(a, b), a_shape[-1], dtype)
    a, b = a.requires_grad_(), b.requires_grad_()  # still the unaligned views: the backward reads them
    y = OPS.matmul(a, b)
    g = unaligned(torch.randn(y.shape).to(dtype=dtype, device=device))
    y.backward(g)
    ref = reference_grads(matmul_ref, [a, b], [g])
    assert_grad_close(a.grad, ref[0], dtype, "da")
    assert_grad_close(b.grad, ref[1], dtype, "db")


def test_broadcast_is_not_materialized():
    # (2, 1, M, K) @ (3, K, N): products on strided views, no expanded copy of a or b
    inp = matmul_inputs((2, 1, 64, 128), (3, 128, 64), torch.float32, seed=4)
    called = aten_ops_called(lambda: OPS.matmul(inp.a, inp.b))
    assert not called & {"aten::contiguous", "aten::clone", "aten::copy_", "aten::reshape", "aten::bmm"}, called
    inp = matmul_inputs((6, 64, 128), (128, 64), torch.float32, seed=4)  # folded: one product, no copy
    called = aten_ops_called(lambda: OPS.matmul(inp.a, inp.b))
    assert not called & {"aten::contiguous", "aten::clone", "aten::copy_", "aten::mm", "aten::matmul"}, called


@pytest.mark.parametrize("a_shape,b_shape", [((0, 5), (5, 4)), ((3, 5), (5, 0)), ((3, 0), (0, 4)),
                                             ((0, 3, 5), (5, 4)), ((2, 3, 0), (1, 0, 4))])
def test_empty(device, a_shape, b_shape):
    a, b = torch.randn(a_shape, device=device), torch.randn(b_shape, device=device)
    y = OPS.matmul(a, b)
    assert y.shape == torch.matmul(a, b).shape
    assert torch.count_nonzero(y) == 0  # K = 0: zeros
    a.requires_grad_()
    b.requires_grad_()
    OPS.matmul(a, b).sum().backward()
    assert a.grad.shape == a.shape and b.grad.shape == b.shape


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("a_shape,b_shape", [((1, 1), (1, 1)), ((37, 65), (65, 19)), ((2, 1, 9, 33), (3, 33, 17)),
                                             ((4, 30, 20), (20, 10)), ((20, 30), (4, 30, 10))])
def test_gradients(device, dtype, a_shape, b_shape):
    inp = matmul_inputs(a_shape, b_shape, dtype, seed=5)
    a, b = inp.a.clone().requires_grad_(), inp.b.clone().requires_grad_()
    y = OPS.matmul(a, b)
    g = torch.randn(y.shape).to(dtype=dtype, device=device)
    y.backward(g)
    ref = reference_grads(matmul_ref, [a, b], [g])
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    assert_grad_close(a.grad, ref[0], dtype, "da")
    assert_grad_close(b.grad, ref[1], dtype, "db")


def test_gradcheck(device):
    for a_shape, b_shape in [((3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((2, 3, 4), (4, 2)), ((3, 4), (2, 4, 5))]:
        a = torch.randn(a_shape, dtype=torch.float64, device=device, requires_grad=True)
        b = torch.randn(b_shape, dtype=torch.float64, device=device, requires_grad=True)
        assert torch.autograd.gradcheck(OPS.matmul, (a, b))
        assert torch.autograd.gradgradcheck(OPS.matmul, (a, b))


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
def test_opcheck(device, requires_grad):
    for a_shape, b_shape, dtype in [((3, 8), (8, 5), torch.float32), ((2, 1, 3, 8), (3, 8, 5), torch.bfloat16),
                                    ((4, 5, 6), (6, 7), torch.float64), ((3, 40, 33), (3, 33, 20), torch.float16)]:
        inp = matmul_inputs(a_shape, b_shape, dtype, seed=6)
        opcheck(OPS.matmul.default, (inp.a.requires_grad_(requires_grad), inp.b.requires_grad_(requires_grad)))


def test_compile_fullgraph_no_recompile(device):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(lambda a, b: OPS.matmul(a, b) * 2.0, backend=counter, fullgraph=True, dynamic=True)
    b = (torch.randn(3, 32, 24, device=device) / 6).requires_grad_()
    for m in (2, 5, 9):
        a = torch.randn(3, m, 32, device=device, requires_grad=True)
        out = compiled(a, b)
        assert_gemm_close(out, matmul_ref(a, b) * 2.0, 32, torch.float32)
        out.sum().backward()
        ref = reference_grads(lambda x, y: matmul_ref(x, y) * 2.0, [a, b], [torch.ones(3, m, 24, device=device)])
        assert_grad_close(a.grad, ref[0], torch.float32, "da")
        assert_grad_close(b.grad, ref[1], torch.float32, "db")
        b.grad = None
    assert counter.frame_count == 1, f"recompiled across sizes: {counter.frame_count} frames"


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
def test_portable_kernel(dtype):
    inp = matmul_inputs((2, 1, 37, 65), (3, 65, 19), dtype, layout="strided", seed=7)
    a, b = inp.a, inp.b
    assert "aten::matmul" in aten_ops_called(lambda: portable(OPS.matmul, a, b))
    assert "aten::matmul" not in aten_ops_called(lambda: OPS.matmul(a, b))
    y = portable(OPS.matmul, a, b)
    assert y.dtype == dtype and y.is_contiguous()
    assert_gemm_close(y, matmul_ref(a, b), 65, dtype)


def test_dispatch_keys_and_schema():
    for key in ("CPU", "Meta", "MPS", "PrivateUse1", "Autograd"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key("yirage::matmul", key), key
    assert torch.Tag.pt2_compliant_tag in OPS.matmul.default.tags
    # DESIGN.md: matmul(Tensor a, Tensor b) -> Tensor
    args = [(a.name, str(a.type), a.default_value) for a in OPS.matmul.default._schema.arguments]
    assert args == [("a", "Tensor", None), ("b", "Tensor", None)]
    assert [str(r.type) for r in OPS.matmul.default._schema.returns] == ["Tensor"]


A = torch.randn(4, 16)
B = torch.randn(16, 8)


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: OPS.matmul(A.int(), B.int()), TypeError,
     r"yirage.matmul: a must have dtype float32, float16, bfloat16 or float64, got int32$"),
    (lambda: OPS.matmul(A, B.double()), TypeError, r"yirage.matmul: b must have the dtype of a \(float32\), got float64"),
    (lambda: OPS.matmul(A, B.to("meta")), RuntimeError, r"yirage.matmul: b must be on the device of a \(cpu\), got meta"),
    (lambda: OPS.matmul(torch.randn(16), B), ValueError,
     r"yirage.matmul: a must have at least 2 dimensions \(\.\.\., M, K\), got a 1-D tensor"),
    (lambda: OPS.matmul(A, torch.randn(16)), ValueError,
     r"yirage.matmul: b must have at least 2 dimensions \(\.\.\., K, N\), got a 1-D tensor"),
    (lambda: OPS.matmul(A, torch.randn(15, 8)), ValueError,
     r"yirage.matmul: b must have K = a.size\(-1\) = 16 rows \(\.\.\., K, N\), got shape \[15, 8\]"),
    (lambda: OPS.matmul(torch.randn(2, 4, 16), torch.randn(3, 16, 8)), ValueError,
     r"yirage.matmul: the batch dims of b must broadcast with those of a \(each pair equal or 1\), "
     r"got a \[2, 4, 16\] and b \[3, 16, 8\]"),
    (lambda: OPS.matmul(torch.tensor(1.0), B), ValueError, r"a must have at least 2 dimensions"),
], ids=["a_dtype", "b_dtype", "b_device", "a_1d", "b_1d", "k_mismatch", "batch_mismatch", "zero_dim"])
def test_bad_input_messages(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_bad_input_on_meta():
    # the Meta kernel runs the same checks (what torch.compile sees)
    with pytest.raises(ValueError, match=r"b must have K = a.size\(-1\) = 16 rows"):
        OPS.matmul(A.to("meta"), torch.randn(15, 8, device="meta"))
