"""yirage_ext: portable fused LLM operators for PyTorch.

Importing the package registers the ops with the PyTorch dispatcher (``torch.ops.yirage.*``), using the
prebuilt native library when it matches the installed torch and a JIT build of the packaged sources
otherwise. ``yirage_ext.load_info()`` says which. The backend query API (``get_available_backends``,
``get_backend_info``, ``select_backend``, ``device_for``, ...) lives in ``yirage_ext.backends`` and is re-exported
here; ``python -m yirage_ext`` prints a diagnostics report.
"""
from ._version import __version__
from ._loader import LoadInfo, load as _load

_load()

from . import ops as _ops  # noqa: E402
from .ops import *  # noqa: E402,F401,F403  (every public op wrapper: ops.__all__)
from . import backends  # noqa: E402
from .backends import (  # noqa: E402,F401  (the backend query API, also at the top level)
    device_for,
    get_available_backends,
    get_backend_info,
    get_default_backend,
    is_backend_available,
    list_backends,
    select_backend,
    set_default_backend,
)


def load_info() -> LoadInfo:
    """How the native library was loaded: kind ("prebuilt" or "jit"), path, reason, cache dir, config."""
    return _load()


def cpu_isa() -> str:
    """The CPU kernel variant in use: "generic", "avx2", "avx512" or "avx512_bf16" (YIRAGE_CPU_ISA narrows it)."""
    from ._loader import native_module

    return native_module().cpu_isa()


def cpu_cache_stats() -> dict:
    """Counters of the CPU output cache: CPU outputs of 4 MiB and up come from blocks mapped once and reused after
    their tensors die (no page faults on fresh memory), as torch's CUDA caching allocator does on the GPU.

    Keys: limit_bytes (the most free memory it keeps: YIRAGE_CPU_CACHE_MB, default an eighth of RAM up to 2 GiB;
    0 when off), cached_bytes / cached_blocks (free, kept for reuse), allocated_bytes / allocated_blocks (in live
    tensors), hits / misses (outputs served from a free block / from a new mapping). All 0 off Linux.
    """
    from ._loader import native_module

    return dict(native_module().cpu_cache_stats())


def empty_cpu_cache() -> None:
    """Return the CPU output cache's free blocks to the system (like torch.cuda.empty_cache(); tensors keep theirs)."""
    from ._loader import native_module

    native_module().empty_cpu_cache()


__all__ = [
    "__version__", "LoadInfo", "load_info", "cpu_isa", "cpu_cache_stats", "empty_cpu_cache", "backends", "device_for", "get_available_backends",
    "get_backend_info", "get_default_backend", "is_backend_available", "list_backends", "select_backend",
    "set_default_backend",
] + _ops.__all__
