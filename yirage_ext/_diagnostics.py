"""`python -m yirage_ext`: the report a user pastes into a bug report.

Versions (yirage_ext, torch, Python, platform), how the native library was loaded (prebuilt ``_C`` or JIT, from
where, its build flags, the JIT cache directory and key), the toolchain a JIT build would use (C++ compiler,
CUDA/HIP toolkit), the CPU, every backend with availability and reason, and the op x dispatch-key table
and, per device backend and op, what runs there (native, portable or unavailable, with the reason).
``--json`` prints the same as one JSON object. The exit status is 0 when the CPU backend works (a small
rms_norm on CPU matches its definition), 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import traceback


def _first_line(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"not runnable ({e})"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else f"exit status {out.returncode}"


def _toolchain() -> dict:
    import torch
    from torch.utils import cpp_extension

    cxx = os.environ.get("CXX", "c++")
    found = shutil.which(cxx)
    out = {"cxx": {"command": cxx, "path": found, "version": _first_line([found, "--version"]) if found else None},
           "ninja": shutil.which("ninja")}
    cuda_home = cpp_extension.CUDA_HOME
    nvcc = os.path.join(cuda_home, "bin", "nvcc") if cuda_home else None
    out["cuda"] = {"torch_cuda": torch.version.cuda, "CUDA_HOME": cuda_home,
                   "nvcc": _first_line([nvcc, "--version"]) if nvcc and os.path.exists(nvcc) else None}
    if out["cuda"]["nvcc"]:  # nvcc's first line is its name; the release is on the last
        out["cuda"]["nvcc"] = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip() \
            .splitlines()[-1]
    rocm_home = cpp_extension.ROCM_HOME
    hipcc = os.path.join(rocm_home, "bin", "hipcc") if rocm_home else shutil.which("hipcc")
    out["hip"] = {"torch_hip": torch.version.hip, "ROCM_HOME": rocm_home,
                  "hipcc": _first_line([hipcc, "--version"]) if hipcc and os.path.exists(hipcc) else None}
    out["TORCH_CUDA_ARCH_LIST"] = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    return out


def _bf16_attention_products(lib, isa: str) -> str:
    """What multiplies CPU bf16 attention's tiles in the active kernel variant `isa` (kernels/cpu/attention.h)."""
    if isa != "avx512_bf16":
        return "torch_fp32"
    if lib.cpu_bf16_attention_amx():
        return "onednn_brgemm"
    return "yirage" if lib.cpu_own_sgemm() else "torch_fp32"


def _cpu_check() -> dict:
    """Runs rms_norm on CPU (our kernel) against its definition in float64."""
    import torch

    try:
        x = torch.randn(4, 96, dtype=torch.float32)
        w = torch.randn(96, dtype=torch.float32)
        got = torch.ops.yirage.rms_norm(x, w, 1e-6)
        xd = x.double()
        want = xd * torch.rsqrt(xd.square().mean(-1, keepdim=True) + 1e-6) * w.double()
        err = (got.double() - want).abs().max().item()
        ok = err <= 1e-5 * max(1.0, want.abs().max().item())
        return {"ok": ok, "detail": f"rms_norm (4, 96) float32 on CPU: max abs error {err:.2e} vs float64"}
    except Exception as e:
        return {"ok": False, "detail": f"rms_norm on CPU failed: {type(e).__name__}: {e}"}


