"""The ROCm build check, without AMD hardware or a ROCm torch (`make hip-check`).

1. hipify a copy of csrc/ the way torch.utils.cpp_extension does for a HIP build (hipify_python.hipify with
   is_pytorch_extension=True, the sources as extra files, csrc/ as the header include dir); csrc/ is never
   touched.
2. Fail on any CUDA API name left untranslated in the hipified CUDA sources and glue. The kernels' own headers
   and .cu files are scanned after the preprocessor (hipcc -E), so that the CUDA-only branch of an
   `#if YIRAGE_HIP` is not counted; the torch glue (csrc/cuda/, csrc/common/cuda_launch.h), which needs a ROCm
   torch to preprocess, is scanned as text, comments removed.
3. Compile every hipified csrc/kernels/cuda/*.cu (the torch-free kernels) with hipcc for --offload-arch
   (default gfx90a), HIP_PLATFORM=amd.

    python .ci/hip_check.py [--csrc csrc] [--hipcc hipcc] [--arch gfx90a] [--keep DIR]
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# CUDA names that have HIP equivalents and must not survive hipify: runtime API and types (cudaStream_t,
# cudaGetLastError, ...), cuBLAS/cuBLASLt/cuRAND/CUB, CUDA-only intrinsic types and headers, the 32-bit-mask
# *_sync warp intrinsics (compat.cuh picks the HIP form), inline PTX.
UNTRANSLATED = re.compile(
    r"\bcuda[A-Z]\w*"                              # runtime API: cudaStream_t, cudaError_t, cudaMemcpyAsync
    r"|\bcu(?:blas|blasLt|rand|sparse|solver|fft|dnn)[A-Z_]\w*"  # libraries: cublasLtMatmul, curandState
    r"|\b(?:CUBLAS|CUDA_R|CUDA_C|CURAND|CUSPARSE)_\w+"  # library enums
    r"|\bcub::|\bnvcuda::|\b__nv_\w+"              # CUB, WMMA, CUDA bf16/fp8 types
    r"|#\s*include\s*[<\"](?:cuda|cublas|curand|cub/|cusparse|mma\.h|cuda_\w+)"
    r"|\b__(?:shfl|shfl_xor|shfl_up|shfl_down|ballot|any|all|activemask|syncwarp)_sync\b"
    r"|\basm\s*(?:volatile\s*)?\(")                # inline PTX
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def hipify(csrc: str, work: str) -> dict[str, str]:
    """Copies csrc into work/csrc, hipifies it there; returns {original relative path: hipified absolute path}
    for every file hipify rewrote or kept."""
    from torch.utils.hipify import hipify_python

    dst = os.path.join(work, "csrc")
    shutil.copytree(csrc, dst)
    files = sorted(p for p in glob.glob(os.path.join(dst, "**", "*"), recursive=True)
                   if p.endswith((".cu", ".cuh", ".h", ".hpp", ".cpp")))
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):  # a line per file; shown on failure
            result = hipify_python.hipify(project_directory=dst, output_directory=dst, header_include_dirs=[dst],
                                          includes=[os.path.join(dst, "*")], extra_files=files,
                                          show_detailed=False, is_pytorch_extension=True,
                                          hipify_extra_files_only=True)
    except BaseException:
        print(log.getvalue(), file=sys.stderr)
        raise
    out = {}
    for path in files:
        r = result.get(os.path.abspath(path))
        hipified = getattr(r, "hipified_path", None) if r is not None else None
        out[os.path.relpath(path, dst)] = os.path.abspath(hipified or path)
    return out


def is_cuda_file(rel: str) -> bool:
    parts = rel.split(os.sep)
    return "cuda" in parts[:-1] or "cuda" in parts[-1] or rel.endswith((".cu", ".cuh"))


# A CUDA-only region of the glue, left out of a ROCm build: `#if !defined(USE_ROCM)` / `#ifndef USE_ROCM` up to
# its `#else` or `#endif` (not nested). Its lines are blanked, keeping the line numbers.
CUDA_ONLY = re.compile(r"^[ \t]*#[ \t]*(?:if[ \t]+!defined\(USE_ROCM\)|ifndef[ \t]+USE_ROCM)(?![\w]).*?^[ \t]*#[ \t]*(?:else|endif)",
                       re.S | re.M)


def scan_text(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), f.read())
    text = CUDA_ONLY.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return [f"{path}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if UNTRANSLATED.search(line)]


def scan_preprocessed(source: str, hipcc: str, flags: list[str], root: str) -> list[str]:
    """hipcc -E of `source`; the lines that come from files under `root` and name a CUDA API."""
    pre = subprocess.run([hipcc, "-E", *flags, source], capture_output=True, text=True)
    if pre.returncode != 0:
        return [f"{source}: hipcc -E failed:\n{pre.stderr[-4000:]}"]
    hits, current, line_no = [], "", 0
    marker = re.compile(r'^#\s*(\d+)\s+"([^"]+)"')
    for line in pre.stdout.splitlines():
        m = marker.match(line)
        if m:
            line_no, current = int(m.group(1)), os.path.abspath(m.group(2))
            continue
        if current.startswith(root + os.sep) and UNTRANSLATED.search(line):
            hits.append(f"{current}:{line_no}: {line.strip()}")
        line_no += 1
    return hits


def main(argv: list[str] | None = None) -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csrc", default=os.path.join(here, "csrc"))
    parser.add_argument("--hipcc", default=os.environ.get("HIPCC", "hipcc"))
    parser.add_argument("--arch", default="gfx90a")
    parser.add_argument("--keep", help="hipify into this directory (emptied first) and keep it")
    args = parser.parse_args(argv)

    hipcc = shutil.which(args.hipcc)
    if hipcc is None:
        print(f"hip-check: {args.hipcc} not found (Debian/Ubuntu: apt-get install hipcc)", file=sys.stderr)
        return 2
    os.environ.setdefault("HIP_PLATFORM", "amd")  # Debian's hipcc picks nvcc when it finds one otherwise

    work = args.keep or tempfile.mkdtemp(prefix="yirage-hip-")
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
    # hipcc leaves an empty directory per compile in $TMPDIR: keep them under `work`, which is removed
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.environ["TMPDIR"] = tmp
    try:
        start = time.monotonic()
        mapping = hipify(os.path.abspath(args.csrc), work)
        root = os.path.join(work, "csrc")
        cuda_files = {rel: path for rel, path in mapping.items() if is_cuda_file(rel)}
        kernels = sorted(path for rel, path in cuda_files.items()
                         if rel.startswith(os.path.join("kernels", "cuda") + os.sep) and rel.endswith(".cu"))
        print(f"hip-check: hipified {len(mapping)} files of {args.csrc} ({len(cuda_files)} CUDA sources and "
              f"headers, {len(kernels)} kernels) in {time.monotonic() - start:.1f} s")
        flags = ["-x", "hip", "--offload-arch=" + args.arch, "-std=c++17", "-O2", "-I", root,
                 "-DUSE_ROCM", "-D__HIP_PLATFORM_AMD__=1"]

        problems = []
        kernel_dir_files = {rel for rel in cuda_files if rel.startswith(os.path.join("kernels", "cuda") + os.sep)}
        for rel in sorted(set(cuda_files) - kernel_dir_files):  # torch glue: as text
            problems += scan_text(cuda_files[rel])
        for source in kernels:  # kernels and every header they include: after the preprocessor
            problems += scan_preprocessed(source, hipcc, flags, root)
        if problems:
            shown = sorted({p.replace(root + os.sep, "") for p in problems})  # paths of the hipified tree
            print("hip-check: CUDA names left untranslated by hipify (hipified paths):\n  " + "\n  ".join(shown),
                  file=sys.stderr)
            return 1

        failed = []
        for source in kernels:
            start = time.monotonic()
            obj = os.path.join(work, os.path.basename(source) + ".o")
            r = subprocess.run([hipcc, *flags, "-c", source, "-o", obj], capture_output=True, text=True)
            rel = os.path.relpath(source, root)
            if r.returncode != 0:
                failed.append(rel)
                print(f"hip-check: {rel}: hipcc failed:\n{r.stdout}{r.stderr}", file=sys.stderr)
            else:
                print(f"hip-check: {rel}: compiled for {args.arch} in {time.monotonic() - start:.1f} s")
        if failed:
            return 1
        print(f"hip-check: ok ({len(kernels)} kernels hipify-clean and compiled with {hipcc} for {args.arch})")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
