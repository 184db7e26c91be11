"""The comparison framework's parts: accuracy metrics, profiler statistics, provider registry and runner."""
import dataclasses
import math

import numpy as np
import pytest
import torch

import yirage_ext.bench as bench
from yirage_ext.bench import accuracy as A
from yirage_ext.bench import api, profiler, report, runner
from yirage_ext.bench.cases import OPS
from yirage_ext.bench.providers import PROVIDERS, Provider, unavailable
from yirage_ext.bench.runner import run_case
from yirage_ext.testing.reference import TF32_TOL, TOLERANCES

FAST = dict(warmup=0, repeats=2, budget_s=0.01)
# one small shape per op, odd sizes where the op allows them
SMALL = {"rms_norm": "5x33", "fused_add_rms_norm": "3x2x17", "layer_norm": "5x33", "softmax": "5x33",
         "log_softmax": "4x19", "silu_and_mul": "5x34", "gelu_and_mul": "3x18", "gelu": "5x33",
         "rotary_embedding": "7x4x2x16", "matmul": "2x9x17x5", "linear": "9x17x5", "attention": "1x4x2x5x9x16"}


# ---- accuracy ----

def test_injected_errors_give_the_expected_metrics():
    ref = torch.tensor([1.0, 2.0, -4.0, 0.5], dtype=torch.float64)
    out = torch.tensor([1.0, 2.5, -4.0, 0.5], dtype=torch.float32)  # one error of 0.5 on 2.0
    acc = A.compare(out, ref, 1e-5, 1e-5)
    assert acc.max_abs == pytest.approx(0.5)
    assert acc.max_rel == pytest.approx(0.25)
    assert acc.l2_rel == pytest.approx(0.5 / math.sqrt(1 + 4 + 16 + 0.25))
    assert acc.frac_outside == pytest.approx(0.25)
    assert not acc.passed and acc.nonfinite == 0 and acc.max_ulp is None
    assert acc.verdict() == "FAIL (25.00% outside)"
    # within tolerance: passes, same metrics
    assert A.compare(out, ref, 0.6, 0.0).passed


def test_relative_error_floor_near_zero():
    # |ref| below atol/rtol: the relative error is taken against atol/rtol, not a tiny |ref|
    ref = torch.tensor([1e-12, 1.0], dtype=torch.float64)
    out = torch.tensor([1e-6, 1.0], dtype=torch.float32)
    acc = A.compare(out, ref, 1e-5, 1e-5)
    assert acc.max_rel == pytest.approx((1e-6 - 1e-12) / 1.0, rel=1e-3)
    assert acc.passed


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_ulp_distance(dtype):
    one = torch.tensor([1.0], dtype=dtype)
    steps = one.view(torch.int16) + torch.tensor([3], dtype=torch.int16)
    three_up = steps.view(dtype)
    acc = A.compare(three_up, one.double(), 1.0, 1.0, dtype)
    assert acc.max_ulp == 3 and acc.passed
    # across zero: the smallest positive and negative subnormals are 2 apart; -0 and +0 are 0 apart
    tiny = torch.tensor([1], dtype=torch.int16).view(dtype)
    assert A.ulp_distance(tiny, -tiny.double(), dtype).item() == 2
    assert A.ulp_distance(torch.tensor([-0.0], dtype=dtype), torch.tensor([0.0]).double(), dtype).item() == 0
    # negative values order the other way
    assert A.ulp_distance((-three_up), (-one).double(), dtype).item() == 3


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nonfinite_never_passes(bad):
    ref = torch.ones(8, dtype=torch.float64)
    out = torch.ones(8)
    out[3] = bad
    acc = A.compare(out, ref, 1e30, 1e30)  # whatever the tolerance
    assert not acc.passed and acc.nonfinite == 1 and acc.frac_outside == pytest.approx(1 / 8)
    assert "non-finite" in acc.verdict()


def test_matching_nonfinite_values_pass():
    ref = torch.tensor([math.nan, math.inf, -math.inf, 1.0], dtype=torch.float64)
    assert A.compare(ref.float(), ref, 1e-5, 1e-5).passed
    wrong_sign = torch.tensor([math.nan, -math.inf, -math.inf, 1.0])
    assert not A.compare(wrong_sign, ref, 1e-5, 1e-5).passed
    finite_for_nan = torch.tensor([0.0, math.inf, -math.inf, 1.0])
    assert not A.compare(finite_for_nan, ref, 1e-5, 1e-5).passed


