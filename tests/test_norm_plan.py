"""The CUDA norm kernels' register plans (csrc/kernels/cuda/norm_common.cuh: plan_rows, row_groups), checked on the
host by a program built with nvcc, without a GPU, for the calls the forwards and backwards make (rms_norm.cu,
layer_norm.cu, norm_bwd_plan.cuh): for every row of 1 .. 512 x max_nv 16-byte vectors, the threads of a row times
its vectors a thread cover the row, a row takes a power of two of threads up to a warp and whole warps beyond (at
most 512), its vectors a thread are 1, 2, 4 or 8 and no more than max_nv, a block holds whole rows; rows longer
than that get no register plan. row_groups' launch facts: enough row groups for every row and none empty, the
thread-to-row shift where the threads of a row are a power of two, 1 / cols. Skipped where no nvcc is found."""
from _helpers import run_host_program

PROGRAM = r"""
#include "kernels/cuda/norm_common.cuh"
#include <cstdio>
using namespace yirage::kernels::cuda::norm;
using yirage::kernels::cuda::kWarpSize;
long bad = 0;
void fail(const char* what, int call, long nvec, const RowPlan& r) {
  if (bad++ < 8) printf("%s: call %d nvec %ld regs %d nv %d tpr %d block %d\n", what, call, nvec, int(r.regs), r.nv,
                        r.tpr, r.block);
}
int main() {
  // (max_nv, target, block_threads) of the call sites, all with whole warps
  const int calls[][3] = {{8, 4, kFwdBlockThreads}, {8, 2, kFwdBlockThreads}, {4, 1, 256}, {4, 2, 256}, {4, 4, 256}};
  long checked = 0;
  for (int c = 0; c < 5; ++c) {
    const int max_nv = calls[c][0], target = calls[c][1], bt = calls[c][2];
    for (long nvec = 1; nvec <= 512L * 8 + 1; ++nvec) {
      const RowPlan r = plan_rows(nvec, max_nv, target, /*whole_warps=*/true, bt);
      ++checked;
      if (nvec > 512L * max_nv) {
        if (r.regs) fail("register plan for a row too long", c, nvec, r);
        continue;
      }
      const bool pow2 = (r.tpr & (r.tpr - 1)) == 0;
      if (!r.regs || r.tpr < 1 || r.tpr > 512 || (r.tpr <= kWarpSize ? !pow2 : r.tpr % kWarpSize != 0) ||
          (r.nv != 1 && r.nv != 2 && r.nv != 4 && r.nv != 8) || r.nv > max_nv || long(r.nv) * r.tpr < nvec ||
          r.block < r.tpr || r.block % r.tpr != 0 || r.block > (bt > 512 ? bt : 512))
        fail("plan", c, nvec, r);
      for (long rows : {1L, 2L, 3L, 7L, 64L, 65535L, 65537L, 1L << 31}) {
        const long v = 8;  // bf16 elements per vector; cols = nvec * v
        const RowGroups g = row_groups(r, rows, nvec * v, int(v));
        const bool shift_ok = pow2 ? (1 << g.shift) == r.tpr : g.shift == -1;
        if (g.tpr != r.tpr || !shift_ok || g.rpb != r.block / r.tpr || g.nvec != nvec || g.groups * g.rpb < rows ||
            (g.groups - 1) * g.rpb >= rows || g.inv_n != 1.f / float(nvec * v))
          fail("row groups", c, nvec, r);
      }
    }
  }
  printf("checked %ld, wrong %ld\n", checked, bad);
  return bad != 0;
}
"""


def test_norm_row_plans_cover_every_row(tmp_path):
    out = run_host_program(PROGRAM, tmp_path)
    assert f"checked {5 * (512 * 8 + 1)}, wrong 0" in out, out
