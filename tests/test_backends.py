"""The backend registry and query API against reality: torch's own answers, the CPU's features as the kernel
reports them (/proc/cpuinfo), and what the dispatcher has registered. Selection with fallbacks, the default
backend, errors for bad names, and the original design's snippet run as written."""
import importlib.util
import os
import sys
import textwrap

import pytest
import torch

import yirage_ext as yr
from yirage_ext import backends

from _helpers import run_python

DEVICES = ["cpu", "cuda", "rocm", "mps"]  # + the PrivateUse1 device, under torch's current name for it
PROVIDERS = ["cudnn", "mkl", "mkldnn", "openmp", "nnpack", "cusparselt", "mha", "opt_einsum", "triton", "nki",
             "xeon"]
KEYS = ["CPU", "CUDA", "MPS", "PrivateUse1", "Meta", "Autograd"]


def pu1_name():
    return torch._C._get_privateuse1_backend_name()


def has_kernel(op, key):
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"yirage::{op}", key)


def yirage_ops():
    return sorted({n.split("::", 1)[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names()
                   if n.startswith("yirage::")})


@pytest.fixture
def restore_default():
    yield
    yr.set_default_backend(None)


# ---- what the registry knows ----

def test_every_backend_of_the_design_is_known():
    names = backends.backend_names()
    assert sorted(names) == sorted(DEVICES + [pu1_name()] + PROVIDERS)
    for name in names:
        info = yr.get_backend_info(name)
        assert info["name"] == name
        assert info["kind"] == ("device" if name in DEVICES + [pu1_name()] else "provider")
        assert isinstance(info["available"], bool) and isinstance(info["compiled"], bool)
        assert (info["reason"] == "") == info["available"], (name, info["reason"])


def test_available_backends_are_the_available_ones():
    expected = [n for n in backends.backend_names() if yr.get_backend_info(n)["available"]]
    assert yr.get_available_backends() == expected
    assert "cpu" in expected
    for n in backends.backend_names():
        assert yr.is_backend_available(n) == (n in expected)


def test_cpu_backend():
    info = yr.get_backend_info("cpu")
    assert info["available"] and info["compiled"] and info["reason"] == ""
    assert info["device_count"] == 1 and len(info["devices"]) == 1
    assert info["compute_units"] == os.sysconf("SC_NPROCESSORS_ONLN")
    assert info["max_memory"] == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert info["devices"][0]["memory"] == info["max_memory"]
    assert info["dtypes"] == [torch.float32, torch.float16, torch.bfloat16, torch.float64]
    assert info["dispatch_key"] == "CPU"
    assert info["details"]["isa"] == yr.cpu_isa()


def test_cuda_and_rocm_match_torch():
    cuda, rocm = yr.get_backend_info("cuda"), yr.get_backend_info("rocm")
    is_rocm = torch.version.hip is not None
    gpu, ours = torch.cuda.is_available(), has_kernel("rms_norm", "CUDA")
    assert cuda["available"] == (gpu and not is_rocm and ours)
    assert rocm["available"] == (gpu and is_rocm and ours)
    if torch.version.cuda is None and not is_rocm:
        assert "CPU-only" in cuda["reason"] and "CPU-only" in rocm["reason"]
        assert cuda["device_count"] == 0 and not cuda["compiled"]
    else:
        info = rocm if is_rocm else cuda
        assert info["device_count"] == torch.cuda.device_count()
        if info["devices"]:  # device properties come with the CUDA build of the library
            props = torch.cuda.get_device_properties(0)
            assert info["compute_capability"] == props.major * 10 + props.minor
            assert info["compute_units"] == props.multi_processor_count
            assert info["max_memory"] == max(torch.cuda.get_device_properties(i).total_memory
                                             for i in range(torch.cuda.device_count()))
            if not is_rocm and hasattr(props, "shared_memory_per_block_optin"):
                assert info["max_shared_memory"] == props.shared_memory_per_block_optin
            assert [d["name"] for d in info["devices"]] == [
                torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def test_mps_matches_torch():
    info = yr.get_backend_info("mps")
    assert info["compiled"] == torch.backends.mps.is_built()
    assert info["available"] == (torch.backends.mps.is_available() and info["compiled"])
    if not torch.backends.mps.is_built():
        assert "without MPS" in info["reason"]


def test_privateuse1_device():
    info = yr.get_backend_info(pu1_name())
    assert info["dispatch_key"] == "PrivateUse1"
    assert info["compiled"] == has_kernel("rms_norm", "PrivateUse1")
    assert yr.get_backend_info("privateuseone")["name"] == pu1_name()  # torch's default name always answers
    if not info["available"]:
        assert "PrivateUse1" in info["reason"]


def test_privateuse1_renamed_in_a_fresh_process():
    out = run_python(textwrap.dedent("""
        import torch
        torch.utils.rename_privateuse1_backend("yrdev")
        import yirage_ext as yr
        info = yr.get_backend_info("yrdev")
        print(info["name"], info["available"], "yrdev" in yr.backends.backend_names(), info["reason"])
    """))
    assert out.returncode == 0, out.stderr
    name, available, listed, reason = out.stdout.strip().split(" ", 3)
    assert (name, available, listed) == ("yrdev", "False", "True")
    assert "no PrivateUse1 device is registered" in reason


@pytest.mark.parametrize("name, torch_answer", [
    ("mkl", lambda: torch.backends.mkl.is_available()),
    ("mkldnn", lambda: torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled),
    ("openmp", lambda: torch.backends.openmp.is_available()),
    ("nnpack", lambda: torch.backends.nnpack.is_available()),
    ("cudnn", lambda: torch.backends.cudnn.is_available() and torch.cuda.is_available()),
    ("cusparselt", lambda: torch.backends.cusparselt.is_available() and torch.cuda.is_available()),
    ("opt_einsum", lambda: torch.backends.opt_einsum.is_available() and torch.backends.opt_einsum.enabled),
    ("mha", lambda: torch.backends.mha.get_fastpath_enabled()),
])
def test_providers_match_torch(name, torch_answer):
    info = yr.get_backend_info(name)
    assert info["available"] == bool(torch_answer()), info["reason"]
    assert info["ops"] == {} and info["dtypes"] == [] and info["dispatch_key"] is None


@pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN")  # torch's, when toggling the flags
def test_mkldnn_disabled_says_so():
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    with torch.backends.mkldnn.flags(enabled=False):
        info = yr.get_backend_info("mkldnn")
        assert not info["available"] and "disabled" in info["reason"]
    assert yr.get_backend_info("mkldnn")["available"]


def test_triton_and_nki_from_python():
    triton = yr.get_backend_info("triton")
    if importlib.util.find_spec("triton") is None:
        assert not triton["available"] and "not installed" in triton["reason"]
    elif not torch.cuda.is_available():
        assert not triton["available"] and "no driver" in triton["reason"]
    nki = yr.get_backend_info("nki")
    neuron = any(importlib.util.find_spec(m) is not None for m in ("neuronxcc", "nki"))
    if not neuron:
        assert not nki["available"] and "AWS Neuron SDK is not installed" in nki["reason"]


def test_python_answers_reach_the_cpp_registry():
    """The C++ registry holds what Python probed (so C++ code in the same process sees the same answers)."""
    from yirage_ext._loader import native_module

    backends.refresh()
    for name in ("triton", "nki", "opt_einsum", "cusparselt", "mha"):
        cpp = native_module().backend_info(name)
        assert (cpp["available"], cpp["reason"]) == (yr.get_backend_info(name)["available"],
                                                     yr.get_backend_info(name)["reason"])
        assert "only the Python package" not in cpp["reason"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/cpuinfo")
def test_xeon_from_cpu_features():
    with open("/proc/cpuinfo") as f:
        text = f.read()
    fields = dict(line.split(":", 1) for line in text.split("\n\n")[0].splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    expected = fields.get("vendor_id") == "GenuineIntel" and bool({"avx512f", "amx_tile"} & flags)
    info = yr.get_backend_info("xeon")
    assert info["available"] == expected, info["reason"]
    assert info["details"]["avx512f"] == ("yes" if "avx512f" in flags else "no")
    assert yr.get_backend_info("cpu")["details"]["vendor"] == fields.get("vendor_id")


# ---- which ops run where, from the dispatcher ----

def test_op_table_matches_the_dispatcher():
    table = backends.op_table()
    assert sorted(table) == yirage_ops() and "rms_norm" in table
    for op, row in table.items():
        assert list(row) == KEYS
        for key, kind in row.items():
            assert kind in ("native", "portable", "fallback", "none")
            assert (kind != "none") == has_kernel(op, key), (op, key, kind)
        assert row["CPU"] in ("native", "none")  # the CPU kernels are ours, not the portable ones
        assert row["MPS"] == row["PrivateUse1"] and row["MPS"] in ("portable", "none")
        assert row["Autograd"] in ("native", "fallback")  # every op has an Autograd kernel


def test_every_op_has_an_mps_and_a_privateuse1_kernel():
    """The portable kernel of every op (backward ops included) is registered for MPS and PrivateUse1, whatever the
    platform: asked of the dispatcher, which knows the MPS key on Linux too."""
    for op in yirage_ops():
        for key in ("MPS", "PrivateUse1"):
            assert has_kernel(op, key), (op, key)
    # per op, native (a Metal kernel, macOS builds only) or portable
    assert set(yr.get_backend_info("mps")["ops"].values()) <= {"native", "portable"}


def test_op_paths_say_what_runs_on_each_device_backend_and_why():
    for name in DEVICES + [pu1_name()]:
        info = yr.get_backend_info(name)
        assert sorted(info["op_paths"]) == sorted(info["ops"]) == yirage_ops()
        for op, p in info["op_paths"].items():
            kernel = info["ops"][op]
            if not info["available"]:
                assert p == {"path": "unavailable", "reason": "backend unavailable: " + info["reason"]}, (name, op)
            elif kernel == "none":
                assert p["path"] == "unavailable" and f"no {info['dispatch_key']} kernel" in p["reason"], (name, op)
            else:
                assert p["path"] == kernel and (p["reason"] == "") == (kernel == "native"), (name, op, p)
    assert {p["path"] for p in yr.get_backend_info("cpu")["op_paths"].values()} == {"native"}
    assert yr.get_backend_info("mkl")["op_paths"] == {}  # providers run none of our ops


def test_objective_c_sources_are_built_only_on_macos(tmp_path, monkeypatch):
    """Native Metal kernels (csrc/mps/*.mm) join the build on macOS only; elsewhere the build leaves them out."""
    from yirage_ext import _build_config as cfg

    (tmp_path / "mps").mkdir()
    (tmp_path / "mps" / "rms_norm.mm").write_text("")
    (tmp_path / "library.cpp").write_text("")
    monkeypatch.setattr(cfg.sys, "platform", "linux")
    assert cfg.sources(str(tmp_path), with_cuda=False) == [str(tmp_path / "library.cpp")]
    assert [name for name, _ in cfg.translation_units(str(tmp_path), with_cuda=False)] == ["library"]
    monkeypatch.setattr(cfg.sys, "platform", "darwin")
    assert cfg.sources(str(tmp_path), with_cuda=False) == [str(tmp_path / "library.cpp"),
                                                           str(tmp_path / "mps" / "rms_norm.mm")]
    assert dict(cfg.translation_units(str(tmp_path), with_cuda=False))["mps__rms_norm"] == [
        str(tmp_path / "mps" / "rms_norm.mm")]  # a unit of its own: Objective-C++ is not unified with C++


def test_backend_ops_are_their_dispatch_key_column():
    table = backends.op_table()
    for name in ["cpu", "cuda", "rocm", "mps", pu1_name()]:
        info = yr.get_backend_info(name)
        assert info["ops"] == {op: row[info["dispatch_key"]] for op, row in table.items()}


def test_autograd_fallback_is_torchs_not_implemented_fallback():
    """"fallback" means torch's not-implemented autograd kernel: the output's grad_fn says so, where an op with a
    derivative of ours gets a real one."""
    table = backends.op_table()
    assert table["softmax_backward"]["Autograd"] == "fallback"
    assert table["softmax"]["Autograd"] == "native"
    x = torch.randn(3, 5, requires_grad=True)
    out = torch.ops.yirage.softmax(x, -1)
    grad = torch.ops.yirage.softmax_backward(torch.ones(3, 5, requires_grad=True), out, -1)
    assert "NotImplemented" in grad.grad_fn.name()
    assert "NotImplemented" not in out.grad_fn.name()


# ---- the default backend, selection, device_for, bad names ----

def test_default_backend(restore_default):
    auto = next(n for n in ["cuda", "rocm", "mps", pu1_name(), "cpu"] if yr.is_backend_available(n))
    assert yr.get_default_backend() == auto
    yr.set_default_backend("cpu")
    assert yr.get_default_backend() == "cpu"
    yr.set_default_backend("CPU")  # names are case-insensitive
    assert yr.get_default_backend() == "cpu"
    yr.set_default_backend(None)
    assert yr.get_default_backend() == auto


def test_default_backend_refuses_providers_and_unavailable(restore_default):
    yr.set_default_backend("cpu")
    with pytest.raises(ValueError, match=r"'mkl' is a provider.*expected one of cpu, cuda, rocm, mps"):
        yr.set_default_backend("mkl")
    missing = [n for n in ["cuda", "rocm", "mps", pu1_name()] if not yr.is_backend_available(n)]
    if missing:
        reason = yr.get_backend_info(missing[0])["reason"]
        with pytest.raises(ValueError, match="is not available") as e:
            yr.set_default_backend(missing[0])
        assert reason in str(e.value)
    assert yr.get_default_backend() == "cpu"  # unchanged by the failed calls


def test_select_backend():
    assert yr.select_backend("cpu") == "cpu"
    order = ["cuda", "mps", "cpu"]
    expected = next(n for n in order if yr.is_backend_available(n))
    assert yr.select_backend("cuda", fallbacks=["mps", "cpu"]) == expected
    assert yr.select_backend("cuda", ("mps", "cpu")) == expected


def test_select_backend_error_lists_every_candidate_with_its_reason():
    missing = [n for n in backends.backend_names() if not yr.is_backend_available(n)]
    if len(missing) < 2:
        pytest.skip("fewer than two backends are unavailable here")
    with pytest.raises(RuntimeError) as e:
        yr.select_backend(missing[0], fallbacks=missing[1:])
    text = str(e.value)
    for name in missing:
        assert f"{name}: {yr.get_backend_info(name)['reason']}" in text
    assert "available here: " + ", ".join(yr.get_available_backends()) in text


@pytest.mark.parametrize("call", [
    lambda: yr.is_backend_available("bogus"),
    lambda: yr.get_backend_info("bogus"),
    lambda: yr.set_default_backend("bogus"),
    lambda: yr.select_backend("bogus"),
    lambda: yr.select_backend("cpu", ["bogus"]),
    lambda: yr.device_for("bogus"),
], ids=["is_backend_available", "get_backend_info", "set_default_backend", "select_backend",
        "select_backend_fallback", "device_for"])
def test_unknown_name_is_a_value_error_listing_the_known_ones(call):
    with pytest.raises(ValueError) as e:
        call()
    text = str(e.value)
    assert "unknown backend 'bogus'" in text
    assert "expected one of " + ", ".join(backends.backend_names()) in text


def test_names_must_be_strings():
    with pytest.raises(TypeError, match="is_backend_available: expected name to be a backend name"):
        yr.is_backend_available(0)
    with pytest.raises(TypeError, match="expected fallbacks to be a list of backend names"):
        yr.select_backend("cpu", "cuda")


def test_device_for(restore_default):
    assert yr.device_for("cpu") == torch.device("cpu")
    yr.set_default_backend("cpu")
    assert yr.device_for() == torch.device("cpu")
    x = torch.randn(2, 8, device=yr.device_for("cpu"))
    torch.testing.assert_close(yr.rms_norm(x), torch.ops.yirage.rms_norm(x))
    with pytest.raises(ValueError, match="'mkl' is a provider"):
        yr.device_for("mkl")
    missing = [n for n in ["cuda", "rocm", "mps"] if not yr.is_backend_available(n)]
    if missing:
        with pytest.raises(RuntimeError, match=f"backend '{missing[0]}' is not available"):
            yr.device_for(missing[0])


def test_list_backends_prints_every_backend(capsys):
    yr.list_backends()
    short = capsys.readouterr().out
    yr.list_backends(verbose=True)
    verbose = capsys.readouterr().out
    for name in backends.backend_names():
        info = yr.get_backend_info(name)
        line = next(l for l in short.splitlines() if l.startswith(name + " "))
        assert ("yes" if info["available"] else "no") in line
        if not info["available"]:
            assert info["reason"] in line
    assert len(verbose.splitlines()) > len(short.splitlines())
    assert "compute units: %d" % yr.get_backend_info("cpu")["compute_units"] in verbose


# ---- the original design's snippet, as written ----

SNIPPET = """
import yirage_ext as yr
print(yr.get_available_backends())          # e.g. ['cpu', 'mkldnn', 'openmp', ...]
if yr.is_backend_available('cuda'):
    cc = yr.get_backend_info('cuda').get('compute_capability', 0); print(cc // 10, cc % 10)
cores = yr.get_backend_info('cpu').get('compute_units', 0)
yr.set_default_backend('cpu'); print(yr.get_default_backend())
yr.list_backends(verbose=True)
"""


def test_the_original_snippet_runs_as_written():
    out = run_python(SNIPPET + "print('cores', cores)\n")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == repr(yr.get_available_backends())
    k = 1
    if yr.is_backend_available("cuda"):
        cc = yr.get_backend_info("cuda")["compute_capability"]
        assert lines[1] == f"{cc // 10} {cc % 10}"
        k = 2
    assert lines[k] == "cpu"
    assert lines[-1] == f"cores {os.sysconf('SC_NPROCESSORS_ONLN')}"
    assert any(l.startswith("mkldnn ") for l in lines)
