"""A small pre-norm transformer block built from the yirage ops, compiled with fullgraph=True, against the
same block in plain PyTorch (float64): forward output and the gradients of the input and every parameter.

    h   = rms_norm(x) -> linear (q, k, v) -> rotary_embedding(q, k) -> attention (causal, GQA) -> linear
    out, resid = fused_add_rms_norm(h, x)
    y   = linear(silu_and_mul(linear(out))) + resid

Runs on every device (the `device` fixture). Where yirage.attention has no kernel for the device, the block uses
torch's scaled_dot_product_attention in its place, so every other op still runs in the same compiled chain there.
(On CUDA its head dim of 16 takes the portable attention kernel; tests/test_attention_cuda.py covers the
tensor-core kernels.)
"""
import math

import pytest
import torch
import torch.nn.functional as F

from _helpers import assert_grad_close

OPS = torch.ops.yirage
B, S, HQ, HK, D, R = 2, 9, 4, 2, 16, 12  # R < D: partial rotary, as in GPT-NeoX style models
HID, FF = HQ * D, 48


def _params(dtype, device="cpu"):
    gen = torch.Generator().manual_seed(0)

    def p(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen) * scale).to(dtype=dtype, device=device).requires_grad_()

    return dict(
        w_norm1=(torch.rand(HID, generator=gen) + 0.5).to(dtype=dtype, device=device).requires_grad_(),
        w_qkv=p((HQ + 2 * HK) * D, HID, scale=HID ** -0.5),
        b_qkv=p((HQ + 2 * HK) * D, scale=0.1),
        w_o=p(HID, HQ * D, scale=(HQ * D) ** -0.5),
        w_norm2=(torch.rand(HID, generator=gen) + 0.5).to(dtype=dtype, device=device).requires_grad_(),
        w_up=p(2 * FF, HID, scale=HID ** -0.5),
        w_down=p(HID, FF, scale=FF ** -0.5),
    )


def _rope_tables(dtype, device="cpu"):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, R, 2, dtype=torch.float64) / R))
    angles = torch.arange(S, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (S, R/2)
    return angles.cos().to(dtype=dtype, device=device), angles.sin().to(dtype=dtype, device=device)


# device types where yirage.attention has a kernel (looked up here: a dispatcher query does not trace)
ATTENTION_DEVICE_TYPES = {t for t, key in (("cpu", "CPU"), ("cuda", "CUDA"))
                          if torch._C._dispatch_has_kernel_for_dispatch_key("yirage::attention", key)}


def _attention(q, k, v):
    """Causal GQA attention on (B, H, S, D): yirage.attention where it has a kernel for the device, else torch's
    scaled_dot_product_attention on the key/value heads repeated to the query heads."""
    if q.device.type in ATTENTION_DEVICE_TYPES:
        return OPS.attention(q, k, v, True, None)
    k, v = k.repeat_interleave(HQ // HK, dim=1), v.repeat_interleave(HQ // HK, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def block_yirage(x, cos, sin, w_norm1, w_qkv, b_qkv, w_o, w_norm2, w_up, w_down):
    h = OPS.rms_norm(x, w_norm1, 1e-6)
    qkv = OPS.linear(h, w_qkv, b_qkv, "none")
    q, k, v = qkv.split([HQ * D, HK * D, HK * D], dim=-1)
    q, k = OPS.rotary_embedding(q.view(B, S, HQ, D), k.view(B, S, HK, D), cos, sin, False)
    v = v.view(B, S, HK, D)
    o = _attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))  # (B, HQ, S, D)
    attn = OPS.linear(o.transpose(1, 2).reshape(B, S, HQ * D), w_o, None, "none")
    out, resid = OPS.fused_add_rms_norm(attn, x, w_norm2, 1e-6)
    mlp = OPS.linear(OPS.silu_and_mul(OPS.linear(out, w_up, None, "none")), w_down, None, "none")
    return mlp + resid


