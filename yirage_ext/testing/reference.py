"""Float64 references and per-dtype tolerances, shared by the tests, the benchmarks and the demo.

Plain PyTorch in float64, independent of the library (never calls torch.ops.yirage)."""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

# (atol, rtol) per dtype for outputs of the norm ops (values O(1)): the kernels accumulate in fp32 and
# round once to the output dtype, so the bound is about one ulp of the output dtype plus fp32 noise.
TOLERANCES = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}

# Gradients sum over rows and reduction terms: compared with an absolute tolerance of GRAD_TOL[dtype] scaled by
# the largest reference gradient (at least 1) and a relative tolerance of GRAD_TOL[dtype].
GRAD_TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}

# float32 products on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32): the inputs are rounded to a 10-bit
# mantissa inside the product (fp32 accumulation), so O(1) GEMM outputs carry errors of a few 1e-3. Outputs and
# gradients of the GEMM-based ops (matmul, linear, attention) are then compared with atol = rtol = TF32_TOL
# (gradients: atol scaled by the largest reference gradient, as GRAD_TOL).
TF32_TOL = 1e-2


def assert_close(actual: Tensor, expected: Tensor, dtype: Optional[torch.dtype] = None, msg: str = "") -> None:
    """Compare in float64 with the tolerances of `dtype` (default: actual's dtype)."""
    atol, rtol = TOLERANCES[dtype or actual.dtype]
    torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=True,
                               msg=(lambda m: f"{msg}\n{m}") if msg else None)


def rms_norm_ref(x: Tensor, weight: Optional[Tensor] = None, eps: float = 1e-6) -> Tensor:
    """x / sqrt(mean(x^2, -1) + eps) * weight, in float64."""
    xd = x.double()
    y = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps)
    return y * weight.double() if weight is not None else y


def fused_add_rms_norm_ref(x: Tensor, residual: Tensor, weight: Optional[Tensor] = None,
                           eps: float = 1e-6) -> Tuple[Tensor, Tensor]:
    """(rms_norm(h), h) with h = x + residual rounded to the input dtype (as the unfused code does)."""
    h = (x.double() + residual.double()).to(x.dtype)
    return rms_norm_ref(h, weight, eps), h.double()


def layer_norm_ref(x: Tensor, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
                   eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dim (biased variance), in float64."""
    xd = x.double()
    centered = xd - xd.mean(-1, keepdim=True)
    y = centered * torch.rsqrt(centered.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.double()
    return y + bias.double() if bias is not None else y


# ---- softmax family ----


def softmax_ref(x: Tensor, dim: int = -1) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) over `dim`, in float64 (NaN for a slice of all -inf)."""
    xd = x.double()
    e = (xd - xd.amax(dim, keepdim=True)).exp()
    return e / e.sum(dim, keepdim=True)


def log_softmax_ref(x: Tensor, dim: int = -1) -> Tensor:
    """(x - max) - log(sum(exp(x - max))) over `dim`, in float64."""
    xd = x.double()
    z = xd - xd.amax(dim, keepdim=True)
    return z - z.exp().sum(dim, keepdim=True).log()


# ---- activations ----


def _gelu64(x: Tensor, approximate: str) -> Tensor:
    # x/2 (1 + erf(x / sqrt 2)) as x/2 erfc(-x / sqrt 2), and x/2 (1 + tanh(u)) as x sigmoid(2u): the same functions,
    # but 1 + erf and 1 + tanh cancel on the lower tail (relative error about 1e-16 / Phi(x) in float64: 2% at
    # x = -8, all digits from about -8.3 down), where these keep their relative accuracy
    if approximate == "tanh":
        return x * torch.sigmoid(2.0 * math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3)))
    return 0.5 * x * torch.erfc(-x / math.sqrt(2.0))


def _halves(x: Tensor) -> Tuple[Tensor, Tensor]:
    xd = x.double()
    d = xd.shape[-1] // 2
    return xd[..., :d], xd[..., d:]


def silu_and_mul_ref(x: Tensor) -> Tensor:
    """a / (1 + exp(-a)) * b with (a, b) the halves of the last dim, in float64."""
    a, b = _halves(x)
    return a * torch.sigmoid(a) * b


def gelu_and_mul_ref(x: Tensor, approximate: str = "none") -> Tensor:
    """gelu(a) * b with (a, b) the halves of the last dim, in float64."""
    a, b = _halves(x)
    return _gelu64(a, approximate) * b


def gelu_ref(x: Tensor, approximate: str = "none") -> Tensor:
    """x/2 (1 + erf(x / sqrt 2)), or x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for "tanh", in float64."""
    return _gelu64(x.double(), approximate)