def test_shape_and_dtype_mismatch_fail():
    ref = torch.ones(2, 3, dtype=torch.float64)
    assert "shape" in A.compare(torch.ones(3, 2), ref, 1, 1).verdict()
    assert "dtype" in A.compare(torch.ones(2, 3), ref, 1, 1, torch.bfloat16).verdict()


# ---- profiler ----

class StubWorkload:
    """fn() advances a fake nanosecond clock by the next scripted duration."""

    def __init__(self, durations_ms):
        self.now, self.durations, self.calls = 0, list(durations_ms), 0

    def clock(self):
        return self.now

    def __call__(self):
        self.now += int(self.durations[self.calls] * 1e6)
        self.calls += 1


def test_profile_statistics_on_a_stub_workload():
    work = StubWorkload([50, 50] + [7, 1, 9, 3, 5, 10, 2, 8, 4, 6])  # two warm-up calls, then 1..10 ms shuffled
    t = profiler.profile(work, "cpu", warmup=2, repeats=10, budget_s=100, clock=work.clock)
    assert work.calls == 12 and t.repeats == 10
    assert t.median == pytest.approx(5.5e-3)
    assert t.p20 == pytest.approx(2.8e-3) and t.p80 == pytest.approx(8.2e-3)  # inclusive quantiles of 1..10


def test_summarize_matches_numpy_percentiles():
    times = list(np.random.default_rng(0).exponential(1.0, 37))
    t = profiler.summarize(times)
    assert t.median == pytest.approx(np.percentile(times, 50))
    assert t.p20 == pytest.approx(np.percentile(times, 20)) and t.p80 == pytest.approx(np.percentile(times, 80))


def test_profile_budget_bounds_the_repeats():
    work = StubWorkload([100] * 50)
    t = profiler.profile(work, "cpu", warmup=0, repeats=50, budget_s=0.25, clock=work.clock)
    assert t.repeats == 3 and t.median == pytest.approx(0.1)  # at least 3 once the budget is spent
    slow = StubWorkload([2000] * 10)  # one call longer than the budget: no more warm-up, one timed call
    t = profiler.profile(slow, "cpu", warmup=5, repeats=50, budget_s=1.0, clock=slow.clock)
    assert slow.calls == 2 and t.repeats == 1 and t.median == pytest.approx(2.0)


def test_latency_times_the_call_to_its_result_by_the_host_clock(monkeypatch):
    """--latency on CUDA (no GPU needed here: the device calls are stubs): no L2 flush, no CUDA events; each repeat
    runs from the call to the end of a synchronize, by the host's clock."""
    work = StubWorkload([1.0] * 3 + [0.004, 0.006, 0.005])  # 3 warm-up calls, then 4-6 us of host time each
    syncs = []

    def synchronize(device=None):
        syncs.append(device)
        work.now += 20_000  # the wait for the GPU: 20 us, inside the timed window

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)
    monkeypatch.setattr(profiler, "flush_l2", lambda device: pytest.fail("--latency flushed the L2"))
    monkeypatch.setattr(torch.cuda, "Event", lambda **kw: pytest.fail("--latency recorded CUDA events"))
    t = profiler.profile(work, "cuda", warmup=3, repeats=3, budget_s=100, clock=work.clock, latency=True)
    assert work.calls == 6 and syncs == ["cuda"] * 4  # one after the warm-up, one per timed call
    assert t.repeats == 3 and t.median == pytest.approx(25e-6) and t.p20 < t.p80
    work = StubWorkload([0.004, 0.006])
    syncs.clear()
    a, b = profiler.profile_interleaved([work, work], "cuda", warmup=0, repeats=1, budget_s=100, clock=work.clock,
                                        latency=True)
    assert syncs == ["cuda"] * 3 and a.median == pytest.approx(24e-6) and b.median == pytest.approx(26e-6)


def test_latency_excludes_cuda_graphs_and_changes_nothing_on_cpu():
    with pytest.raises(ValueError, match="--latency and --cuda-graph: expected one of them"):
        api.check_cuda_graph(True, "cuda", latency=True)
    api.check_cuda_graph(False, "cuda", latency=True)
    kw = dict(ops=["rms_norm"], device="cpu", dtypes=["float32"], providers=["yirage"], shapes=["8x64"], **FAST)
    row, = api.run(latency=True, **kw)  # CPU calls are timed by the host's clock either way: rooflines stay
    assert row.status == "ok" and row.roofline == "copy" and row.roofline_pct > 0, row