def collect() -> dict:
    """Everything the report shows, as JSON-serializable data."""
    import torch

    report = {
        "yirage_ext": None,
        "torch": {"version": torch.__version__, "git": getattr(torch.version, "git_version", ""),
                  "cuda": torch.version.cuda, "hip": torch.version.hip,
                  "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI), "threads": torch.get_num_threads()},
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "errors": [],
    }
    try:
        report["toolchain"] = _toolchain()
    except Exception as e:
        report["toolchain"] = {}
        report["errors"].append(f"toolchain: {type(e).__name__}: {e}")
    try:
        import yirage_ext
        from yirage_ext import _loader, backends
    except Exception as e:  # the report still says what it can
        report["errors"].append("import yirage_ext: " + "".join(traceback.format_exception_only(type(e), e)).strip())
        report["cpu_check"] = {"ok": False, "detail": "yirage_ext does not import"}
        return report
    info = yirage_ext.load_info()
    report["yirage_ext"] = {"version": yirage_ext.__version__, "package": os.path.dirname(yirage_ext.__file__)}
    jit_cfg = _loader.jit_config()
    report["load"] = {
        "kind": info.kind, "path": info.path, "reason": info.reason,
        "build_config": info.config,
        "jit_cache_root": _loader._cache_root(),
        "jit_build_dir": info.build_dir,
        "jit_key": info.key or _loader.jit_key(jit_cfg),
        "build_seconds": info.build_seconds,
    }
    lib = _loader.native_module()
    report["cpu"] = dict(lib.cpu_features(), isa=yirage_ext.cpu_isa(), best_isa=lib.cpu_best_isa(),
                         output_cache=yirage_ext.cpu_cache_stats(),
                         fp32_gemm="yirage" if lib.cpu_own_sgemm() else "torch",
                         bf16_attention_products=_bf16_attention_products(lib, yirage_ext.cpu_isa()))
    report["backends"] = []
    for name in backends.backend_names():
        b = backends.get_backend_info(name)
        b["dtypes"] = [str(d).replace("torch.", "") for d in b["dtypes"]]
        b.pop("ops")  # the op tables below have them all
        report["backends"].append(b)
    report["op_paths"] = {b["name"]: b.pop("op_paths") for b in report["backends"] if b["kind"] == "device"}
    report["default_backend"] = backends.get_default_backend()
    report["ops"] = backends.op_table()
    report["cpu_check"] = _cpu_check()
    return report


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else (f"{n // 1024} KiB" if n else "-")


def render(r: dict) -> str:
    lines = []
    add = lines.append
    y = r.get("yirage_ext") or {}
    add(f"yirage_ext {y.get('version', '(does not import)')}  ({y.get('package', '-')})")
    t = r["torch"]
    add(f"torch {t['version']} (git {t['git'][:10] or '-'}; CUDA {t['cuda'] or '-'}; HIP {t['hip'] or '-'}; "
        f"C++11 ABI {t['cxx11_abi']}; {t['threads']} threads)")
    add(f"python {r['python']} on {r['platform']}")
    load = r.get("load")
    if load:
        add("")
        add("== native library")
        add(f"loaded: {load['kind']} from {load['path']}")
        if load["reason"]:
            add(f"why not prebuilt: {load['reason']}")
        cfg = load["build_config"]
        flags = cfg.get("flags") or cfg.get("cflags") or []
        add(f"built for torch {cfg.get('torch', '?')}, CUDA kernels: {cfg.get('with_cuda', '?')}, "
            f"flags: {' '.join(flags) or '-'}, arch list: {cfg.get('arch_list') or '-'}")
        if load["kind"] == "jit":
            add(f"JIT cache: {load['jit_build_dir']} (key {load['jit_key']})")
        else:
            add(f"JIT cache (not used: the prebuilt library loaded): {load['jit_cache_root']}, "
                f"key of these sources {load['jit_key']}")
        if load["build_seconds"] is not None:
            add(f"built in this process in {load['build_seconds']:.1f} s")
    tc = r.get("toolchain") or {}
    if tc:
        add("")
        add("== toolchain")
        add(f"C++ compiler: {tc['cxx']['path'] or tc['cxx']['command'] + ' (not found)'}"
            f"{': ' + tc['cxx']['version'] if tc['cxx']['version'] else ''}")
        add(f"ninja: {tc['ninja'] or 'not found'}")
        add(f"CUDA toolkit: {tc['cuda']['CUDA_HOME'] or 'not found'}"
            f"{' (' + tc['cuda']['nvcc'] + ')' if tc['cuda']['nvcc'] else ''}")
        add(f"ROCm/HIP toolkit: {tc['hip']['ROCM_HOME'] or 'not found'}"
            f"{' (' + tc['hip']['hipcc'] + ')' if tc['hip']['hipcc'] else ''}")
    cpu = r.get("cpu")
    if cpu:
        add("")
        add("== cpu")
        amx = "yes" if cpu["amx_tile"] else "no"
        add(f"{cpu['brand'] or '?'} ({cpu['vendor'] or '?'}); kernel variant {cpu['isa']} (best {cpu['best_isa']}); "
            f"AVX2+FMA {'yes' if cpu['avx2_fma'] else 'no'}, AVX-512F {'yes' if cpu['avx512f'] else 'no'}, AMX {amx}")
        cache = cpu["output_cache"]
        if cache["limit_bytes"]:
            mib = lambda n: f"{n / 2**20:.0f} MiB"  # noqa: E731
            add(f"output cache: keeps up to {mib(cache['limit_bytes'])} of freed outputs of 4 MiB and up "
                f"(YIRAGE_CPU_CACHE_MB); now {mib(cache['cached_bytes'])} free, {mib(cache['allocated_bytes'])} "
                "in tensors")
        else:
            add("output cache: off (YIRAGE_CPU_CACHE_MB=0, or not Linux)")
        if cpu["fp32_gemm"] == "yirage":
            add("fp32 matmul / linear products: the library's AVX-512 GEMM (YIRAGE_CPU_SGEMM=0: torch's BLAS)")
        else:
            add("fp32 matmul / linear products: torch's BLAS")
        add("bf16 attention products: " + {
            "onednn_brgemm": "torch's oneDNN brgemm, AMX where the CPU has it (YIRAGE_CPU_AMX=0: off)",
            "yirage": "the library's AVX512-BF16 tiles (YIRAGE_CPU_SGEMM=0: torch's BLAS)",
            "torch_fp32": "torch's BLAS on fp32 copies of the tiles"}[cpu["bf16_attention_products"]])
        if cpu.get("llc_bytes"):
            add(f"last-level cache: {cpu['llc_bytes'] / 2**20:.0f} MiB (forwards whose traffic exceeds it stream "
                "their outputs; YIRAGE_CPU_STREAM)")
    if r.get("backends"):
        add("")
        add(f"== backends (default: {r['default_backend']})")
        width = max(len(b["name"]) for b in r["backends"])
        for b in r["backends"]:
            state = "available" if b["available"] else "unavailable"
            add(f"{b['name']:<{width}}  {b['kind']:<8}  {state:<11}  {b['reason'] or b['description']}")
            if b["available"] and b["kind"] == "device":
                for i, d in enumerate(b["devices"]):
                    extra = ""
                    if b["compute_capability"]:
                        extra = f", compute capability {b['compute_capability'] // 10}.{b['compute_capability'] % 10}"
                    add(f"{'':<{width}}  device {i}: {d['name']}, {_size(d['memory'])}{extra}, "
                        f"{b['compute_units']} compute units")
            details = "; ".join(f"{k}: {v}" for k, v in sorted(b["details"].items()) if v)
            if details and b["available"]:
                add(f"{'':<{width}}  {details}")
    if r.get("ops"):
        add("")
        add("== ops x dispatch keys (native: our kernel for the key; portable: our ATen-composite kernel; "
            "fallback: torch's not-implemented autograd fallback; none: nothing registered)")
        keys = list(next(iter(r["ops"].values())).keys())
        width = max(len(op) for op in r["ops"])
        add(f"{'op':<{width}}  " + "  ".join(f"{k:<11}" for k in keys))
        for op, row in r["ops"].items():
            add(f"{op:<{width}}  " + "  ".join(f"{row[k]:<11}" for k in keys))
    paths = r.get("op_paths")
    if paths and any(paths.values()):
        add("")
        add("== ops x device backends (what runs here: native kernel, portable ATen kernel, or unavailable)")
        names = list(paths)
        ops = list(next(p for p in paths.values() if p))
        width = max(len(op) for op in ops)
        cols = [max(11, len(n)) for n in names]
        add(f"{'op':<{width}}  " + "  ".join(f"{n:<{c}}" for n, c in zip(names, cols)))
        for op in ops:
            add(f"{op:<{width}}  " + "  ".join(f"{paths[n][op]['path']:<{c}}" for n, c in zip(names, cols)))
        for n in names:  # why: one line per distinct reason of a backend's unavailable ops
            reasons = sorted({p["reason"] for p in paths[n].values() if p["path"] == "unavailable"})
            for reason in reasons:
                add(f"  {n}: {reason}")
    add("")
    for e in r["errors"]:
        add(f"error: {e}")
    check = r["cpu_check"]
    add(f"CPU check: {'ok' if check['ok'] else 'FAILED'} ({check['detail']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m yirage_ext",
                                     description="yirage_ext diagnostics: versions, how the library was loaded, "
                                                 "toolchain, backends and the op x backend table.")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = parser.parse_args(argv)
    report = collect()
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print(render(report))
    return 0 if report["cpu_check"]["ok"] else 1