# ---- rotary embedding ----


def _rotate_half(x: Tensor) -> Tensor:
    """(x1, x2) -> (-x2, x1) over the two halves of the last dim (neox / Hugging Face Llama)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotate_every_two(x: Tensor) -> Tensor:
    """(x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...) (gpt-j)."""
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def rotary_embedding_ref(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor,
                         interleaved: bool = False) -> Tuple[Tensor, Tensor]:
    """x * cos + rotate(x) * sin on the first R = 2 * cos.size(-1) features of every head, the rest passed
    through, in float64. q/k (..., S, H, D); cos/sin (..., S, R/2) broadcast over heads (and leading dims)."""
    r = 2 * cos.shape[-1]
    c, s = cos.double().unsqueeze(-2), sin.double().unsqueeze(-2)  # (..., S, 1, R/2)
    if interleaved:
        c, s, rotate = c.repeat_interleave(2, -1), s.repeat_interleave(2, -1), _rotate_every_two
    else:
        c, s, rotate = torch.cat((c, c), -1), torch.cat((s, s), -1), _rotate_half

    def apply(x: Tensor) -> Tensor:
        xd = x.double()
        return torch.cat((xd[..., :r] * c + rotate(xd[..., :r]) * s, xd[..., r:]), dim=-1)

    return apply(q), apply(k)


# ---- GEMM ----

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu")


def gemm_tolerance(dtype: torch.dtype, k: int) -> Tuple[float, float]:
    """(atol, rtol) for GEMM outputs of size O(1) (the input factories scale b and weight by 1/sqrt(K)).

    The per-dtype TOLERANCES, with the float32/float64 atol grown by sqrt(K / 64): a K-term sum rounds
    K times, and those errors add up like a random walk. bf16/fp16 results accumulate in fp32, so their
    error is the output rounding (at most about 1 ulp: the product may be rounded before the bias and
    activation are applied, as in unfused torch code), independent of K."""
    atol, rtol = TOLERANCES[dtype]
    if dtype in (torch.float32, torch.float64):
        atol *= max(1.0, (k / 64) ** 0.5)
    return atol, rtol


def assert_gemm_close(actual: Tensor, expected: Tensor, k: int, dtype: Optional[torch.dtype] = None,
                      msg: str = "") -> None:
    """assert_close with gemm_tolerance(dtype, k)."""
    atol, rtol = gemm_tolerance(dtype or actual.dtype, k)
    torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=True,
                               msg=(lambda m: f"{msg}\n{m}") if msg else None)


def matmul_ref(a: Tensor, b: Tensor) -> Tensor:
    """a @ b with batch broadcasting, in float64."""
    return torch.matmul(a.double(), b.double())


def activation_ref(z: Tensor, activation: str = "none") -> Tensor:
    """The activations of linear, in z's dtype (float64 for the reference)."""
    if activation == "none":
        return z
    if activation == "relu":
        return torch.relu(z)
    if activation == "gelu":
        return torch.nn.functional.gelu(z)
    if activation == "gelu_tanh":
        return torch.nn.functional.gelu(z, approximate="tanh")
    if activation == "silu":
        return torch.nn.functional.silu(z)
    raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


def linear_ref(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, activation: str = "none") -> Tensor:
    """act(x @ weight.T + bias), in float64."""
    z = torch.matmul(x.double(), weight.double().t())
    if bias is not None:
        z = z + bias.double()
    return activation_ref(z, activation)


# ---- attention ----


def _attention_scores_ref(q: Tensor, k: Tensor, causal: bool, scale: Optional[float]) -> Tuple[Tensor, Tensor]:
    """(scores, visible): scale * q k^T in float64 with each key/value head repeated over its group of query
    heads, and the (Sq, Sk) mask of keys each query sees (bottom-right causal alignment)."""
    qd, kd = q.double(), k.double()
    kd = kd.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (qd @ kd.transpose(-1, -2)) * scale
    sq, sk = q.shape[2], k.shape[2]
    visible = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        visible = torch.arange(sk, device=q.device)[None, :] <= i + (sk - sq)
    return s.masked_fill(~visible, float("-inf")), visible