class Turns:
    """Stub workloads sharing one fake nanosecond clock; each call logs its name, advances the clock by the
    workload's duration and raises from its `fail_at`-th call on."""

    def __init__(self):
        self.now, self.log = 0, []

    def clock(self):
        return self.now

    def workload(self, name, ms, fail_at=None):
        def fn():
            self.log.append(name)
            if fail_at is not None and self.log.count(name) >= fail_at:
                raise RuntimeError(f"{name} broke")
            self.now += int(ms * 1e6)
        return fn


def test_profile_interleaved_takes_turns():
    t = Turns()
    fns = [t.workload("a", 10), t.workload("b", 20), t.workload("c", 5, fail_at=3)]
    a, b, c = profiler.profile_interleaved(fns, "cpu", warmup=1, repeats=4, budget_s=100, clock=t.clock)
    # one warm-up round, then rounds of one timed call each; c raises on its second timed call and leaves the rounds
    assert t.log == ["a", "b", "c"] + ["a", "b", "c"] * 2 + ["a", "b"] * 2
    assert a.repeats == b.repeats == 4 and a.median == pytest.approx(0.010) and b.median == pytest.approx(0.020)
    assert isinstance(c, RuntimeError) and str(c) == "c broke"


def test_profile_interleaved_stops_each_callable_on_its_own():
    t = Turns()
    slow, fast = t.workload("slow", 100), t.workload("fast", 1)
    s, f = profiler.profile_interleaved([slow, fast], "cpu", warmup=0, repeats=50, budget_s=0.25, clock=t.clock)
    assert s.repeats == 3 and f.repeats == 50  # slow: its budget spent after 3 calls; fast: its repeats
    assert t.log[:6] == ["slow", "fast"] * 3 and t.log[6:] == ["fast"] * 47
    # a first warm-up call that takes the whole budget: no more warm-up for that one (as in profile)
    t = Turns()
    profiler.profile_interleaved([t.workload("huge", 2000), t.workload("tiny", 1)], "cpu", warmup=3, repeats=2,
                                 budget_s=1.0, clock=t.clock)
    assert t.log == ["huge", "tiny", "tiny", "tiny", "huge", "tiny", "tiny"]
    with pytest.raises(ValueError, match="profile_interleaved: expected repeats >= 1"):
        profiler.profile_interleaved([t.workload("x", 1)], repeats=0)


def test_report_summary_takes_the_fastest_provider_that_passed(tmp_path):
    def row(op, provider, ms, status="ok", spread=0.0, dtype="bfloat16"):
        r = runner.Result(op, "8x64", dtype, "cpu", "fwd", provider, status=status, ms=ms,
                          p20_ms=ms * (1 - spread), p80_ms=ms * (1 + spread))
        r.roofline, r.roofline_pct, r.same_size_copy_pct = "copy", 50.0, 80.0
        return r
    rows = [row("gelu", "yirage", 0.010), row("gelu", "torch", 0.020), row("gelu", "compile", 0.005, "fail"),
            row("gelu", "liger", math.nan, "skip"), row("gelu", "triton", 0.016, spread=0.2),
            row("softmax", "yirage", 0.010),  # no other provider ran: no line
            row("rms_norm", "yirage", 0.010, "fail"), row("rms_norm", "torch", 0.020),  # ours failed: no line
            row("gelu", "yirage", 0.030, dtype="float32"), row("gelu", "torch", 0.015, dtype="float32")]
    assert report.summary(rows) == [
        ["gelu", "8x64", "bfloat16", "10.0 us", "50% copy", "80%", "triton 16.0 us", "1.60x noisy"],
        ["gelu", "8x64", "float32", "30.0 us", "50% copy", "80%", "torch 15.0 us", "0.50x"]]
    env = dict(device="cpu", date="d", device_name="n", torch="t", yirage_ext="y", library="l", cpu_variant="c",
               python="p", argv="a")
    report.write_markdown(rows, str(tmp_path / "r.md"), env)
    md = (tmp_path / "r.md").read_text().splitlines()
    at = md.index("## Ours against the fastest other provider")
    assert md[at + 4] == "| " + " | ".join(report.SUMMARY_COLUMNS) + " |"
    assert md[at + 6:] == ["| gelu | 8x64 | bfloat16 | 10.0 us | 50% copy | 80% | triton 16.0 us | 1.60x noisy |",
                           "| gelu | 8x64 | float32 | 30.0 us | 50% copy | 80% | torch 15.0 us | 0.50x |"]
    report.write_markdown(rows[5:6], str(tmp_path / "alone.md"), env)  # nothing to compare: no section
    assert "fastest other" not in (tmp_path / "alone.md").read_text()


