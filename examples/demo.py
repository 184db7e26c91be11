"""The main job, for now: load the library, say how it was loaded and what can run here, then run every op
against PyTorch on the CPU with errors (vs a float64 reference, within the tests' per-dtype tolerances)
and timings.

    make demo            # or: python examples/demo.py
"""
import time

import torch
import torch.nn.functional as F

import yirage_ext
from yirage_ext.testing import reference as R
from yirage_ext.testing.inputs import attention_inputs, linear_inputs, rotary_embedding_inputs
from yirage_ext.testing.reference import TOLERANCES, fused_add_rms_norm_ref, layer_norm_ref, rms_norm_ref


def median_ms(fn, repeats=20):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


def max_errors(out, ref, floor):
    """Max absolute error, and max relative error where |ref| >= floor (near zero only the absolute
    error means something)."""
    out, ref = out.double(), ref.double()
    abs_err = (out - ref).abs().max().item()
    rel = ((out - ref).abs() / ref.abs().clamp_min(floor)).max().item()
    return abs_err, rel


def rotate_half_rope(q, k, cos, sin):
    """The usual eager neox rotary code (full rotary: cos/sin (S, D/2), q/k (..., S, H, D))."""
    c, s = torch.cat([cos, cos], -1)[:, None, :], torch.cat([sin, sin], -1)[:, None, :]

    def rot(x):
        x1, x2 = x.chunk(2, -1)
        return torch.cat([-x2, x1], -1)
    return q * c + rot(q) * s, k * c + rot(k) * s


def cases(dtype):
    """(name, shape, ours, torch's, pairs(out) -> [(output, float64 reference)], (atol, rtol)) per op."""
    tol = TOLERANCES[dtype]
    m, n = 4096, 4096
    x = torch.randn(m, n, dtype=dtype)
    r = torch.randn(m, n, dtype=dtype)
    w = torch.rand(n, dtype=dtype) + 0.5
    eps = 1e-6
    rope = rotary_embedding_inputs((1024, 32, 128), kv_heads=8, dtype=dtype, seed=1)
    lin = linear_inputs((256, 4096), 4096, dtype, seed=2)
    att = attention_inputs(1, 8, 8, 1024, 1024, 128, dtype, causal=True, seed=3)
    gemm_tol = R.gemm_tolerance(dtype, 4096)
    shape = f"{m}x{n}"
    return [
        ("rms_norm", shape, lambda: yirage_ext.rms_norm(x, w, eps), lambda: F.rms_norm(x, (n,), w, eps),
         lambda out: [(out, rms_norm_ref(x, w, eps))], tol),
        ("fused_add_rms_norm", shape, lambda: yirage_ext.fused_add_rms_norm(x, r, w, eps),
         lambda: F.rms_norm(x + r, (n,), w, eps), lambda out: list(zip(out, fused_add_rms_norm_ref(x, r, w, eps))), tol),
        ("layer_norm", shape, lambda: yirage_ext.layer_norm(x, w, r[0], 1e-5), lambda: F.layer_norm(x, (n,), w, r[0], 1e-5),
         lambda out: [(out, layer_norm_ref(x, w, r[0], 1e-5))], tol),
        ("softmax", shape, lambda: yirage_ext.softmax(x), lambda: torch.softmax(x, -1),
         lambda out: [(out, R.softmax_ref(x))], tol),
        ("silu_and_mul", shape, lambda: yirage_ext.silu_and_mul(x), lambda: F.silu(x[:, :n // 2]) * x[:, n // 2:],
         lambda out: [(out, R.silu_and_mul_ref(x))], tol),
        ("gelu", shape, lambda: yirage_ext.gelu(x), lambda: F.gelu(x), lambda out: [(out, R.gelu_ref(x))], tol),
        ("rotary_embedding", "1024x32/8x128", lambda: yirage_ext.rotary_embedding(rope.q, rope.k, rope.cos, rope.sin),
         lambda: rotate_half_rope(rope.q, rope.k, rope.cos, rope.sin),
         lambda out: list(zip(out, R.rotary_embedding_ref(rope.q, rope.k, rope.cos, rope.sin))), tol),
        ("linear[gelu]", "256x4096x4096", lambda: yirage_ext.linear(lin.x, lin.weight, lin.bias, "gelu"),
         lambda: F.gelu(F.linear(lin.x, lin.weight, lin.bias)),
         lambda out: [(out, R.linear_ref(lin.x, lin.weight, lin.bias, "gelu"))], gemm_tol),
        ("attention causal", "1x8x1024x128", lambda: yirage_ext.attention(att.q, att.k, att.v, causal=True),
         lambda: F.scaled_dot_product_attention(att.q, att.k, att.v, is_causal=True),
         lambda out: [(out, R.attention_ref(att.q, att.k, att.v, causal=True))], tol),
    ]


def main():
    info = yirage_ext.load_info()
    print(f"yirage_ext {yirage_ext.__version__} with torch {torch.__version__}")
    print(f"library: {info.kind} ({info.path})" + (f"\n  JIT because: {info.reason}" if info.reason else ""))
    if not torch._C._dispatch_has_kernel_for_dispatch_key("yirage::rms_norm", "CUDA"):
        cuda = "no yirage CUDA kernels in this build" + (
            f" (GPU present: {torch.cuda.get_device_name()})" if torch.cuda.is_available() else "")
    elif torch.cuda.is_available():
        cuda = f"available ({torch.cuda.get_device_name()})"
    else:
        cuda = "compiled in, no GPU visible"
    print(f"backends: cpu (kernel variant {yirage_ext.cpu_isa()}, {torch.get_num_threads()} threads); cuda: {cuda}")
    print()
    print(f"{'op':20s} {'shape':>15s} {'dtype':9s} {'max abs err':>11s} {'max rel':>9s} {'ok':>3s} "
          f"{'yirage ms':>9s} {'torch ms':>9s} {'speedup':>7s}")
    all_ok = True
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        for name, shape, ours, theirs, pairs, tol in cases(dtype):
            checks = pairs(ours())
            atol, rtol = tol
            abs_err = max(max_errors(o, ref, atol / rtol)[0] for o, ref in checks)
            rel_err = max(max_errors(o, ref, atol / rtol)[1] for o, ref in checks)
            ok = all(torch.allclose(o.double(), ref.double(), atol=atol, rtol=rtol) for o, ref in checks)
            all_ok &= ok
            t_ours, t_theirs = median_ms(ours), median_ms(theirs)
            print(f"{name:20s} {shape:>15s} {str(dtype).replace('torch.', ''):9s} {abs_err:11.2e} "
                  f"{rel_err:9.2e} {'yes' if ok else 'NO':>3s} {t_ours:9.2f} {t_theirs:9.2f} "
                  f"{t_theirs / t_ours:6.1f}x", flush=True)
    print()
    print("errors are against a float64 reference (relative error where |ref| >= atol/rtol of the dtype; GEMMs"
          " with the K-scaled tolerance of the tests); torch is eager PyTorch: the ATen op where there is one"
          " (F.rms_norm, F.layer_norm, torch.softmax, F.gelu, SDPA), else the unfused code a model"
          " writes (x + r then F.rms_norm, F.silu(a) * b, rotate_half, act(F.linear))")
    if not all_ok:
        raise SystemExit("demo: some results are outside the per-dtype tolerance")


if __name__ == "__main__":
    main()
