"""Every yirage op on an out-of-tree PrivateUse1 device: tests/hostdev, a test-only device backed by host memory
with a logging CPU fallback, renamed 'hostdev'. Renaming PrivateUse1 is process-wide and happens once, so the
device lives in a subprocess (tests/hostdev/check_ops.py, run once for this file); this process never loads it.

What is proven there: each op's forward matches the float64 reference and its gradients the reference's, on
the device; opcheck passes on the device (schema, fake tensor, AOT dispatch; its autograd registration check
knows only CPU/CUDA/XPU); the kernel that ran is our PrivateUse1 (portable) one, not the CPU kernel reached
through the device's fallback; the backend API reports the device by its new name with its op table."""
import json
import os
import sys

import pytest
import torch

import yirage_ext as yr

from _helpers import run_python

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLIC_OPS = ["rms_norm", "fused_add_rms_norm", "layer_norm", "softmax", "log_softmax", "silu_and_mul",
              "gelu_and_mul", "gelu", "rotary_embedding", "matmul", "linear", "attention"]


def yirage_ops():
    return sorted(yr.backends.op_table())


@pytest.fixture(scope="module")
def report():
    out = run_python(args=[os.path.join(HERE, "hostdev", "check_ops.py")], timeout=600)
    assert out.returncode == 0, f"the hostdev run failed:\n{out.stdout[-3000:]}\n{out.stderr[-6000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_op_matches_the_reference_with_gradients_and_opcheck_on_the_device(report):
    failed = {name: tb for name, tb in report["results"].items() if tb != "ok"}
    assert not failed, "\n\n".join(f"== {name}\n{tb}" for name, tb in failed.items())
    assert {name.split("[")[0] for name in report["results"]} == set(PUBLIC_OPS)


def test_every_op_ran_its_privateuse1_kernel_not_the_cpu_kernel_through_the_fallback(report):
    # every yirage op (the backward ops and linear_forward/attention_forward through autograd) ran on hostdev...
    assert report["yirage_ops_run"] == yirage_ops()
    # ... and none of them through the device's CPU fallback, which logs every op it runs: the portable
    # kernels' ATen calls are there (the device has no kernels of its own for them), no yirage op is
    assert not [op for op in report["fallback_ops"] if op.startswith("yirage::")], report["fallback_ops"]
    assert {"aten::mul", "aten::sum", "aten::mm"} <= set(report["fallback_ops"])
    # the control: an op with only a CPU kernel runs on hostdev through the fallback and is logged
    assert report["control"] == {"fallback_ops": ["hostdev::cpu_only"], "device": "hostdev:0",
                                 "value": [2.0, 2.0, 2.0]}


def test_gradients_flow_through_our_autograd_privateuse1_kernels(report):
    # the gradients matched on the device (first test); the AutogradPrivateUse1 kernel of every op is ours
    # (csrc/autograd: a derivative, or the no-double-backward kernel of a backward op), not torch's fallback
    assert sorted(report["autograd_pu1"]) == yirage_ops()
    for op, entry in report["autograd_pu1"].items():
        assert f"{os.sep}autograd{os.sep}" in entry and "[autograd kernel]" in entry, (op, entry)


def test_backend_api_reports_the_renamed_device_with_its_op_table(report):
    info = report["backend_info"]
    assert (info["name"], info["kind"], info["dispatch_key"]) == ("hostdev", "device", "PrivateUse1")
    assert info["available"] and info["compiled"] and info["reason"] == ""
    assert info["device_count"] == report["torch_device_count"] == 1
    assert info["details"]["torch_name"] == "hostdev"
    assert info["ops"] == report["op_table_pu1"] == {op: "portable" for op in yirage_ops()}
    assert {p["path"] for p in info["op_paths"].values()} == {"portable"}
    assert report["privateuseone_name"] == "hostdev"  # torch's default name still answers
    assert "hostdev" in report["available_backends"]
    # the default is the first available of cuda, rocm, mps, the PrivateUse1 device, cpu
    if not any(yr.is_backend_available(n) for n in ("cuda", "rocm", "mps")):
        assert report["default_backend"] == "hostdev"
    assert report["device_for"] == "hostdev"


def test_diagnostics_show_the_renamed_device():
    code = ("import sys; sys.path.insert(0, %r); import hostdev; hostdev.load(); import yirage_ext._diagnostics as d; "
            "sys.exit(d.main([]))" % HERE)
    out = run_python(code)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert any(line.split()[:3] == ["hostdev", "device", "available"] for line in lines), out.stdout
    assert not any(line.startswith("privateuseone ") for line in lines), out.stdout
    table = out.stdout.split("== ops x device backends")[1].splitlines()
    column = table[1].split().index("hostdev")
    rows = [line.split() for line in table[2:] if line.split() and line.split()[0] in yirage_ops()]
    assert len(rows) == len(yirage_ops()) and {row[column] for row in rows} == {"portable"}


def test_the_device_stays_in_its_subprocess():
    """Loading hostdev here would rename PrivateUse1 for every other test of this process."""
    assert "hostdev" not in sys.modules and torch._C._get_privateuse1_backend_name() != "hostdev"


def test_a_vendors_native_kernel_for_one_op_replaces_ours_there_only(report):
    """USAGE_GUIDE's recipe: a kernel registered for yirage::rms_norm at PrivateUse1 by someone else runs instead
    of our portable one, the registry reports it native, the other ops (and rms_norm's backward) stay portable,
    and gradients still flow."""
    assert report["vendor_kernel"] == {"calls": 1, "matches": True, "grad_matches": True,
                                       "ops": {"rms_norm": "native", "rms_norm_backward": "portable",
                                               "softmax": "portable"},
                                       "path": "native"}