def test_rooflines_are_measured_once():
    roof = profiler.Rooflines("cpu", budget_s=0.02)
    bw = roof.copy_bandwidth()
    assert bw > 1e8 and roof.copy_bandwidth() == bw
    # a copy of a row's own size, once per size; from the roof's size up, the roof itself (nothing allocated)
    same = roof.same_size_copy(3 << 20, budget_s=0.01)
    assert same > 1e8 and roof.same_size_copy(3 << 20) == same and list(roof._same) == [3 << 19]
    assert roof.same_size_copy(1 << 40) == bw and len(roof._same) == 1
    rate, what = roof.gemm_rate(torch.float32)
    assert rate > 1e8 and "torch.matmul" in what and roof.gemm_rate(torch.float32) == (rate, what)
    # a half type's roof is at least the fp32 one (its products can run as fp32 ones), and says which it is
    rate16, what16 = roof.gemm_rate(torch.float16)
    assert rate16 >= rate and ("float16" in what16 if rate16 > rate else what16 == f"{what} (faster than float16 here)")


# ---- providers and the runner ----

@pytest.fixture
def scratch_provider():
    added = []

    def add(provider):
        added.append(bench.register(provider))
        return provider
    yield add
    for p in added:
        PROVIDERS.pop(p.name, None)


def test_availability_reasons(monkeypatch):
    f32 = torch.float32
    assert unavailable(PROVIDERS["yirage"], "rms_norm", "cpu", f32, False) is None
    assert unavailable(PROVIDERS["torch"], "attention", "cpu", f32, True) is None
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert "TRITON_INTERPRET=1" in unavailable(PROVIDERS["triton"], "rms_norm", "cpu", f32, False) \
        or "not installed" in unavailable(PROVIDERS["triton"], "rms_norm", "cpu", f32, False)
    for name in ("flash", "cudnn", "efficient"):
        assert unavailable(PROVIDERS[name], "attention", "cpu", f32, False) == "needs a CUDA device (running on cpu)"
    liger = unavailable(PROVIDERS["liger"], "rms_norm", "cpu", f32, False)
    assert liger.startswith("not installed") or liger.startswith("needs a CUDA device")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    if unavailable(PROVIDERS["triton"], "rms_norm", "cpu", f32, False) is None:  # triton installed
        assert unavailable(PROVIDERS["triton"], "layer_norm", "cpu", f32, False) == "no triton implementation of layer_norm"
        assert unavailable(PROVIDERS["triton"], "rms_norm", "cpu", torch.float64, False).startswith("float64 not supported")
        assert unavailable(PROVIDERS["triton"], "rms_norm", "cpu", f32, True) == "forward only (no gradients)"


@pytest.mark.skipif(torch._C._dispatch_has_kernel_for_dispatch_key("yirage::rms_norm", "CUDA"),
                    reason="this build has CUDA kernels")
def test_yirage_without_cuda_kernels_says_so():
    why = unavailable(PROVIDERS["yirage"], "softmax", "cuda", torch.float32, False)
    assert why == "no CUDA kernel registered for yirage::softmax"


