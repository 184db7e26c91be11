"""How `import yirage_ext` loads the native library: prebuilt `_C` or a locked, cached JIT build.

Everything that loads a library runs in a subprocess (a process registers the ops once, for good) from
a neutral working directory (so the checkout's `yirage_ext/` does not shadow the installed package),
with a temporary JIT cache directory. The package under test is the installed one, or a temporary copy
of it put first on PYTHONPATH where a test needs to change something (no `_C`, a build record for
another torch, a changed source).

Cold JIT builds are expensive (minutes for the whole library on a small machine), so the file does one
of the full package: a concurrent cold build shared by the module (`cold_cache`), reused by the
cached-import, mismatch, no-`_C` and second-copy tests. The rebuild and killed-build tests are about
the loader (cache keys, locks), not the kernels, so they build a slim copy of the package whose
sources are rms_norm's alone (`_slim_package`): three small builds instead of three more full ones.
Cached imports reuse the shared cache and compile nothing.
"""
from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A hang (a lock nobody releases) must fail the test, not stall CI; a cold build of a few translation
# units takes well under this even on a slow, shared two-core machine.
BUILD_TIMEOUT_S = 420
QUICK_TIMEOUT_S = 120
CACHED_IMPORT_LIMIT_S = 1.0
ATOL = 1e-4  # float32 kernel vs float64 reference, values of order 10

# Imports torch, then yirage_ext (timed separately), checks both ops against float64 torch and prints
# one line `RESULT {json}`. argv[1]: the package to import (default yirage_ext).
PROBE = textwrap.dedent(
    """
    import importlib, json, os, sys, time
    t0 = time.perf_counter()
    import torch
    t1 = time.perf_counter()
    pkg = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "yirage_ext")
    t2 = time.perf_counter()
    info = pkg.load_info()
    torch.manual_seed(0)
    x, r, w, eps = torch.randn(5, 131), torch.randn(5, 131), torch.randn(131), 1e-6

    def ref(h):
        h = h.double()
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.double()

    y = torch.ops.yirage.rms_norm(x, w, eps)
    out, h = torch.ops.yirage.fused_add_rms_norm(x, r, w, eps)
    err = max((y.double() - ref(x)).abs().max().item(), (out.double() - ref(x + r)).abs().max().item(),
              (h - (x + r)).abs().max().item())
    mapped = set()
    if os.path.exists("/proc/self/maps"):
        with open("/proc/self/maps") as f:
            mapped = {line.split()[-1] for line in f if line.rstrip().endswith(".so")}
    print("RESULT " + json.dumps(dict(
        kind=info.kind, path=info.path, reason=info.reason, build_dir=info.build_dir, key=info.key,
        build_seconds=info.build_seconds, package=os.path.dirname(os.path.abspath(pkg.__file__)),
        import_s=t2 - t1, torch_import_s=t1 - t0, max_err=err, c_imported="yirage_ext._C" in sys.modules,
        mapped=sorted(p for p in mapped if "yirage" in p))))
    """
)


# ----------------------------------------------------------------------------------------- helpers


