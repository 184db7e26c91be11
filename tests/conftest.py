import os

import pytest
import torch

# Without a GPU, Triton code (the bench's triton provider) runs in Triton's interpreter; the variable must be set
# before Triton is first imported (its own library functions are defined at import), hence here.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import yirage_ext
from yirage_ext._loader import native_module
from yirage_ext.testing.inputs import default_device

ISAS = ("generic", "avx2", "avx512", "avx512_bf16")
# YIRAGE_TEST_ISAS=best: the tests that run once per CPU kernel variant run only with the best variant this CPU
# supports (a second build of the same CPU sources, as the CUDA build check makes, need not repeat the others).
ONLY_BEST_ISA = os.environ.get("YIRAGE_TEST_ISAS", "all") == "best"


def pytest_report_header(config):
    info = yirage_ext.load_info()
    return [f"yirage_ext {yirage_ext.__version__}: {info.kind} library {info.path}",
            f"torch {torch.__version__}; CPU kernel variant {yirage_ext.cpu_isa()} "
            f"(best here: {native_module().cpu_best_isa()}); {torch.get_num_threads()} threads"]


def _has_kernel(key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key("yirage::rms_norm", key)


# Devices whose backend has yirage kernels here: CPU always; CUDA once the library has CUDA kernels and a
# GPU is present (tests then run there too; in CI, without a GPU, those cases are not generated).
HAS_CUDA = torch.cuda.is_available() and _has_kernel("CUDA")
# the CUDA cases carry the `cuda` marker, so `pytest -m cuda` selects every one of them (not only the files
# that mark their tests themselves)
CUDA_PARAM = pytest.param("cuda", marks=pytest.mark.cuda)
DEVICES = ["cpu"] + ([CUDA_PARAM] if HAS_CUDA else [])


@pytest.fixture(params=DEVICES)
def device(request):
    """Runs the test on each device; the input factories (yirage_ext.testing.inputs) default to it."""
    with default_device(request.param):
        yield request.param


def _use_isa(isa):
    mod = native_module()
    best = mod.cpu_best_isa()
    if ONLY_BEST_ISA and isa != best:
        pytest.skip(f"YIRAGE_TEST_ISAS=best: only the {best!r} CPU kernel variant is tested in this run")
    if ISAS.index(isa) > ISAS.index(best):
        pytest.skip(f"this CPU supports CPU kernel variants up to {best!r}, not {isa!r}")
    before = mod.cpu_isa()
    mod.set_cpu_isa(isa)
    assert yirage_ext.cpu_isa() == isa
    yield isa
    mod.set_cpu_isa(before)


@pytest.fixture(params=ISAS)
def isa(request):
    """Runs the test with each CPU kernel variant this CPU supports; the others skip with a reason."""
    yield from _use_isa(request.param)


@pytest.fixture(params=ISAS + ((CUDA_PARAM,) if HAS_CUDA else ()))
def target(request):
    """Runs the test with each kernel this machine has: every CPU kernel variant this CPU supports (the others
    skip with a reason), and the CUDA kernels when a GPU is present (the input factories then default to it)."""
    if request.param == "cuda":
        with default_device("cuda"):
            yield "cuda"
        return
    yield from _use_isa(request.param)