def test_adding_a_provider_and_broken_providers_become_rows(scratch_provider):
    scratch_provider(Provider("ref32", "the reference rounded to fp32", lambda d: None,
                              {"rms_norm": lambda s: lambda x, w, eps: s.reference(x, w, eps).to(x.dtype)}))
    scratch_provider(Provider("off", "a wrong result", lambda d: None,
                              {"rms_norm": lambda s: lambda x, w, eps: s.eager(x, w, eps) * 1.01}))
    scratch_provider(Provider("raises", "raises", lambda d: None,
                              {"rms_norm": lambda s: lambda x, w, eps: (_ for _ in ()).throw(RuntimeError("boom\nmore"))}))
    scratch_provider(Provider("moves", "returns a tensor on another device", lambda d: None,
                              {"rms_norm": lambda s: lambda x, w, eps: s.eager(x, w, eps).to("meta")}))
    scratch_provider(Provider("nodevice", "cannot run here", lambda d: "needs a frobnicator", {"rms_norm": None}))

    def unsupported(x, w, eps):
        raise bench.Unsupported("no kernel for 40 columns")
    scratch_provider(Provider("nokernel", "finds out when it runs", lambda d: None, {"rms_norm": lambda s: unsupported}))
    rows = api.run(ops=["rms_norm"], device="cpu", dtypes=["float32"], shapes=["6x40"],
                   providers=["torch", "ref32", "off", "raises", "moves", "nodevice", "nokernel", "yirage"], **FAST)
    by = {r.provider: r for r in rows}
    assert [r.provider for r in rows] == ["torch", "ref32", "off", "raises", "moves", "nodevice", "nokernel", "yirage"]
    assert by["ref32"].status == "ok" and by["ref32"].ms > 0 and by["ref32"].speedup_vs_torch > 0
    assert by["off"].status == "fail" and by["off"].frac_outside > 0.5 and by["off"].failed
    assert by["raises"].status == "error" and by["raises"].reason == "RuntimeError: boom"
    assert by["moves"].status == "fail" and by["moves"].reason == "FAIL (output on meta, expected cpu)"
    assert by["nodevice"].status == "skip" and by["nodevice"].reason == "needs a frobnicator"
    assert not by["nodevice"].failed and by["yirage"].status == "ok"
    assert by["nokernel"].status == "skip" and by["nokernel"].reason == "no kernel for 40 columns"


def test_interleaved_rows_match_the_sequential_ones(scratch_provider):
    scratch_provider(Provider("ref32", "the reference rounded to fp32", lambda d: None,
                              {"rms_norm": lambda s: lambda x, w, eps: s.reference(x, w, eps).to(x.dtype)}))
    scratch_provider(Provider("raises", "raises", lambda d: None,
                              {"rms_norm": lambda s: lambda x, w, eps: (_ for _ in ()).throw(RuntimeError("boom"))}))
    scratch_provider(Provider("nodevice", "cannot run here", lambda d: "needs a frobnicator", {"rms_norm": None}))
    calls = []

    def checked_once(spec):  # right on the checked call, then raises while timed
        def fn(x, w, eps):
            calls.append(1)
            if len(calls) > 1:
                raise RuntimeError("timing broke")
            return spec.eager(x, w, eps)
        return fn
    scratch_provider(Provider("once", "raises after its first call", lambda d: None, {"rms_norm": checked_once}))
    names = ["torch", "ref32", "raises", "nodevice", "once", "yirage"]
    kw = dict(ops=["rms_norm"], device="cpu", dtypes=["float32"], shapes=["6x40"], providers=names, **FAST)
    seq = api.run(**kw)
    calls.clear()
    done = []
    rows = api.run(**kw, interleave=True, progress=lambda i, total, row: done.append((i, total, row.provider)))
    assert [r.provider for r in rows] == names and done == [(i + 1, 6, n) for i, n in enumerate(names)]
    for r, q in zip(rows, seq):
        assert (r.status, r.reason, r.max_rel, r.verdict) == (q.status, q.reason, q.max_rel, q.verdict), r.provider
    by = {r.provider: r for r in rows}
    assert by["once"].status == "error" and by["once"].reason == "RuntimeError while timing: timing broke"
    for name in ("torch", "ref32", "yirage"):
        assert by[name].status == "ok" and by[name].ms > 0 and by[name].repeats >= 1 and by[name].gbps > 0
        assert by[name].roofline == "copy" and by[name].speedup_vs_torch > 0
    assert by["raises"].reason == "RuntimeError: boom" and by["nodevice"].status == "skip"
    fb = api.run(ops=["softmax"], device="cpu", dtypes=["float32"], shapes=["4x16"], providers=["yirage", "torch"],
                 backward=True, interleave=True, **FAST)
    assert [r.status for r in fb] == ["ok", "ok"] and {r.mode for r in fb} == {"fwd+bwd"}


