"""The main job, for now: load the library, say how it was loaded and what can run here, then run
rms_norm, fused_add_rms_norm and layer_norm against PyTorch on the CPU with errors (vs a float64
reference) and timings.

    make demo            # or: python examples/demo.py
"""
import time

import torch
import torch.nn.functional as F

import yirage_ext
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
    print(f"{'op':20s} {'shape':>11s} {'dtype':9s} {'max abs err':>11s} {'max rel':>9s} {'ok':>3s} "
          f"{'yirage ms':>9s} {'torch ms':>9s} {'speedup':>7s}")
    all_ok = True
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        for m, n in ((4096, 4096), (16384, 1024)):
            x = torch.randn(m, n, dtype=dtype)
            r = torch.randn(m, n, dtype=dtype)
            w = torch.rand(n, dtype=dtype) + 0.5
            eps = 1e-6
            atol, rtol = TOLERANCES[dtype]
            cases = [
                ("rms_norm", lambda: yirage_ext.rms_norm(x, w, eps), lambda: F.rms_norm(x, (n,), w, eps),
                 lambda out: [(out, rms_norm_ref(x, w, eps))]),
                ("fused_add_rms_norm", lambda: yirage_ext.fused_add_rms_norm(x, r, w, eps),
                 lambda: F.rms_norm(x + r, (n,), w, eps),
                 lambda out: list(zip(out, fused_add_rms_norm_ref(x, r, w, eps)))),
                ("layer_norm", lambda: yirage_ext.layer_norm(x, w, r[0], 1e-5),
                 lambda: F.layer_norm(x, (n,), w, r[0], 1e-5),
                 lambda out: [(out, layer_norm_ref(x, w, r[0], 1e-5))]),
            ]
            for name, ours, theirs, pairs in cases:
                checks = pairs(ours())
                abs_err = max(max_errors(o, ref, atol / rtol)[0] for o, ref in checks)
                rel_err = max(max_errors(o, ref, atol / rtol)[1] for o, ref in checks)
                ok = all(torch.allclose(o.double(), ref.double(), atol=atol, rtol=rtol) for o, ref in checks)
                all_ok &= ok
                t_ours, t_theirs = median_ms(ours), median_ms(theirs)
                print(f"{name:20s} {m:>5d}x{n:<5d} {str(dtype).replace('torch.', ''):9s} {abs_err:11.2e} "
                      f"{rel_err:9.2e} {'yes' if ok else 'NO':>3s} {t_ours:9.2f} {t_theirs:9.2f} "
                      f"{t_theirs / t_ours:6.1f}x")
    print()
    print("errors are against a float64 reference (relative error where |ref| >= atol/rtol of the dtype);"
          " torch is eager PyTorch (F.rms_norm; x + r then F.rms_norm;"
          " F.layer_norm)")
    if not all_ok:
        raise SystemExit("demo: some results are outside the per-dtype tolerance")


if __name__ == "__main__":
    main()
