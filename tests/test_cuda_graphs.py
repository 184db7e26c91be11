"""The CUDA kernels inside CUDA graphs, on a non-default stream and on a second GPU.

For every op with a CUDA kernel: the forward and backward (the op's backward op, through autograd) are
captured in a torch.cuda.CUDAGraph after a warm-up on a side stream (as the PyTorch docs show), new values
are copied into the static inputs, the graph is replayed, and its outputs and gradients are compared with
the eager op on the new values and with the float64 reference. A kernel that launches on the legacy default
stream, allocates, or synchronizes during capture fails here. Then each op runs on a non-default stream
(behind a sleep that delays its input, so a kernel on the wrong stream reads stale data) and, where there
are two GPUs, on the second one while the first is current (the kernels must set the device themselves).

Skipped as a whole without a GPU or without yirage's CUDA kernels (CI runs on CPU).
"""
import dataclasses
from typing import Callable, Optional

import pytest
import torch

from yirage_ext.testing import inputs as fx
from yirage_ext.testing.reference import (GRAD_TOL, assert_close, assert_gemm_close, attention_ref,
                                          fused_add_rms_norm_ref,
                                          gelu_and_mul_ref, gelu_ref, layer_norm_ref, linear_ref, log_softmax_ref,
                                          matmul_ref, rms_norm_ref, rotary_embedding_ref, silu_and_mul_ref, softmax_ref)

from _helpers import assert_grad_close, dtype_id, reference_grads

OPS = torch.ops.yirage


def _has_cuda_kernel(op):
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", "CUDA")


HAS_CUDA = torch.cuda.is_available() and _has_cuda_kernel("rms_norm")
# marked `cuda`: `pytest tests -m cuda` on a GPU machine selects this file too
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not HAS_CUDA, reason="needs a GPU and yirage's CUDA kernels "
                                 "(torch.cuda.is_available() and a CUDA kernel for yirage ops)")]


@dataclasses.dataclass(frozen=True)
class Case:
    """One op: the yirage ops it runs (each must have a CUDA kernel), its differentiable inputs made by the
    input factories, the call, and the float64 reference. gemm_k: outputs compared with gemm_tolerance."""
    name: str
    ops: tuple
    make: Callable  # (dtype, device, seed) -> list of tensors (the op's differentiable inputs)
    fn: Callable  # (*tensors) -> tensor or tuple of tensors
    ref: Callable  # (*tensors) -> float64 tensor or tuple
    gemm_k: Optional[int] = None


def _rms(dtype, device, seed):
    inp = fx.rms_norm_inputs((37, 769), dtype, device=device, seed=seed)
    return [inp.x, inp.weight]


def _fused(dtype, device, seed):
    inp = fx.rms_norm_inputs((37, 769), dtype, device=device, seed=seed)
    return [inp.x, inp.residual, inp.weight]


def _ln(dtype, device, seed):
    inp = fx.layer_norm_inputs((37, 769), dtype, device=device, seed=seed)
    return [inp.x, inp.weight, inp.bias]


def _logits(dtype, device, seed):
    return [fx.softmax_inputs((37, 769), dtype, device=device, seed=seed)]


def _act(dtype, device, seed):
    return [fx.activation_inputs((37, 2 * 385), dtype, device=device, seed=seed)]


def _rope(dtype, device, seed):
    inp = fx.rotary_embedding_inputs((2, 13, 4, 72), kv_heads=2, rot_dim=40, dtype=dtype, device=device,
                                     per_sequence=True, seed=seed)
    return [inp.q, inp.k, inp.cos, inp.sin]


def _mm(dtype, device, seed):
    inp = fx.matmul_inputs((3, 37, 129), (129, 65), dtype, device=device, seed=seed)
    return [inp.a, inp.b]


def _lin(dtype, device, seed):
    inp = fx.linear_inputs((37, 129), 65, dtype, device=device, seed=seed)
    return [inp.x, inp.weight, inp.bias]


def _lin_decode(dtype, device, seed):
    # few rows: the skinny kernel on CUDA for bf16 (bias and GELU in its epilogue)
    inp = fx.linear_inputs((4, 264), 50, dtype, device=device, seed=seed)
    return [inp.x, inp.weight, inp.bias]


def _attn(shape):
    def make(dtype, device, seed):
        inp = fx.attention_inputs(*shape, dtype=dtype, device=device, seed=seed)
        return [inp.q, inp.k, inp.v]
    return make


_ATTN = ("attention", "attention_forward", "attention_backward")

