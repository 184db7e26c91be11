"""Provider registry: for each op, the implementations that can run it.

A Provider has a name, a check of the device (why it cannot run there, or None), the dtypes it takes, whether
it has gradients, and one implementation per op it supports: a function with the op's arguments (see
cases.OPS). `unavailable(provider, op, device, dtype, backward)` gives the reason a provider cannot run a
case, shown in the table instead of a number.

Adding a provider: `register(Provider(name, description, device_check, impls={op: factory}))`, where each
factory takes the OpSpec and returns the function; adding an op to a provider: `add_impl(name, op, factory)`."""
from __future__ import annotations

import dataclasses
import importlib.util
import os
from typing import Callable, Dict, Optional, Tuple

import torch

from .cases import OPS, OpSpec

ALL_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
HALF_AND_FLOAT = (torch.float32, torch.float16, torch.bfloat16)


@dataclasses.dataclass
class Provider:
    name: str
    description: str
    device_check: Callable[[str], Optional[str]]  # device -> why this provider cannot run there, or None
    impls: Dict[str, Callable[[OpSpec], Callable]] = dataclasses.field(default_factory=dict)
    dtypes: Tuple[torch.dtype, ...] = ALL_DTYPES
    backward: bool = True  # has gradients (--backward)
    case_check: Optional[Callable[[str, str, tuple], Optional[str]]] = None  # (op, device, args) -> reason or None

    def function(self, spec: OpSpec) -> Callable:
        return self.impls[spec.name](spec)


PROVIDERS: Dict[str, Provider] = {}


class Unsupported(Exception):
    """Raised by a provider's function for a case it has no kernel for (found only when it runs): the row is
    a skip with this reason, not an error."""


def register(provider: Provider) -> Provider:
    if provider.name in PROVIDERS:
        raise ValueError(f"provider: {provider.name!r} is already registered")
    PROVIDERS[provider.name] = provider
    return provider


def add_impl(provider: str, op: str, factory: Callable[[OpSpec], Callable]) -> None:
    if provider not in PROVIDERS:
        raise ValueError(f"provider: expected one of {sorted(PROVIDERS)}, got {provider!r}")
    if op not in OPS:
        raise ValueError(f"op: expected one of {list(OPS)}, got {op!r}")
    PROVIDERS[provider].impls[op] = factory


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def unavailable(provider: Provider, op: str, device: str, dtype: torch.dtype, backward: bool,
                args: tuple = ()) -> Optional[str]:
    """Why `provider` cannot run `op` here (device, op, dtype, gradients, this case), or None if it can."""
    why = provider.device_check(device)
    if why:
        return why
    if op not in provider.impls:
        return f"no {provider.name} implementation of {op}"
    if dtype not in provider.dtypes:
        return f"{_dtype_name(dtype)} not supported (takes {', '.join(map(_dtype_name, provider.dtypes))})"
    if backward and not provider.backward:
        return "forward only (no gradients)"
    if provider.case_check is not None:
        return provider.case_check(op, device, args)
    return None


def _device_type(device: str) -> str:
    return torch.device(device).type


def _any_device(device: str) -> Optional[str]:
    return None


def _needs_cuda(device: str) -> Optional[str]:
    return None if _device_type(device) == "cuda" else f"needs a CUDA device (running on {device})"


def _not_installed(module: str, package: str) -> Optional[str]:
    return None if importlib.util.find_spec(module) is not None else f"not installed (pip install {package})"


# ---- yirage: our kernels through the dispatcher ----

_DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA", "mps": "MPS", "meta": "Meta"}


def _yirage_case(op: str, device: str, args: tuple) -> Optional[str]:
    key = _DISPATCH_KEYS.get(_device_type(device), "PrivateUse1")
    if not torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", key):
        return f"no {key} kernel registered for yirage::{op}"
    return None


register(Provider("yirage", "our kernels (torch.ops.yirage.*)", _any_device,
                  {op: (lambda spec: getattr(torch.ops.yirage, spec.name)) for op in OPS}, case_check=_yirage_case))

# ---- torch: the eager PyTorch code; compile: torch.compile of it ----

register(Provider("torch", "eager PyTorch (the ATen op, or the unfused code a model writes)", _any_device,
                  {op: (lambda spec: spec.eager) for op in OPS}))


