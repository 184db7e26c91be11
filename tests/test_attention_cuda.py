"""attention on CUDA (issue 8): the tensor-core kernels (fp16/bf16, head dims 64/128/256, sm_80+) and the portable
path for everything else, against the float64 reference and torch's scaled_dot_product_attention.

Covered: B in {1, 3}; heads 8/8, 32/8 (GQA), 16/1 (MQA); Sq and Sk in {1, 7, 128, 1000, 4096}, every (Sq, Sk)
pairing (Sq != Sk both ways), causal (bottom-right) and not; D in {64, 128, 256}; fp16 and bf16; the lse output;
gradients of q, k and v (GQA: dk/dv summed over the group); non-contiguous inputs (q, k, v sliced from one packed
qkv tensor, GQA included), a misaligned view (the copy path), rows without keys, Sk = 0, empty batch, large
logits; fp32 and other head dims (the portable path); that the native kernels ran (torch.profiler); opcheck;
torch.compile(fullgraph=True); CUDA-graph capture and replay.

The float64 reference of the big shapes is computed on the GPU in blocks (attention_ref_chunked): the plain
attention_ref forms B * Hq * Sq * Sk scores at once (13 GB for B=3, H=32, S=4096).

Skipped as a whole without a GPU or without a CUDA kernel for yirage::attention. Every test name contains
"cuda" and the module is marked `cuda`: `pytest tests/test_attention_cuda.py -m cuda` (or `-k cuda`)."""
import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch.library import opcheck

from yirage_ext.testing.inputs import attention_inputs
from yirage_ext.testing.reference import (GRAD_TOL, TOLERANCES, assert_close, attention_lse_ref_chunked,
                                          attention_ref, attention_ref_chunked)

from _helpers import assert_grad_close, dtype_id, reference_grads, unaligned

OPS = torch.ops.yirage
HAS_CUDA_ATTENTION = torch.cuda.is_available() and \
    torch._C._dispatch_has_kernel_for_dispatch_key("yirage::attention", "CUDA")
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not HAS_CUDA_ATTENTION, reason="needs a GPU and a CUDA kernel for yirage::attention "
                                 "(torch.cuda.is_available() and a CUDA build of yirage_ext)")]

HALF = [torch.float16, torch.bfloat16]
HEAD_DIMS = [64, 128, 256]
SEQS = [1, 7, 128, 1000, 4096]
HEADS = [(8, 8), (32, 8), (16, 1)]
NATIVE_FWD, NATIVE_BWD, COMBINE = "flash_attention_fwd", "flash_attention_bwd", "flash_attention_combine"
# lse: fp32 logsumexp of fp32 logits (tensor-core products of fp16/bf16 values are exact, the sums fp32 in another
# order than the CPU's, and exp2/log2 rescaling): a few fp32 ulps of |lse| (up to ~20 here) plus the logits' error
LSE_TOL = dict(atol=5e-5, rtol=1e-5)


def shape_id(s):
    return "x".join(map(str, s))