def test_every_op_yirage_and_torch_forward_and_backward():
    assert set(SMALL) == set(OPS), "give every op of yirage_ext.bench.cases.OPS a small shape here"
    shapes = [f"{op}:{s}" for op, s in SMALL.items()]
    rows = api.run(device="cpu", dtypes=["float32", "bfloat16"], providers=["yirage", "torch"], shapes=shapes, **FAST)
    assert len(rows) == len(OPS) * 2 * 2
    assert [r for r in rows if r.status != "ok"] == []
    assert all(r.max_ulp is not None for r in rows if r.dtype == "bfloat16")
    assert all((r.tflops == r.tflops) == (r.op in ("matmul", "linear", "attention")) for r in rows)
    # matmul and linear at these few rows (<= 64) are rated by bandwidth, like every memory-bound op
    assert all(r.roofline == ("gemm" if r.op == "attention" else "copy") for r in rows)
    assert all((r.same_size_copy_pct > 0) == (r.roofline == "copy") for r in rows)  # nan for the gemm rows
    rows = api.run(device="cpu", dtypes=["float32"], providers=["yirage", "torch"], shapes=shapes, backward=True, **FAST)
    assert [r for r in rows if r.status != "ok"] == [] and {r.mode for r in rows} == {"fwd+bwd"}


def test_backward_catches_a_wrong_gradient(scratch_provider):
    def wrong_grad(spec):  # the right forward, half the gradient
        def fn(x, dim):
            y = torch.softmax(x, dim)
            return y.detach() + (y - y.detach()) * 0.5
        return fn
    scratch_provider(Provider("halfgrad", "half the gradient", lambda d: None, {"softmax": wrong_grad}))
    fwd, = api.run(ops=["softmax"], device="cpu", dtypes=["float32"], shapes=["4x16"], providers=["halfgrad"], **FAST)
    bwd, = api.run(ops=["softmax"], device="cpu", dtypes=["float32"], shapes=["4x16"], providers=["halfgrad"],
                   backward=True, **FAST)
    assert fwd.status == "ok" and bwd.status == "fail" and bwd.reason.startswith("FAIL (grad of argument 0: ")


def test_tolerances_come_from_the_reference_module():
    row, = api.run(ops=["softmax"], device="cpu", dtypes=["bfloat16"], shapes=["3x8"], providers=["torch"], **FAST)
    assert (row.atol, row.rtol) == TOLERANCES[torch.bfloat16]


@pytest.mark.slow
def test_compile_provider():
    row, = api.run(ops=["silu_and_mul"], device="cpu", dtypes=["float32"], shapes=["8x64"], providers=["compile"],
                   **FAST)
    assert row.status == "ok", row.reason


@pytest.mark.parametrize("kwargs, message", [
    (dict(ops=["rms_norm", "nope"]), "--ops: expected one of rms_norm, "),
    (dict(providers=["yirage", "nope"]), "--providers: expected one of yirage, "),
    (dict(dtypes=["float8"]), "--dtype: expected one of float32, float16, bfloat16, float64, got 'float8'"),
    (dict(device="gpu"), "--device: expected a torch device such as cpu or cuda, got 'gpu'"),
    (dict(ops=["rms_norm"], shapes=["4096"]), "--shapes: rms_norm expects ROWSxHIDDEN (positive integers), got '4096'"),
    (dict(ops=["silu_and_mul"], shapes=["4x5"]), "--shapes: silu_and_mul expects ROWSxHIDDEN with an even HIDDEN"),
    (dict(device="cpu", tf32=True), "--tf32: TF32 tensor cores are a CUDA setting, expected a cuda device, got 'cpu'"),
    (dict(device="cpu", cuda_graph=True), "--cuda-graph: CUDA graph replays need a cuda device, got 'cpu'"),
])
def test_run_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError) as e:
        api.run(**kwargs)
    assert message in str(e.value)


@pytest.mark.parametrize("op,few,many", [("linear", "64x40x24", "65x40x24"), ("matmul", "2x32x40x24", "2x33x40x24")])
def test_gemm_decode_rows_rated_by_bandwidth(op, few, many):
    # at most 64 rows of the left operand: GB/s against the copy bandwidth (the FLOP/s stay in the CSV)
    rows = api.run(ops=[op], device="cpu", dtypes=["float32"], providers=["torch"], shapes=[few, many], **FAST)
    assert [r for r in rows if r.status != "ok"] == [] and [r.shape for r in rows] == [few, many]
    assert rows[0].roofline == "copy" and rows[0].gbps > 0 and rows[0].tflops > 0
    assert rows[1].roofline == "gemm" and rows[1].tflops > 0