def _env(**overrides) -> dict:
    """The test environment without any yirage_ext setting or PYTHONPATH, plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("YIRAGE_EXT_") and k != "PYTHONPATH"}
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def _session_members(sid: int) -> dict[int, str]:
    """{pid: name} of the live processes of session `sid` (Linux /proc; {} elsewhere)."""
    members = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                data = f.read()
        except OSError:
            continue
        name, fields = data[data.index("(") + 1: data.rindex(")")], data[data.rindex(")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != "Z":
            members[int(os.path.basename(os.path.dirname(stat)))] = name
    return members


def _kill_session(sid: int) -> None:
    """Kills what a command started in its own session (start_new_session=True): its process group and,
    because ninja puts every compiler into a process group of its own, each process of the session."""
    for kill, target in [(os.killpg, sid)] + [(os.kill, pid) for pid in _session_members(sid)]:
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _run(args, *, cwd, env, timeout, what):
    """Runs a command in its own session; on timeout kills the whole group (compilers included) and
    fails. Returns (returncode, stdout, stderr)."""
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"{what}: no result after {timeout} s (hang?)\nstderr:\n{err[-3000:]}")
    finally:
        _kill_session(proc.pid)  # nothing may outlive the command
    return proc.returncode, out, err


def _result(rc: int, out: str, err: str, what: str) -> dict:
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if rc != 0 or not lines:
        pytest.fail(f"{what}: exit status {rc}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _probe(cwd, env, what, timeout=QUICK_TIMEOUT_S, package="yirage_ext"):
    """Runs PROBE; returns (result dict, stderr)."""
    rc, out, err = _run([sys.executable, "-c", PROBE, package], cwd=cwd, env=env, timeout=timeout, what=what)
    return _result(rc, out, err, what), err


def _compiled(stderr: str) -> int:
    return stderr.count("yirage_ext: compiled in")


def _under(path: str, root: str) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(root) + os.sep)


def _copy_package(src: str, site: str, name: str = "yirage_ext", keep_c: bool = True) -> str:
    """A copy of the installed package at site/name (optionally without its prebuilt _C)."""
    dst = os.path.join(site, name)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    if not keep_c:
        for p in glob.glob(os.path.join(dst, "_C*")):
            os.remove(p)
    return dst


# The sources a slim package keeps (relative to _csrc): the schema table, the Python module, and the
# rms_norm family that PROBE checks, the backend registry the module binds and the CPU output cache both use.
# Headers all stay; other translation units are removed.
SLIM_SOURCES = {"library.cpp", "python/module.cpp", "kernels/cpu/isa.cpp", "kernels/cpu/rms_norm.cpp",
                "cpu/rms_norm.cpp", "meta/rms_norm.cpp", "autograd/rms_norm.cpp", "portable/rms_norm.cpp",
                "backend/registry.cpp", "backend/op_support.cpp", "backend/probes_device.cpp",
                "backend/probes_library.cpp", "common/cpu_memory.cpp", "kernels/cpu/sgemm.cpp",
                "cpu/attention_engine.cpp"}


def _slim_package(src: str, site: str) -> str:
    """A copy of the installed package without _C and with only SLIM_SOURCES compiled by the JIT."""
    dst = _copy_package(src, site, keep_c=False)
    csrc = os.path.join(dst, "_csrc")
    kept = set()
    for dirpath, _, files in os.walk(csrc):
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), csrc).replace(os.sep, "/")
            if f.endswith((".cpp", ".cu", ".mm")):
                if rel in SLIM_SOURCES:
                    kept.add(rel)
                else:
                    os.remove(os.path.join(dirpath, f))
    assert kept == SLIM_SOURCES, f"slim package: sources missing from the package: {SLIM_SOURCES - kept}"
    return dst


SOURCE_SUFFIXES = (".cpp", ".cu", ".h", ".cuh", ".mm", ".hpp")


def _stale_sources(pkg: str) -> list[str]:
    """The source files (relative paths) where the installed package's _csrc differs from this checkout's csrc:
    missing on either side or with other contents. Empty when the tests do not run from a checkout."""
    repo = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")
    if not os.path.isdir(repo):
        return []

    def tree(root: str) -> dict[str, str]:
        files = {}
        for dirpath, _, names in os.walk(root):
            for name in names:
                if name.endswith(SOURCE_SUFFIXES):
                    path = os.path.join(dirpath, name)
                    files[os.path.relpath(path, root).replace(os.sep, "/")] = path
        return files

    ours, theirs = tree(repo), tree(os.path.join(pkg, "_csrc"))
    stale = sorted(set(ours) ^ set(theirs))
    for rel in sorted(set(ours) & set(theirs)):
        with open(ours[rel], "rb") as a, open(theirs[rel], "rb") as b:
            if a.read() != b.read():
                stale.append(rel)
    return stale


@pytest.fixture(scope="module")
def installed_pkg(tmp_path_factory) -> str:
    """Directory of the installed yirage_ext (found from a neutral cwd, without importing it). These tests build and
    load the installed package: one built from other sources than this checkout's fails them here, with the files
    that differ, rather than later in a build of stale sources."""
    cwd = tmp_path_factory.mktemp("cwd")
    rc, out, err = _run([sys.executable, "-c", "import importlib.util as u; s = u.find_spec('yirage_ext'); "
                         "print(s.origin if s else '')"], cwd=cwd, env=_env(), timeout=60, what="find yirage_ext")
    origin = out.strip()
    if rc != 0 or not origin:
        pytest.skip(f"yirage_ext is not installed in this environment (make install): {err[-500:]}")
    pkg = os.path.dirname(origin)
    if not os.path.isdir(os.path.join(pkg, "_csrc")):
        pytest.skip(f"{pkg} is not an installed yirage_ext (no packaged _csrc sources)")
    stale = _stale_sources(pkg)
    if stale:
        pytest.fail(f"the installed yirage_ext ({pkg}) was built from other sources than this checkout: "
                    f"{len(stale)} files differ ({', '.join(stale[:4])}{', ...' if len(stale) > 4 else ''}); "
                    f"install the checkout first (make install; make test does it)", pytrace=False)
    return pkg


@pytest.fixture
def neutral_cwd(tmp_path) -> str:
    d = tmp_path / "cwd"
    d.mkdir()
    return str(d)


@pytest.fixture(scope="module")
def cold_cache(installed_pkg, tmp_path_factory):
    """The module's one shared cold build: two concurrent forced-JIT imports of the installed package
    into an empty cache directory. Returns the cache dir and both (result, stderr)."""
    cache = str(tmp_path_factory.mktemp("jit-cache"))
    cwd = str(tmp_path_factory.mktemp("cwd"))
    env = _env(YIRAGE_EXT_FORCE_JIT=1, YIRAGE_EXT_BUILD_DIR=cache)
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", PROBE], cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True) for _ in range(2)]
    runs = []
    try:
        for i, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=max(1.0, BUILD_TIMEOUT_S - (time.perf_counter() - t0)))
            except subprocess.TimeoutExpired:
                pytest.fail(f"concurrent cold import {i}: no result after {BUILD_TIMEOUT_S} s (hang?)")
            runs.append((_result(p.returncode, out, err, f"concurrent cold import {i}"), err))
    finally:
        for p in procs:
            _kill_session(p.pid)
    return dict(cache=cache, runs=runs, wall_s=time.perf_counter() - t0)


# ---------------------------------------------------------- prebuilt_problem (in-process, cheap)


class TestPrebuiltProblem:
    @pytest.fixture(autouse=True)
    def _no_force(self, monkeypatch):
        monkeypatch.delenv("YIRAGE_EXT_FORCE_JIT", raising=False)

    @staticmethod
    def _fake_c(d) -> None:
        (d / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")  # never loaded: decided before

    def test_missing_library(self, tmp_path):
        from yirage_ext._loader import prebuilt_problem

        assert prebuilt_problem(str(tmp_path)) == f"no prebuilt _C in {tmp_path}"

    def test_missing_record(self, tmp_path):
        from yirage_ext._loader import prebuilt_problem

        self._fake_c(tmp_path)
        assert "no readable build record" in prebuilt_problem(str(tmp_path))

    @pytest.mark.parametrize("text", ["{not json", "", "[1, 2]", "null"])
    def test_unreadable_record(self, tmp_path, text):
        from yirage_ext._loader import prebuilt_problem

        self._fake_c(tmp_path)
        (tmp_path / "_C.build.json").write_text(text)
        assert "no readable build record" in prebuilt_problem(str(tmp_path))

    def test_mismatch(self, tmp_path):
        from yirage_ext import _build_config
        from yirage_ext._loader import prebuilt_problem

        self._fake_c(tmp_path)
        record = dict(_build_config.torch_identity(), torch="1.0.0+other", with_cuda=False)
        (tmp_path / "_C.build.json").write_text(json.dumps(record))
        why = prebuilt_problem(str(tmp_path))
        assert why.startswith("the prebuilt _C was built for another torch: torch '1.0.0+other' (installed: ")
        assert "python" not in why  # only the fields that differ are named

    def test_match_and_force(self, tmp_path, monkeypatch):
        from yirage_ext import _build_config
        from yirage_ext._loader import prebuilt_problem

        self._fake_c(tmp_path)
        (tmp_path / "_C.build.json").write_text(json.dumps(dict(_build_config.torch_identity(), extra=1)))
        assert prebuilt_problem(str(tmp_path)) is None
        monkeypatch.setenv("YIRAGE_EXT_FORCE_JIT", "1")
        assert prebuilt_problem(str(tmp_path)) == "YIRAGE_EXT_FORCE_JIT=1"


# ------------------------------------------------------------------ the shared cold JIT build


@pytest.mark.slow
def test_concurrent_cold_imports_build_once(cold_cache):
    """Two cold imports at once both succeed; exactly one compiles, the other waits on the lock."""
    (a, err_a), (b, err_b) = cold_cache["runs"]
    both = err_a + err_b
    assert _compiled(both) == 1, f"expected exactly one build across both imports; stderr:\n{both}"
    assert both.count("yirage_ext: compiling") == 1, both
    builder, waiter = (a, b) if a["build_seconds"] is not None else (b, a)
    assert builder["build_seconds"] is not None and waiter["build_seconds"] is None
    assert "waiting for another process" in (err_b if builder is a else err_a), both
    assert a["path"] == b["path"] and a["key"] == b["key"] and os.path.exists(a["path"])
    assert [os.path.basename(p) for p in os.listdir(cold_cache["cache"]) if ".tmp-" in p] == []
    print(f"cold concurrent build: {builder['build_seconds']:.1f} s build, {cold_cache['wall_s']:.1f} s wall")


# Mangled-name prefixes of symbols that only the C++ runtime itself defines (std::locale, std::ios_base::Init,
# the UTF-8 codecvt facets): a library that exports them carries its own copy of libstdc++, whose iostream
# and locale code then mixes with torch's copy (a crash whenever an error message formats an integer).
CXX_RUNTIME_PREFIXES = ("_ZNSt6locale", "_ZNKSt6locale", "_ZNSt8ios_base4Init", "_ZNKSt19__codecvt_utf8_base")


def _exported_cxx_runtime(path: str) -> list[str]:
    nm = shutil.which("nm")
    if nm is None or not sys.platform.startswith("linux"):
        pytest.skip("needs nm (binutils) on Linux")
    out = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.split()]
    return [n for n in names if n.startswith(CXX_RUNTIME_PREFIXES)]


@pytest.mark.slow
def test_libraries_export_no_cxx_runtime(cold_cache, installed_pkg):
    """Neither the JIT build nor the prebuilt _C exports libstdc++'s own symbols, whatever the compiler
    links statically (the linker keeps archive members private: _build_config.ld_flags)."""
    paths = [cold_cache["runs"][0][0]["path"]] + glob.glob(os.path.join(installed_pkg, "_C*.so"))
    for path in paths:
        leaked = _exported_cxx_runtime(path)
        assert leaked == [], f"{path} exports {len(leaked)} C++ runtime symbols, e.g. {leaked[:3]}"


@pytest.mark.slow
def test_forced_jit_correct(cold_cache, installed_pkg):
    """YIRAGE_EXT_FORCE_JIT=1 with the installed package: JIT from its packaged sources, right values."""
    for res, _ in cold_cache["runs"]:
        assert res["kind"] == "jit" and res["reason"] == "YIRAGE_EXT_FORCE_JIT=1"
        assert _under(res["path"], cold_cache["cache"]) and _under(res["build_dir"], cold_cache["cache"])
        assert res["package"] == os.path.realpath(installed_pkg)
        assert not res["c_imported"] and not any("/_C." in p for p in res["mapped"]), res["mapped"]
        assert res["max_err"] < ATOL, res


@pytest.mark.slow
def test_package_without_c_uses_jit(cold_cache, installed_pkg, tmp_path, neutral_cwd):
    """A copy of the package without _C (no FORCE_JIT) takes the JIT path: the cache is keyed on the
    sources' content, not their location, so it reuses the shared build."""
    site = str(tmp_path / "site")
    copy = _copy_package(installed_pkg, site, keep_c=False)
    res, err = _probe(neutral_cwd, _env(PYTHONPATH=site, YIRAGE_EXT_BUILD_DIR=cold_cache["cache"]),
                      "import of a package copy without _C")
    assert res["package"] == os.path.realpath(copy)
    assert res["kind"] == "jit" and res["reason"] == f"no prebuilt _C in {copy}", res
    assert res["key"] == cold_cache["runs"][0][0]["key"] and res["build_seconds"] is None, res
    assert _compiled(err) == 0, err
    assert res["max_err"] < ATOL, res


@pytest.mark.slow
def test_cached_import_is_fast(cold_cache, neutral_cwd):
    """A second (cached) JIT import compiles nothing and takes under a second (torch import excluded)."""
    env = _env(YIRAGE_EXT_FORCE_JIT=1, YIRAGE_EXT_BUILD_DIR=cold_cache["cache"])
    times = []
    for i in range(3):  # best of three: the machine may be busy with other work
        res, err = _probe(neutral_cwd, env, f"cached import {i}")
        assert res["kind"] == "jit" and res["build_seconds"] is None, res
        assert "yirage_ext: compiling" not in err and "waiting" not in err, err
        assert res["max_err"] < ATOL, res
        times.append(res["import_s"])
    best = min(times)
    print(f"cached import yirage_ext: best {best:.3f} s of {', '.join(f'{t:.3f}' for t in times)}")
    assert best < CACHED_IMPORT_LIMIT_S, (
        f"cached `import yirage_ext` took {best:.3f} s (runs: {', '.join(f'{t:.3f}' for t in times)} s), "
        f"limit {CACHED_IMPORT_LIMIT_S} s")


@pytest.mark.slow
def test_prebuilt_for_other_torch_is_refused(cold_cache, installed_pkg, tmp_path, neutral_cwd):
    """A _C whose build record names another torch is refused before it is loaded; JIT takes over."""
    site = str(tmp_path / "site")
    copy = _copy_package(installed_pkg, site)
    libs = glob.glob(os.path.join(copy, "_C*.so"))
    assert libs, f"the installed package has no prebuilt _C: {os.listdir(installed_pkg)}"
    record_path = os.path.join(copy, "_C.build.json")
    with open(record_path) as f:
        record = json.load(f)
    installed_torch = record["torch"]
    record["torch"] = "1.0.0+other"
    with open(record_path, "w") as f:
        json.dump(record, f)
    res, err = _probe(neutral_cwd, _env(PYTHONPATH=site, YIRAGE_EXT_BUILD_DIR=cold_cache["cache"]),
                      "import of a package copy whose _C was built for another torch")
    assert res["package"] == os.path.realpath(copy)
    assert res["kind"] == "jit", res
    assert res["reason"] == (f"the prebuilt _C was built for another torch: torch '1.0.0+other' "
                             f"(installed: {installed_torch!r})"), res
    # refused before loading: never imported, never mapped into the process
    assert not res["c_imported"], res
    assert not any(os.path.realpath(lib) in res["mapped"] for lib in libs), res["mapped"]
    assert res["build_seconds"] is None and _compiled(err) == 0, err  # the shared build, same sources
    assert res["max_err"] < ATOL, res


