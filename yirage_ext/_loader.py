"""Loads the native library exactly once per process: the prebuilt ``_C`` when it was built for the
installed torch, otherwise a JIT build of the packaged sources with ``torch.utils.cpp_extension``.

JIT builds live in a cache directory keyed on everything that changes the binary (torch version and
git hash, CUDA/HIP version, C++ ABI, Python version, arch list, flags, a hash of the sources). A build
holds an ``fcntl.flock`` on ``<key>.lock`` in the cache root: concurrent imports build once, and the
lock dies with its holder, so a killed build never leaves the next import waiting. Each build runs in
a private temporary directory that is renamed into place only when it succeeded.
"""
from __future__ import annotations

import dataclasses
import fcntl
import glob
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import sys
import time

from . import _build_config as cfg

JIT_MODULE_NAME = "yirage_ext_jit"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class LoadInfo:
    kind: str  # "prebuilt" or "jit"
    path: str  # the shared library that was loaded
    reason: str  # why JIT was used ("" for prebuilt)
    build_dir: str | None = None  # JIT cache directory of this configuration
    key: str | None = None  # JIT cache key
    build_seconds: float | None = None  # time of the build this process did (None: none was needed)
    config: dict = dataclasses.field(default_factory=dict)  # what the library was built for and with


_info: LoadInfo | None = None
_module = None


def _log(msg: str) -> None:
    print(f"yirage_ext: {msg}", file=sys.stderr, flush=True)


def _ops_registered() -> bool:
    import torch

    return bool(torch._C._jit_get_schemas_for_operator("yirage::rms_norm"))


def _refuse_second_copy() -> None:
    """Loading a second copy of the library would abort the process (a second TORCH_LIBRARY(yirage)
    throws from a static initializer, inside dlopen): raise instead, before loading anything."""
    if _ops_registered():
        raise RuntimeError("yirage_ext: the yirage ops are already registered in this process by another copy of "
                           "the library (a second TORCH_LIBRARY(yirage) is an error); import only one yirage_ext")


def prebuilt_problem(package_dir: str = _PACKAGE_DIR) -> str | None:
    """Why the prebuilt _C cannot be used (None when it can). Decided before loading it."""
    if cfg.env_flag("YIRAGE_EXT_FORCE_JIT"):
        return "YIRAGE_EXT_FORCE_JIT=1"
    libs = [p for p in glob.glob(os.path.join(package_dir, "_C*")) if p.endswith((".so", ".pyd", ".dylib"))]
    if not libs:
        return f"no prebuilt _C in {package_dir}"
    record_path = os.path.join(package_dir, "_C.build.json")
    try:
        with open(record_path) as f:
            record = json.load(f)
    except (OSError, ValueError) as e:
        return f"the prebuilt _C has no readable build record ({record_path}: {e})"
    if not isinstance(record, dict):
        return f"the prebuilt _C has no readable build record ({record_path}: not a JSON object)"
    mismatches = [
        f"{k} {record.get(k)!r} (installed: {v!r})" for k, v in cfg.torch_identity().items() if record.get(k) != v
    ]
    if mismatches:
        return "the prebuilt _C was built for another torch: " + ", ".join(mismatches)
    return None


def _cache_root() -> str:
    root = os.environ.get("YIRAGE_EXT_BUILD_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "yirage_ext")
    return os.path.abspath(root)


def jit_config(csrc: str | None = None) -> dict:
    """Everything the JIT binary depends on; its hash is the cache key."""
    csrc = csrc or cfg.package_csrc_dir(_PACKAGE_DIR)
    with_cuda, why = cfg.want_cuda(csrc)
    config = dict(cfg.torch_identity())
    config.update(
        with_cuda=with_cuda,
        cuda_reason=why,
        arch_list=os.environ.get("TORCH_CUDA_ARCH_LIST", "") if with_cuda else "",
        cflags=cfg.cxx_flags(with_cuda),
        cuda_cflags=cfg.nvcc_flags() if with_cuda else [],
        ldflags=cfg.ld_flags(with_cuda),
        sources=cfg.sources_hash(csrc),
        csrc=csrc,
    )
    return config


def jit_key(config: dict) -> str:
    material = {k: v for k, v in config.items() if k not in ("csrc", "cuda_reason")}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]


