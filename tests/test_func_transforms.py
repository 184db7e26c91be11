"""torch.func transforms and forward-mode AD.

Forward-mode AD (torch.func.jvp, torch.autograd.forward_ad): the ops have no forward-mode derivatives, so a
tangent on any input is a clear NotImplementedError naming the op, never a silently dropped tangent (below the
Autograd key the kernels return a result without one, which torch.func.jvp would read as a zero jvp). The
activation backward ops are the exception: their differentiable composites carry tangents, and their jvps
are checked against finite differences. torch.func.grad (each op records its own graph node) matches
torch.autograd, also under vmap; torch.func.vmap runs the ops per sample (torch's fallback) and must match a
loop."""
import pytest
import torch
import torch.autograd.forward_ad as fwAD

import yirage_ext as yr
from _helpers import small_f64_inputs

OPS = torch.ops.yirage
F64 = dict(dtype=torch.float64)


def _cases():
    t = small_f64_inputs()
    x, w, q, qr, cos, sin, weight = (t[k] for k in ("x", "w", "q", "qr", "cos", "sin", "weight"))
    return {
        # name: (inputs, fn of them)
        "silu_and_mul": ([x], lambda a: yr.silu_and_mul(a)),
        "gelu_and_mul": ([x], lambda a: yr.gelu_and_mul(a, "tanh")),
        "gelu": ([x], lambda a: yr.gelu(a)),
        "rms_norm": ([x, w], lambda a, b: yr.rms_norm(a, b)),
        "fused_add_rms_norm": ([x, x.clone(), w], lambda a, r, b: yr.fused_add_rms_norm(a, r, b)[0]),
        "layer_norm": ([x, w, w.clone()], lambda a, b, c: yr.layer_norm(a, b, c)),
        "softmax": ([x], lambda a: yr.softmax(a, 0)),
        "log_softmax": ([x], lambda a: yr.log_softmax(a)),
        "rotary_embedding": ([qr, qr.clone(), cos, sin], lambda a, b, c, s: yr.rotary_embedding(a, b, c, s)[0]),
        "matmul": ([x, weight.T.contiguous()], lambda a, b: yr.matmul(a, b)),
        "linear": ([x, weight], lambda a, b: yr.linear(a, b, None, "gelu")),
        "attention": ([q, q.clone(), q.clone()], lambda a, b, c: yr.attention(a, b, c, causal=True)),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_jvp_is_a_clear_error(name):
    inputs, fn = _cases()[name]
    op = name.split("_and_mul")[0] + "_and_mul" if "_and_mul" in name else name
    for i in range(len(inputs)):  # a tangent on any one input
        tangents = [torch.zeros_like(t) for t in inputs]
        tangents[i] = torch.randn_like(inputs[i])
        with pytest.raises(NotImplementedError, match=rf"yirage\.{op}: forward-mode AD .* is not supported"):
            torch.func.jvp(fn, tuple(inputs), tuple(tangents))


@pytest.mark.parametrize("requires_grad", [False, True], ids=["plain", "requires_grad"])
def test_dual_tensor_is_a_clear_error(requires_grad):
    x = torch.randn(3, 8, **F64).requires_grad_(requires_grad)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.randn_like(x))
        with pytest.raises(NotImplementedError, match=r"yirage\.softmax: forward-mode AD"):
            OPS.softmax(dual, -1)


def test_no_tangent_runs_as_before():
    """Inside a dual level, inputs without tangents run the kernels as usual."""
    x = torch.randn(3, 8, **F64)
    with fwAD.dual_level():
        torch.testing.assert_close(OPS.softmax(x, -1), torch.softmax(x, -1))


BACKWARD_OPS = {
    "silu_and_mul_backward": lambda g, x: OPS.silu_and_mul_backward(g, x),
    "gelu_and_mul_backward": lambda g, x: OPS.gelu_and_mul_backward(g, x, "none"),
    "gelu_backward": lambda g, x: OPS.gelu_backward(g, x, "tanh"),
}


@pytest.mark.parametrize("name", list(BACKWARD_OPS))
def test_activation_backward_jvp_matches_finite_differences(name):
    fn = BACKWARD_OPS[name]
    x = torch.randn(3, 8, **F64)
    g = torch.randn(3, 8 if name == "gelu_backward" else 4, **F64)
    tx, tg = torch.randn_like(x), torch.randn_like(g)
    out, jvp = torch.func.jvp(fn, (g, x), (tg, tx))
    torch.testing.assert_close(out, fn(g, x))
    h = 1e-6
    fd = (fn(g + h * tg, x + h * tx) - fn(g - h * tg, x - h * tx)) / (2 * h)
    torch.testing.assert_close(jvp, fd, rtol=1e-6, atol=1e-7)
    assert jvp.abs().max() > 0  # a dropped tangent would be all zeros