def attention_ref(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None) -> Tensor:
    """softmax(q k^T * scale, hidden keys masked) v in float64, GQA by repeating each key/value head over its
    Hq/Hk query heads. A query row that sees no key gives zeros (and, through this code, zero gradients)."""
    s, visible = _attention_scores_ref(q, k, causal, scale)
    has_key = visible.any(-1, keepdim=True)
    # rows without a key: softmax of zeros (finite, no NaN gradients), then multiplied by 0
    p = torch.softmax(torch.where(has_key, s, torch.zeros_like(s)), dim=-1) * has_key
    return p @ v.double().repeat_interleave(q.shape[1] // k.shape[1], dim=1)


def attention_lse_ref(q: Tensor, k: Tensor, causal: bool = False, scale: Optional[float] = None) -> Tensor:
    """logsumexp over the visible keys of scale * q k^T, (B, Hq, Sq) float64; -inf for a row that sees none."""
    return torch.logsumexp(_attention_scores_ref(q, k, causal, scale)[0], dim=-1)


class _ChunkedAttentionRef(torch.autograd.Function):
    """attention_ref block by block: per batch entry, key/value head (with its G query heads) and block of
    queries. A block of queries [i0, i1) sees keys [0, Sk - Sq + i1) at most, so the block is attention_ref of
    its queries against those keys (bottom-right alignment keeps every query's mask; fewer keys in causal
    blocks). The backward recomputes each block with autograd."""

    @staticmethod
    def _blocks(q: Tensor, k: Tensor, causal: bool, max_elements: int):
        b, hq, sq, _ = q.shape
        hk, sk = k.shape[1], k.shape[2]
        g = hq // hk
        rows = max(1, max_elements // (g * max(sk, 1)))
        for bi in range(b):
            for h in range(hk):
                for i0 in range(0, sq, rows):
                    i1 = min(sq, i0 + rows)
                    keys = min(sk, sk - sq + i1) if causal else sk
                    yield bi, slice(h * g, (h + 1) * g), h, slice(i0, i1), max(keys, 0)

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, max_elements):
        ctx.causal, ctx.scale, ctx.max_elements = causal, scale, max_elements
        ctx.save_for_backward(q, k, v)
        out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
        for bi, hs, h, rs, keys in _ChunkedAttentionRef._blocks(q, k, causal, max_elements):
            if keys > 0:
                out[bi, hs, rs] = attention_ref(q[bi:bi + 1, hs, rs], k[bi:bi + 1, h:h + 1, :keys],
                                                v[bi:bi + 1, h:h + 1, :keys], causal, scale)[0]
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v = ctx.saved_tensors
        dq = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
        dk = torch.zeros(k.shape, dtype=torch.float64, device=q.device)
        dv = torch.zeros(v.shape, dtype=torch.float64, device=q.device)
        for bi, hs, h, rs, keys in _ChunkedAttentionRef._blocks(q, k, ctx.causal, ctx.max_elements):
            if keys == 0:
                continue
            with torch.enable_grad():
                qb = q[bi:bi + 1, hs, rs].detach().double().requires_grad_()
                kb = k[bi:bi + 1, h:h + 1, :keys].detach().double().requires_grad_()
                vb = v[bi:bi + 1, h:h + 1, :keys].detach().double().requires_grad_()
                o = attention_ref(qb, kb, vb, ctx.causal, ctx.scale)
                gq, gk, gv = torch.autograd.grad(o, (qb, kb, vb), grad_out[bi:bi + 1, hs, rs].double())
            dq[bi, hs, rs] = gq[0]
            dk[bi, h, :keys] += gk[0, 0]
            dv[bi, h, :keys] += gv[0, 0]
        return dq, dk, dv, None, None, None


def attention_ref_chunked(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: Optional[float] = None,
                          max_elements: int = 1 << 26) -> Tensor:
    """attention_ref (float64, on q's device) computed in blocks of at most about `max_elements` scores
    (attention_ref forms B * Hq * Sq * Sk of them at once), and only float64 copies of one block's operands:
    for long sequences and large batches. Differentiable (the backward recomputes block by block)."""
    return _ChunkedAttentionRef.apply(q, k, v, causal, scale, max_elements)


def attention_lse_ref_chunked(q: Tensor, k: Tensor, causal: bool = False, scale: Optional[float] = None,
                              max_elements: int = 1 << 26) -> Tensor:
    """attention_lse_ref in blocks, as attention_ref_chunked: (B, Hq, Sq) float64, -inf for a row with no key."""
    lse = torch.full(q.shape[:3], float("-inf"), dtype=torch.float64, device=q.device)
    for bi, hs, h, rs, keys in _ChunkedAttentionRef._blocks(q, k, causal, max_elements):
        if keys > 0:
            lse[bi, hs, rs] = attention_lse_ref(q[bi:bi + 1, hs, rs], k[bi:bi + 1, h:h + 1, :keys], causal, scale)[0]
    return lse
