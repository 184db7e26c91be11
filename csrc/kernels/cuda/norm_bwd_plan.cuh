// The launch plan of the rms_norm and layer_norm backward kernels (rms_norm_bwd.cu, layer_norm_bwd.cu), host code,
// torch-free: the row slots their register paths stage in shared memory, the choice between the register and the
// long-row paths, the grid (which is also the number of workspace partial rows) and the launch. Each op supplies
// its kernels and what differs (its vector test, staging and vectors-per-thread target).
#pragma once

#include <cstdint>
#include <type_traits>

#include "norm_bwd_common.cuh"

namespace yirage::kernels::cuda::norm {

// The row slots of a backward register kernel (`want`, fewer when they do not fit the
// device's opt-in shared memory with `extra` bytes after them; 0 when not even one does: the caller takes its
// long-row path) and its dynamic shared memory (*smem), which the kernel is allowed to use. 16-byte vectors:
// nv per thread, x and grad_out.
template <typename K>
inline int bwd_stages(K kernel, int nv, int block, size_t extra, size_t* smem, int want = YIRAGE_NORM_BWD_STAGES) {
  const size_t per = size_t(nv) * 2 * block * 16;
  const size_t cap = size_t(smem_optin()) - 1024;  // room for the kernel's static shared memory
  int stages = want;
  while (stages > 0 && per * stages + extra > cap) --stages;
  *smem = per * stages + extra;
  if (stages > 0) {  // allowed once per kernel and device, up to the cap: any plan's launch fits under it
    (void)detail::remembered(reinterpret_cast<const void*>(kernel), -3, 0, [&] {
      if (cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(cap)) != cudaSuccess) {
        (void)cudaGetLastError();  // the launch reports the failure
        return 0;
      }
      return 1;
    });
  }
  return stages;
}

// How a norm's backward runs: the register path (rp.regs; rows staged through shared memory in `stages` slots
// where the op stages them) or the long-row path (a block per row, 16-byte vectors when `vec`), and the grid,
// which is also the number of each gradient's workspace partial rows. The same plan serves the workspace query and
// the launch (same device, same parameters).
struct BwdPlan {
  RowPlan rp;
  bool vec = false;
  int stages = 0;
  int block = 0;
  size_t smem = 0;
  int64_t grid = 0;
  int resident = 0;  // blocks per SM
};

// The plan of a norm backward over `rows` rows of `cols` elements of T. The op supplies: `vec`, whether its operands
// allow 16-byte vectors; `params`, whether it writes partial gradient rows (a block of several rows then merges them
// in `cols` floats of shared memory); `target`, the vectors per thread plan_rows aims at; `regs_kernel(nv)`, the
// register kernel for nv vectors per thread, and `staged(nv)`, whether it stages its rows (`want_stages` slots);
// `general_vec` / `general_1`, the long-row kernels over vectors / single elements.
template <typename T, typename RegsKernelOf, typename StagedOf, typename General>
inline BwdPlan plan_bwd(int64_t rows, int64_t cols, bool vec, bool params, int target, RegsKernelOf regs_kernel,
                        StagedOf staged, int want_stages, General general_vec, General general_1) {
  constexpr int V = kVec<T>;
  BwdPlan b;
  b.vec = vec;
  const int64_t sms = sm_count();
  if (!std::is_same_v<T, double> && b.vec) b.rp = plan_rows(cols / V, 4, target, /*whole_warps=*/true);
  if (b.rp.regs) {
    const int rpb = b.rp.block / b.rp.tpr;
    b.block = b.rp.block;
    const size_t merge = rpb > 1 && params ? size_t(cols) * sizeof(float) : 0;
    const auto kernel = regs_kernel(b.rp.nv);
    b.smem = merge;
    if (staged(b.rp.nv)) {
      b.stages = bwd_stages(kernel, b.rp.nv, b.block, merge, &b.smem, want_stages);
      b.rp.regs = b.stages > 0;  // not even one row slot fits shared memory: the long-row path
    }
    const int64_t groups = (rows + rpb - 1) / rpb;
    b.resident = blocks_per_sm(kernel, b.block, b.smem);
    const int64_t cap = sms * b.resident;
    b.grid = groups < cap ? groups : cap;
  }
  if (!b.rp.regs) {
    b.smem = 0;
    b.block = general_block(b.vec ? cols / V : cols);
    b.resident = b.vec ? blocks_per_sm(general_vec, b.block, 0) : blocks_per_sm(general_1, b.block, 0);
    const int64_t cap = sms * b.resident;
    b.grid = rows < cap ? rows : cap;
  }
  return b;
}

// Launches the kernel that plan `b` chose (the kernels as for plan_bwd); the column sums are the caller's.
template <typename P, typename RegsKernelOf, typename General>
inline cudaError_t launch_bwd(const BwdPlan& b, const P& p, RegsKernelOf regs_kernel, General general_vec,
                              General general_1, cudaStream_t stream) {
  if (b.rp.regs) {
    const auto kernel = regs_kernel(b.rp.nv);  // a named kernel: hipify cannot rewrite f(x)<<<...>>>
    kernel<<<dim3(unsigned(b.grid)), b.block, b.smem, stream>>>(p, b.rp.tpr, b.stages);
  } else if (b.vec) {
    general_vec<<<dim3(unsigned(b.grid)), b.block, 0, stream>>>(p);
  } else {
    general_1<<<dim3(unsigned(b.grid)), b.block, 0, stream>>>(p);
  }
  return launch_status();
}

}  // namespace yirage::kernels::cuda::norm
