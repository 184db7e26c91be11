"""The graph nodes the memory-bound ops record (csrc/autograd/node.h) behave as PyTorch's own: saved tensors
checked for in-place changes, saved-tensor hooks applied, a second backward refused without retain_graph,
gradients only for the inputs that need them, deep graphs freed without recursion, and checkpointing."""
import pytest
import torch
import torch.utils.checkpoint as checkpoint

import yirage_ext as yr

F64 = dict(dtype=torch.float64)


def _inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 16, generator=g, **F64).requires_grad_()
    w = torch.randn(16, generator=g, **F64).requires_grad_()
    return x, w


NAMED = {
    "softmax": ("YirageSoftmaxBackward", lambda x, w: yr.softmax(x)),
    "log_softmax": ("YirageLogSoftmaxBackward", lambda x, w: yr.log_softmax(x)),
    "layer_norm": ("YirageLayerNormBackward", lambda x, w: yr.layer_norm(x, w, w)),
    "rms_norm": ("YirageRmsNormBackward", lambda x, w: yr.rms_norm(x, w)),
    "fused_add_rms_norm": ("YirageFusedAddRmsNormBackward", lambda x, w: yr.fused_add_rms_norm(x, x, w)[0]),
    "silu_and_mul": ("YirageSiluAndMulBackward", lambda x, w: yr.silu_and_mul(x)),
    "gelu_and_mul": ("YirageGeluAndMulBackward", lambda x, w: yr.gelu_and_mul(x)),
    "gelu": ("YirageGeluBackward", lambda x, w: yr.gelu(x)),
    "matmul": ("YirageMatmulBackward", lambda x, w: yr.matmul(x, w[:, None])),
    "linear": ("YirageLinearBackward", lambda x, w: yr.linear(x, w[None, :], None, "gelu")),
}


def test_attention_grad_fn_and_lse():
    q = torch.randn(1, 2, 5, 8, **F64).requires_grad_()
    out, lse = torch.ops.yirage.attention_forward(q, q.detach(), q.detach(), True, None)
    assert out.grad_fn.name() == "YirageAttentionBackward"
    assert lse.grad_fn is None and not lse.requires_grad  # the log-sum-exp is not differentiable


@pytest.mark.parametrize("name", list(NAMED))
def test_grad_fn_name(name):
    node, fn = NAMED[name]
    assert fn(*_inputs()).grad_fn.name() == node


def test_rotary_grad_fn_name():
    q = torch.randn(1, 2, 3, 8, **F64).requires_grad_()
    cos, sin = torch.randn(2, 4, **F64), torch.randn(2, 4, **F64)  # q: (B, S, H, D), S = 2
    oq, ok = yr.rotary_embedding(q, q.detach(), cos, sin)
    assert oq.grad_fn.name() == "YirageRotaryEmbeddingBackward" and oq.grad_fn is ok.grad_fn


@pytest.mark.parametrize("name", ["softmax", "rms_norm", "gelu"])
def test_inplace_change_of_a_saved_tensor_raises(name):
    x, w = _inputs()
    out = NAMED[name][1](x, w)
    if name == "softmax":  # saves its output
        victim = out
        out = out * 1.0
    else:  # save x: change it through a view that does not need grad
        victim = x.detach()
    victim.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_second_backward_needs_retain_graph():
    x, w = _inputs()
    out = yr.layer_norm(x, w, w).pow(2).sum()
    out.backward(retain_graph=True)
    first = x.grad.clone()
    out.backward()  # retained: runs again, accumulates
    torch.testing.assert_close(x.grad, 2 * first)
    out2 = yr.layer_norm(x, w, w).pow(2).sum()
    out2.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out2.backward()


def test_saved_tensor_hooks_see_the_saved_tensors():
    x, w = _inputs()
    packed, unpacked = [], []

    def pack(t):
        packed.append(t.shape)
        return t.clone()

    def unpack(t):
        unpacked.append(t.shape)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = yr.rms_norm(x, w)  # saves x and the weight
    assert packed == [x.shape, w.shape]
    out.sum().backward()
    assert unpacked == [x.shape, w.shape]


def test_gradients_only_where_needed():
    x, w = _inputs()
    w_frozen = w.detach()
    yr.layer_norm(x, w_frozen, None).sum().backward()
    assert x.grad is not None and w_frozen.grad is None
    x2 = x.detach()  # no grad for x: only the weight's gradient
    w.grad = None
    yr.rms_norm(x2, w).pow(2).sum().backward()
    ref_w = w.detach().clone().requires_grad_()
    torch.nn.functional.rms_norm(x2, (16,), ref_w, 1e-6).pow(2).sum().backward()
    torch.testing.assert_close(w.grad, ref_w.grad)


def test_fused_add_rms_norm_unused_output():
    x, w = _inputs()
    r = x.detach().clone().requires_grad_()
    y, h = yr.fused_add_rms_norm(x, r, w)
    h.sum().backward()  # y unused: dx = dresidual = 1
    torch.testing.assert_close(x.grad, torch.ones_like(x))
    torch.testing.assert_close(r.grad, torch.ones_like(r))
    assert w.grad is None


def test_deep_graph_frees_without_recursion():
    x = torch.randn(2, 8, requires_grad=True)
    y = x
    for _ in range(30000):  # a chain of nodes this deep overflows the stack if freed recursively
        y = yr.softmax(y)
    torch.testing.assert_close(y.detach().sum(-1), torch.ones(2))
    depth, fn = 0, y.grad_fn
    while fn is not None and depth < 5:  # the chain is made of our nodes
        assert fn.name() == "YirageSoftmaxBackward"
        fn, depth = fn.next_functions[0][0], depth + 1
    del y, fn  # freed here


def test_non_reentrant_checkpoint():
    x, w = _inputs()

    def block(a):
        return yr.silu_and_mul(torch.cat([yr.rms_norm(a, w), yr.layer_norm(a, w, None)], -1))

    checkpoint.checkpoint(block, x, use_reentrant=False).pow(2).sum().backward()
    got = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    block(x).pow(2).sum().backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], w.grad)
