"""Helpers shared by the test files: float64 reference gradients, gradient comparison, a way to run an op's
portable (PrivateUse1) kernel on CPU tensors, and running Python in a fresh process."""
import torch

from yirage_ext.testing.reference import GRAD_TOL  # noqa: F401  (re-exported: the tests' gradient tolerances)


def dtype_id(dt):
    return str(dt).replace("torch.", "")


def reference_grads(fn_ref, inputs, grads_out):
    leaves = [t.detach().double().requires_grad_(t.requires_grad) if t is not None else None for t in inputs]
    outs = fn_ref(*leaves)
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    pairs = [(o, g) for o, g in zip(outs, grads_out) if g is not None]
    torch.autograd.backward([o for o, _ in pairs], [g.double() for _, g in pairs])
    return [t.grad if t is not None and t.requires_grad else None for t in leaves]


def assert_grad_close(actual, expected, dtype, what):
    tol = GRAD_TOL[dtype] * max(1.0, expected.abs().max().item())
    torch.testing.assert_close(actual.double(), expected, atol=tol, rtol=GRAD_TOL[dtype], msg=lambda m: f"{what}: {m}")


def small_f64_inputs():
    """Small float64 inputs of every op, shared by the tests of autograd mechanics (double backward, torch.func):
    x (4, 8), w (8,) positive, q (1, 2, 5, 8) in attention's layout, qr (1, 5, 2, 8) in rotary's, cos and sin
    (5, 4), a linear weight (3, 8)."""
    f64 = dict(dtype=torch.float64)
    return dict(x=torch.randn(4, 8, **f64), w=torch.rand(8, **f64) + 0.5, q=torch.randn(1, 2, 5, 8, **f64),
                qr=torch.randn(1, 5, 2, 8, **f64), cos=torch.randn(5, 4, **f64), sin=torch.randn(5, 4, **f64),
                weight=torch.randn(3, 8, **f64))


def portable(op, *args):
    """Runs an op's PrivateUse1 (portable) kernel on CPU tensors."""
    return op.default.redispatch(torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1), *args)


def aten_ops_called(fn):
    with torch.autograd.profiler.profile() as prof:
        fn()
    return {e.name for e in prof.function_events}


def run_python(code=None, args=(), timeout=300, cwd=None, env_extra=None):
    """Runs `python -c code` (or `python *args`) in a fresh process from a neutral directory, importing the
    yirage_ext this process imported (the installed wheel under `make test`, the checkout with PYTHONPATH):
    never the other, so a checkout without a built library is not JIT-built. `env_extra`: variables set for
    it. Returns the CompletedProcess."""
    import os
    import subprocess
    import sys
    import tempfile

    import yirage_ext

    parent = os.path.dirname(os.path.dirname(os.path.abspath(yirage_ext.__file__)))
    env = dict(os.environ, PYTHONPATH=parent + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env_extra or {}))
    cmd = [sys.executable] + (["-c", code] if code is not None else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or tempfile.gettempdir(),
                          env=env)


def unaligned(t):
    """A contiguous copy of `t` whose data starts one element past an aligned address (storage offset 1), so
    its data pointer is not 16-byte aligned: kernels that load vectors must take their unaligned path."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    out = buf[1:].view(t.shape)
    out.copy_(t)
    return out


def device_of(target):
    """The device a `target` fixture value runs on: "cuda" for the CUDA kernels, "cpu" for a CPU variant."""
    return "cuda" if target == "cuda" else "cpu"


def nvcc_path():
    """The nvcc of CUDA_HOME or /usr/local/cuda, else the one on PATH, else None."""
    import os
    import shutil
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    return shutil.which("nvcc")


def run_host_program(source, tmp_path, opt="-O1"):
    """Builds `source` (a host program over the CUDA kernels' headers, csrc/ on the include path) with nvcc and runs
    it; fails the test when either step fails, skips it where no nvcc is found. Returns the program's stdout."""
    import os
    import subprocess

    import pytest
    nvcc = nvcc_path()
    if nvcc is None:
        pytest.skip("no nvcc found (set CUDA_HOME)")
    csrc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")
    src, exe = tmp_path / "program.cu", tmp_path / "program"
    src.write_text(source)
    build = subprocess.run([nvcc, "-std=c++20", opt, "-I", csrc, str(src), "-o", str(exe)], capture_output=True,
                           text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout
