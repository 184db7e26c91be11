"""python -m yirage_ext.bench end to end (subprocesses: table, CSV columns, PNG, exit codes 0/1/2) and every
bad-argument message (in process: one line on stderr, exit status 2, no traceback)."""
import csv
import importlib.util
import re
import sys
import textwrap

import pytest

from _helpers import run_python
from yirage_ext.bench import cli
from yirage_ext.bench.report import CSV_FIELDS

HAS_MPL = importlib.util.find_spec("matplotlib") is not None
TINY = ["--warmup", "0", "--repeats", "2", "--budget", "0.01"]


def bench(*args, code=None):
    """The CLI (or `code` with these arguments) in a subprocess, on the yirage_ext this process imported."""
    return run_python(code, args=args if code else ("-m", "yirage_ext.bench", *args))


def test_cli_table_csv_and_plot(tmp_path):
    out_csv, out_png, out_md = tmp_path / "r.csv", tmp_path / "r.png", tmp_path / "r.md"
    args = ["--ops", "rms_norm", "matmul", "--device", "cpu", "--dtype", "float32", "bfloat16",
            "--providers", "yirage", "torch", "flash", "--shapes", "rms_norm:8x96", "matmul:96x32x8",
            "--csv", str(out_csv), "--markdown", str(out_md), "--progress", "always", *TINY]
    if HAS_MPL:
        args += ["--plot", str(out_png)]
    r = bench(*args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("op "))
    assert lines[header].split() == ["op", "shape", "dtype", "provider", "time", "p20-p80", "rate", "%", "roof",
                                     "%", "size", "copy", "vs", "torch", "accuracy"]
    body = lines[header + 2: header + 2 + 12]
    assert len(body) == 12 and all(line.split()[0] in ("rms_norm", "matmul") for line in body)
    assert sum("GB/s" in line and "% copy" in line and " ok (rel" in line for line in body) == 4
    # memory-bound rows also against a copy of their own size; compute-bound ones not
    assert all(re.search(r"% copy +\d+% +\d", line) for line in body if "GB/s" in line)
    assert all(re.search(r"% gemm +- +\d", line) for line in body if "FLOP/s" in line)
    assert sum("FLOP/s" in line and "% gemm" in line for line in body) == 4
    assert sum("n/a: needs a CUDA device (running on cpu)" in line for line in body) == 4
    assert "Traceback" not in r.stderr
    if importlib.util.find_spec("tqdm") is not None:  # the bar goes to stderr, never into the table
        assert "/12 [" in r.stderr and "|" not in "".join(lines[header + 2:])
    with open(out_csv) as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:len(CSV_FIELDS)] == CSV_FIELDS
    assert {"date", "device_name", "torch", "yirage_ext"} <= set(rows[0])
    assert len(rows) == 12 and {r["status"] for r in rows} == {"ok", "skip"}
    assert all(float(r["ms"]) > 0 and r["verdict"] == "ok" for r in rows if r["status"] == "ok")
    assert all(float(r["same_size_copy_pct"]) > 0 for r in rows if r["status"] == "ok" and r["roofline"] == "copy")
    md = out_md.read_text()
    assert "| op | shape |" in md and "- % size copy: of a copy moving the row's ideal bytes" in md
    summary = md[md.index("## Ours against the fastest other provider"):].splitlines()
    assert sum(line.startswith(("| rms_norm | 8x96 |", "| matmul | 96x32x8 |")) for line in summary) == 4
    # the recorded command keeps what was run and leaves out where the outputs went
    command = next(line for line in md.splitlines() if line.startswith("- command:"))
    assert "--ops rms_norm matmul" in command and str(tmp_path) not in command and "--csv" not in command
    assert all(row["argv"] == command.split("`")[1].removeprefix("python -m yirage_ext.bench ") for row in rows)
    if HAS_MPL:
        for op in ("rms_norm", "matmul"):
            png = tmp_path / f"r-{op}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_exit_status_1_when_a_check_fails():
    code = textwrap.dedent("""
        import sys
        import yirage_ext.bench as bench
        from yirage_ext.bench import cli
        bench.register(bench.Provider("off", "a wrong result", lambda d: None,
                                      {"gelu": lambda s: lambda x, a: s.eager(x, a) + 1e-2}))
        sys.exit(cli.main(sys.argv[1:]))
    """)
    r = bench("--ops", "gelu", "--device", "cpu", "--dtype", "float32", "--shapes", "4x32",
              "--providers", "torch", "off", *TINY, code=code)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL (out: 100.00% outside)" in r.stdout
    assert "1 of 2 rows failed: gelu 4x32 float32 off: FAIL" in r.stderr


