// LayerNorm backward on CUDA (the forward, and the register and long-row paths it shares with the
// backward: layer_norm.cu).
//
// Register path up to 512 * 4 vectors: fp16 / bf16 rows of 128+ vectors staged through shared memory with cp.async
// (norm::RowStager; the row does not fit in registers beside the two gradient accumulators), bf16 at 2 or 4 vectors
// per thread in 1 or 2 row slots by the device's bandwidth per SM (the plan: below), fp16 at 4 in 1; shorter rows at
// 2 vectors per thread and fp32 rows in registers. One reduction of
// four sums (sum x, sum x^2, sum g*w, sum g*w*x; taken again around their estimate of the mean, d = x - mean
// estimate, when the mean lies more than 4 standard deviations from 0, as the forward) gives the mean, the
// variance, mean(g*w) and mean(g*w*(x-mean)); then dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)).
// (Shifting every row by its x[0], as until 2026-11-26, cost a subtraction per element in the sums and two in xhat:
// without it the kernel ran 1.5-3% faster for bf16 and level to 4.5% for fp32 on an H200, kernel alone; bf16
// 16384x4096 144.3 -> 139.8 us; cuda-layer-norm-plain-sums-h200-2026-11-26.md.)
// The weight and bias gradients (sum of g*xhat, sum of g) are accumulated per thread in registers across the
// rows of a persistent grid (SMs x resident blocks), merged per block in shared memory into one fp32 row each
// of a workspace, and reduced column-wise by a second kernel (deterministic, no atomics; both gradients in one
// launch). The long-row backward (one read pass with four shifted sums, taken again around their estimate of the
// mean when x[0] lies more than 4 standard deviations from it, as the forward; one write pass) keeps its block's
// partial rows in registers where a row is at most 4 vectors per thread (fp32 rows of 16-byte vectors up to 16K
// columns, element-wise rows up to 4096), else accumulates them in the workspace: fp32 2048x16384 on an H200,
// 450 -> 183 us (benchmarks/results/cuda-norm-bwd-h200-2026-11-26.md).
// Accumulation in fp32 (fp64 for fp64).
#include <type_traits>

#include "layer_norm.h"
#include "norm_bwd_common.cuh"
#include "norm_bwd_plan.cuh"

