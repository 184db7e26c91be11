import os

import pytest
import torch

# Without a GPU, Triton code (the bench's triton provider) runs in Triton's interpreter; the variable must be set
# before Triton is first imported (its own library functions are defined at import), hence here.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import yirage_ext
from yirage_ext._loader import native_module

ISAS = ("generic", "avx2", "avx512")


def pytest_report_header(config):
    info = yirage_ext.load_info()
    return [f"yirage_ext {yirage_ext.__version__}: {info.kind} library {info.path}",
            f"torch {torch.__version__}; CPU kernel variant {yirage_ext.cpu_isa()} "
            f"(best here: {native_module().cpu_best_isa()}); {torch.get_num_threads()} threads"]


def _has_kernel(key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key("yirage::rms_norm", key)


# Devices whose backend has yirage kernels here: CPU always; CUDA once the library has CUDA kernels and a
# GPU is present (tests then run there too; in CI, without a GPU, those cases are not generated).
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and _has_kernel("CUDA") else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(params=ISAS)
def isa(request):
    """Runs the test with each CPU kernel variant this CPU supports; the others skip with a reason."""
    mod = native_module()
    best = mod.cpu_best_isa()
    if ISAS.index(request.param) > ISAS.index(best):
        pytest.skip(f"this CPU supports CPU kernel variants up to {best!r}, not {request.param!r}")
    before = mod.cpu_isa()
    mod.set_cpu_isa(request.param)
    assert yirage_ext.cpu_isa() == request.param
    yield request.param
    mod.set_cpu_isa(before)