CASES = [
    Case("rms_norm", ("rms_norm", "rms_norm_backward"), _rms,
         lambda x, w: OPS.rms_norm(x, w, 1e-6), lambda x, w: rms_norm_ref(x, w, 1e-6)),
    Case("fused_add_rms_norm", ("fused_add_rms_norm", "rms_norm_backward"), _fused,
         lambda x, r, w: OPS.fused_add_rms_norm(x, r, w, 1e-6),
         lambda x, r, w: fused_add_rms_norm_ref(x, r, w, 1e-6)),
    Case("layer_norm", ("layer_norm", "layer_norm_backward"), _ln,
         lambda x, w, b: OPS.layer_norm(x, w, b, 1e-5), lambda x, w, b: layer_norm_ref(x, w, b, 1e-5)),
    Case("softmax", ("softmax", "softmax_backward"), _logits,
         lambda x: OPS.softmax(x, -1), lambda x: softmax_ref(x, -1)),
    Case("softmax_dim0", ("softmax", "softmax_backward"), _logits,
         lambda x: OPS.softmax(x, 0), lambda x: softmax_ref(x, 0)),
    Case("log_softmax", ("log_softmax", "log_softmax_backward"), _logits,
         lambda x: OPS.log_softmax(x, -1), lambda x: log_softmax_ref(x, -1)),
    Case("silu_and_mul", ("silu_and_mul", "silu_and_mul_backward"), _act,
         lambda x: OPS.silu_and_mul(x), silu_and_mul_ref),
    Case("gelu_and_mul", ("gelu_and_mul", "gelu_and_mul_backward"), _act,
         lambda x: OPS.gelu_and_mul(x, "tanh"), lambda x: gelu_and_mul_ref(x, "tanh")),
    Case("gelu", ("gelu", "gelu_backward"), _act,
         lambda x: OPS.gelu(x, "none"), lambda x: gelu_ref(x, "none")),
    Case("rotary_embedding", ("rotary_embedding", "rotary_embedding_backward"), _rope,
         lambda q, k, c, s: OPS.rotary_embedding(q, k, c, s, False),
         lambda q, k, c, s: rotary_embedding_ref(q, k, c, s, False)),
    Case("matmul", ("matmul",), _mm, lambda a, b: OPS.matmul(a, b), matmul_ref, gemm_k=129),
    Case("linear", ("linear", "linear_forward", "linear_backward"), _lin,
         lambda x, w, b: OPS.linear(x, w, b, "gelu"), lambda x, w, b: linear_ref(x, w, b, "gelu"), gemm_k=129),
    Case("linear_decode", ("linear", "linear_forward", "linear_backward"), _lin_decode,
         lambda x, w, b: OPS.linear(x, w, b, "gelu"), lambda x, w, b: linear_ref(x, w, b, "gelu"), gemm_k=264),
    # bfloat16: the tensor-core kernels (D = 128); float32: the portable path. GQA, causal with Sq < Sk.
    Case("attention", _ATTN, _attn((2, 8, 2, 77, 130, 128)),
         lambda q, k, v: OPS.attention(q, k, v, True, None), lambda q, k, v: attention_ref(q, k, v, True)),
    # decode: one query per head against a long cache (the forward may split the keys and combine the parts)
    Case("attention_decode", _ATTN, _attn((2, 32, 8, 1, 3000, 128)),
         lambda q, k, v: OPS.attention(q, k, v, False, None), lambda q, k, v: attention_ref(q, k, v, False)),
]
CASE_IDS = [c.name for c in CASES]
DTYPES = [torch.float32, torch.bfloat16]


def _tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _need_kernels(case):
    missing = [op for op in case.ops if not _has_cuda_kernel(op)]
    if missing:
        pytest.skip(f"no CUDA kernel yet for {', '.join('yirage::' + op for op in missing)}")


def _grad_outs(outs, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=gen).to(dtype=o.dtype, device=o.device) for o in outs]


def _forward_backward(case, n_in):
    """(*leaves, *grad_outs) -> (*outputs, *gradients of the leaves): forward and backward in one call."""
    def run(*args):
        leaves, gouts = args[:n_in], args[n_in:]
        outs = _tuple(case.fn(*leaves))
        grads = torch.autograd.grad(outs, leaves, gouts, allow_unused=True)
        return (*outs, *(torch.zeros_like(t) if g is None else g for t, g in zip(leaves, grads)))
    return run