def test_cli_exit_status_2_on_a_bad_argument():
    r = bench("--ops", "rms_nrom")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "python -m yirage_ext.bench: error: --ops: expected one of rms_norm, fused_add_rms_norm, layer_norm, "
        "softmax, log_softmax, silu_and_mul, gelu_and_mul, gelu, rotary_embedding, matmul, linear, attention, "
        "got 'rms_nrom'"]


BAD = [
    (["--ops", "nope"], "--ops: expected one of rms_norm, ", "got 'nope'"),
    (["--providers", "yirage", "tensorrt"], "--providers: expected one of yirage, torch, compile", "got 'tensorrt'"),
    (["--device", "tpu9"], "--device: expected a torch device such as cpu or cuda", "got 'tpu9'"),
    (["--dtype", "int8"], "--dtype: expected one of float32, float16, bfloat16, float64", "got 'int8'"),
    (["--ops", "rms_norm", "--shapes", "12xab"], "--shapes: rms_norm expects ROWSxHIDDEN (positive integers)",
     "got '12xab'"),
    (["--ops", "rms_norm", "--shapes", "0x8"], "--shapes: rms_norm expects ROWSxHIDDEN (positive integers)",
     "got '0x8'"),
    (["--ops", "attention", "--shapes", "1x8x3x16x16x64"], "--shapes: attention expects BxHxSxD or BxHqxHkxSqxSkxD "
     "with Hq divisible by Hk", "got '1x8x3x16x16x64'"),
    (["--ops", "rms_norm", "--shapes", "matmul:8x8x8"], "--shapes: 'matmul:8x8x8' names op 'matmul', expected one "
     "of the selected ops (rms_norm)", ""),
    (["--repeats", "0"], "--repeats: expected an integer >= 1", "got 0"),
    (["--warmup", "-1"], "--warmup: expected an integer >= 0", "got -1"),
    (["--budget", "0"], "--budget: expected seconds > 0", "got 0.0"),
    (["--repeats", "many"], "argument --repeats: invalid int value", "'many'"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate", ""),
    (["--device", "cpu", "--tf32"], "--tf32: TF32 tensor cores are a CUDA setting, expected a cuda device",
     "got 'cpu'"),
    (["--device", "cpu", "--cuda-graph"], "--cuda-graph: CUDA graph replays need a cuda device", "got 'cpu'"),
]
if not HAS_MPL:
    BAD.append((["--plot", "x.png"], "--plot: needs matplotlib", "got 'x.png'"))
if not __import__("torch").cuda.is_available():
    BAD.append((["--device", "cuda"], "--device: 'cuda' was asked for, but no CUDA GPU is available here", ""))


@pytest.mark.parametrize("argv, expected, given", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_argument_messages(argv, expected, given, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("python -m yirage_ext.bench: error: ") and expected in err and given in err


def test_long_runs_without_a_terminal_print_a_line_per_op(capsys):
    from yirage_ext.bench.runner import Result

    rows = [Result(op, "8x8", "float32", "cpu", "fwd", p) for op in ("gelu", "softmax") for p in ("yirage", "torch")]
    short, _ = cli._progress("auto")  # stderr is captured here: not a terminal
    for i, r in enumerate(rows):
        short(i + 1, len(rows), r)
    assert capsys.readouterr().err == ""
    long_run, _ = cli._progress("auto")
    for i, r in enumerate(rows):
        long_run(i + 1, cli.LONG_RUN_ROWS, r)
    err = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in err] == ["bench: gelu", "bench: softmax"]
    assert err[1].startswith(f"bench: softmax (3/{cli.LONG_RUN_ROWS} rows, ")
    assert cli._progress("never")[0] is None


def _makefile_attention_argv():
    """The bench-cuda-attention target's CLI arguments (Makefile: CUDA_ATTN and ATTN_SHAPES_<part>)."""
    import os
    import re

    text = open(os.path.join(os.path.dirname(__file__), "..", "Makefile")).read().replace("\\\n", " ")
    var = {m.group(1): m.group(2).split() for m in re.finditer(r"^(CUDA_ATTN|ATTN_SHAPES_\d) :=(.*)$", text, re.M)}
    base = var["CUDA_ATTN"][3:]  # after "$(BENCH_PY) -m yirage_ext.bench"
    parts = {k[-1]: v for k, v in var.items() if k.startswith("ATTN_SHAPES_")}
    return base, parts


def test_makefile_attention_rows_parse():
    from yirage_ext.bench import api

    base, parts = _makefile_attention_argv()
    assert sorted(parts) == ["1", "2", "3"]
    for part, extra in parts.items():
        argv = [a.replace("cuda", "cpu") if a == "cuda" else a for a in base]
        args = cli.parser().parse_args(argv + extra)
        assert args.ops == ["attention"] and args.dtypes == ["bfloat16"] and args.progress == "never"
        assert args.providers == ["yirage", "torch", "flash", "cudnn", "efficient"]
        assert args.backward == (part == "2") and args.interleave == (part != "3")  # decode: one provider at a time
        plan = api.plan_shapes(args.ops, args.shapes)  # every shape parses (dims, GQA, suffix)
        assert len(plan["attention"]) == len(args.shapes) >= 2
    shapes = parts["1"] + parts["3"]
    assert {"4x32x4096x128-full", "4x32x4096x128-causal", "4x32x4096x64-full", "4x32x16384x128-causal",
            "4x32x2048x128-full", "64x32x8x1x131072x128-full", "1x32x8x1x1024x128-full"} <= set(shapes)


def test_makefile_cuda_grid_parts_parse():
    """Every part of the bench-cuda target (Makefile: the recipe's $(CUDA_GRID) commands) parses: options, ops, and
    each shape for its op; the small shapes are timed from Python (--latency)."""
    import os
    import re

    from yirage_ext.bench import api

    text = open(os.path.join(os.path.dirname(__file__), "..", "Makefile")).read().replace("\\\n", " ")
    base = re.search(r"^CUDA_GRID :=(.*)$", text, re.M).group(1).split()[3:]  # after "$(BENCH_PY) -m yirage_ext.bench"
    recipe = text[text.index("\nbench-cuda:"):text.index("\nbench-cuda-attention:")]
    parts = [re.split(r" \|\| ", cmd)[0].split() for cmd in recipe.split("$(CUDA_GRID)")[1:]]
    assert len(parts) == 5
    latency = []
    for extra in parts:
        extra = [a for a in extra if not a.startswith("$$tmp/")]
        args = cli.parser().parse_args([a.replace("cuda", "cpu") if a == "cuda" else a for a in base]
                                       + [a for a in extra if a not in ("--markdown", "--csv")])
        assert args.providers == ["yirage", "torch", "compile", "liger"] and args.progress == "never"
        plan = api.plan_shapes(args.ops, args.shapes)
        assert all(plan[op] for op in args.ops)
        if args.latency:
            latency += [(op, s) for op in args.ops for s in plan[op]]
    assert ("softmax", "1x4096") in latency and ("rotary_embedding", "1x32x8x128") in latency
    assert all(int(s.split("x")[0]) <= 64 for _, s in latency)  # only the small shapes


def test_cli_attention_full_and_causal_rows():
    r = bench("--ops", "attention", "--device", "cpu", "--dtype", "float32", "--providers", "yirage", "torch",
              "--shapes", "1x2x1x6x9x8-full", "1x2x1x6x9x8-causal", "1x8x2x1x200x16-full", *TINY)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("attention")]
    assert len(lines) == 6 and all(" ok (rel" in line for line in lines)
    assert sum("-full" in line for line in lines) == 4 and sum("-causal" in line for line in lines) == 2
    assert all("GB/s" in line and "% copy" in line for line in lines if "x200x" in line)
    assert all("FLOP/s" in line and "% gemm" in line for line in lines if "x9x" in line)
    r = bench("--ops", "attention", "--shapes", "1x2x6x8-sideways", *TINY)
    assert r.returncode == 2 and "with a suffix -causal or -full, got '1x2x6x8-sideways'" in r.stderr