# ---- attention: -full / -causal shapes, decode rows rated by bandwidth, the blockwise reference ----

def test_attention_variants_and_decode_rows():
    spec = OPS["attention"]
    assert spec.parse_shape("4x32x4096x128-full") == spec.parse_shape("4x32x4096x128-causal") == (4, 32, 4096, 128)
    assert spec.case("1x2x1x5x9x8-full", torch.float32, "cpu").args[3] is False
    assert spec.case("1x2x1x5x9x8-causal", torch.float32, "cpu").args[3] is True
    assert spec.case("1x2x1x5x9x8", torch.float32, "cpu").args[3] is True  # no suffix: causal, as before
    with pytest.raises(ValueError, match=r"--shapes: attention expects BxHxSxD or BxHqxHkxSqxSkxD with a suffix "
                                         r"-causal or -full, got '1x2x5x8-sideways'"):
        spec.parse_shape("1x2x5x8-sideways")
    with pytest.raises(ValueError, match=r"rms_norm expects ROWSxHIDDEN with no suffix, got '4x8-full'"):
        OPS["rms_norm"].parse_shape("4x8-full")
    rows = api.run(ops=["attention"], device="cpu", dtypes=["float32"], providers=["yirage", "torch"],
                   shapes=["1x2x1x5x9x8-full", "1x2x1x5x9x8-causal", "2x8x2x1x300x16-full"], **FAST)
    assert [r for r in rows if r.status != "ok"] == []
    assert [r.shape for r in rows[::2]] == ["1x2x1x5x9x8-full", "1x2x1x5x9x8-causal", "2x8x2x1x300x16-full"]
    prefill, decode = rows[:4], rows[4:]
    assert all(r.roofline == "gemm" and r.tflops > 0 for r in prefill)
    # decode: GB/s against the copy bandwidth (the FLOP/s stay in the CSV)
    assert all(r.roofline == "copy" and r.gbps > 0 and r.tflops > 0 for r in decode)
    from yirage_ext.bench.report import cells
    assert "GB/s" in cells(decode[0])[6] and "% copy" in cells(decode[0])[7]
    assert "FLOP/s" in cells(prefill[0])[6] and "% gemm" in cells(prefill[0])[7]
    full, causal = prefill[0], prefill[2]
    assert full.gbps == full.gbps and causal.tflops == causal.tflops


@pytest.mark.parametrize("shape, causal", [((2, 4, 2, 37, 20, 8), True), ((1, 4, 2, 20, 37, 8), True),
                                           ((1, 2, 1, 33, 33, 16), False), ((2, 4, 4, 1, 50, 8), True)])
def test_attention_blockwise_reference(shape, causal):
    from yirage_ext.testing.inputs import attention_inputs
    from yirage_ext.testing.reference import (attention_lse_ref, attention_lse_ref_chunked, attention_ref,
                                              attention_ref_chunked)
    inp = attention_inputs(*shape, dtype=torch.float64, seed=1)
    q, k, v = (t.clone().requires_grad_() for t in (inp.q, inp.k, inp.v))
    want = attention_ref(q, k, v, causal)
    got = attention_ref_chunked(q, k, v, causal, max_elements=100)  # many blocks of a few query rows
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)
    g = torch.randn_like(want)
    for a, b in zip(torch.autograd.grad(got, (q, k, v), g), torch.autograd.grad(want, (q, k, v), g)):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(attention_lse_ref_chunked(q, k, causal, max_elements=100),
                               attention_lse_ref(q, k, causal))
    assert OPS["attention"].reference is not attention_ref  # the bench uses the blockwise one