# ------------------------------------------------------------------------------ rebuilds


@pytest.mark.slow
def test_changed_source_rebuilds(installed_pkg, tmp_path, neutral_cwd):
    """A real rebuild: a package whose sources differ by one comment gets another cache key and directory
    and is compiled, although the cache holds a build of the original sources (slim packages, see top)."""
    cache = str(tmp_path / "cache")
    site_a, site_b = str(tmp_path / "site-a"), str(tmp_path / "site-b")
    _slim_package(installed_pkg, site_a)
    original, err = _probe(neutral_cwd, _env(PYTHONPATH=site_a, YIRAGE_EXT_BUILD_DIR=cache),
                           "import of the slim package", timeout=BUILD_TIMEOUT_S)
    assert original["kind"] == "jit" and original["build_seconds"] is not None and _compiled(err) == 1, err
    copy = _slim_package(installed_pkg, site_b)
    with open(os.path.join(copy, "_csrc", "library.cpp"), "a") as f:
        f.write("// a changed comment: the cache key must change with it\n")
    res, err = _probe(neutral_cwd, _env(PYTHONPATH=site_b, YIRAGE_EXT_BUILD_DIR=cache),
                      "import after a source change", timeout=BUILD_TIMEOUT_S)
    assert res["package"] == os.path.realpath(copy)
    assert res["kind"] == "jit" and res["key"] != original["key"], (res, original)
    assert res["build_dir"] != original["build_dir"]
    assert res["build_seconds"] is not None and _compiled(err) == 1, err
    assert os.path.exists(original["path"]) and os.path.exists(res["path"])  # both builds stay cached
    assert res["max_err"] < ATOL, res
    print(f"rebuild after a source change: {res['build_seconds']:.1f} s")


