"""Our Triton kernels (the `triton` provider) against the float64 reference. On CPU they run under
TRITON_INTERPRET=1 (Triton's interpreter: small shapes, it is slow), which conftest.py sets before anything
imports Triton; skipped when Triton is not installed."""
import os

import pytest
import torch

pytest.importorskip("triton")

from yirage_ext.bench import api  # noqa: E402
from yirage_ext.testing.inputs import activation_inputs, rms_norm_inputs, softmax_inputs  # noqa: E402
from yirage_ext.testing.reference import assert_close, rms_norm_ref, silu_and_mul_ref, softmax_ref  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def triton_ops():
    if DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("Triton on CPU tensors needs TRITON_INTERPRET=1 set before Triton is imported")
    from yirage_ext.bench import triton_ops as mod
    return mod


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (3, 2, 37), (5, 128)])
def test_rms_norm(triton_ops, dtype, shape):
    inp = rms_norm_inputs(shape, dtype, device=DEVICE, layout="strided", seed=1)
    assert_close(triton_ops.rms_norm(inp.x, inp.weight, inp.eps), rms_norm_ref(inp.x, inp.weight, inp.eps), dtype)
    assert_close(triton_ops.rms_norm(inp.x, None, inp.eps), rms_norm_ref(inp.x, None, inp.eps), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (3, 2, 37), (5, 128)])
def test_softmax(triton_ops, dtype, shape):
    x = softmax_inputs(shape, dtype, device=DEVICE, masked=0.2, layout="strided", seed=2)
    x[..., 0] = 30.0  # large logits and a row never all -inf
    assert_close(triton_ops.softmax(x), softmax_ref(x), dtype)


def test_softmax_other_dims_are_refused(triton_ops):
    with pytest.raises(NotImplementedError, match="dim: the Triton softmax supports the last dim only, got dim=0"):
        triton_ops.softmax(torch.randn(3, 4, device=DEVICE), 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 2), (3, 2, 74), (5, 128)])
def test_silu_and_mul(triton_ops, dtype, shape):
    x = activation_inputs(shape, dtype, device=DEVICE, layout="strided", seed=3)
    y = triton_ops.silu_and_mul(x)
    assert y.shape == (*shape[:-1], shape[-1] // 2)
    assert_close(y, silu_and_mul_ref(x), dtype)


def test_triton_provider_rows(triton_ops):
    rows = api.run(ops=["rms_norm", "softmax", "silu_and_mul"], device=DEVICE, dtypes=["float32", "bfloat16"],
                   providers=["triton"], shapes=["3x20"], warmup=0, repeats=1, budget_s=0.01)
    assert len(rows) == 6 and [r.reason for r in rows if r.status != "ok"] == []
    back = api.run(ops=["rms_norm"], device=DEVICE, dtypes=["float32"], providers=["triton"], shapes=["3x20"],
                   backward=True, warmup=0, repeats=1, budget_s=0.01)
    assert back[0].status == "skip" and back[0].reason == "forward only (no gradients)"
