"""`python -m yirage_ext` and `python -m yirage_ext --json` in a fresh process: exit status 0 (the CPU backend
works here), and the report holds the versions, how the library was loaded, every backend with its reason and
the op x dispatch-key table, agreeing with the Python API of this process."""
import json
import os

import pytest
import torch

import yirage_ext as yr
from yirage_ext import backends

from _helpers import run_python


@pytest.fixture(scope="module")
def json_report():
    out = run_python(args=["-m", "yirage_ext", "--json"])
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_json_report(json_report):
    r = json_report
    assert r["yirage_ext"]["version"] == yr.__version__
    assert r["torch"]["version"] == torch.__version__
    info = yr.load_info()
    assert r["load"]["kind"] == info.kind and r["load"]["path"] == info.path
    assert r["load"]["jit_key"] and r["load"]["jit_cache_root"]
    assert "cxx" in r["toolchain"] and "CUDA_HOME" in r["toolchain"]["cuda"]
    assert [b["name"] for b in r["backends"]] == backends.backend_names()
    for b in r["backends"]:
        mine = yr.get_backend_info(b["name"])
        assert (b["available"], b["reason"], b["compiled"]) == (mine["available"], mine["reason"], mine["compiled"])
    assert r["ops"] == backends.op_table()
    devices = [n for n in backends.backend_names() if yr.get_backend_info(n)["kind"] == "device"]
    assert r["op_paths"] == {n: yr.get_backend_info(n)["op_paths"] for n in devices}
    assert r["default_backend"] == yr.get_default_backend()
    assert r["cpu_check"]["ok"] is True
    assert r["cpu"]["isa"] == yr.cpu_isa()
    assert r["cpu"]["output_cache"]["limit_bytes"] == yr.cpu_cache_stats()["limit_bytes"]
    assert r["errors"] == []


def test_text_report(json_report):
    out = run_python(args=["-m", "yirage_ext"])
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert f"yirage_ext {yr.__version__}" in text and f"torch {torch.__version__}" in text
    limit = yr.cpu_cache_stats()["limit_bytes"]
    assert (f"output cache: keeps up to {limit / 2**20:.0f} MiB" if limit else "output cache: off") in text
    assert f"loaded: {yr.load_info().kind} from {yr.load_info().path}" in text
    assert json_report["load"]["jit_key"] in text
    backend_lines = text.split("== backends")[1].split("== ops")[0]
    for b in json_report["backends"]:
        line = next(l for l in backend_lines.splitlines() if l.startswith(b["name"] + " "))
        assert ("unavailable" if not b["available"] else "available") in line
        assert (b["reason"] or b["description"]) in line
    table = text.split("== ops x dispatch keys")[1]
    for op, row in json_report["ops"].items():
        line = next(l for l in table.splitlines() if l.split() and l.split()[0] == op)
        assert line.split()[1:] == list(row.values())
    paths = text.split("== ops x device backends")[1].split("CPU check")[0].splitlines()
    names = paths[1].split()[1:]
    assert names == list(json_report["op_paths"])
    for op in json_report["ops"]:
        line = next(l for l in paths if l.split() and l.split()[0] == op)
        assert line.split()[1:] == [json_report["op_paths"][n][op]["path"] for n in names]
    for n in names:  # each reason for an unavailable op is shown once, under the table
        for p in json_report["op_paths"][n].values():
            if p["path"] == "unavailable":
                assert f"  {n}: {p['reason']}" in paths
    assert "CPU check: ok" in text


def test_fp32_gemm_choice(json_report):
    # the library's own fp32 GEMM runs on AMD CPUs in an AVX-512 variant, unless YIRAGE_CPU_SGEMM=0
    cpu = json_report["cpu"]
    own = cpu["vendor"] == "AuthenticAMD" and cpu["isa"] in ("avx512", "avx512_bf16")
    if os.environ.get("YIRAGE_CPU_SGEMM") == "0":
        own = False
    assert cpu["fp32_gemm"] == ("yirage" if own else "torch")
    out = run_python(args=["-m", "yirage_ext", "--json"], env_extra={"YIRAGE_CPU_SGEMM": "0"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["cpu"]["fp32_gemm"] == "torch"
    text = run_python(args=["-m", "yirage_ext"], env_extra={"YIRAGE_CPU_SGEMM": "0"}).stdout
    assert "fp32 matmul / linear products: torch's BLAS" in text


def test_bf16_attention_products_choice(json_report):
    # avx512_bf16 variant: oneDNN's brgemm where the CPU has AMX-BF16 (or YIRAGE_CPU_AMX=1), else our AVX512-BF16
    # tiles on AMD; other variants convert the tiles to fp32 for torch's BLAS
    cpu = json_report["cpu"]
    assert cpu["llc_bytes"] >= 0
    choices = {}
    for amx in ("0", "1"):
        out = run_python(args=["-m", "yirage_ext", "--json"], env_extra={"YIRAGE_CPU_AMX": amx})
        assert out.returncode == 0, out.stdout + out.stderr
        choices[amx] = json.loads(out.stdout)["cpu"]["bf16_attention_products"]
    if cpu["isa"] != "avx512_bf16":
        assert choices == {"0": "torch_fp32", "1": "torch_fp32"}
        return
    own = cpu["fp32_gemm"] == "yirage"
    assert choices == {"0": "yirage" if own else "torch_fp32", "1": "onednn_brgemm"}
    # by default: brgemm where torch's oneDNN can run bf16 on AMX (its own check), else the "0" choice
    assert cpu["bf16_attention_products"] in ("onednn_brgemm", choices["0"])