def make(b, hq, hk, sq, sk, d, dtype, seed=0, causal=False):
    """q (B, Hq, Sq, D), k/v (B, Hk, Sk, D) on the GPU: the tests' factory for small cases; for large ones
    standard normals drawn by a CUDA generator (the factory draws on the CPU, seconds per 100M values)."""
    if b * max(hq, hk) * max(sq, sk) * d <= 1 << 22:
        inp = attention_inputs(b, hq, hk, sq, sk, d, dtype=dtype, device="cuda", causal=causal, seed=seed)
        return inp.q, inp.k, inp.v
    gen = torch.Generator("cuda").manual_seed(seed)
    return tuple(torch.randn(b, h, s, d, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
                 for h, s in ((hq, sq), (hk, sk), (hk, sk)))


def leaves(*ts):
    return [t.detach().clone().requires_grad_() for t in ts]


def kernels_run(fn):
    """Names of the CUDA kernels that `fn()` launched (torch.profiler, CUDA activity)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return {e.name for e in prof.events()}


def ran(names, kernel):
    return any(kernel in n for n in names)


def check_forward(q, k, v, causal, scale=None, dtype=None, lse=True):
    """out and lse of attention_forward (and attention's out) against the blockwise float64 reference."""
    dtype = dtype or q.dtype
    with torch.no_grad():
        out, l = OPS.attention_forward(q, k, v, causal, scale)
        torch.cuda.synchronize()
        assert out.dtype == dtype and out.shape == q.shape and out.is_contiguous() and out.device == q.device
        assert l.dtype == torch.float32 and l.shape == q.shape[:3]
        assert_close(out, attention_ref_chunked(q, k, v, causal, scale), dtype, msg="out")
        if lse:
            torch.testing.assert_close(l.double(), attention_lse_ref_chunked(q, k, causal, scale), **LSE_TOL)
        assert torch.equal(OPS.attention(q, k, v, causal, scale), out), "attention and attention_forward differ"
    return out, l


def check_grads(q, k, v, causal, scale=None, seed=1):
    """dq, dk, dv of attention (autograd: attention_forward + attention_backward) against float64 reference grads."""
    dtype = q.dtype
    q, k, v = leaves(q, k, v)
    gen = torch.Generator("cuda").manual_seed(seed)
    g = torch.randn(q.shape, generator=gen, device="cuda").to(dtype)
    OPS.attention(q, k, v, causal, scale).backward(g)
    ref = reference_grads(lambda a, b, c: attention_ref_chunked(a, b, c, causal, scale), [q, k, v], [g])
    for got, want, what in zip((q.grad, k.grad, v.grad), ref, ("dq", "dk", "dv")):
        assert got.dtype == dtype and got.shape == want.shape and torch.isfinite(got).all(), what
        assert_grad_close(got, want, dtype, what)
    return q, k, v


# ---- forward: the full matrix, pruned ----

# every D x dtype x causal on these (B, Hq, Hk, Sq, Sk): together every B, head layout and sequence length
FWD_FULL = [(1, 8, 8, 128, 128), (3, 32, 8, 1000, 128), (1, 16, 1, 7, 4096), (3, 8, 8, 1, 1000),
            (1, 32, 8, 4096, 4096)]


@pytest.mark.parametrize("dtype", HALF, ids=dtype_id)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", FWD_FULL, ids=shape_id)
def test_cuda_forward_matrix(shape, causal, head_dim, dtype):
    q, k, v = make(*shape, head_dim, dtype, seed=sum(shape) + head_dim)
    check_forward(q, k, v, causal)


# every (Sq, Sk) pairing of SEQS, causal and not, B / heads / D / dtype rotating over the pairings
FWD_PAIRS = [((1, 3)[i % 2], *HEADS[i % 3], sq, sk, HEAD_DIMS[(i // 3) % 3], HALF[(i // 2) % 2])
             for i, (sq, sk) in enumerate(itertools.product(SEQS, SEQS))]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", FWD_PAIRS, ids=lambda c: shape_id(c[:6]) + "-" + dtype_id(c[6]))
def test_cuda_forward_seq_pairs(case, causal):
    *shape, dtype = case
    if shape[0] == 3 and shape[1] == 32 and shape[3] * shape[4] > 1000 * 4096:
        shape[0] = 1  # B=3, 32 heads, 4096 x 4096 is in test_cuda_forward_big
    q, k, v = make(*shape, dtype, seed=sum(shape))
    check_forward(q, k, v, causal)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_cuda_forward_big(causal):
    # the largest listed case: B=3, 32 query heads over 8 key/value heads, S=4096, D=128, bf16
    q, k, v = make(3, 32, 8, 4096, 4096, 128, torch.bfloat16, seed=3)
    check_forward(q, k, v, causal)


# causal over more than 4096 keys with Sq != Sk (bottom-right mask) and a partial last key tile: on Hopper the forward's
# 176-key tiles (attention_fwd.cu, sm90_short_tiles); enough query tiles (256 / 304 blocks) that the keys are not split
LONG_CAUSAL = [(2, 16, 16, 1000, 4500, 128, torch.bfloat16), (2, 32, 8, 600, 5000, 128, torch.float16)]


@pytest.mark.parametrize("case", LONG_CAUSAL, ids=lambda c: shape_id(c[:6]) + "-" + dtype_id(c[6]))
def test_cuda_forward_causal_long_keys(case):
    *shape, dtype = case
    check_forward(*make(*shape, dtype, seed=sum(shape)), True)


# ---- gradients ----

GRAD_FULL = [(1, 8, 8, 128, 128), (3, 32, 8, 7, 1000), (1, 16, 1, 1000, 128)]


@pytest.mark.parametrize("dtype", HALF, ids=dtype_id)
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", GRAD_FULL, ids=shape_id)
def test_cuda_gradients_matrix(shape, causal, head_dim, dtype):
    check_grads(*make(*shape, head_dim, dtype, seed=sum(shape) + head_dim), causal)


# the other sequence lengths (1, 4096) and both directions of Sq != Sk in the backward
GRAD_MORE = [(1, 8, 8, 4096, 4096, 128, torch.bfloat16), (3, 32, 8, 1, 4096, 64, torch.float16),
             (1, 16, 1, 4096, 7, 256, torch.bfloat16), (3, 8, 8, 128, 1000, 256, torch.float16),
             (1, 32, 8, 1000, 1000, 128, torch.float16), (3, 16, 1, 1, 1, 64, torch.bfloat16)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", GRAD_MORE, ids=lambda c: shape_id(c[:6]) + "-" + dtype_id(c[6]))
def test_cuda_gradients_more_shapes(case, causal):
    *shape, dtype = case
    check_grads(*make(*shape, dtype, seed=sum(shape)), causal)


# Under a causal mask the Hopper kernels hand out their blocks longest first over groups of 8 (batch, key/value head)
# pairs: 9 and 10 pairs (one full group and a partial one), every head dim, forward and gradients.
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("shape", [(3, 6, 3, 300, 300), (2, 10, 5, 200, 333)], ids=shape_id)
def test_cuda_causal_launch_order_groups(shape, head_dim):
    q, k, v = make(*shape, head_dim, torch.bfloat16, seed=sum(shape) + head_dim, causal=True)
    check_forward(q, k, v, True)
    check_grads(q, k, v, True)


# The narrow backward tiles (what GPUs with 99 KB of shared memory per block run) on a GPU where the wide ones fit:
# each head dim, GQA, odd lengths and Sq != Sk, causal and not.
NARROW_TILE = {64: "BwdTile<128, 64, 1, 16, 1, false>", 128: "BwdTile<64, 32, 1, 16, 1, false>",
               256: "BwdTile<64, 32, 2, 16, 1, false>"}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_cuda_gradients_narrow_tiles(head_dim, causal, monkeypatch):
    monkeypatch.setenv("YIRAGE_CUDA_ATTENTION_TILES", "narrow")
    q, k, v = make(2, 8, 2, 300, 1000, head_dim, torch.bfloat16, seed=head_dim, causal=causal)
    names = kernels_run(lambda: check_grads(q, k, v, causal))
    assert any("dkdv" in n and NARROW_TILE[head_dim] in n for n in names), sorted(n for n in names if "dkdv" in n)


# ---- against torch's SDPA (enable_gqa) ----

SDPA_SHAPES = [(1, 32, 8, 1000, 1000, 128), (3, 16, 1, 128, 128, 64), (1, 8, 8, 4096, 4096, 256),
               (3, 32, 8, 1, 4096, 128)]


@pytest.mark.parametrize("dtype", HALF, ids=dtype_id)
@pytest.mark.parametrize("shape", SDPA_SHAPES, ids=shape_id)
def test_cuda_matches_sdpa(shape, dtype):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = make(*shape, dtype, seed=7)
    qf, kf, vf = q.float(), k.float(), v.float()
    b, hq, hk, sq, sk, d = shape
    with sdpa_kernel(SDPBackend.MATH):  # fp32, the math backend: a reference independent of ours
        for causal in (False, True):
            mask = None if sq == sk or not causal else \
                torch.ones(sq, sk, dtype=torch.bool, device="cuda").tril(sk - sq)  # bottom-right
            want = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask, is_causal=causal and sq == sk,
                                                  enable_gqa=hq != hk)
            assert_close(OPS.attention(q, k, v, causal, None), want, dtype, msg=f"causal={causal}, default scale")
        for scale in (0.05, 1 / math.sqrt(d)):
            want = F.scaled_dot_product_attention(qf, kf, vf, scale=scale, enable_gqa=hq != hk)
            assert_close(OPS.attention(q, k, v, False, scale), want, dtype, msg=f"scale={scale}")
    # and SDPA's default backend in the same dtype: within the tolerance of each other's float64 error
    want = F.scaled_dot_product_attention(q, k, v, is_causal=sq == sk, enable_gqa=hq != hk)
    ref = attention_ref_chunked(q, k, v, sq == sk)
    ours = OPS.attention(q, k, v, sq == sk, None)
    err_ours, err_sdpa = (ours.double() - ref).abs().max().item(), (want.double() - ref).abs().max().item()
    assert err_ours <= 2 * err_sdpa + TOLERANCES[dtype][0] / 4, (err_ours, err_sdpa)


# ---- layouts ----

def check_packed(qkv, split, gen):
    """q, k, v = split(qkv), views of one packed tensor: the forward (full and causal) and, causal, the gradient
    that flows into the packed tensor, against the float64 reference."""
    q, k, v = split(qkv)
    for causal in (False, True):
        check_forward(q, k, v, causal)
    g = torch.randn(q.shape, generator=gen, device="cuda").to(qkv.dtype)
    OPS.attention(q, k, v, True, None).backward(g)
    want, = reference_grads(lambda t: attention_ref_chunked(*split(t), True), [qkv], [g])
    assert_grad_close(qkv.grad, want, qkv.dtype, "d(packed qkv)")


@pytest.mark.parametrize("dtype", HALF, ids=dtype_id)
@pytest.mark.parametrize("packing", ["bs3hd", "bs_hd3"])
def test_cuda_packed_qkv(packing, dtype):
    # q, k, v sliced from one packed projection output and transposed to (B, H, S, D): head and sequence
    # strides of 3 * H * D elements, rows 16-byte aligned (no copy needed); gradients flow into the packed tensor
    b, s, h, d = 2, 300, 8, 128
    gen = torch.Generator("cuda").manual_seed(11)
    if packing == "bs3hd":  # (B, S, 3, H, D)
        qkv = torch.randn(b, s, 3, h, d, generator=gen, device="cuda").to(dtype).requires_grad_()

        def split(t):
            return [t[:, :, i].transpose(1, 2) for i in range(3)]
    else:  # (B, S, H*D*3), the fused Linear's output
        qkv = torch.randn(b, s, 3 * h * d, generator=gen, device="cuda").to(dtype).requires_grad_()

        def split(t):
            return [t[..., i * h * d:(i + 1) * h * d].unflatten(-1, (h, d)).transpose(1, 2) for i in range(3)]
    q = split(qkv)[0]
    assert not q.is_contiguous() and q.stride(-1) == 1 and q.stride(2) == 3 * h * d
    check_packed(qkv, split, gen)


@pytest.mark.parametrize("dtype", HALF, ids=dtype_id)
def test_cuda_packed_qkv_gqa(dtype):
    # (B, S, (Hq + 2 Hk) * D): 32 query heads, 8 key/value heads, as Llama-style fused projections give
    b, s, hq, hk, d = 1, 513, 32, 8, 64
    gen = torch.Generator("cuda").manual_seed(12)
    qkv = torch.randn(b, s, (hq + 2 * hk) * d, generator=gen, device="cuda").to(dtype).requires_grad_()

    def split(t):
        q = t[..., :hq * d].unflatten(-1, (hq, d)).transpose(1, 2)
        k = t[..., hq * d:(hq + hk) * d].unflatten(-1, (hk, d)).transpose(1, 2)
        return q, k, t[..., (hq + hk) * d:].unflatten(-1, (hk, d)).transpose(1, 2)
    check_packed(qkv, split, gen)


@pytest.mark.parametrize("dtype", HALF, ids=dtype_id)
def test_cuda_misaligned_and_odd_strides(dtype):
    # storage offset 1 (not 16-byte aligned), and rows padded by 3 elements (strides not multiples of 8): the
    # glue copies these to contiguous tensors first; results and gradients must not change
    q, k, v = make(2, 8, 2, 200, 333, 128, dtype, seed=13)
    mis = [unaligned(t) for t in (q, k, v)]
    assert all(t.data_ptr() % 16 != 0 for t in mis)
    padded = []
    for t in (q, k, v):
        wide = torch.zeros(*t.shape[:-1], t.shape[-1] + 3, dtype=dtype, device="cuda")
        wide[..., :t.shape[-1]] = t
        padded.append(wide[..., :t.shape[-1]])
    assert padded[0].stride(2) % 8 != 0
    for causal in (False, True):
        want = OPS.attention(q, k, v, causal, None)
        for variant in (mis, padded):
            out, _ = check_forward(*variant, causal)
            torch.testing.assert_close(out, want, atol=0, rtol=0)  # the same kernel on a contiguous copy
    for variant in (mis, padded):
        check_grads(*variant, True)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_cuda_expanded_kv(head_dim):
    # k / v expanded (stride 0) over heads, over the sequence, and over the batch: read in place by the native
    # kernels (the Hopper forward's tensor-memory-accelerator maps included), as if materialized
    q, k, v = make(2, 8, 4, 300, 257, head_dim, torch.bfloat16, seed=17)
    variants = [(k[:, :1].expand(k.shape), v[:, 1:2].expand(v.shape)),
                (k[:, :, 5:6].expand(k.shape), v),
                (k[:1].expand(k.shape), v[1:].expand(v.shape))]
    assert all(0 in (kx.stride(0), kx.stride(1), kx.stride(2)) for kx, _ in variants)
    for kx, vx in variants:
        for causal in (False, True):
            out, _ = check_forward(q, kx, vx, causal)
            want = OPS.attention(q, kx.contiguous(), vx.contiguous(), causal, None)
            torch.testing.assert_close(out, want, atol=0, rtol=0)


# ---- edge cases ----

@pytest.mark.parametrize("dtype", HALF + [torch.float32], ids=dtype_id)
def test_cuda_causal_rows_without_keys(dtype):
    # Sq > Sk, bottom-right: query i sees keys j <= i - 136, so rows 0..135 see none
    q0, k0, v0 = make(1, 8, 2, 200, 64, 128, dtype, seed=14)
    q, k, v = leaves(q0, k0, v0)
    out, lse = OPS.attention_forward(q, k, v, True, None)
    assert torch.count_nonzero(out[:, :, :136]) == 0 and torch.isneginf(lse[:, :, :136]).all()
    assert torch.isfinite(lse[:, :, 136:]).all() and torch.isfinite(out).all()
    assert_close(out.detach(), attention_ref(q0, k0, v0, True), dtype)
    torch.testing.assert_close(lse.double(), attention_lse_ref_chunked(q0, k0, True), **LSE_TOL)
    g = torch.randn_like(out)
    out.backward(g)
    assert torch.count_nonzero(q.grad[:, :, :136]) == 0 and all(torch.isfinite(t.grad).all() for t in (q, k, v))
    ref = reference_grads(lambda a, b, c: attention_ref(a, b, c, True), [q, k, v], [g])
    for got, want, what in zip((q.grad, k.grad, v.grad), ref, ("dq", "dk", "dv")):
        assert_grad_close(got, want, dtype, what)


@pytest.mark.parametrize("dtype", HALF, ids=dtype_id)
@pytest.mark.parametrize("shape", [(1, 4, 2, 16, 0, 128), (0, 4, 2, 16, 16, 128), (2, 4, 2, 0, 16, 64)],
                         ids=["Sk0", "B0", "Sq0"])
def test_cuda_empty(shape, dtype):
    b, hq, hk, sq, sk, d = shape
    q = torch.randn(b, hq, sq, d, device="cuda").to(dtype).requires_grad_()
    k = torch.randn(b, hk, sk, d, device="cuda").to(dtype).requires_grad_()
    v = torch.randn(b, hk, sk, d, device="cuda").to(dtype).requires_grad_()
    for causal in (False, True):
        out, lse = OPS.attention_forward(q, k, v, causal, None)
        torch.cuda.synchronize()
        assert out.shape == q.shape and lse.shape == q.shape[:3] and out.dtype == dtype
        assert torch.count_nonzero(out) == 0 and torch.isneginf(lse).all()
        out.backward(torch.ones_like(out))
        assert all(t.grad.shape == t.shape and torch.count_nonzero(t.grad) == 0 for t in (q, k, v))
        q.grad = k.grad = v.grad = None


@pytest.mark.parametrize("dtype", HALF, ids=dtype_id)
def test_cuda_large_logits(dtype):
    # logits in the hundreds: the running max keeps exp() in range; no inf/NaN in outputs, lse or gradients
    q, k, v = make(1, 4, 2, 100, 1000, 128, dtype, seed=15)
    q = (q.float() * 40).to(dtype)  # logits ~ 40 * N(0, 1): in the hundreds
    logit_max = attention_lse_ref_chunked(q, k).abs().max().item()
    assert logit_max > 100
    # as in test_attention.py: fp32 logits of size L carry rounding errors of about L * 2^-24
    tol = max(TOLERANCES[dtype][0], 16 * 2.0 ** -24 * logit_max)
    for causal in (False, True):
        out, lse = OPS.attention_forward(q, k, v, causal, None)
        assert torch.isfinite(out).all() and torch.isfinite(lse).all()
        torch.testing.assert_close(out.double(), attention_ref(q, k, v, causal), atol=tol, rtol=tol)
    ql, kl, vl = leaves(q, k, v)
    OPS.attention(ql, kl, vl, True, None).backward(torch.ones_like(ql))
    assert all(torch.isfinite(t.grad).all() for t in (ql, kl, vl))


# ---- the portable path on CUDA (other dtypes and head dims), and which kernels run ----

PORTABLE = [(torch.float32, 64), (torch.float32, 128), (torch.bfloat16, 32), (torch.float16, 80),
            (torch.bfloat16, 96), (torch.float16, 40)]


@pytest.mark.parametrize("dtype, head_dim", PORTABLE, ids=[f"{dtype_id(t)}-D{d}" for t, d in PORTABLE])
def test_cuda_portable_path(dtype, head_dim):
    q, k, v = make(2, 8, 2, 130, 257, head_dim, dtype, seed=16)
    names = kernels_run(lambda: OPS.attention(q, k, v, True, None))
    assert not ran(names, NATIVE_FWD), f"{dtype_id(dtype)} D={head_dim} should take the portable path"
    for causal in (False, True):
        check_forward(q, k, v, causal)
    check_grads(q, k, v, True)


NATIVE = [(torch.bfloat16, 128), (torch.float16, 64), (torch.bfloat16, 256)]


@pytest.mark.parametrize("dtype, head_dim", NATIVE, ids=[f"{dtype_id(t)}-D{d}" for t, d in NATIVE])
def test_cuda_native_kernels_run(dtype, head_dim):
    major, minor = torch.cuda.get_device_capability()
    if major < 8:
        pytest.skip(f"the tensor-core kernels need sm_80 or newer, this GPU is sm_{major}{minor}")
    q, k, v = leaves(*make(2, 8, 2, 256, 256, head_dim, dtype, seed=17))
    holder = {}
    names = kernels_run(lambda: holder.setdefault("out", OPS.attention(q, k, v, True, None)))
    assert ran(names, NATIVE_FWD), f"no {NATIVE_FWD} kernel among {sorted(names)}"
    out = holder["out"]
    g = torch.randn_like(out)
    names = kernels_run(lambda: out.backward(g))
    assert ran(names, NATIVE_BWD), f"no {NATIVE_BWD} kernel among {sorted(names)}"


# On Hopper the prefill forward and the backward run warpgroup-MMA kernels (*_sm90_kernel, *_sm90_d256_kernel)
# when the library holds sm_90a code; YIRAGE_CUDA_ATTENTION_WGMMA=0 (read once per process) turns them off. The
# sm_80-class kernels that every other GPU runs are checked here in a process with the switch off: forward and
# gradients, each head dim, GQA, odd lengths, Sq != Sk, causal and not; and that none of our *_sm90 kernels ran
# there (cuBLAS's own kernels, which the float64 reference runs, have sm90 in their names too).
SM80_PROGRAM = """
import sys, torch
sys.path.insert(0, sys.argv[1])
import test_attention_cuda as t
names = set()
for d in (64, 128, 256):
    for causal in (False, True):
        q, k, v = t.make(2, 8, 2, 300, 1000, d, torch.bfloat16, seed=d, causal=causal)
        names |= t.kernels_run(lambda: t.check_forward(q, k, v, causal))
        names |= t.kernels_run(lambda: t.check_grads(q, k, v, causal))
assert t.ran(names, t.NATIVE_FWD) and t.ran(names, t.NATIVE_BWD), sorted(names)
ours = [n for n in names if "flash_attention" in n]
assert not any("_sm90" in n for n in ours), sorted(ours)
print("ok")
"""


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def test_cuda_hopper_kernels_run(head_dim):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the warpgroup-MMA kernels run on compute capability 9.0 only")
    # long enough that the forward takes no key splits (the split kernels are the sm_80-class ones)
    q, k, v = leaves(*make(2, 16, 4, 1024, 1024, head_dim, torch.bfloat16, seed=18))
    holder = {}
    names = kernels_run(lambda: holder.setdefault("out", OPS.attention(q, k, v, True, None)))
    if not ran(names, "fwd_sm90") and ran(names, NATIVE_FWD):
        pytest.skip("this library holds no sm_90a code (TORCH_CUDA_ARCH_LIST without 9.0a)")
    assert ran(names, "fwd_sm90"), sorted(names)
    out = holder["out"]
    g = torch.randn_like(out)
    names = kernels_run(lambda: out.backward(g))
    assert ran(names, "bwd_sm90"), sorted(names)


def test_cuda_sm80_kernels_without_wgmma():
    import os
    import subprocess
    import sys

    env = dict(os.environ, YIRAGE_CUDA_ATTENTION_WGMMA="0")
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", SM80_PROGRAM, here], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-4000:]


# Many backward launches back to back (D 64 / 128, B4 H32 S4096, causal and not), in a child process so that a kernel
# that never finishes fails the test instead of stopping the run: the Hopper backward's two math warpgroups once shared
# one named barrier for both of their turns, and at D = 64 runs of 12 to 100 launches hung now and then (a barrier
# completed by one warpgroup alone). The first result of each case is checked against the float64 reference on one
# (batch, head); every 50th repeat against the first: dK / dV equal, dQ (summed by atomic adds, in any order) within
# tolerance.
REPEAT_PROGRAM = """
import sys, torch
sys.path.insert(0, sys.argv[1])
import test_attention_cuda as t
ops = t.OPS
for d, causal, n in ((64, False, 400), (64, True, 300), (128, False, 150), (128, True, 200)):
    q, k, v = t.make(4, 32, 32, 4096, 4096, d, torch.bfloat16, seed=d + causal)
    g = torch.randn(q.shape, generator=torch.Generator("cuda").manual_seed(5), device="cuda").to(q.dtype)
    out, lse = ops.attention_forward(q, k, v, causal, None)
    first = ops.attention_backward(g, q, k, v, out, lse, causal, None)
    one = t.leaves(*(x[3:4, 31:32] for x in (q, k, v)))
    ref = t.reference_grads(lambda a, b, c: t.attention_ref_chunked(a, b, c, causal, None), one, [g[3:4, 31:32]])
    for got, want, what in zip(first, ref, ("dq", "dk", "dv")):
        t.assert_grad_close(got[3:4, 31:32], want, q.dtype, f"D{d} causal={causal} {what}")
    tol = t.GRAD_TOL[q.dtype] * first[0].abs().max().item()
    for i in range(n):
        grads = ops.attention_backward(g, q, k, v, out, lse, causal, None)
        if i % 50 == 49 or i == n - 1:
            torch.testing.assert_close(grads[0], first[0], atol=tol, rtol=0)
            assert torch.equal(grads[1], first[1]) and torch.equal(grads[2], first[2]), (d, causal, i)
    torch.cuda.synchronize()
    print(f"D{d} causal={causal}: {n + 1} backward launches", flush=True)
print("ok")
"""


def test_cuda_backward_repeated_launches_finish():
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        r = subprocess.run([sys.executable, "-c", REPEAT_PROGRAM, here], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the repeated backward launches did not finish in 300 s (a kernel that never ends?): {e.stdout}")
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-4000:]


DECODE_SPLIT_SHAPES = [(1, 32, 8, 1, 32768, 128, False), (1, 32, 8, 1, 20000, 64, False),
                       (1, 16, 1, 1, 9000, 256, False), (2, 32, 8, 3, 4097, 128, True), (1, 16, 1, 1, 3000, 64, True)]


@pytest.mark.parametrize("case", DECODE_SPLIT_SHAPES, ids=lambda c: shape_id(c[:6]) + ("-causal" if c[6] else "-full"))
def test_cuda_decode_split_merge(case):
    # decode shapes with few query tiles and many keys: the keys are split over blocks and the last block of
    # each query tile to finish merges the splits (no flash_attention_combine launch on sm_80+). Its counters
    # must come back to zero: a second call gives the same bits, and so do calls on two streams at once.
    *shape, causal = case
    q, k, v = make(*shape, torch.bfloat16, seed=24)
    names = kernels_run(lambda: OPS.attention_forward(q, k, v, causal, None))
    if torch.cuda.get_device_capability()[0] >= 8:
        assert ran(names, NATIVE_FWD) and not ran(names, COMBINE), sorted(names)
    out, lse = check_forward(q, k, v, causal)
    for _ in range(3):
        again = OPS.attention_forward(q, k, v, causal, None)
        assert torch.equal(again[0], out) and torch.equal(again[1], lse), "a repeated call differs"
    q2, k2, v2 = make(*shape, torch.bfloat16, seed=25)
    want2 = OPS.attention_forward(q2, k2, v2, causal, None)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for st in streams:
        st.wait_stream(torch.cuda.current_stream())
    got = [[], []]
    for _ in range(4):  # both streams busy with the same op at once
        for st, args, dst in zip(streams, ((q, k, v), (q2, k2, v2)), got):
            with torch.cuda.stream(st):
                dst.append(OPS.attention_forward(*args, causal, None))
    torch.cuda.synchronize()
    for dst, want in zip(got, ((out, lse), want2)):
        for o, l in dst:
            assert torch.equal(o, want[0]) and torch.equal(l, want[1]), "a call on a second stream differs"


def test_cuda_decode_split_kv():
    # decode: one query per head against 4096 keys; the forward may split the keys over blocks or not,
    # depending on its heuristic: only the result is asserted
    q, k, v = make(1, 32, 8, 1, 4096, 128, torch.bfloat16, seed=18)
    names = kernels_run(lambda: OPS.attention_forward(q, k, v, False, None))
    if torch.cuda.get_device_capability()[0] >= 8:
        assert ran(names, NATIVE_FWD), f"no {NATIVE_FWD} kernel among {sorted(names)}"
    print(f"decode kernels: {sorted(n for n in names if 'flash_attention' in n)}")
    for causal in (False, True):  # Sq = 1: causal sees every key
        check_forward(q, k, v, causal)
    # a batch of decode rows: every split heuristic branch with more query tiles
    check_forward(*make(3, 32, 8, 1, 4096, 128, torch.bfloat16, seed=19), False)


# ---- PyTorch integration ----

def test_cuda_opcheck():
    for causal, requires_grad in ((True, True), (False, False)):
        q, k, v = make(1, 4, 2, 37, 70, 64, torch.bfloat16, seed=20)
        q, k, v = (t.requires_grad_(requires_grad) for t in (q, k, v))
        opcheck(OPS.attention.default, (q, k, v, causal, None))
        opcheck(OPS.attention.default, (q, k, v, causal, 0.3))
        opcheck(OPS.attention_forward.default, (q, k, v, causal, None))
        out, lse = (t.detach() for t in OPS.attention_forward(q, k, v, causal, None))
        g = torch.randn_like(out)
        opcheck(OPS.attention_backward.default, (g, q.detach(), k.detach(), v.detach(), out, lse, causal, None))


def test_cuda_compile_fullgraph():
    torch._dynamo.reset()

    def layer(q, k, v, w):  # attention inside a compiled graph, its backward through autograd
        return (OPS.attention(q, k, v, True, None).float() * w).sum()

    compiled = torch.compile(layer, fullgraph=True)
    q, k, v = leaves(*make(2, 8, 2, 100, 160, 128, torch.bfloat16, seed=21))
    w = torch.randn(q.shape, device="cuda")  # an O(1) upstream gradient for every output
    loss = compiled(q, k, v, w)
    loss.backward()
    ref_q, ref_k, ref_v = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref_loss = (attention_ref(ref_q, ref_k, ref_v, True) * w.double()).sum()
    ref_loss.backward()
    # a sum of 204800 outputs, each within bf16 rounding: compared relative to the sum of their magnitudes
    scale = (attention_ref(ref_q, ref_k, ref_v, True) * w.double()).abs().sum().item()
    assert abs(loss.item() - ref_loss.item()) <= 4e-3 * scale, (loss.item(), ref_loss.item(), scale)
    for got, want, what in ((q.grad, ref_q.grad, "dq"), (k.grad, ref_k.grad, "dk"), (v.grad, ref_v.grad, "dv")):
        assert_grad_close(got, want, torch.bfloat16, what)

    # the forward and backward ops called explicitly, in one graph
    def fwd_bwd(q, k, v, g):
        out, lse = OPS.attention_forward(q, k, v, False, None)
        return (out, *OPS.attention_backward(g, q, k, v, out, lse, False, None))

    qd, kd, vd = (t.detach() for t in (q, k, v))
    g = torch.randn_like(qd)
    got = torch.compile(fwd_bwd, fullgraph=True)(qd, kd, vd, g)
    want = fwd_bwd(qd, kd, vd, g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=GRAD_TOL[torch.bfloat16] * max(1.0, b.abs().max().item()),
                                   rtol=GRAD_TOL[torch.bfloat16])


GRAPH_SHAPES = [(1, 8, 2, 300, 300, 128, True), (2, 32, 8, 1, 4096, 128, False), (1, 4, 4, 70, 130, 64, True),
                (1, 32, 8, 1, 32768, 128, False)]


def _capture(fn, args):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*args)
    return graph, out


@pytest.mark.parametrize("case", GRAPH_SHAPES, ids=lambda c: shape_id(c[:6]) + ("-causal" if c[6] else "-full"))
def test_cuda_graph_capture(case):
    *shape, causal = case
    dtype = torch.bfloat16

    def fwd_bwd(q, k, v, g):
        out, lse = OPS.attention_forward(q, k, v, causal, None)
        return (out, lse, *OPS.attention_backward(g, q, k, v, out, lse, causal, None))

    static = [*make(*shape, dtype, seed=22), None]
    static[3] = torch.randn_like(static[0])
    fwd_graph, fwd_out = _capture(lambda q, k, v, g: OPS.attention_forward(q, k, v, causal, None), static)
    graph, outs = _capture(fwd_bwd, static)
    new = [*make(*shape, dtype, seed=23), None]
    new[3] = torch.randn_like(new[0])
    for s, n in zip(static, new):
        s.copy_(n)
    fwd_graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    eager = fwd_bwd(*new)
    for got, want in zip(fwd_out, eager[:2]):
        torch.testing.assert_close(got, want, atol=0, rtol=0, msg=lambda m: f"forward graph replay vs eager: {m}")
    for i, (got, want) in enumerate(zip(outs, eager)):
        tol = GRAD_TOL[dtype] * max(1.0, want.abs().max().item())
        torch.testing.assert_close(got, want, atol=tol, rtol=GRAD_TOL[dtype],
                                   msg=lambda m: f"graph replay vs eager, result {i}: {m}")
    q, k, v, g = new
    assert_close(outs[0], attention_ref_chunked(q, k, v, causal), dtype, msg="graph replay: out")
    ref = reference_grads(lambda a, b, c: attention_ref_chunked(a, b, c, causal), leaves(q, k, v), [g])
    for got, want, what in zip(outs[2:], ref, ("dq", "dk", "dv")):
        assert_grad_close(got, want, dtype, "graph replay: " + what)