def _compiled(spec: OpSpec) -> Callable:
    # one graph per case: a fresh dynamo state, so a grid of shapes never hits the recompile limit (which
    # would silently fall back to eager)
    torch._dynamo.reset()
    return torch.compile(spec.eager, dynamic=False)


register(Provider("compile", "torch.compile (Inductor) of the eager code", _any_device,
                  {op: _compiled for op in OPS}))


# ---- triton: our Triton kernels (triton_ops.py) ----

def _triton_device(device: str) -> Optional[str]:
    why = _not_installed("triton", "triton")
    if why:
        return why
    kind = _device_type(device)
    if kind == "cuda":
        return None
    if kind == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        return None
    return f"needs a CUDA device, or TRITON_INTERPRET=1 on CPU (running on {device})"


def _triton(name: str) -> Callable[[OpSpec], Callable]:
    def factory(spec: OpSpec) -> Callable:
        from . import triton_ops
        return getattr(triton_ops, name)
    return factory


register(Provider("triton", "our Triton kernels (yirage_ext.bench.triton_ops)", _triton_device,
                  {op: _triton(op) for op in ("rms_norm", "softmax", "silu_and_mul")}, dtypes=HALF_AND_FLOAT,
                  backward=False))


# ---- liger: Liger-Kernel's Triton ops (GPU) ----

def _liger_device(device: str) -> Optional[str]:
    return _not_installed("liger_kernel", "liger-kernel") or _needs_cuda(device)


def _liger_rms_norm(spec):
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    return lambda x, w, eps: LigerRMSNormFunction.apply(x, w, eps)


def _liger_layer_norm(spec):
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction
    return lambda x, w, b, eps: LigerLayerNormFunction.apply(x, w, b, eps)


def _liger_silu_and_mul(spec):
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    # Liger's kernel takes one row stride for a, b and its output (its output's), so the halves of the packed
    # input must be copied to contiguous tensors first; its time includes those two copies. (Liger's own MLP feeds
    # it two separate projections, which a packed [gate, up] input cannot be without a copy.)
    def fn(x):
        a, b = x.chunk(2, -1)
        return LigerSiLUMulFunction.apply(a.contiguous(), b.contiguous())
    return fn


register(Provider("liger", "Liger-Kernel's Triton ops", _liger_device,
                  {"rms_norm": _liger_rms_norm, "layer_norm": _liger_layer_norm, "silu_and_mul": _liger_silu_and_mul},
                  dtypes=HALF_AND_FLOAT))


# ---- SDPA backends (attention, GPU) ----

def _sdpa(backend_name: str) -> Callable[[OpSpec], Callable]:
    def factory(spec: OpSpec) -> Callable:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = getattr(SDPBackend, backend_name)

        def fn(*args):
            try:
                with sdpa_kernel(backend):
                    return spec.eager(*args)
            except RuntimeError as e:
                if "No available kernel" in str(e):
                    raise Unsupported(f"SDPA's {backend_name} backend has no kernel for this case (its dtypes, "
                                      "head dims, GQA and masks vary by torch version and GPU)") from e
                raise
        return fn
    return factory


def _sdpa_case(op: str, device: str, args: tuple) -> Optional[str]:
    q, k, _, causal, _ = args
    if causal and q.shape[-2] != k.shape[-2]:
        return "causal with Sq != Sk needs an explicit mask, which this backend does not take"
    return None


for _name, _backend, _dtypes, _desc in (
        ("flash", "FLASH_ATTENTION", (torch.float16, torch.bfloat16), "SDPA's FlashAttention backend"),
        ("cudnn", "CUDNN_ATTENTION", (torch.float16, torch.bfloat16), "SDPA's cuDNN backend"),
        ("efficient", "EFFICIENT_ATTENTION", HALF_AND_FLOAT, "SDPA's memory-efficient backend")):
    register(Provider(_name, _desc, _needs_cuda, {"attention": _sdpa(_backend)}, dtypes=_dtypes,
                      case_check=_sdpa_case if _name != "efficient" else None))

DEFAULT_PROVIDERS = ("yirage", "torch", "compile", "triton", "liger", "flash", "cudnn", "efficient")