def _import_library(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def _build(config: dict, final_dir: str):
    """Compiles and imports the library in a private directory, then renames it into place."""
    from torch.utils import cpp_extension

    csrc = config["csrc"]
    units = cfg.translation_units(csrc, config["with_cuda"])
    for stale in glob.glob(f"{final_dir}.tmp-*"):  # left by killed builds (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    tmp_dir = f"{final_dir}.tmp-{os.getpid()}"
    target = "cuda" if config["with_cuda"] else "cpu"
    _log(f"compiling the native library ({len(units)} translation units from {csrc}, torch {config['torch']}, "
         f"{target}: {config['cuda_reason']}) into {final_dir} - this takes a minute or two, once ...")
    t0 = time.perf_counter()
    module = cpp_extension.load(
        name=JIT_MODULE_NAME,
        sources=cfg.write_translation_units(csrc, config["with_cuda"], os.path.join(tmp_dir, "src")),
        extra_cflags=config["cflags"],
        extra_cuda_cflags=config["cuda_cflags"],
        extra_ldflags=config["ldflags"],
        extra_include_paths=[csrc] + cfg.cuda_include_dirs(config["with_cuda"]),
        build_directory=tmp_dir,
        verbose=cfg.env_flag("YIRAGE_EXT_VERBOSE"),
        with_cuda=config["with_cuda"],
        is_python_module=True,
    )
    with open(os.path.join(tmp_dir, "build.json"), "w") as f:
        json.dump(config, f, indent=1)
    shutil.rmtree(final_dir, ignore_errors=True)  # a partial directory of an older layout
    os.replace(tmp_dir, final_dir)
    seconds = time.perf_counter() - t0
    _log(f"compiled in {seconds:.1f} s")
    return module, seconds


def _jit_load(reason: str) -> LoadInfo:
    _refuse_second_copy()  # also when called after the prebuilt library was loaded
    if cfg.env_flag("YIRAGE_EXT_NO_JIT"):
        raise ImportError(f"yirage_ext: cannot use the prebuilt library ({reason}) and YIRAGE_EXT_NO_JIT=1 "
                          "forbids compiling it; reinstall yirage_ext against the installed torch")
    config = jit_config()
    key = jit_key(config)
    root = _cache_root()
    os.makedirs(root, exist_ok=True)
    tag = "torch{}-py{}-{}".format(config["torch"].replace("+", "_"), config["python"].replace(".", ""),
                                   "cuda" if config["with_cuda"] else "cpu")
    build_dir = os.path.join(root, f"{tag}-{key}")
    lib_path = os.path.join(build_dir, JIT_MODULE_NAME + ".so")
    marker = os.path.join(build_dir, "build.json")
    module, seconds = None, None
    if not (os.path.exists(marker) and os.path.exists(lib_path)):
        with open(os.path.join(root, f"{key}.lock"), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                _log(f"waiting for another process that is building {build_dir} ...")
                fcntl.flock(lock, fcntl.LOCK_EX)
            if not (os.path.exists(marker) and os.path.exists(lib_path)):  # built while we waited?
                module, seconds = _build(config, build_dir)
    if module is None:
        module = _import_library(lib_path, JIT_MODULE_NAME)
    global _module
    _module = module
    return LoadInfo("jit", lib_path, reason, build_dir, key, seconds, config)


def load() -> LoadInfo:
    """Registers the yirage ops with torch (once per process) and says how."""
    global _info, _module
    if _info is not None:
        return _info
    _refuse_second_copy()
    reason = prebuilt_problem()
    if reason is None:
        _module = importlib.import_module("yirage_ext._C")
        with open(os.path.join(_PACKAGE_DIR, "_C.build.json")) as f:
            config = json.load(f)
        _info = LoadInfo("prebuilt", _module.__file__, "", config=config)
    else:
        _info = _jit_load(reason)
    return _info


def native_module():
    """The loaded native module (its non-op API: CPU kernel variant selection, the backend registry)."""
    load()
    return _module