namespace yirage::kernels::cuda {
namespace {

using norm::group_sum;
using norm::RowPlan;
using norm::write_partial;

// add_moments (the per-vector sums) and the long-row kernel ln_bwd_general: layer_norm_bwd_general.cuh
#include "layer_norm_bwd_general.cuh"

// ---------------------------------------------------------------- backward, register path
// The register path's plan for bf16 rows of 128+ vectors, staged through shared memory: 2 vectors per thread in
// 2 row slots (the next row's copies in flight during this one; "two": twice the threads per row of 4 vectors, half
// the gradient accumulators), or 4 vectors per thread in 1 or 2 slots. The choice is by the device's DRAM bandwidth
// per SM (norm::dram_gbs_per_sm; 30 GB/s: between an H100's 25 and an H200's 36), which sets the bytes a kernel must
// keep in flight:
// - under 30: 2 vectors; 4 (1 slot) only where 2 do not fit the 512-thread block (rows over 1024 vectors);
// - 30 and over: 2 vectors unless that holds fewer threads per SM than 4 (rows of 5120: 320 threads a row at 128
//   registers, one block per SM); 4 vectors in 2 slots.
// Kernel alone, bf16, us, the plan before (4 vectors, 1 slot) -> this one (cuda-layer-norm-bwd-plan-2026-11-26.md):
// - H100: 16384x4096 161.7 -> 152.3, 65536x1024 164.7 -> 153.7, 4096x8192 93.7 -> 85.5, 4096x5120 64.0 -> 62.5,
//   8192x2048 57.6 -> 50.5 (4 vectors in 2 slots: 1-11% slower than in 1 at every shape);
// - H200: 16384x4096 139.9 -> 127.0, 4096x8192 82.3 -> 76.4, 8192x2048 51.3 -> 43.1, 2048x16384 92.3 -> 81.6,
//   4096x5120 56.4 -> 52.3 (2 vectors: 59.1), 65536x1024 128.7 -> 128.1.
// fp16 kept 4 vectors in 1 slot: its elements convert one at a time (bf16's shift / mask unpack does not apply),
// and neither change held for it at every shape (H200, 65536x1024: 125.8 us -> 130.8 with 2 slots, 136.5 with 2
// vectors; H100, 16384x4096: 160.9 -> 162.7 with 2 vectors). Since the 2-vector kernel lost a tenth of its
// instructions (2026-11-27: the weight hoisted and converted once, the reduce-scatter sums,
// cuda-norm-bwd-issue-h200-2026-11-27.md), fp16 takes the bf16 rule, its 4-vector plan still in 1 slot: H200, kernel
// alone, 4096x8192 76.1 -> 63.8 us, 16384x4096 133.3 -> 107.9, 65536x1024 125.1 -> 109.7, 8192x2048 47.7 -> 37.1,
// 1024x4096 25.4 -> 18.7, 4096x5120 (4 vectors by the rule), 2048x16384 and 32768x512 level; H100, 4096x8192 86.3 ->
// 75.2, 16384x4096 153.4 -> 140.6, 65536x1024 155.0 -> 141.0, 8192x2048 51.7 -> 41.1, 1024x4096 27.2 -> 19.8,
// 4096x5120 57.8 -> 54.0, 2048x16384 and 32768x512 level (cuda-norm-fwd-launch-facts-h200-2026-11-27.md).
// Staging at all: bf16 on an H100: 65 -> 76% of the copy bandwidth at 16384x4096, 68 -> 83% at 65536x1024,
// 51 -> 70% at 4096x8192. Rows below 128 vectors keep 2 vectors per thread in registers (staged: 5-7% slower).
// Tuning builds: YIRAGE_NORM_BWD_LN_TWO_VEC -1 (the rule above), 0 never, 1 always (fp16 too);
// YIRAGE_NORM_BWD_STAGES_LN > 0 sets the slots of both plans.
#ifndef YIRAGE_NORM_BWD_LN_TWO_VEC
#define YIRAGE_NORM_BWD_LN_TWO_VEC -1
#endif
constexpr double kLnBwdHighGbsPerSm = 30.0;

// Whether the kernel for nv vectors per thread stages its rows (two: the 2-vector plan above).
template <typename T>
constexpr bool ln_bwd_staged(int nv, bool two) {
  return norm::kStageRows<T> && (nv == 4 || (two && nv == 2));
}

// Staged rows (kTwo, or 4 vectors per thread; fp16 / bf16) go through shared memory (norm::RowStager,
// `stages` >= 1 slots) and each phase reads them there again; other rows are loaded into registers
// (stages = 0). Only the gradient accumulators live in registers across rows.
template <typename T, int NV, bool kTwo = false>
__global__ void __launch_bounds__(512) ln_bwd_regs(LayerNormBackward p, int tpr, int stages) {
  pdl_launch_dependents();  // the column sums' blocks may be scheduled (they wait for this grid's end)
  using A = float;
  constexpr int V = kVec<T>;
  constexpr bool kStaged = ln_bwd_staged<T>(NV, kTwo);
  // the row slots, then cols floats to merge the partials when a block holds several rows
  extern __shared__ __align__(16) unsigned char ln_bwd_dyn[];
  const norm::RowStager<T, NV> st{reinterpret_cast<Vec<T, V>*>(ln_bwd_dyn), stages};
  float* ln_bwd_merge = reinterpret_cast<float*>(ln_bwd_dyn + st.bytes(stages, blockDim.x));
  // two buffers for the reductions, alternating from row group to row group: one barrier per group (three before,
  // with the vote on `shifted`: H200, kernel alone, bf16 4096x8192 74.7 -> 72.7 us, 16384x4096 126.3 -> 124.9, the
  // rest level; benchmarks/results/cuda-row-barriers-h200-2026-11-27.md)
  __shared__ A smem[2][512 / kWarpSize * 4];
  int buf = 0;
  const int rpb = blockDim.x / tpr;
  const int lane = threadIdx.x % tpr, sub = threadIdx.x / tpr;
  const int64_t nvec = p.cols / V;
  const int nv32 = int(nvec);  // the register path's rows: at most 512 * NV vectors (32-bit index arithmetic)
  const int64_t groups = (p.rows + rpb - 1) / rpb;
  const T* w = static_cast<const T*>(p.weight);
  // the weight's loads read here, a valid row of cols elements, when there is no weight: the compiler may hoist
  // load_vec_keep's asm above its `if (w)` (seen in a 2-vector staged build: an illegal address with no weight)
  const T* wl = w != nullptr ? w : static_cast<const T*>(p.x);
  const bool want_dw = p.grad_weight != nullptr, want_db = p.grad_bias != nullptr;
  A dw[NV][V], db[NV][V];
#pragma unroll
  for (int k = 0; k < NV; ++k) {
#pragma unroll
    for (int e = 0; e < V; ++e) { dw[k][e] = A(0); db[k][e] = A(0); }
  }
  const A inv_n = A(1) / A(p.cols);
  const uint64_t keep = l2_keep_policy();  // the weight, read again by every row
  // kHoistW (2 vectors a thread or fewer): a thread's weight vectors are the same in every row, so they are loaded
  // once, into registers (ones where there is no weight: no branch on it per element), instead of twice a row.
  // These kernels were issue-bound (bf16 4096x8192 on an H200: 40 instructions an element, warps ready but not
  // selected a quarter of the time); with this and group_sum's kScatter, 37, and kernel alone, bf16, us:
  // 4096x8192 73.1 -> 66.3, 16384x4096 125.5 -> 113.9, 65536x1024 127.9 -> 116.3, 8192x2048 41.2 -> 38.9, 32768x512
  // 42.2 -> 41.3, 1024x4096 18.8 -> 19.1 (cuda-norm-bwd-issue-h200-2026-11-27.md). The 4-vector kernels keep the
  // loads a row (at the register limit: with them hoisted they spilled); they take kScatter for 16-bit types once the
  // 32-bit index arithmetic left them room (bf16 2048x16384 78.5 -> 75.1 us; fp32 4096x5120 2% slower with it).
  constexpr bool kHoistW = NV <= 2;
  A wa[kHoistW ? NV : 1][V];  // converted once too (bf16: two instructions an element a row fewer)
  if constexpr (kHoistW) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = k * tpr + lane;
      Vec<T, V> b;
#pragma unroll
      for (int e = 0; e < V; ++e) b.v[e] = from_acc<T>(A(1));
      if (w && j < nv32) b = load_vec<T, V>(w + j * V);
#pragma unroll
      for (int e = 0; e < V; ++e) wa[k][e] = elem(b, e);
    }
  }
  // queues this thread's copies of group g's row into `slot`
  auto issue = [&](int64_t g, int slot) {
    const int64_t row = g * rpb + sub;
    const bool live = g < groups && row < p.rows;
    const int64_t rr = live ? row : 0;
    st.issue(slot, static_cast<const T*>(p.x) + rr * p.x_stride,
             static_cast<const T*>(p.grad_out) + rr * p.grad_out_stride, live, nv32, tpr, lane);
  };
  if constexpr (kStaged) {
    if (stages > 1) issue(blockIdx.x, 0);
    if (stages > 2) issue(blockIdx.x + int64_t(gridDim.x), 1);
  }
  int slot = 0;
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t row = g * rpb + sub;
    const bool live = row < p.rows;
    const int64_t rr = live ? row : 0;
    Vec<T, V> xr[kStaged ? 1 : NV], gr[kStaged ? 1 : NV];  // the row, when not staged
    if constexpr (kStaged) {
      // the copies of the row stages - 1 groups ahead go out before this one is waited for
      issue(g + int64_t(stages - 1) * gridDim.x, slot > 0 ? slot - 1 : stages - 1);
      st.wait();
    } else {
      norm::load_row(xr, gr, static_cast<const T*>(p.x) + rr * p.x_stride,
                     static_cast<const T*>(p.grad_out) + rr * p.grad_out_stride, live, nvec, tpr, lane);
    }
    auto xv = [&](int k) { if constexpr (kStaged) return st.get(slot, k, 0); else return xr[k]; };
    auto gv = [&](int k) { if constexpr (kStaged) return st.get(slot, k, 1); else return gr[k]; };
    // with d = x - base (kShift) or x: mean(d), the variance, mean(g*w) and mean(g*w*(x - mean)) from one
    // reduction (as the forward: plain sums, taken again around their first estimate of the mean when it lies more
    // than 4 standard deviations from 0)
    auto moments = [&](auto shift_tag, A b0, A& off, A& var, A& mean_gw, A& mean_gwc) {
      A s[4] = {A(0), A(0), A(0), A(0)};  // sum d, sum d^2, sum g*w, sum g*w*d
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = k * tpr + lane;
        if (live && j < nv32) {
          if constexpr (kHoistW) {
            const Vec<T, V> a = xv(k), gg = gv(k);
#pragma unroll
            for (int e = 0; e < V; ++e) {
              const A d = decltype(shift_tag)::value ? elem(a, e) - b0 : elem(a, e);
              const A gw = elem(gg, e) * wa[k][e];
              s[0] += d;
              s[1] += d * d;
              s[2] += gw;
              s[3] += gw * d;
            }
          } else {
            Vec<T, V> b;
            if (w) b = load_vec_keep<T, V>(wl + j * V, keep);
            add_moments<decltype(shift_tag)::value>(s, xv(k), gv(k), b, w != nullptr, b0);
          }
        }
      }
      group_sum<4, false, (NV <= 2 || sizeof(T) == 2)>(s, tpr, sub, smem[buf]);
      off = s[0] * inv_n;
      var = s[1] * inv_n - off * off;
      mean_gw = s[2] * inv_n;
      mean_gwc = s[3] * inv_n - off * mean_gw;
    };
    A base = A(0), off, var, mean_gw, mean_gwc;
    moments(std::false_type{}, base, off, var, mean_gw, mean_gwc);
    // the mean far from 0 (as the forward): the sums again around their first estimate of the mean;
    // group_any_of_sums keeps the branch uniform where the reduction needs it (no vote where a block holds one row)
    const bool shifted = norm::group_any_of_sums(off * off > A(16) * var, tpr);
    if (shifted) {
      if (tpr > kWarpSize) __syncthreads();  // block-uniform here: every thread has read smem[buf]
      base = off;
      moments(std::true_type{}, base, off, var, mean_gw, mean_gwc);
    }
    var = var > A(0) ? var : A(0);
    const A rstd = rsqrtf(var + A(p.eps));
    const A shift = -off * rstd;         // xhat = (x - base) * rstd + shift, |shift| <= 4 (as the forward)
    const A mean_gwx = rstd * mean_gwc;  // mean(g*w*xhat)
    // dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) = fma(-xhat, c1, fma(g*w, rstd, c0)): two instructions
    const A c0 = -rstd * mean_gw, c1 = rstd * mean_gwx;
    T* dx = static_cast<T*>(p.grad_x) + rr * p.cols;
    auto write = [&](auto shift_tag) {
      constexpr bool kShift = decltype(shift_tag)::value;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = k * tpr + lane;
        if (live && j < nv32) {
          const Vec<T, V> a = xv(k), gg = gv(k);
          [[maybe_unused]] Vec<T, V> b;  // the weight's vector (where it is not hoisted)
          if constexpr (!kHoistW) {
            if (w) b = load_vec_keep<T, V>(wl + j * V, keep);
          }
          Vec<T, V> o;
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const A gf = elem(gg, e);
            const A xhat = fmaf(kShift ? elem(a, e) - base : elem(a, e), rstd, shift);
            A gw;
            if constexpr (kHoistW) {
              gw = gf * wa[k][e];  // ones where there is no weight
            } else {
              gw = w ? gf * elem(b, e) : gf;
            }
            o.v[e] = from_acc<T>(fmaf(-xhat, c1, fmaf(gw, rstd, c0)));
            dw[k][e] += gf * xhat;
            db[k][e] += gf;
          }
          store_vec<T, V>(dx + j * V, o);
        }
      }
    };
    if (shifted) {
      write(std::true_type{});
    } else {
      write(std::false_type{});
    }
    if constexpr (kStaged) slot = slot + 1 < stages ? slot + 1 : 0;
    buf ^= 1;
  }
  if constexpr (kStaged) norm::copy_wait(0);  // the groups queued past the last row are empty: nothing in flight
  A* ws = static_cast<A*>(p.workspace);
  const int64_t part = int64_t(gridDim.x) * p.cols;
  if (want_dw) {  // block-uniform
    write_partial<NV, V>(dw, ws + int64_t(blockIdx.x) * p.cols, ln_bwd_merge, p.cols, nvec, tpr, rpb, lane, sub);
    if (rpb > 1) __syncthreads();  // ln_bwd_merge is reused for db
  }
  if (want_db) {
    write_partial<NV, V>(db, ws + part + int64_t(blockIdx.x) * p.cols, ln_bwd_merge, p.cols, nvec, tpr, rpb, lane,
                         sub);
  }
}


