"""The ops the framework knows: for each, how a shape string reads, its inputs (the tests' factories in
yirage_ext.testing.inputs), its float64 reference and tolerance (yirage_ext.testing.reference), the eager
PyTorch code it replaces (the `torch` provider, which `compile` compiles), what --backward differentiates,
and the bytes or FLOPs an ideal kernel moves or does.

Adding an op is one OpSpec in OPS (and a provider entry for each implementation: see providers.py)."""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from ..testing import inputs as I
from ..testing import reference as R


@dataclasses.dataclass(frozen=True)
class Case:
    """One op on one shape, dtype and device: the op's positional arguments (tensors on `device`)."""
    op: str
    shape: str
    dims: Tuple[int, ...]
    dtype: torch.dtype
    device: str
    args: tuple


@dataclasses.dataclass(frozen=True)
class OpSpec:
    name: str
    shape_format: str  # e.g. "ROWSxHIDDEN", shown in errors and --help
    ndims: Tuple[int, ...]  # accepted numbers of dims in a shape string
    shapes: Tuple[str, ...]  # the default grid
    make: Callable[[Tuple[int, ...], torch.dtype, str, int], tuple]  # (dims, dtype, device, seed) -> args
    reference: Callable  # float64 reference, same arguments as the op
    eager: Callable  # the eager PyTorch code, same arguments as the op
    grad_args: Tuple[int, ...]  # indices of the arguments differentiated with --backward
    nbytes: Callable[[tuple, bool], int]  # ideal bytes (args, backward)
    flops: Optional[Callable[[tuple, bool], float]] = None  # compute-bound ops: FLOPs (args, backward)
    tolerance: Callable[[tuple, torch.dtype], Tuple[float, float]] = lambda args, dtype: R.TOLERANCES[dtype]
    validate: Callable[[Tuple[int, ...]], Optional[str]] = lambda dims: None  # why a shape is invalid, or None
    note: str = ""  # what the case computes, for the docs and --list
    # shape suffixes "-<variant>" the op accepts (e.g. attention's "-full", "-causal"); make then gets variant=...
    variants: Tuple[str, ...] = ()
    # (args) -> whether this case is memory-bound (its % roof is then of the copy bandwidth, its rate GB/s) though
    # the op has FLOPs (e.g. attention decoding: one query row per head against a long key/value cache)
    memory_bound: Callable[[tuple], bool] = lambda args: False

    @property
    def may_be_memory_bound(self) -> bool:
        """Whether some of its cases are rated against the copy bandwidth (no FLOPs, or a memory_bound test)."""
        return self.flops is None or self.memory_bound is not OpSpec.memory_bound

    def split_variant(self, text: str) -> Tuple[str, Optional[str]]:
        """'4x32x4096x128-full' -> ('4x32x4096x128', 'full'); ('...', None) without a suffix."""
        base, sep, variant = text.partition("-")
        if not sep:
            return text, None
        if variant.lower() not in self.variants:
            allowed = (f"a suffix -{' or -'.join(self.variants)}" if self.variants else "no suffix")
            raise ValueError(f"--shapes: {self.name} expects {self.shape_format} with {allowed}, got {text!r}")
        return base, variant.lower()

    def parse_shape(self, text: str) -> Tuple[int, ...]:
        """'4096x4096' -> (4096, 4096); ValueError naming the op, the expected format and the given text. A
        suffix "-<variant>" (one of `variants`) is checked and dropped."""
        base, _ = self.split_variant(text)
        try:
            dims = tuple(int(v) for v in base.lower().split("x"))
        except ValueError:
            dims = ()
        if len(dims) not in self.ndims or any(d <= 0 for d in dims):
            raise ValueError(f"--shapes: {self.name} expects {self.shape_format} (positive integers), got {text!r}")
        why = self.validate(dims)
        if why:
            raise ValueError(f"--shapes: {self.name} expects {self.shape_format} with {why}, got {text!r}")
        return dims

    def case(self, shape: str, dtype: torch.dtype, device: str, seed: int = 0) -> Case:
        dims = self.parse_shape(shape)
        _, variant = self.split_variant(shape)
        extra = {"variant": variant} if variant is not None else {}
        return Case(self.name, shape, dims, dtype, device, self.make(dims, dtype, device, seed, **extra))


