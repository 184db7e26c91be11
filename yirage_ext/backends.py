"""The backend query API: what can run here, why the rest cannot, and selection with fallbacks.

A thin layer over the C++ ``BackendRegistry`` of the native library (the same registry C++ users reach without
Python). The only answers computed here are the ones only Python can know: whether Triton imports and has a
driver for a present device, whether the AWS Neuron SDK (NKI) imports, and torch's Python-level flags for
opt_einsum, cuSPARSELt and the MultiheadAttention fast path. They are handed to the C++ registry on first use,
so C++ and Python see the same answers afterwards.

Backends are either *devices* (``cpu``, ``cuda``, ``rocm``, ``mps`` and the PrivateUse1 device under the name
torch knows it by), which run the yirage ops, or *providers* (libraries and CPU features torch or the comparison
framework use), which run none of ours. An op runs on a device ``native`` (a kernel written for it),
``portable`` (the ATen-composite kernel) or not at all (``none``).
"""
from __future__ import annotations

import importlib
import importlib.util
import threading

import torch

from ._loader import native_module

__all__ = [
    "get_available_backends",
    "is_backend_available",
    "get_backend_info",
    "list_backends",
    "get_default_backend",
    "set_default_backend",
    "select_backend",
    "device_for",
    "backend_names",
    "op_table",
    "refresh",
]

_probe_lock = threading.Lock()
_probed = False


def _status(available: bool, reason: str = "", compiled: bool | None = None, **details) -> dict:
    return dict(available=bool(available), reason="" if available else reason,
                compiled=bool(available if compiled is None else compiled),
                details={k: str(v) for k, v in details.items()})


def _probe_triton() -> dict:
    if importlib.util.find_spec("triton") is None:
        return _status(False, "triton is not installed")
    try:
        triton = importlib.import_module("triton")
        from triton.backends import backends as triton_backends
    except Exception as e:  # a broken install says why
        return _status(False, f"triton is installed but does not import ({type(e).__name__}: {e})")
    version = getattr(triton, "__version__", "?")
    active = []
    for name, backend in triton_backends.items():
        try:
            if backend.driver.is_active():
                active.append(name)
        except Exception:  # a driver that cannot even check counts as absent
            pass
    if not active:
        return _status(False, f"triton {version} imports but has no driver for a present device (none of its "
                              f"drivers is active: {', '.join(sorted(triton_backends)) or 'none installed'})",
                       compiled=True, version=version)
    return _status(True, version=version, driver=",".join(active))


def _probe_nki() -> dict:
    for module in ("neuronxcc.nki", "nki"):
        top = module.split(".")[0]
        if importlib.util.find_spec(top) is None:
            continue
        try:
            mod = importlib.import_module(module)
        except Exception as e:
            return _status(False, f"the AWS Neuron SDK is installed but {module} does not import "
                                  f"({type(e).__name__}: {e})")
        return _status(True, module=module, version=getattr(mod, "__version__", "?"))
    return _status(False, "the AWS Neuron SDK is not installed (neither neuronxcc.nki nor nki imports)")


def _probe_opt_einsum() -> dict:
    if not torch.backends.opt_einsum.is_available():
        return _status(False, "the opt_einsum package is not installed (torch.backends.opt_einsum.is_available() "
                              "is False)")
    if not torch.backends.opt_einsum.enabled:
        return _status(False, "disabled (torch.backends.opt_einsum.enabled is False)", compiled=True)
    return _status(True, strategy=torch.backends.opt_einsum.strategy)


def _probe_cusparselt() -> dict:
    if not torch.backends.cusparselt.is_available():
        return _status(False, "this torch was built without cuSPARSELt")
    if not torch.cuda.is_available():
        return _status(False, "cuSPARSELt is built into torch but no CUDA device is visible", compiled=True)
    return _status(True, version=torch.backends.cusparselt.version())


def _probe_mha() -> dict:
    if not torch.backends.mha.get_fastpath_enabled():
        return _status(False, "disabled (torch.backends.mha.get_fastpath_enabled() is False)", compiled=True)
    return _status(True)


