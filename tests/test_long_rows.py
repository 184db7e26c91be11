"""Rows far longer than any hidden size in use (CPU): the norms sum such rows block by block (vec_util.h,
kSumBlock), so their error against the float64 references stays at the tests' tolerance; one set of fp32 vector
lanes over a row of 1M elements drifted to 1-4e-5 (2M: 2e-4). Forward and backward of rms_norm, fused_add_rms_norm
and layer_norm, with softmax / log_softmax alongside, for every CPU kernel variant this machine runs."""
import pytest
import torch

from yirage_ext._loader import native_module
from yirage_ext.testing.reference import (assert_close, fused_add_rms_norm_ref, layer_norm_ref, log_softmax_ref,
                                          rms_norm_ref, softmax_ref)

from _helpers import assert_grad_close, reference_grads

OPS = torch.ops.yirage
N = 2**20 + 3  # 128 blocks of 8192 and an odd tail


def isas():
    order = ["avx2", "avx512", "avx512_bf16"]
    top = native_module().cpu_best_isa()
    return ["generic"] + (order[: order.index(top) + 1] if top in order else [])


@pytest.fixture(params=isas())
def isa(request):
    lib = native_module()
    before = lib.cpu_isa()
    lib.set_cpu_isa(request.param)
    yield request.param
    lib.set_cpu_isa(before)


def inputs(dtype, seed=0, offset=0.0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(2, N, generator=g) + offset).to(dtype)
    r = torch.randn(2, N, generator=g).to(dtype)
    w = (torch.rand(N, generator=g) + 0.5).to(dtype)
    b = torch.randn(N, generator=g).to(dtype)
    return x, r, w, b


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("offset", [0.0, 100.0], ids=["centred", "offset"])
def test_forward(isa, dtype, offset):
    x, r, w, b = inputs(dtype, offset=offset)
    xd, wd, bd = x.double(), w.double(), b.double()
    assert_close(OPS.rms_norm(x, w, 1e-6), rms_norm_ref(xd, wd, 1e-6), dtype)
    y, h = OPS.fused_add_rms_norm(x, r, w, 1e-6)
    _, h_ref = fused_add_rms_norm_ref(xd, r.double(), wd, 1e-6)
    assert_close(h, h_ref, dtype)
    assert_close(y, rms_norm_ref(h.double(), wd, 1e-6), dtype)
    assert_close(OPS.layer_norm(x, w, b, 1e-5), layer_norm_ref(xd, wd, bd, 1e-5), dtype)
    assert_close(OPS.softmax(x, -1), softmax_ref(xd, -1), dtype)
    assert_close(OPS.log_softmax(x, -1), log_softmax_ref(xd, -1), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_backward(isa, dtype):
    x, _, w, b = inputs(dtype, seed=1)
    x, w, b = x.requires_grad_(), w.requires_grad_(), b.requires_grad_()
    go = torch.randn(x.shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    got = torch.autograd.grad(OPS.rms_norm(x, w, 1e-6), [x, w], go)
    ref = reference_grads(lambda a, c: rms_norm_ref(a, c, 1e-6), [x, w], [go])
    for a, e, what in zip(got, ref, ["rms_norm dx", "rms_norm dw"]):
        assert_grad_close(a, e, dtype, what)
    got = torch.autograd.grad(OPS.layer_norm(x, w, b, 1e-5), [x, w, b], go)
    ref = reference_grads(lambda a, c, d: layer_norm_ref(a, c, d, 1e-5), [x, w, b], [go])
    for a, e, what in zip(got, ref, ["layer_norm dx", "layer_norm dw", "layer_norm db"]):
        assert_grad_close(a, e, dtype, what)