def _capture(fn, static_args, warmup=3):
    """Warms fn up on a side stream, then captures it; returns the graph and its static outputs."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn(*static_args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(*static_args)
    return graph, static_out


def _check_against_reference(case, dtype, leaves, gouts, outs, grads, what):
    ref_outs = _tuple(case.ref(*leaves))
    for i, (got, want) in enumerate(zip(outs, ref_outs)):
        if case.gemm_k is None:
            assert_close(got, want, dtype, msg=f"{what}: output {i}")
        else:
            assert_gemm_close(got, want, case.gemm_k, dtype, f"{what}: output {i}")
    ref_grads = reference_grads(case.ref, [t.detach().requires_grad_() for t in leaves], gouts)
    for i, (got, want) in enumerate(zip(grads, ref_grads)):
        assert_grad_close(got, want, dtype, f"{what}: gradient of input {i}")


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_forward_in_graph(case, dtype):
    _need_kernels(case)
    static = case.make(dtype, "cuda", seed=1)
    graph, static_out = _capture(lambda *a: _tuple(case.fn(*a)), static)
    new = case.make(dtype, "cuda", seed=2)
    for s, n in zip(static, new):
        s.copy_(n)
    graph.replay()
    torch.cuda.synchronize()
    eager = _tuple(case.fn(*new))
    for got, want in zip(static_out, eager):
        torch.testing.assert_close(got, want, msg=lambda m: f"graph replay vs eager: {m}")
    for i, (got, want) in enumerate(zip(static_out, _tuple(case.ref(*new)))):
        if case.gemm_k is None:
            assert_close(got, want, dtype, msg=f"graph replay: output {i}")
        else:
            assert_gemm_close(got, want, case.gemm_k, dtype, f"graph replay: output {i}")
    graph.replay()  # a second replay on the same inputs gives the same values
    torch.cuda.synchronize()
    for got, want in zip(static_out, eager):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_forward_and_backward_in_graph(case, dtype):
    _need_kernels(case)
    static = [t.detach().clone().requires_grad_() for t in case.make(dtype, "cuda", seed=3)]
    n_in = len(static)
    static_gouts = _grad_outs(_tuple(case.fn(*static)), seed=4)
    run = _forward_backward(case, n_in)
    graph, static_out = _capture(run, (*static, *static_gouts))
    new = case.make(dtype, "cuda", seed=5)
    new_gouts = _grad_outs(static_gouts, seed=6)
    with torch.no_grad():
        for s, n in zip((*static, *static_gouts), (*new, *new_gouts)):
            s.copy_(n)
    graph.replay()
    torch.cuda.synchronize()
    n_out = len(static_out) - n_in
    outs, grads = static_out[:n_out], static_out[n_out:]
    eager = run(*(t.detach().clone().requires_grad_() for t in new), *new_gouts)
    for i, (got, want) in enumerate(zip(static_out, eager)):
        # gradients summed over rows may use atomics: equal up to the summation order
        tol = GRAD_TOL[dtype] * max(1.0, want.abs().max().item())
        torch.testing.assert_close(got, want, atol=tol, rtol=GRAD_TOL[dtype],
                                   msg=lambda m: f"graph replay vs eager, result {i}: {m}")
    _check_against_reference(case, dtype, new, new_gouts, outs, grads, "graph replay")


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_id)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_non_default_stream(case, dtype):
    """Inputs written on a side stream after a long sleep there: a kernel launched on any other stream than
    the current one would read them before they are written (PyTorch's side streams do not synchronize with
    the default stream)."""
    _need_kernels(case)
    static = [t.detach().clone().requires_grad_() for t in case.make(dtype, "cuda", seed=7)]
    gouts = _grad_outs(_tuple(case.fn(*static)), seed=8)
    new = case.make(dtype, "cuda", seed=9)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # tens of milliseconds of GPU time
        with torch.no_grad():
            for s, n in zip(static, new):
                s.copy_(n)
        result = _forward_backward(case, len(static))(*static, *gouts)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    n_out = len(result) - len(static)
    _check_against_reference(case, dtype, new, gouts, result[:n_out], result[n_out:], "side stream")


@pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs a second GPU")
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_second_gpu(case):
    """Inputs on cuda:1 while cuda:0 is current: the kernels must run on the inputs' device (a device guard)."""
    _need_kernels(case)
    dtype = torch.float32
    with torch.cuda.device(0):
        leaves = [t.detach().clone().requires_grad_() for t in case.make(dtype, "cuda:1", seed=10)]
        outs = _tuple(case.fn(*leaves))
        assert all(o.device == torch.device("cuda:1") for o in outs)
        gouts = _grad_outs(outs, seed=11)
        result = _forward_backward(case, len(leaves))(*leaves, *gouts)
        torch.cuda.synchronize(1)
    assert all(r.device == torch.device("cuda:1") for r in result)
    n_out = len(result) - len(leaves)
    _check_against_reference(case, dtype, leaves, gouts, result[:n_out], result[n_out:], "second GPU")