def _size(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


# ---- norms ----

def _rms_make(dims, dtype, device, seed):
    inp = I.rms_norm_inputs(dims, dtype, device=device, seed=seed)
    return inp.x, inp.weight, inp.eps


def _add_rms_make(dims, dtype, device, seed):
    inp = I.rms_norm_inputs(dims, dtype, device=device, seed=seed)
    return inp.x, inp.residual, inp.weight, inp.eps


def _ln_make(dims, dtype, device, seed):
    inp = I.layer_norm_inputs(dims, dtype, device=device, seed=seed)
    return inp.x, inp.weight, inp.bias, inp.eps


def _eager_add_rms(x, r, w, eps):
    h = x + r
    return F.rms_norm(h, (h.shape[-1],), w, eps), h


def _passes(fwd: float, bwd: float):
    """Ideal bytes as passes over the first argument: `fwd` forward, `fwd + bwd` forward + backward."""
    return lambda args, backward: int((fwd + (bwd if backward else 0)) * _size(args[0]))


# ---- activations ----

def _act_make(dims, dtype, device, seed):
    return (I.activation_inputs(dims, dtype, device=device, seed=seed),)


def _gated_eager(act):
    def eager(x, *rest):
        a, b = x.chunk(2, -1)
        return act(a, *rest) * b
    return eager


def _even(dims):
    return None if dims[-1] % 2 == 0 else "an even HIDDEN (2*d)"


# ---- rotary ----

def _rope_make(dims, dtype, device, seed):
    s, hq, hk, d = dims if len(dims) == 4 else (dims[0], dims[1], dims[1], dims[2])
    inp = I.rotary_embedding_inputs((s, hq, d), kv_heads=hk, dtype=dtype, device=device, seed=seed)
    return inp.q, inp.k, inp.cos, inp.sin, False


def _rope_eager(q, k, cos, sin, interleaved=False):
    """The usual neox code: x * cos + rotate_half(x) * sin, cos/sin (S, R/2) expanded to the head dim."""
    c, s = torch.cat((cos, cos), -1).unsqueeze(-2), torch.cat((sin, sin), -1).unsqueeze(-2)

    def rot(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    return q * c + rot(q) * s, k * c + rot(k) * s


def _rope_bytes(args, backward):
    io = _size(args[0]) + _size(args[1])
    tables = _size(args[2]) + _size(args[3])
    return (2 * io + tables) * (2 if backward else 1)


def _even_head(dims):
    return None if dims[-1] % 2 == 0 else "an even head dim D"


# ---- GEMM ----

def _mm_make(dims, dtype, device, seed):
    *batch, m, k, n = dims
    inp = I.matmul_inputs((*batch, m, k), (*batch, k, n), dtype, device=device, seed=seed)
    return inp.a, inp.b


def _mm_flops(args, backward):
    a, b = args
    return 2.0 * a.numel() * b.shape[-1] * (3 if backward else 1)


def _linear_make(dims, dtype, device, seed):
    m, k, n = dims
    inp = I.linear_inputs((m, k), n, dtype, device=device, seed=seed)
    return inp.x, inp.weight, inp.bias, "gelu"


def _linear_eager(x, w, b, activation):
    return R.activation_ref(F.linear(x, w, b), activation)


def _linear_flops(args, backward):
    x, w = args[0], args[1]
    return 2.0 * x.numel() * w.shape[0] * (3 if backward else 1)


def _mm_bytes(args, backward):
    a, b = args
    out = a.numel() // a.shape[-1] * b.shape[-1]
    return (_size(a) + _size(b) + out * a.element_size()) * (3 if backward else 1)


def _gemm_memory_bound(args):
    """Products of at most 64 rows of the left operand (decoding: a few tokens through a layer; about M FLOPs per
    byte of the weight) are rated by bandwidth: their time is the read of the weight."""
    return args[0].numel() // max(args[0].shape[-1], 1) <= 64


def _linear_bytes(args, backward):
    x, w, b = args[:3]
    out = x.numel() // x.shape[-1] * w.shape[0]
    return (_size(x) + _size(w) + _size(b) + out * x.element_size()) * (3 if backward else 1)


def _gemm_tol(args, dtype):
    return R.gemm_tolerance(dtype, args[0].shape[-1])


# ---- attention ----

# Inputs of more elements than this, on a GPU, are drawn there (a CUDA generator): the factory draws on the CPU,
# about a second per 100M values (a decode case of B=64, Hk=8, Sk=131072, D=128 has 8.6G per tensor).
_DRAW_ON_DEVICE = 1 << 26


def _attn_make(dims, dtype, device, seed, variant="causal"):
    """q, k, v, causal, scale. The shape's suffix: -causal (the default, bottom-right) or -full (no mask)."""
    b, hq, hk, sq, sk, d = dims if len(dims) == 6 else (dims[0], dims[1], dims[1], dims[2], dims[2], dims[3])
    causal = variant != "full"
    if torch.device(device).type == "cuda" and b * max(hq, hk) * max(sq, sk) * d > _DRAW_ON_DEVICE:
        gen = torch.Generator(device).manual_seed(seed)
        q, k, v = (torch.randn(b, h, s, d, generator=gen, device=device, dtype=dtype)
                   for h, s in ((hq, sq), (hk, sk), (hk, sk)))
        return q, k, v, causal, None
    inp = I.attention_inputs(b, hq, hk, sq, sk, d, dtype=dtype, device=device, causal=causal, seed=seed)
    return inp.q, inp.k, inp.v, causal, None


def _attn_reference(q, k, v, causal=False, scale=None):
    """The float64 reference in blocks of queries per batch entry and key/value head (R.attention_ref_chunked):
    the plain one forms B * Hq * Sq * Sk scores, 275 GB for B=4, H=32, S=16384."""
    return R.attention_ref_chunked(q, k, v, causal, scale)


def _attn_memory_bound(args):
    """Decoding-like cases (at most 8 query rows per key/value head, Sq * Hq / Hk: the K/V cache is read for
    a few FLOPs per byte) are rated by bandwidth."""
    q, k = args[0], args[1]
    return q.shape[2] * (q.shape[1] // max(k.shape[1], 1)) <= 8


def _attn_eager(q, k, v, causal=False, scale=None):
    """SDPA; for causal with Sq != Sk an explicit bottom-right mask (SDPA's is_causal aligns top-left)."""
    sq, sk = q.shape[-2], k.shape[-2]
    mask = None
    if causal and sq != sk:
        mask = torch.ones(sq, sk, dtype=torch.bool, device=q.device).tril(sk - sq)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and sq == sk, scale=scale,
                                          enable_gqa=q.shape[1] != k.shape[1])


def _visible_pairs(sq, sk, causal):
    if not causal:
        return sq * sk
    return sum(min(max(i + sk - sq + 1, 0), sk) for i in range(sq))


def _attn_flops(args, backward):
    q, k, _, causal, _ = args
    b, hq, sq, d = q.shape
    return 4.0 * b * hq * _visible_pairs(sq, k.shape[2], causal) * d * (3.5 if backward else 1)


def _attn_bytes(args, backward):
    io = 2 * _size(args[0]) + _size(args[1]) + _size(args[2])
    return io * (3 if backward else 1)


def _gqa(dims):
    if len(dims) == 6 and dims[1] % dims[2]:
        return "Hq divisible by Hk"
    return None


_NORM = "ROWSxHIDDEN"
OPS = {spec.name: spec for spec in [
    OpSpec("rms_norm", _NORM, (2, 3), ("4096x1024",), _rms_make, R.rms_norm_ref,
           lambda x, w, eps: F.rms_norm(x, (x.shape[-1],), w, eps), (0, 1), _passes(2, 3),
           note="weight (N,); torch = F.rms_norm"),
    OpSpec("fused_add_rms_norm", _NORM, (2, 3), ("4096x1024",), _add_rms_make, R.fused_add_rms_norm_ref,
           _eager_add_rms, (0, 1, 2), _passes(4, 5), note="torch = x + residual, then F.rms_norm"),
    OpSpec("layer_norm", _NORM, (2, 3), ("4096x1024",), _ln_make, R.layer_norm_ref,
           lambda x, w, b, eps: F.layer_norm(x, (x.shape[-1],), w, b, eps), (0, 1, 2), _passes(2, 3),
           note="weight and bias (N,); torch = F.layer_norm"),
    OpSpec("softmax", _NORM, (2, 3), ("4096x1024",), lambda *a: (I.softmax_inputs(*a[:2], device=a[2], seed=a[3]), -1),
           R.softmax_ref, lambda x, dim: torch.softmax(x, dim), (0,), _passes(2, 3),
           note="over the last dim; torch = torch.softmax"),
    OpSpec("log_softmax", _NORM, (2, 3), ("4096x1024",),
           lambda *a: (I.softmax_inputs(*a[:2], device=a[2], seed=a[3]), -1),
           R.log_softmax_ref, lambda x, dim: torch.log_softmax(x, dim), (0,), _passes(2, 3),
           note="over the last dim; torch = torch.log_softmax"),
    OpSpec("silu_and_mul", _NORM, (2, 3), ("4096x2048",), _act_make, R.silu_and_mul_ref,
           _gated_eager(lambda a: F.silu(a)), (0,), _passes(1.5, 2.5), validate=_even,
           note="x (ROWS, 2d) -> (ROWS, d); torch = F.silu(a) * b"),
    OpSpec("gelu_and_mul", _NORM, (2, 3), ("4096x2048",), lambda *a: (*_act_make(*a), "none"), R.gelu_and_mul_ref,
           _gated_eager(lambda a, approximate: F.gelu(a, approximate=approximate)), (0,), _passes(1.5, 2.5),
           validate=_even, note="erf GELU; torch = F.gelu(a) * b"),
    OpSpec("gelu", _NORM, (2, 3), ("4096x1024",), lambda *a: (*_act_make(*a), "none"), R.gelu_ref,
           lambda x, approximate: F.gelu(x, approximate=approximate), (0,), _passes(2, 3),
           note="erf GELU; torch = F.gelu"),
    OpSpec("rotary_embedding", "SxHxD or SxHqxHkxD", (3, 4), ("1024x8x2x128",), _rope_make, R.rotary_embedding_ref,
           _rope_eager, (0, 1), _rope_bytes, validate=_even_head,
           note="neox pairs, full rotary, cos/sin (S, D/2); torch = x * cos + rotate_half(x) * sin"),
    OpSpec("matmul", "MxKxN or BxMxKxN", (3, 4), ("256x512x512",), _mm_make, R.matmul_ref,
           torch.matmul, (0, 1), _mm_bytes, flops=_mm_flops, tolerance=_gemm_tol, memory_bound=_gemm_memory_bound,
           note="torch = torch.matmul; at most 64 rows of a (batches included) rated in GB/s"),
    OpSpec("linear", "MxKxN", (3,), ("256x512x512",), _linear_make, R.linear_ref, _linear_eager, (0, 1, 2),
           _linear_bytes, flops=_linear_flops, tolerance=_gemm_tol, memory_bound=_gemm_memory_bound,
           note="x (M, K), weight (N, K), bias, GELU epilogue; torch = F.gelu(F.linear(x, weight, bias)); "
                "M <= 64 (decoding) rated in GB/s"),
    OpSpec("attention", "BxHxSxD or BxHqxHkxSqxSkxD", (4, 6), ("1x8x2x512x512x64",), _attn_make,
           _attn_reference, _attn_eager, (0, 1, 2), _attn_bytes, flops=_attn_flops, validate=_gqa,
           variants=("causal", "full"), memory_bound=_attn_memory_bound,
           note="causal (bottom-right; suffix -full: no mask), GQA when Hq > Hk; torch = "
                "F.scaled_dot_product_attention; decoding shapes (Sq * Hq / Hk <= 8) rated in GB/s"),
]}


def names() -> Sequence[str]:
    return list(OPS)