def _rope_ref(t, cos, sin):  # neox pairs (i, i + R/2) of the first R features; t (B, S, H, D)
    half = R // 2
    x1, x2, rest = t[..., :half], t[..., half:R], t[..., R:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s, rest], dim=-1)


def _rms_norm_ref(t, w):
    return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def block_reference(x, cos, sin, w_norm1, w_qkv, b_qkv, w_o, w_norm2, w_up, w_down):
    h = _rms_norm_ref(x, w_norm1)
    qkv = h @ w_qkv.T + b_qkv
    q, k, v = qkv.split([HQ * D, HK * D, HK * D], dim=-1)
    q, k = _rope_ref(q.view(B, S, HQ, D), cos, sin), _rope_ref(k.view(B, S, HK, D), cos, sin)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.view(B, S, HK, D).transpose(1, 2)
    k, v = k.repeat_interleave(HQ // HK, dim=1), v.repeat_interleave(HQ // HK, dim=1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
    o = scores.softmax(-1) @ v
    attn = o.transpose(1, 2).reshape(B, S, HQ * D) @ w_o.T
    resid = attn + x
    out = _rms_norm_ref(resid, w_norm2)
    up = out @ w_up.T
    mlp = (F.silu(up[..., :FF]) * up[..., FF:]) @ w_down.T
    return mlp + resid


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_compiled_block_matches_plain_pytorch(device, backend):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(block_yirage, backend=counter, fullgraph=True)
    params = _params(torch.float32, device)
    cos, sin = _rope_tables(torch.float32, device)
    x = torch.randn(B, S, HID, generator=torch.Generator().manual_seed(1)).to(device).requires_grad_()
    g = torch.randn(B, S, HID, generator=torch.Generator().manual_seed(2)).to(device)

    y = compiled(x, cos, sin, **params)
    y.backward(g)
    assert counter.frame_count == 1, f"expected one graph, got {counter.frame_count} (a graph break?)"
    leaves = dict(x=x, **params)
    ref_leaves = {n: t.detach().double().requires_grad_() for n, t in leaves.items()}
    cos64, sin64 = _rope_tables(torch.float64, device)
    y_ref = block_reference(ref_leaves["x"], cos64, sin64, **{n: ref_leaves[n] for n in params})
    y_ref.backward(g.double())

    torch.testing.assert_close(y.double(), y_ref, atol=1e-4, rtol=1e-4)
    for name, t in leaves.items():
        assert t.grad is not None, f"no gradient for {name}"
        assert_grad_close(t.grad, ref_leaves[name].grad, torch.float32, f"grad of {name}")


def test_eager_block_bfloat16(device):
    """The same block in bf16, eager: every op's half-precision path in one realistic chain."""
    params = _params(torch.bfloat16, device)
    cos, sin = _rope_tables(torch.bfloat16, device)
    x = torch.randn(B, S, HID, generator=torch.Generator().manual_seed(1)).to(dtype=torch.bfloat16, device=device)
    x.requires_grad_()
    y = block_yirage(x, cos, sin, **params)
    y.sum().backward()
    ref_leaves = {n: t.detach().double().requires_grad_() for n, t in dict(x=x, **params).items()}
    y_ref = block_reference(ref_leaves["x"], cos.double(), sin.double(), **{n: ref_leaves[n] for n in params})
    y_ref.sum().backward()
    # bf16 rounds every intermediate (8 bits of mantissa) through about ten ops: compare to the float64
    # block with a tolerance scaled to the output's magnitude.
    scale = y_ref.abs().max().item()
    torch.testing.assert_close(y.double(), y_ref, atol=0.05 * scale, rtol=0.05)
    for name in ("x", "w_qkv", "w_down"):
        got, want = dict(x=x, **params)[name].grad.double(), ref_leaves[name].grad
        torch.testing.assert_close(got, want, atol=0.05 * want.abs().max().item(), rtol=0.05, msg=name)
