"""The CPU output cache (csrc/common/cpu_memory.h): CPU outputs of 4 MiB and up come from blocks mapped once and
reused after their tensors die. Results stay exact against the float64 references when a block is reused (its old
contents must never show through), the counters move as documented, the limit holds, freed memory goes back on
request, such tensors behave like any other (resize, pickling, shared memory, views outliving the tensor), and a
forked child can use it."""
import io
import pickle
import sys

import pytest
import torch

import yirage_ext
from yirage_ext.testing.reference import assert_close, rms_norm_ref, softmax_ref

from _helpers import run_python

OPS = torch.ops.yirage
MIB = 2**20

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the cache is Linux-only")
cache_on = pytest.mark.skipif(yirage_ext.cpu_cache_stats()["limit_bytes"] == 0,
                              reason="YIRAGE_CPU_CACHE_MB=0 in this environment")

pytestmark = [linux_only, cache_on]


def big(rows=1024, cols=2048, dtype=torch.float32, seed=0):  # 8 MiB in fp32: cached
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=g).to(dtype)


def test_reused_block_gives_exact_results():
    yirage_ext.empty_cpu_cache()
    w = torch.randn(2048)
    x1, x2 = big(seed=1), big(seed=2)
    y1 = OPS.rms_norm(x1, w, 1e-6)
    ptr = y1.data_ptr()
    assert_close(y1, rms_norm_ref(x1.double(), w.double(), 1e-6), torch.float32)
    before = yirage_ext.cpu_cache_stats()
    del y1
    mid = yirage_ext.cpu_cache_stats()
    assert mid["cached_blocks"] == before["cached_blocks"] + 1
    assert mid["allocated_blocks"] == before["allocated_blocks"] - 1
    y2 = OPS.rms_norm(x2, w, 1e-6)  # the same block, holding y1's values until the kernel overwrites them
    after = yirage_ext.cpu_cache_stats()
    assert y2.data_ptr() == ptr
    assert after["hits"] == mid["hits"] + 1 and after["misses"] == mid["misses"]
    assert_close(y2, rms_norm_ref(x2.double(), w.double(), 1e-6), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reuse_across_ops_and_sizes(dtype):
    # a block freed by one op serves another op's output of a size within 1.25x; results stay exact
    yirage_ext.empty_cpu_cache()
    x = big(1024, 4096, dtype, seed=3)
    y = OPS.softmax(x, -1)
    del y
    x2 = big(1000, 4096, dtype, seed=4)  # 2.3% smaller: served by the same block
    y2 = OPS.softmax(x2, -1)
    assert yirage_ext.cpu_cache_stats()["hits"] >= 1
    assert_close(y2, softmax_ref(x2.double(), -1), dtype)


def test_small_outputs_bypass_the_cache():
    yirage_ext.empty_cpu_cache()
    before = yirage_ext.cpu_cache_stats()
    x = torch.randn(64, 1024)  # 256 KiB
    y = OPS.softmax(x, -1)
    after = yirage_ext.cpu_cache_stats()
    assert (after["hits"], after["misses"], after["allocated_blocks"]) == (
        before["hits"], before["misses"], before["allocated_blocks"])
    assert_close(y, softmax_ref(x.double(), -1), torch.float32)


def test_empty_cpu_cache_releases_free_blocks_only():
    yirage_ext.empty_cpu_cache()
    keep = OPS.softmax(big(seed=5), -1)
    drop = OPS.softmax(big(seed=6), -1)
    del drop
    s = yirage_ext.cpu_cache_stats()
    assert s["cached_bytes"] >= 8 * MIB and s["allocated_bytes"] >= 8 * MIB
    yirage_ext.empty_cpu_cache()
    s = yirage_ext.cpu_cache_stats()
    assert s["cached_bytes"] == 0 and s["cached_blocks"] == 0
    assert s["allocated_bytes"] >= 8 * MIB
    x = big(seed=5)
    assert_close(keep, softmax_ref(x.double(), -1), torch.float32)  # the live tensor is untouched


def test_cached_tensors_behave_like_others():
    x = big(seed=7)
    y = OPS.softmax(x, -1)
    expected = softmax_ref(x.double(), -1)
    # a view outlives the tensor it came from
    row = y[5]
    del y
    assert_close(row, expected[5], torch.float32)
    y = OPS.softmax(x, -1)
    # growing the storage moves it to a larger block (the allocator's copy), keeping the data
    z = y.clone()
    y.resize_(2048, 2048)
    assert torch.equal(y.view(-1)[: z.numel()], z.view(-1))
    # serialization and numpy
    buf = io.BytesIO()
    torch.save(z, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf), z)
    assert torch.equal(pickle.loads(pickle.dumps(z)), z)
    w = OPS.softmax(x, -1)
    assert torch.equal(torch.from_numpy(w.numpy().copy()), w)
    # moved to shared memory (torch copies it out of the block, which goes back to the cache)
    s = OPS.softmax(x, -1)
    s.share_memory_()
    assert s.is_shared()
    assert_close(s, expected, torch.float32)


def test_limit_env_holds_and_zero_turns_it_off():
    code = r"""
import torch, yirage_ext
ops = torch.ops.yirage
x = [torch.randn(1024, 2048 + 64 * i) for i in range(6)]   # 8-9.5 MiB outputs, each a new size class
ys = [ops.softmax(t, -1) for t in x]
del ys
s = yirage_ext.cpu_cache_stats()
print(s["limit_bytes"], s["cached_bytes"], s["cached_blocks"], s["misses"])
"""
    r = run_python(code, env_extra={"YIRAGE_CPU_CACHE_MB": "20"})
    assert r.returncode == 0, r.stderr
    limit, cached, blocks, misses = map(int, r.stdout.split())
    assert limit == 20 * MIB and 0 < cached <= limit and blocks == 2 and misses == 6
    r = run_python(code, env_extra={"YIRAGE_CPU_CACHE_MB": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "0", "0", "0"]


def test_bad_limit_env_is_a_clear_error():
    r = run_python("import torch, yirage_ext; torch.ops.yirage.softmax(torch.randn(1024, 2048), -1)",
                   env_extra={"YIRAGE_CPU_CACHE_MB": "lots"})
    assert r.returncode != 0
    assert "YIRAGE_CPU_CACHE_MB must be a whole number of MiB" in r.stderr and "'lots'" in r.stderr


def test_forked_child_uses_the_cache():
    code = r"""
import os, torch, yirage_ext
ops = torch.ops.yirage
x = torch.randn(1024, 2048)
y = ops.softmax(x, -1); del y            # a free block in the parent
pid = os.fork()
if pid == 0:
    torch.set_num_threads(1)             # torch's OpenMP pool does not survive a fork (hangs with the cache off too)
    y = ops.softmax(x, -1)               # the child's copy of that block
    ok = torch.allclose(y, torch.softmax(x.double(), -1).float(), rtol=1e-5, atol=1e-7)
    os._exit(0 if ok and yirage_ext.cpu_cache_stats()["hits"] >= 1 else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""
    r = run_python(code, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


def test_memory_profiler_sees_cached_outputs():
    from torch.profiler import ProfilerActivity, profile

    x = big(seed=8)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        y = OPS.softmax(x, -1)
        del y
    ev = [e for e in prof.key_averages() if e.key == "yirage::softmax"]
    assert ev and ev[0].cpu_memory_usage == x.numel() * 4