using BwdRegsKernel = void (*)(LayerNormBackward, int, int);

// The register kernel for nv vectors per thread (two: the staged 2-vector plan).
template <typename T>
BwdRegsKernel bwd_regs_kernel(int nv, bool two) {
  if constexpr (std::is_same_v<T, double>) {
    return nullptr;
  } else {
    switch (nv) {
      case 1: return ln_bwd_regs<T, 1>;
      case 2:
        if constexpr (norm::kStageRows<T>) {  // fp16 / bf16: the staged 2-vector plan
          if (two) return ln_bwd_regs<T, 2, true>;
        }
        return ln_bwd_regs<T, 2>;
      default: return ln_bwd_regs<T, 4>;
    }
  }
}

// The same plan for the workspace query and the launch (same device, same parameters); *two: whether it is the
// staged 2-vector one.
template <typename T>
norm::BwdPlan bwd_plan(const LayerNormBackward& p, bool* two) {
  constexpr int V = kVec<T>;
  const bool vec = p.cols % V == 0 && p.x_stride % V == 0 && p.grad_out_stride % V == 0 && aligned(p.x, 16) &&
                   aligned(p.grad_out, 16) && aligned(p.grad_x, 16) && (p.weight == nullptr || aligned(p.weight, 16));
  const bool params = p.grad_weight != nullptr || p.grad_bias != nullptr;
  constexpr bool kF16 = std::is_same_v<T, f16>;
  constexpr bool kPlanned = std::is_same_v<T, bf16> || kF16;
  const bool high = kPlanned && norm::dram_gbs_per_sm() >= kLnBwdHighGbsPerSm;
  auto plan = [&](bool t) {
    const int target = sizeof(T) == 2 && (p.cols / V < 128 || t) ? 2 : 4;
    const int slots = YIRAGE_NORM_BWD_STAGES_LN > 0 ? YIRAGE_NORM_BWD_STAGES_LN : t || (high && !kF16) ? 2 : 1;
    return norm::plan_bwd<T>(
        p.rows, p.cols, vec, params, target, [t](int nv) { return bwd_regs_kernel<T>(nv, t); },
        [t](int nv) { return ln_bwd_staged<T>(nv, t); }, slots, ln_bwd_general<T, V>, ln_bwd_general<T, 1>);
  };
  *two = false;
  if (!norm::kStageRows<T> || (!kPlanned && YIRAGE_NORM_BWD_LN_TWO_VEC != 1) || !vec || p.cols / V < 128 ||
      YIRAGE_NORM_BWD_LN_TWO_VEC == 0) {
    return plan(false);
  }
  const norm::BwdPlan b = plan(true);
  if (!b.rp.regs || b.rp.nv != 2) return plan(false);
  if (YIRAGE_NORM_BWD_LN_TWO_VEC == 1 || !high) {
    *two = true;
    return b;
  }
  const norm::BwdPlan four = plan(false);
  *two = !four.rp.regs || b.resident * b.block >= four.resident * four.block;
  return *two ? b : four;
}