# Every op's Autograd kernel records its own graph node (csrc/autograd/node.h), so torch.func.grad works.
NODE_OPS = list(_cases())


@pytest.mark.filterwarnings("ignore:.*batching rule")
@pytest.mark.parametrize("name", NODE_OPS)
def test_func_grad_matches_autograd(name):
    inputs, fn = _cases()[name]
    loss = lambda *a: fn(*a).pow(2).sum()  # noqa: E731
    got = torch.func.grad(loss, argnums=tuple(range(len(inputs))))(*inputs)
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    want = torch.autograd.grad(loss(*leaves), leaves, allow_unused=True)  # rotary: k unused in this loss
    want = [torch.zeros_like(t) if w is None else w for t, w in zip(inputs, want)]
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, msg=lambda m: f"{name}, input {i}: {m}")
    # per-sample gradients: vmap over grad, against a loop
    batch = torch.stack([inputs[0], inputs[0] * 0.5 + 0.1])
    per_sample = torch.func.vmap(torch.func.grad(lambda a: loss(a, *inputs[1:])))(batch)
    for b, g in zip(batch, per_sample):
        torch.testing.assert_close(g, torch.func.grad(lambda a: loss(a, *inputs[1:]))(b))


def test_func_grad_of_grad():
    """A second derivative through torch.func.grad: the activations' backward ops have differentiable
    composites (torch's formulas); the others stop with the not-implemented error of their backward op."""
    x = torch.randn(3, 8, **F64)
    gelu = lambda a: torch.func.grad(lambda b: yr.gelu(b, "tanh").pow(2).sum())(a).sum()  # noqa: E731
    ref = lambda a: torch.func.grad(  # noqa: E731
        lambda b: torch.nn.functional.gelu(b, approximate="tanh").pow(2).sum())(a).sum()
    torch.testing.assert_close(torch.func.grad(gelu)(x), torch.func.grad(ref)(x))
    softmax = lambda a: torch.func.grad(lambda b: yr.softmax(b, -1).pow(2).sum())(a).sum()  # noqa: E731
    with pytest.raises(RuntimeError, match=r"derivative for yirage::softmax_backward is not implemented"):
        torch.func.grad(softmax)(x)
    w = torch.randn(8, 5, **F64)  # matmul's backward is matmuls: differentiable
    mm = lambda a: torch.func.grad(lambda b: yr.matmul(b, w).pow(3).sum())(a).sum()  # noqa: E731
    mm_ref = lambda a: torch.func.grad(lambda b: (b @ w).pow(3).sum())(a).sum()  # noqa: E731
    torch.testing.assert_close(torch.func.grad(mm)(x), torch.func.grad(mm_ref)(x))


@pytest.mark.filterwarnings("ignore:.*batching rule")
@pytest.mark.parametrize("name", ["silu_and_mul", "gelu", "rms_norm", "layer_norm", "softmax", "log_softmax"])
def test_vmap_matches_a_loop(name):
    inputs, fn = _cases()[name]
    batch = torch.randn(5, *inputs[0].shape, **F64)
    rest = inputs[1:]
    got = torch.func.vmap(lambda a: fn(a, *rest))(batch)
    torch.testing.assert_close(got, torch.stack([fn(b, *rest) for b in batch]))


@pytest.mark.filterwarnings("ignore:.*batching rule")
def test_jacrev_and_vjp_match_torch():
    x = torch.randn(3, 8, **F64)
    torch.testing.assert_close(torch.func.jacrev(lambda a: yr.softmax(a, -1))(x),
                               torch.func.jacrev(lambda a: torch.softmax(a, -1))(x))
    w = torch.randn(8, 5, **F64)
    torch.testing.assert_close(torch.func.jacrev(lambda a: yr.linear(a, w.T.contiguous(), None, "gelu"))(x),
                               torch.func.jacrev(lambda a: torch.nn.functional.gelu(a @ w))(x))
    q = torch.randn(1, 2, 4, 8, **F64)
    out, vjp = torch.func.vjp(lambda a: yr.attention(a, q, q, causal=True), q)
    g = torch.randn_like(out)
    _, vjp_ref = torch.func.vjp(
        lambda a: torch.nn.functional.scaled_dot_product_attention(a, q, q, is_causal=True), q)
    torch.testing.assert_close(vjp(g)[0], vjp_ref(g)[0])
