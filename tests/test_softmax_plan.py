"""The CUDA softmax row plans (csrc/kernels/cuda/softmax_common.cuh: softmax_row_plan, softmax_fwd_min_n), checked on
the host by a program built with nvcc, without a GPU: for every row length of 1 .. 8192 16-byte vectors, the
forward's and the backward's plan covers the row (lanes or threads x vectors per thread >= the row), stays within
the kernels' limits (whole warps, at most 512 threads, the vectors a thread the kernels are instantiated for) and
takes the fewest vectors a thread that fit, from 4 for the forward's rows of 1024 vectors or more, 2 otherwise;
rows too long for registers take the global kernel. A plan that left part of a row to no thread would give wrong
results only on a GPU; this catches it anywhere nvcc is. Skipped where no nvcc is found."""
from _helpers import run_host_program

PROGRAM = r"""
#include "kernels/cuda/softmax_common.cuh"
#include <cstdio>
using namespace yirage::kernels::cuda::softmax;
using yirage::kernels::cuda::kWarpSize;
long bad = 0;
void fail(const char* what, int bwd, long nvec, const RowPlan& r) {
  if (bad++ < 8) printf("%s: %s nvec %ld kind %d n %d lanes %d threads %d\n", what, bwd ? "bwd" : "fwd", nvec,
                        int(r.kind), r.n, r.lanes, r.threads);
}
int main() {
  long checked = 0;
  for (int bwd = 0; bwd < 2; ++bwd) {
    const int max_n = bwd ? kMaxNBwd : kMaxN;
    for (long nvec = 1; nvec <= 8192; ++nvec) {
      const int min_n = bwd ? kBlockMinN : softmax_fwd_min_n(nvec);
      const RowPlan r = softmax_row_plan(nvec, true, max_n, min_n);
      ++checked;
      if (nvec <= long(kWarpSize) * kWarpMaxN) {
        if (r.kind != RowPlan::warp || r.lanes < 1 || r.lanes > kWarpSize || (r.lanes & (r.lanes - 1)) != 0 ||
            r.n > kWarpMaxN || long(r.lanes) * r.n < nvec || r.threads != kWarpRowThreads)
          fail("warp rows", bwd, nvec, r);
      } else if (nvec <= long(kRegThreads) * max_n) {
        if (r.kind != RowPlan::block || r.threads % kWarpSize != 0 || r.threads > kRegThreads || r.n < min_n ||
            r.n > max_n || (r.n & (r.n - 1)) != 0 || long(r.threads) * r.n < nvec ||
            long(r.threads - kWarpSize) * r.n >= nvec)
          fail("block rows", bwd, nvec, r);
        // the fewest vectors a thread from min_n: half as many would need more than kRegThreads threads
        if (r.n > min_n && (nvec + r.n / 2 - 1) / (r.n / 2) <= kRegThreads) fail("block: not the fewest", bwd, nvec, r);
      } else if (r.kind != RowPlan::global) {
        fail("global rows", bwd, nvec, r);
      }
    }
  }
  // the cases the plans were measured at (benchmarks/results/cuda-softmax-plan-h200-2026-11-28.md)
  struct { int bwd; long nvec; int n, threads; } want[] = {
      {0, 1024, 4, 256}, {0, 1023, 2, 512}, {0, 512, 2, 256}, {0, 128, 2, 64}, {0, 2048, 4, 512},
      {0, 4096, 8, 512}, {1, 1024, 2, 512}, {1, 2048, 4, 512}};
  for (const auto& w : want) {
    const RowPlan r = softmax_row_plan(w.nvec, true, w.bwd ? kMaxNBwd : kMaxN,
                                       w.bwd ? kBlockMinN : softmax_fwd_min_n(w.nvec));
    if (r.kind != RowPlan::block || r.n != w.n || r.threads != w.threads) fail("measured plan", w.bwd, w.nvec, r);
  }
  printf("checked %ld, wrong %ld\n", checked, bad);
  return bad != 0;
}
"""


def test_softmax_row_plans_cover_every_row(tmp_path):
    out = run_host_program(PROGRAM, tmp_path)
    assert "checked 16384, wrong 0" in out, out
