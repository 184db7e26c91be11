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


__all__ = [
    "__version__", "LoadInfo", "load_info", "cpu_isa", "backends", "device_for", "get_available_backends",
    "get_backend_info", "get_default_backend", "is_backend_available", "list_backends", "select_backend",
    "set_default_backend",
] + _ops.__all__
