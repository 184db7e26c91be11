"""hostdev: the test-only PrivateUse1 device (hostdev.cpp), built on first use and registered with torch.

    import hostdev; hostdev.load()        # then torch.device("hostdev"), x.to("hostdev"), x.hostdev(), torch.hostdev

Renaming the PrivateUse1 backend is process-wide and done once, so tests load it in a subprocess. The build is
cached in the checkout's build/hostdev (HOSTDEV_BUILD_DIR overrides): the first build takes about 20 s on 2
cores, later loads only check that the source has not changed.
"""
import os
import shutil
import sys
import time
import types

import torch

NAME = "hostdev"
_HERE = os.path.dirname(os.path.abspath(__file__))
_module = None


def build_dir() -> str:
    return os.environ.get("HOSTDEV_BUILD_DIR") or os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build",
                                                               NAME)


def _device_module() -> types.ModuleType:
    """torch.hostdev: what torch asks a device module for (availability, count, current device)."""
    ops = torch.ops.hostdev
    mod = types.ModuleType(f"torch.{NAME}")
    mod.is_available = lambda: True
    mod.device_count = lambda: ops.device_count()
    mod.current_device = lambda: ops.current_device()
    mod.set_device = lambda device: ops.set_device(torch.device(device, 0).index if isinstance(device, str)
                                                   else int(device))
    mod._is_in_bad_fork = lambda: False
    # No generator of its own (random ops run on CPU through the fallback): an empty RNG state, for the code
    # that saves and restores the accelerator's (torch.testing's freeze_rng_state, which opcheck uses).
    mod.manual_seed_all = lambda seed: None
    mod.get_rng_state = lambda device=None: torch.empty(0, dtype=torch.uint8)
    mod.set_rng_state = lambda state, device=None: None
    mod.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16]
    return mod


def load(verbose: bool = False) -> types.ModuleType:
    """Builds (once) and loads the device, renames PrivateUse1 to 'hostdev', registers torch.hostdev and the
    tensor/module/storage methods (x.hostdev(), x.is_hostdev). Returns the device module."""
    global _module
    if _module is not None:
        return _module
    from torch.utils.cpp_extension import load as load_extension

    os.makedirs(build_dir(), exist_ok=True)
    bindir = os.path.dirname(sys.executable)  # pip's ninja lives next to the venv's python, maybe not on PATH
    if not shutil.which("ninja") and os.path.exists(os.path.join(bindir, "ninja")):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    start = time.monotonic()
    load_extension(name=NAME, sources=[os.path.join(_HERE, "hostdev.cpp")], build_directory=build_dir(),
                   extra_cflags=["-O1", "-g0", "-std=c++20"], is_python_module=False, verbose=verbose)
    if verbose:
        print(f"hostdev: loaded in {time.monotonic() - start:.1f} s", file=sys.stderr)
    torch.utils.rename_privateuse1_backend(NAME)
    _module = _device_module()
    torch._register_device_module(NAME, _module)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    return _module


def fallback_ops() -> list:
    """Names of the ops the CPU fallback has run since the last clear_fallback_ops(), in order."""
    return list(torch.ops.hostdev.fallback_ops())


def clear_fallback_ops() -> None:
    torch.ops.hostdev.clear_fallback_ops()