_PYTHON_PROBES = {"triton": _probe_triton, "nki": _probe_nki, "opt_einsum": _probe_opt_einsum,
                  "cusparselt": _probe_cusparselt, "mha": _probe_mha}


def refresh() -> None:
    """Probes again what only Python can know (after installing Triton, toggling a torch.backends flag, ...).
    Everything else is probed on every query."""
    global _probed
    with _probe_lock:
        lib = native_module()
        for name, probe in _PYTHON_PROBES.items():
            s = probe()
            lib.set_external_status(name, s["compiled"], s["available"], s["reason"], s["details"])
        _probed = True


def _lib():
    if not _probed:
        refresh()
    return native_module()


def _name(name, what: str, arg: str = "name") -> str:
    if not isinstance(name, str):
        raise TypeError(f"{what}: expected {arg} to be a backend name (str), got {type(name).__name__} {name!r}")
    return name


def backend_names() -> list[str]:
    """Every backend this library knows, available or not (devices first)."""
    return list(_lib().backend_names())


def get_available_backends() -> list[str]:
    """The backends available here, devices first, e.g. ``['cpu', 'mkl', 'mkldnn', 'openmp', ...]``."""
    return list(_lib().get_available_backends())


def is_backend_available(name: str) -> bool:
    """Whether backend ``name`` is available here. ValueError for an unknown name."""
    return bool(_lib().is_backend_available(_name(name, "is_backend_available")))


def get_backend_info(name: str) -> dict:
    """Everything known about backend ``name`` (ValueError for an unknown name).

    Keys: name, display_name, description, kind ("device" or "provider"), available, reason (why not, "" when
    available), compiled (built into this binary / this torch), device_count, devices (list of {name, memory}),
    compute_capability (major*10+minor on CUDA, else 0), compute_units (SMs, CUs or logical CPU cores),
    max_memory (bytes), max_shared_memory (bytes per block; 0 where there is none), dtypes (torch dtypes the ops
    accept; empty for providers), dispatch_key (None for providers), ops (op -> the kernel registered at the
    backend's dispatch key: "native" / "portable" / "none"; empty for providers), op_paths (op -> {"path":
    "native" / "portable" / "unavailable", "reason": why}: what runs here, "unavailable" where the backend is or
    the op has no kernel for it; empty for providers), details (versions, CPU features, ...).
    """
    info = dict(_lib().backend_info(_name(name, "get_backend_info")))
    info["dtypes"] = [getattr(torch, d) for d in info["dtypes"]]
    info["devices"] = [dict(d) for d in info["devices"]]
    info["ops"] = dict(info["ops"])
    info["details"] = dict(info["details"])
    info["op_paths"] = _op_paths(info)
    return info


def _op_paths(info: dict) -> dict:
    """op -> {"path": "native" / "portable" / "unavailable", "reason": why} on a device backend: what a call
    with this backend's tensors runs here, and why (the backend's reason when it is unavailable)."""
    key = info["dispatch_key"]
    out = {}
    for op, kernel in info["ops"].items():
        if not info["available"]:
            path, reason = "unavailable", f"backend unavailable: {info['reason']}"
        elif kernel == "none":
            path, reason = "unavailable", f"this build of yirage_ext has no {key} kernel for {op}"
        elif kernel == "portable":
            path, reason = "portable", f"no native {key} kernel for {op}: the portable ATen kernel runs"
        else:
            path, reason = "native", ""
        out[op] = {"path": path, "reason": reason}
    return out


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n else "-"


