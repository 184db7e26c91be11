"""Second derivatives: where an op has none, backpropagating through its gradient (create_graph=True, then
a second backward) is an error naming the backward op, never a silent zero; the first backward, with
create_graph too, is unaffected. (matmul and the activations do have second derivatives: their
gradgradcheck tests are in their own files.)"""
import pytest
import torch

import yirage_ext as yr
from _helpers import small_f64_inputs

F64 = dict(dtype=torch.float64)


def _cases():
    t = small_f64_inputs()
    x, w, q, qr, cos, sin, weight = (t[k] for k in ("x", "w", "q", "qr", "cos", "sin", "weight"))
    return {
        # name: (inputs that require grad, fn of them -> output, the backward op named in the error)
        "rms_norm": ([x, w], lambda a, b: yr.rms_norm(a, b), "rms_norm_backward"),
        "fused_add_rms_norm": ([x, x.clone(), w], lambda a, r, b: yr.fused_add_rms_norm(a, r, b)[0],
                               "rms_norm_backward"),
        "layer_norm": ([x, w], lambda a, b: yr.layer_norm(a, b), "layer_norm_backward"),
        "softmax": ([x], lambda a: yr.softmax(a, 0), "softmax_backward"),
        "log_softmax": ([x], lambda a: yr.log_softmax(a), "log_softmax_backward"),
        # with cos and sin as leaves: q's gradient depends on them (in q alone rope is linear, its second
        # derivative a true zero, and torch says the gradient does not require grad)
        "rotary_embedding": ([qr, qr.clone(), cos, sin], lambda a, b, c, s: sum(yr.rotary_embedding(a, b, c, s)),
                             "rotary_embedding_backward"),
        "linear": ([x], lambda a: yr.linear(a, weight, None, "gelu"), "linear_backward"),
        "attention": ([q, q.clone(), q.clone()], lambda a, b, c: yr.attention(a, b, c, causal=True),
                      "attention_backward"),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_second_backward_is_a_clear_error(name):
    inputs, fn, backward_op = _cases()[name]
    leaves = [t.clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    weights = torch.randn_like(out)  # a non-uniform upstream gradient (softmax's gradient of a plain sum is 0)
    # the first backward with create_graph=True works and gives the plain first derivative
    grads = torch.autograd.grad((out * weights).sum(), leaves, create_graph=True)
    plain = torch.autograd.grad((fn(*leaves) * weights).sum(), leaves)
    for g, p in zip(grads, plain):
        torch.testing.assert_close(g.detach(), p, rtol=0, atol=0)
    # the second one stops at the backward op instead of returning zeros
    with pytest.raises(RuntimeError, match=rf"derivative for yirage::{backward_op} is not implemented"):
        sum(g.square().sum() for g in grads).backward()


def test_backward_op_called_directly():
    # a backward op called by a user is an ordinary op: same values with and without grad mode
    x = torch.randn(4, 8, **F64, requires_grad=True)
    g = torch.randn(4, 8, **F64)
    gx, _ = torch.ops.yirage.rms_norm_backward(g, x, None, 1e-6)
    with torch.no_grad():
        gx2, _ = torch.ops.yirage.rms_norm_backward(g, x, None, 1e-6)
    torch.testing.assert_close(gx, gx2, rtol=0, atol=0)
    assert gx.requires_grad  # and asking for its derivative is the error above