template <typename T>
cudaError_t bwd_launch(const LayerNormBackward& p, cudaStream_t stream) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  bool two = false;
  const norm::BwdPlan b = bwd_plan<T>(p, &two);
  if ((p.grad_weight || p.grad_bias) && p.workspace == nullptr) return cudaErrorInvalidValue;
  cudaError_t e = norm::launch_bwd(
      b, p, [two](int nv) { return bwd_regs_kernel<T>(nv, two); }, ln_bwd_general<T, V>, ln_bwd_general<T, 1>,
      stream);
  const A* ws = static_cast<const A*>(p.workspace);
  T* dw = static_cast<T*>(p.grad_weight);
  T* db = static_cast<T*>(p.grad_bias);
  if (e != cudaSuccess || (dw == nullptr && db == nullptr)) return e;
  // the weight's partial rows, then the bias's: both in one launch when both are wanted
  if (dw == nullptr) return norm::colsum<T, A>(ws + b.grid * p.cols, b.grid, p.cols, db, nullptr, stream);
  return norm::colsum<T, A>(ws, b.grid, p.cols, dw, db, stream);
}

}  // namespace

int64_t layer_norm_backward_workspace(const LayerNormBackward& p) {
  if (p.rows <= 0 || p.cols <= 0 || (p.grad_weight == nullptr && p.grad_bias == nullptr)) return 0;
  int64_t n = 0;
  auto get = [&]() -> cudaError_t {
    bool two = false;
    YIRAGE_CUDA_DISPATCH(p.dtype, T, n = 2 * bwd_plan<T>(p, &two).grid * p.cols);
    return cudaSuccess;
  };
  (void)get();
  return n;
}

cudaError_t layer_norm_backward(const LayerNormBackward& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return bwd_launch<T>(p, stream));
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
