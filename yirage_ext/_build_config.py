"""What the native library is built from and with: the one place setup.py and the JIT loader share.

Imported by setup.py straight from its file (before the package is installed), so it imports
nothing but the standard library and torch.
"""
from __future__ import annotations

import hashlib
import os
import sys

# Sources with these suffixes are compiled; headers are only hashed.
CPP_SUFFIXES = (".cpp",)
CUDA_SUFFIXES = (".cu",)
OBJC_SUFFIXES = (".mm",)
SOURCE_SUFFIXES = CPP_SUFFIXES + CUDA_SUFFIXES + OBJC_SUFFIXES + (".h", ".cuh", ".hpp")


def env_flag(name: str) -> bool:
    """True when an environment variable is set to 1/true/yes/on."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def package_csrc_dir(package_dir: str) -> str:
    """The C++ sources: shipped inside the package (`_csrc`), or the checkout's `csrc/`."""
    packaged = os.path.join(package_dir, "_csrc")
    if os.path.isdir(packaged):
        return packaged
    return os.path.join(os.path.dirname(package_dir), "csrc")


def sources(csrc: str, with_cuda: bool, python_module: bool = True) -> list[str]:
    """Translation units of the library, sorted. CUDA (.cu) only with_cuda; Objective-C++ (.mm) only
    on macOS; the Python module init only for the Python extension (not for LibTorch builds)."""
    out = []
    for dirpath, _, files in os.walk(csrc):
        for f in files:
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, csrc)
            if f.endswith(CPP_SUFFIXES):
                if rel.startswith("python" + os.sep) and not python_module:
                    continue
                if rel.startswith("cuda" + os.sep) and not with_cuda:
                    continue  # .cpp glue that needs CUDA headers lives next to the .cu files
                out.append(path)
            elif f.endswith(CUDA_SUFFIXES) and with_cuda:
                out.append(path)
            elif f.endswith(OBJC_SUFFIXES) and sys.platform == "darwin":
                out.append(path)
    return sorted(out)


# Glue directories whose .cpp files each include the ATen headers: parsing those headers is most of a
# file's compile time, so each directory is compiled as one translation unit (a file that #includes its
# .cpp files) - a quarter of the time of compiling them one by one. Their files must not define the same
# name twice (helpers shared by a directory go in a header). Kernels, CUDA and single files stay separate.
UNITY_DIRS = ("autograd", "backend", "cpu", "cuda", "meta", "portable")


def translation_units(csrc: str, with_cuda: bool, python_module: bool = True) -> list[tuple[str, list[str]]]:
    """The library's translation units as (name, sources): one per UNITY_DIRS directory holding all its
    C++ files, one per other source. `name` is unique and safe as a file stem (the path with "__")."""
    groups: dict[str, list[str]] = {}
    for path in sources(csrc, with_cuda, python_module):
        rel = os.path.relpath(path, csrc)
        top = rel.split(os.sep)[0]
        if top in UNITY_DIRS and path.endswith(CPP_SUFFIXES) and os.path.dirname(rel) == top:
            groups.setdefault(f"{top}__all", []).append(path)
        else:
            groups[os.path.splitext(rel.replace(os.sep, "__"))[0]] = [path]
    return sorted(groups.items())


def write_translation_units(csrc: str, with_cuda: bool, dst: str, python_module: bool = True) -> list[str]:
    """Writes one file per translation unit into `dst`, each #including its sources by absolute path, and
    returns their paths. Also spares cpp_extension.load its object naming by basename (cpu/rms_norm.cpp
    and meta/rms_norm.cpp would collide). A file is rewritten only when its text changes (no rebuilds)."""
    os.makedirs(dst, exist_ok=True)
    out = []
    for name, srcs in translation_units(csrc, with_cuda, python_module):
        ext = os.path.splitext(srcs[0])[1]
        path = os.path.join(dst, name + ext)
        text = "".join(f'#include "{os.path.abspath(s)}"\n' for s in srcs)
        old = None
        if os.path.exists(path):
            with open(path) as f:
                old = f.read()
        if old != text:
            with open(path, "w") as f:
                f.write(text)
        out.append(path)
    for stale in set(os.listdir(dst)) - {os.path.basename(p) for p in out}:  # units of an older layout
        if stale.endswith(CPP_SUFFIXES + CUDA_SUFFIXES + OBJC_SUFFIXES):
            os.remove(os.path.join(dst, stale))
    return out


def has_cuda_sources(csrc: str) -> bool:
    return any(p.endswith(CUDA_SUFFIXES) for p in sources(csrc, with_cuda=True))


def want_cuda(csrc: str) -> tuple[bool, str]:
    """Whether to build the CUDA (or, on a ROCm torch, HIP) kernels, and why. With
    YIRAGE_EXT_FORCE_CUDA=1 a build that cannot include them is an error instead of a CPU-only build."""
    ok, why = _cuda_decision(csrc)
    if not ok and env_flag("YIRAGE_EXT_FORCE_CUDA") and not env_flag("YIRAGE_EXT_DISABLE_CUDA"):
        raise RuntimeError(f"yirage_ext: YIRAGE_EXT_FORCE_CUDA=1 but the CUDA kernels cannot be built: {why}")
    return ok, why