def list_backends(verbose: bool = False) -> None:
    """Prints a table of every backend: available or not and why; with verbose, devices, compute units, memory,
    dtypes and how many ops run native / portable."""
    rows = [get_backend_info(n) for n in backend_names()]
    default = get_default_backend()
    width = max(len(r["name"]) for r in rows)
    print(f"{'backend':<{width}}  {'kind':<8}  {'available':<9}  {'reason / devices'}")
    for r in rows:
        mark = "*" if r["name"] == default else " "
        avail = "yes" if r["available"] else "no"
        text = r["reason"] if not r["available"] else (
            ", ".join(d["name"] for d in r["devices"]) or r["description"])
        print(f"{r['name']:<{width}}  {r['kind']:<8}  {avail + mark:<9}  {text}")
        if verbose:
            parts = [r["display_name"], f"compiled: {'yes' if r['compiled'] else 'no'}"]
            if r["kind"] == "device":
                counts = {k: list(r["ops"].values()).count(k) for k in ("native", "portable", "none")}
                parts += [f"devices: {r['device_count']}", f"compute units: {r['compute_units']}",
                          f"memory: {_gib(r['max_memory'])}"]
                if r["compute_capability"]:
                    parts.append(f"compute capability: {r['compute_capability'] // 10}.{r['compute_capability'] % 10}")
                if r["max_shared_memory"]:
                    parts.append(f"shared memory/block: {r['max_shared_memory'] // 1024} KiB")
                parts += ["dtypes: " + ", ".join(str(d).replace("torch.", "") for d in r["dtypes"]),
                          "ops: " + ", ".join(f"{v} {k}" for k, v in counts.items())]
            parts += [f"{k}: {v}" for k, v in sorted(r["details"].items()) if v]
            print(" " * (width + 2) + "; ".join(parts))
    print("(* default backend)")


def get_default_backend() -> str:
    """The default device backend: the one set with set_default_backend, else the first available of cuda,
    rocm, mps, the PrivateUse1 device and cpu."""
    return _lib().get_default_backend()


def set_default_backend(name: str | None) -> None:
    """Sets the default device backend (None goes back to the automatic choice). ValueError for an unknown
    name, a provider, or a backend that is not available here (with the reason)."""
    if name is None:
        _lib().reset_default_backend()
        return
    _lib().set_default_backend(_name(name, "set_default_backend"))


def select_backend(name: str, fallbacks: list[str] | tuple[str, ...] | None = None) -> str:
    """The first available of ``name`` and then ``fallbacks``, in order. Falls back only to the backends
    listed; when none is available, RuntimeError listing every candidate with its reason. ValueError for an
    unknown name."""
    _name(name, "select_backend")
    if fallbacks is None:
        fallbacks = []
    elif isinstance(fallbacks, str) or not all(isinstance(f, str) for f in fallbacks):
        raise TypeError(f"select_backend: expected fallbacks to be a list of backend names, got {fallbacks!r}")
    return _lib().select_backend(name, list(fallbacks))


def device_for(backend: str | None = None) -> torch.device:
    """The torch.device to put tensors on for a device backend (default: get_default_backend()): cpu -> cpu,
    cuda and rocm -> cuda (ROCm torch calls its devices cuda), mps -> mps, the PrivateUse1 device -> its name.
    ValueError for a provider or an unknown name; RuntimeError when the backend is not available here."""
    name = get_default_backend() if backend is None else _name(backend, "device_for", "backend")
    info = get_backend_info(name)
    if info["kind"] != "device":
        devices = [n for n in backend_names() if _lib().backend_info(n)["kind"] == "device"]
        raise ValueError(f"device_for: '{name}' is a provider, not a device that holds tensors; "
                         f"expected one of {', '.join(devices)}")
    if not info["available"]:
        raise RuntimeError(f"device_for: backend '{info['name']}' is not available: {info['reason']}")
    return torch.device({"rocm": "cuda"}.get(info["name"], info["name"]))


def op_table() -> dict:
    """op -> {dispatch key -> "native" / "portable" / "fallback" / "none"} for every yirage op registered with
    the dispatcher, over the keys CPU, CUDA, MPS, PrivateUse1, Meta and Autograd ("fallback": torch's
    not-implemented autograd fallback, which makes differentiating through the op an error)."""
    return {op: dict(row) for op, row in _lib().op_table().items()}