def test_tf32_applies_to_cuda_float32_gemm_rows_only():
    cases = {name: OPS[name].case(shape, torch.float32, "cpu", 0)
             for name, shape in (("matmul", "8x8x8"), ("rms_norm", "4x8"))}
    on_cuda = {name: dataclasses.replace(c, device="cuda") for name, c in cases.items()}  # only the name is read
    before = torch.backends.cuda.matmul.allow_tf32  # (a settable property: monkeypatch cannot undo it)
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        assert runner.tf32_applies(OPS["matmul"], on_cuda["matmul"])
        assert not runner.tf32_applies(OPS["rms_norm"], on_cuda["rms_norm"])  # no products
        assert not runner.tf32_applies(OPS["matmul"], cases["matmul"])  # CPU
        assert not runner.tf32_applies(OPS["matmul"], dataclasses.replace(on_cuda["matmul"], dtype=torch.bfloat16))
        torch.backends.cuda.matmul.allow_tf32 = False
        assert not runner.tf32_applies(OPS["matmul"], on_cuda["matmul"])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_tf32_rows_are_checked_with_the_tf32_tolerance(monkeypatch):
    spec = OPS["matmul"]
    case = spec.case("16x64x8", torch.float32, "cpu", 0)
    ref = spec.reference(*case.args)
    ref = ref if isinstance(ref, tuple) else (ref,)
    off = tuple(r.float() + 3e-3 for r in ref)  # a TF32-sized error: outside fp32's tolerance, inside TF32's
    assert not runner._check(spec, case, off, None, ref, None).passed
    monkeypatch.setattr(runner, "tf32_applies", lambda spec, case: True)
    acc = runner._check(spec, case, off, None, ref, None)
    assert acc.passed and acc.atol == acc.rtol == TF32_TOL
    far = tuple(r.float() + 5 * TF32_TOL for r in ref)
    assert not runner._check(spec, case, far, None, ref, None).passed


def test_noisy_rows_are_marked():
    r = runner.Result("rms_norm", "4x8", "float32", "cpu", "fwd", "torch", status="ok", ms=1.0, p20_ms=0.96,
                      p80_ms=1.04)
    assert "noisy" not in report.cells(r)[5]
    r.p80_ms = 1.2
    assert report.cells(r)[5].endswith(" noisy")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_tf32_run_on_cuda_passes_and_restores_the_setting():
    before = torch.backends.cuda.matmul.allow_tf32
    rows = api.run(ops=["matmul", "linear"], device="cuda", dtypes=["float32"], providers=["yirage", "torch"],
                   shapes=["1024x1024x1024"], warmup=1, repeats=3, tf32=True)
    assert torch.backends.cuda.matmul.allow_tf32 == before
    assert rows and all(r.status == "ok" and r.atol == TF32_TOL for r in rows), [(r.provider, r.reason) for r in rows]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graphed_replay_recomputes_from_the_captured_inputs():
    x = torch.randn(1000, device="cuda")
    out = torch.empty_like(x)
    replay = runner.graphed(lambda: torch.mul(x, 2, out=out), "cuda")
    x.copy_(torch.arange(1000, dtype=torch.float32, device="cuda"))
    out.zero_()
    replay()
    torch.cuda.synchronize()
    assert torch.equal(out, 2 * torch.arange(1000, dtype=torch.float32, device="cuda"))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_latency_rows_on_cuda():
    rows = api.run(ops=["rms_norm"], device="cuda", dtypes=["bfloat16"], providers=["yirage", "torch"],
                   shapes=["8x4096"], warmup=2, repeats=5, latency=True)
    assert [r.provider for r in rows] == ["yirage", "torch"]
    assert all(r.status == "ok" and r.ms > 0 and r.gbps > 0 for r in rows), [(r.provider, r.reason) for r in rows]
    assert all(r.roofline == "" and math.isnan(r.same_size_copy_pct) for r in rows)  # the roofs are event-timed


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_rows_time_replays_and_report_capture_failures(scratch_provider):
    rows = api.run(ops=["rms_norm", "softmax"], device="cuda", dtypes=["bfloat16"], providers=["yirage", "torch"],
                   shapes=["rms_norm:64x1024", "softmax:64x1024"], backward=True, warmup=1, repeats=3,
                   cuda_graph=True)
    assert len(rows) == 4 and all(r.status == "ok" and r.ms > 0 for r in rows), [(r.provider, r.reason) for r in rows]

    # a host synchronization inside the call (.item()): right results, but it cannot be captured
    scratch_provider(Provider("syncs", "synchronizes with the host", lambda d: None,
                              {"rms_norm": lambda s: lambda x, w, eps: s.eager(x, w, eps) * (w.sum() / w.sum()).item()}))
    rows = api.run(ops=["rms_norm"], device="cuda", dtypes=["float32"], providers=["syncs"],
                   shapes=["64x1024"], warmup=1, repeats=3, cuda_graph=True)
    assert rows[0].status == "error" and "while capturing a CUDA graph" in rows[0].reason, rows[0].reason