def _cuda_decision(csrc: str) -> tuple[bool, str]:
    import torch

    if env_flag("YIRAGE_EXT_DISABLE_CUDA"):
        return False, "YIRAGE_EXT_DISABLE_CUDA=1"
    if torch.version.cuda is None and torch.version.hip is None:
        return False, "torch is a CPU-only build"
    if not has_cuda_sources(csrc):
        return False, "no CUDA sources in this version"
    from torch.utils.cpp_extension import CUDA_HOME, ROCM_HOME  # imports setuptools: only when needed

    if torch.version.hip is not None:
        return (ROCM_HOME is not None), ("ROCm torch" if ROCM_HOME else "ROCm torch but no ROCm toolkit found")
    if CUDA_HOME is None:
        return False, "no CUDA toolkit found (set CUDA_HOME)"
    # Without a visible GPU (a build machine) the kernels are built too.
    return True, "CUDA torch and toolkit" + ("" if torch.cuda.is_available() else " (no GPU visible)")


def cxx_flags(with_cuda: bool) -> list[str]:
    flags = ["-O3", "-std=c++20", "-g0"]  # -g0: setuptools adds -g from sysconfig (a 14 MB library)
    if sys.platform.startswith("linux"):
        # at::parallel_for's OpenMP loop is inlined into our code; the GOMP symbols resolve against
        # the OpenMP runtime torch already loaded (no -fopenmp at link time: one thread pool).
        flags.append("-fopenmp")
    if with_cuda:
        flags.append("-DYIRAGE_WITH_CUDA")
    return flags


def nvcc_flags() -> list[str]:
    return ["-O3", "-std=c++20", "--expt-relaxed-constexpr", "-DYIRAGE_WITH_CUDA"]


def cuda_include_dirs(with_cuda: bool) -> list[str]:
    """Extra include directories of a CUDA build: the cuBLAS/cuSPARSE headers that torch's CUDA headers
    include, taken from torch's own nvidia wheels when the toolkit lacks them (a toolkit with only nvcc and
    cudart, as on a build machine)."""
    if not with_cuda:
        return []
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    if torch.version.cuda is None or (CUDA_HOME and os.path.exists(os.path.join(CUDA_HOME, "include", "cublas_v2.h"))):
        return []
    out = []
    for base in sys.path:
        nv = os.path.join(base, "nvidia")
        if not os.path.isdir(nv):
            continue
        for sub in sorted(os.listdir(nv)):
            inc = os.path.join(nv, sub, "include")
            if os.path.exists(os.path.join(inc, "cublas_v2.h")) or os.path.exists(os.path.join(inc, "cusparse.h")):
                out.append(inc)
        if out:
            break
    return out


def ld_flags(with_cuda: bool = False) -> list[str]:
    """Linker flags.

    On Linux, `--exclude-libs,ALL` keeps whatever comes from static archives private to the library. A
    compiler that links its C++ runtime statically (seen: a GCC 13 installation whose library directory
    held libstdc++.a and no libstdc++.so) would otherwise export thousands of libstdc++ symbols from our
    library, and its copy of the iostream and locale code mixed with the copy torch uses: every error
    message that formats an integer (a shape, say) crashed the process instead of raising. With the usual
    shared libstdc++ the flag changes nothing.

    For a CUDA build, also cuBLAS and cuBLASLt (the CUDA glue calls them directly): from the toolkit when it
    has them, else torch's own nvidia wheel libraries (which torch has loaded already when the library is
    imported)."""
    base = ["-Wl,--exclude-libs,ALL"] if sys.platform.startswith("linux") else []
    return base + _cublas_ld_flags(with_cuda)


def _cublas_ld_flags(with_cuda: bool) -> list[str]:
    if not with_cuda:
        return []
    import torch

    if torch.version.cuda is None:  # ROCm: hipBLAS comes through torch's own libraries
        return []
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME:
        lib = os.path.join(CUDA_HOME, "lib64")
        if os.path.exists(os.path.join(lib, "libcublasLt.so")) and os.path.exists(os.path.join(lib, "libcublas.so")):
            return [f"-L{lib}", "-lcublasLt", "-lcublas"]
    major = torch.version.cuda.split(".")[0]
    for base in sys.path:
        for sub in (f"cu{major}", "cublas"):
            lib = os.path.join(base, "nvidia", sub, "lib")
            if os.path.exists(os.path.join(lib, f"libcublasLt.so.{major}")):
                return [f"-L{lib}", f"-l:libcublasLt.so.{major}", f"-l:libcublas.so.{major}"]
    return ["-lcublasLt", "-lcublas"]


def sources_hash(csrc: str) -> str:
    """sha256 over every source and header (relative path and bytes)."""
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(csrc):
        dirs.sort()
        for f in sorted(files):
            if not f.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(dirpath, f)
            h.update(os.path.relpath(path, csrc).replace(os.sep, "/").encode())
            with open(path, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def torch_identity() -> dict:
    """What a binary built against torch depends on; a prebuilt _C must match all of it."""
    import torch

    return {
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", ""),
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        "python": "%d.%d" % sys.version_info[:2],
    }