def _compilers(sid: int) -> list[str]:
    return [n for n in _session_members(sid).values() if n != "ninja" and not n.startswith("python")]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="watches the build's processes in /proc")
def test_killed_build_then_import_succeeds(installed_pkg, tmp_path, neutral_cwd):
    """SIGKILL an importing process in the middle of its cold build (its compilers keep running, orphaned):
    the lock dies with it and the next import builds and succeeds, within a timeout."""
    cache, site = str(tmp_path / "cache"), str(tmp_path / "site")
    _slim_package(installed_pkg, site)
    env = _env(PYTHONPATH=site, YIRAGE_EXT_BUILD_DIR=cache)
    stderr_path = tmp_path / "killed.stderr"
    with open(stderr_path, "w") as stderr:
        victim = subprocess.Popen([sys.executable, "-c", PROBE], cwd=neutral_cwd, env=env, stdout=subprocess.DEVNULL,
                                  stderr=stderr, start_new_session=True)
    try:
        deadline = time.monotonic() + QUICK_TIMEOUT_S
        tmp_dirs: list[str] = []
        while time.monotonic() < deadline and victim.poll() is None:
            tmp_dirs = glob.glob(os.path.join(cache, f"*.tmp-{victim.pid}"))
            if ("yirage_ext: compiling" in stderr_path.read_text() and tmp_dirs
                    and os.path.exists(os.path.join(tmp_dirs[0], "build.ninja"))
                    and _compilers(victim.pid)):  # the compilers have started
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the build did not start (exit status {victim.poll()}):\n{stderr_path.read_text()}")
        time.sleep(1.0)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        orphans = sorted(_session_members(victim.pid).values())
        locks = glob.glob(os.path.join(cache, "*.lock"))
        assert len(locks) == 1, locks
        with open(locks[0]) as lock:  # free at once, though the killed build's compilers may still run
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(lock, fcntl.LOCK_UN)

        res, err = _probe(neutral_cwd, env, "import after a killed build", timeout=BUILD_TIMEOUT_S)
        assert res["kind"] == "jit" and res["build_seconds"] is not None and _compiled(err) == 1, err
        assert os.path.basename(res["build_dir"]) + f".tmp-{victim.pid}" == os.path.basename(tmp_dirs[0])
        assert res["max_err"] < ATOL, res
        print(f"killed build (orphans left running: {orphans}); rebuild {res['build_seconds']:.1f} s")
    finally:
        _kill_session(victim.pid)  # the orphaned ninja and compilers of the killed build
        if victim.poll() is None:
            victim.kill()
    deadline = time.monotonic() + 10
    while _session_members(victim.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _session_members(victim.pid), "processes of the killed build survived the clean-up"


# ---------------------------------------------------------------- one registration per process

SECOND_LOAD = textwrap.dedent(
    """
    import json, sys, torch, yirage_ext
    from yirage_ext import _loader
    first = yirage_ext.load_info()
    out = dict(kind=first.kind, same=_loader.load() is first and _loader.load() is first, errors={})

    def attempt(name, fn):
        try:
            fn()
            out["errors"][name] = None
        except Exception as e:
            out["errors"][name] = f"{type(e).__name__}: {e}"

    def second_copy():
        sys.path.insert(0, sys.argv[1])
        import yirage_ext_copy

    attempt("jit_after_prebuilt", lambda: _loader._jit_load("test"))
    attempt("second_copy", second_copy)
    out["same_after"] = yirage_ext.load_info() is first
    out["works"] = torch.ops.yirage.rms_norm(torch.ones(2, 8), None, 1e-6).sub(1).abs().max().item() < 1e-5
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.slow
def test_ops_registered_once(cold_cache, installed_pkg, tmp_path, neutral_cwd):
    """A second load() returns the same info; the JIT path after the prebuilt library, or a second copy of
    the package, raises a clear error instead of aborting the process (second TORCH_LIBRARY)."""
    site = str(tmp_path / "site")
    _copy_package(installed_pkg, site, name="yirage_ext_copy")
    # the shared cache holds a JIT build, so the JIT path would load a library rather than compile one
    env = _env(YIRAGE_EXT_BUILD_DIR=cold_cache["cache"])
    rc, out, err = _run([sys.executable, "-c", SECOND_LOAD, site], cwd=neutral_cwd, env=env,
                        timeout=QUICK_TIMEOUT_S, what="second load")
    res = _result(rc, out, err, "second load (a negative status is a crash)")
    assert res["kind"] == "prebuilt" and res["same"] and res["same_after"] and res["works"], res
    for name, error in res["errors"].items():
        assert error is not None and error.startswith("RuntimeError: ") and "already registered" in error, (name, res)
    assert _compiled(err) == 0 and "yirage_ext: compiling" not in err, err


LOAD_LIBRARY = textwrap.dedent(
    """
    import json, sys, torch, yirage_ext
    try:
        torch.ops.load_library(sys.argv[1])
        error = None
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    print("RESULT " + json.dumps(dict(kind=yirage_ext.load_info().kind, error=error)))
    """
)


@pytest.mark.slow
def test_load_library_of_second_build_fails_loudly(cold_cache, neutral_cwd):
    """A second copy of the native library loaded behind the loader's back (torch.ops.load_library)
    runs its TORCH_LIBRARY(yirage) static initializer inside dlopen; torch refuses a second definition of
    the namespace by throwing there, which ends the process. Pin that down: it is a loud failure that
    names the namespace, never two libraries' kernels silently mixed. (Turning it into a Python exception
    needs a registration that is not a static initializer; see the closing notes of the foundation work.)"""
    lib = cold_cache["runs"][0][0]["path"]
    rc, out, err = _run([sys.executable, "-c", LOAD_LIBRARY, lib], cwd=neutral_cwd, env=_env(),
                        timeout=QUICK_TIMEOUT_S, what="torch.ops.load_library of a second build")
    assert rc != 0, f"a second TORCH_LIBRARY(yirage) was accepted: {out[-800:]}"
    assert "TORCH_LIBRARY" in err and "yirage" in err, err[-1500:]


# -------------------------------------------------------------------------------- the wheel


@pytest.mark.slow
def test_wheel_imports_prebuilt_without_compiling(tmp_path, neutral_cwd):
    """The wheel from `make wheel`, installed into a fresh venv, imports its own prebuilt _C with
    YIRAGE_EXT_NO_JIT=1 (nothing is compiled) and computes the right values."""
    wheels = sorted(glob.glob(os.path.join(REPO, "dist", "yirage_ext-*.whl")), key=os.path.getmtime)
    if not wheels:
        pytest.skip("no wheel in dist/ (build it with `make wheel`)")
    wheel = shutil.copy(wheels[-1], tmp_path)  # dist/ may be rebuilt meanwhile
    venv = str(tmp_path / "venv")
    rc, out, err = _run([sys.executable, "-m", "venv", "--system-site-packages", venv], cwd=neutral_cwd,
                        env=_env(), timeout=300, what="python -m venv")
    assert rc == 0, err
    py = os.path.join(venv, "bin", "python")
    rc, out, err = _run([py, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                         "--disable-pip-version-check", wheel], cwd=neutral_cwd, env=_env(), timeout=300,
                        what="pip install the wheel")
    assert rc == 0, out + err
    # --system-site-packages exposes the base interpreter's packages; when torch lives in a virtual
    # environment (ours), expose that one's site-packages after the new venv's own.
    rc, out, err = _run([py, "-c", "import sysconfig, importlib.util as u; "
                         "print(sysconfig.get_paths()['purelib']); print(bool(u.find_spec('torch')))"],
                        cwd=neutral_cwd, env=_env(), timeout=60, what="venv paths")
    purelib, has_torch = out.split()
    if has_torch != "True":
        import torch

        torch_site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
        with open(os.path.join(purelib, "_outer_torch.pth"), "w") as f:
            f.write(torch_site + "\n")
    cache = tmp_path / "cache"
    rc, out, err = _run([py, "-c", PROBE], cwd=neutral_cwd,
                        env=_env(YIRAGE_EXT_NO_JIT=1, YIRAGE_EXT_BUILD_DIR=cache), timeout=QUICK_TIMEOUT_S,
                        what="import of the installed wheel")
    res = _result(rc, out, err, f"import of the installed wheel {os.path.basename(wheel)}")
    assert res["kind"] == "prebuilt" and res["reason"] == "", res
    assert _under(res["path"], venv) and _under(res["package"], venv), (res, venv)
    assert res["c_imported"], res
    assert "yirage_ext: compiling" not in err and not cache.exists(), err
    assert res["max_err"] < ATOL, res
