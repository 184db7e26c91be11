// RMSNorm backward on CUDA (the forward, and the register and long-row paths it shares with the backward:
// rms_norm.cu).
//
// Register path up to 512 * 4 vectors (16K bf16, 8K fp32; 16-bit types aim at 2 vectors per thread), then
// the long-row path. fp16 / bf16 rows stream through shared memory with cp.async, the next row's copy in
// flight while this one is computed (norm::RowStager; bf16 on an H100, kernel alone: 79 -> 84% of the copy
// bandwidth at 16384x4096, 69 -> 80% at 4096x8192); fp32 rows are loaded into registers (staged: slower).
// One pass per row computes sum(x^2) and sum(g*w*x) in one reduction, then
// dx = rstd*g*w - x*rstd^3*sum(g*w*x)/N (+ grad_add). The weight gradient sum(g*x*rstd) is accumulated
// per thread in registers across the rows of a persistent grid (SMs x resident blocks), merged per block
// in shared memory into one fp32 row of a workspace, and reduced column-wise by a second kernel
// (deterministic, no atomics). The long-row backward keeps its block's partial row in registers where a row
// is at most 4 vectors per thread (fp32 rows of 16-byte vectors, up to 16K columns; element-wise rows, up to 4096),
// else accumulates it in the workspace: fp32 2048x16384 on an H200, 277 -> 150 us with the L2 flushed
// (benchmarks/results/cuda-norm-bwd-h200-2026-11-26.md).
// Accumulation in fp32 (fp64 for fp64).
#include <type_traits>

#include "norm_bwd_common.cuh"
#include "norm_bwd_plan.cuh"
#include "rms_norm.h"

namespace yirage::kernels::cuda {
namespace {

using norm::group_sum;
using norm::block_sum_k;
using norm::RowPlan;
using norm::write_partial;

// Adds one vector's terms to the backward's sums, converted element by element: sum x^2 and sum g*w*x (w: the
// weight's vector when has_w).
template <typename A, typename T, int V>
__device__ __forceinline__ void add_sums(A (&s)[2], const Vec<T, V>& x, const Vec<T, V>& g, const Vec<T, V>& w,
                                         bool has_w) {
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const A xf = to_acc(x.v[e]);
    s[0] += xf * xf;
    s[1] += (has_w ? to_acc(g.v[e]) * to_acc(w.v[e]) : to_acc(g.v[e])) * xf;
  }
}

// ---------------------------------------------------------------- backward, register path
// fp16 / bf16 rows stream through shared memory (norm::RowStager, `stages` >= 1 slots) and each phase reads
// them there again; fp32 rows are loaded into registers (stages = 0). Only the weight-gradient accumulators
// live in registers across rows.
template <typename T, int NV>
__device__ __forceinline__ void rms_bwd_rows(const RmsNormBackward& p, int tpr, int stages) {
  using A = float;
  constexpr int V = kVec<T>;
  constexpr bool kStaged = norm::kStageRows<T>;
  // bf16: each vector unpacked whole by shift/mask (unpack), then the arithmetic: H200, bf16 16384x4096 139.3 ->
  // 125.6 us, 4096x8192 76.8 -> 71.1. fp16 and fp32 convert element by element: the same arrays gave the fp16
  // 2-vector kernel 44 bytes of spills and cost it 15-20% (cuda-norm-bwd-h200-2026-11-26.md).
  constexpr bool kUnpack = std::is_same_v<T, bf16>;
  // the row slots, then cols floats to merge the partials when a block holds several rows
  extern __shared__ __align__(16) unsigned char rms_bwd_dyn[];
  const norm::RowStager<T, NV> st{reinterpret_cast<Vec<T, V>*>(rms_bwd_dyn), stages};
  float* rms_bwd_merge = reinterpret_cast<float*>(rms_bwd_dyn + st.bytes(stages, blockDim.x));
  // two buffers for the reductions, alternating from row group to row group: one barrier per group (two before:
  // H200, kernel alone, bf16 2048x16384 73.0 -> 70.1 us, the rest level; cuda-row-barriers-h200-2026-11-27.md)
  __shared__ A smem[2][512 / kWarpSize * 2];
  int buf = 0;
  const int rpb = blockDim.x / tpr;
  const int lane = threadIdx.x % tpr, sub = threadIdx.x / tpr;
  const int64_t nvec = p.cols / V;
  const int nv32 = int(nvec);  // the register path's rows: at most 512 * NV vectors (32-bit index arithmetic)
  const int64_t groups = (p.rows + rpb - 1) / rpb;
  const T* w = static_cast<const T*>(p.weight);
  const bool want_dw = p.grad_weight != nullptr;
  A dw[NV][V];
#pragma unroll
  for (int k = 0; k < NV; ++k) {
#pragma unroll
    for (int e = 0; e < V; ++e) dw[k][e] = A(0);
  }
  const A inv_n = A(1) / A(p.cols);
  // kHoistW (2 vectors a thread or fewer): a thread's weight vectors are the same in every row, so they are loaded
  // once, into registers (ones where there is no weight: the products below need no branch), instead of twice a row.
  // With group_sum's kScatter, kernel alone on an H200, bf16, us: 4096x8192 68.0 -> 63.9, 16384x4096 122.4 -> 117.3,
  // 65536x1024 120.8 -> 117.7, 4096x5120 46.5 -> 44.7, 2048x16384 (4 vectors, unchanged) level; fp16 up to 1.04x
  // (its 2-vector kernel spills 16 bytes with the weight in registers, and ran 1-3% slower without them than with);
  // fp32 level (cuda-norm-bwd-issue-h200-2026-11-27.md).
  constexpr bool kHoistW = NV <= 2;
  Vec<T, V> wr[kHoistW ? NV : 1];
  if constexpr (kHoistW) {
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int64_t j = int64_t(k) * tpr + lane;
#pragma unroll
      for (int e = 0; e < V; ++e) wr[k].v[e] = from_acc<T>(A(1));
      if (w && j < nvec) wr[k] = load_vec<T, V>(w + j * V);
    }
  }
  auto wvec = [&](int k, int64_t j) {
    if constexpr (kHoistW) {
      return wr[k];
    } else {
      return load_vec<T, V>(w + j * V);
    }
  };
  // queues this thread's copies of group g's row into `slot`
  auto issue = [&](int64_t g, int slot) {
    const int64_t row = g * rpb + sub;
    const bool live = g < groups && row < p.rows;
    const int64_t rr = live ? row : 0;
    st.issue(slot, static_cast<const T*>(p.x) + rr * p.x_stride,
             static_cast<const T*>(p.grad_out) + rr * p.grad_out_stride, live, nv32, tpr, lane);
  };
  if constexpr (kStaged) {
    for (int i = 0; i + 1 < stages; ++i) issue(blockIdx.x + int64_t(i) * gridDim.x, i);
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
    A s[2] = {A(0), A(0)};
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int j = k * tpr + lane;
      if (live && j < nv32) {
        if constexpr (kUnpack) {
          A xf[V], gf[V], wf[V];
          unpack(xv(k), xf);
          unpack(gv(k), gf);
          if (kHoistW || w) unpack(wvec(k, j), wf);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            s[0] += xf[e] * xf[e];
            s[1] += (kHoistW || w ? gf[e] * wf[e] : gf[e]) * xf[e];
          }
        } else {
          const Vec<T, V> a = xv(k), gg = gv(k);
          Vec<T, V> b;
          if (kHoistW || w) b = wvec(k, j);
          add_sums(s, a, gg, b, kHoistW || w != nullptr);
        }
      }
    }
    group_sum<2, false, (NV <= 2)>(s, tpr, sub, smem[buf]);
    const A rstd = rsqrtf(s[0] * inv_n + A(p.eps));
    const A c = rstd * rstd * rstd * s[1] * inv_n;
    T* dx = static_cast<T*>(p.grad_x) + rr * p.cols;
    // the write pass, with or without grad_add (a uniform branch outside it: its address arithmetic and tests
    // were repeated for every vector though grad_add is null in most calls). With it, the 32-bit index arithmetic
    // and RowStager's addresses computed once: kernel alone on an H200, bf16 4096x8192 63.5 -> 57.8 us, 4096x5120
    // 44.6 -> 39.4, 16384x4096 116.9 -> 111.4; fp32 4096x5120 83.9 -> 66.3 (cuda-norm-bwd-issue-h200-2026-11-27.md)
    auto write = [&](auto ga_tag) {
      constexpr bool kGa = decltype(ga_tag)::value;
      const T* ga = kGa ? static_cast<const T*>(p.grad_add) + rr * p.grad_add_stride : nullptr;
#pragma unroll
      for (int k = 0; k < NV; ++k) {
        const int j = k * tpr + lane;
        if (live && j < nv32) {
          Vec<T, V> o;
          if constexpr (kUnpack) {
            A xf[V], gf[V], wf[V], af[V];
            unpack(xv(k), xf);
            unpack(gv(k), gf);
            if (kHoistW || w) unpack(wvec(k, j), wf);
            if constexpr (kGa) unpack(load_vec<T, V>(ga + j * V), af);
#pragma unroll
            for (int e = 0; e < V; ++e) {
              A d = (kHoistW || w ? gf[e] * wf[e] : gf[e]) * rstd - xf[e] * c;
              if constexpr (kGa) d += af[e];
              o.v[e] = from_acc<T>(d);
              if (want_dw) dw[k][e] += gf[e] * (xf[e] * rstd);
            }
          } else {
            const Vec<T, V> a = xv(k), gg = gv(k);
            Vec<T, V> b, ad;
            if (kHoistW || w) b = wvec(k, j);
            if constexpr (kGa) ad = load_vec<T, V>(ga + j * V);
#pragma unroll
            for (int e = 0; e < V; ++e) {
              const A gf = to_acc(gg.v[e]), xf = to_acc(a.v[e]);
              A d = (kHoistW || w ? gf * to_acc(b.v[e]) : gf) * rstd - xf * c;
              if constexpr (kGa) d += to_acc(ad.v[e]);
              o.v[e] = from_acc<T>(d);
              if (want_dw) dw[k][e] += gf * (xf * rstd);
            }
          }
          store_vec<T, V>(dx + j * V, o);
        }
      }
    };
    if (p.grad_add) {
      write(std::true_type{});
    } else {
      write(std::false_type{});
    }
    if constexpr (kStaged) slot = slot + 1 < stages ? slot + 1 : 0;
    buf ^= 1;
  }
  if constexpr (kStaged) norm::copy_wait(0);  // the groups queued past the last row are empty: nothing in flight
  if (!want_dw) return;  // block-uniform
  A* ws = static_cast<A*>(p.workspace) + int64_t(blockIdx.x) * p.cols;
  write_partial<NV, V>(dw, ws, rms_bwd_merge, p.cols, nvec, tpr, rpb, lane, sub);
}

// The kernels: ptxas gives the 2-vector instance 75 registers under __launch_bounds__(512), one 512-thread block
// per SM (a quarter of the warps); capped at 64 (two blocks) it does not spill. The others keep the plain bound:
// capped they spill (4 vectors: 292 bytes at 64 registers), and an explicit minimum of 1 block is not the same
// bound to ptxas (the bf16 4-vector forward got 86 registers with (512, 1) against 64 with (512)).
template <typename T, int NV>
__global__ void __launch_bounds__(512) rms_bwd_regs(RmsNormBackward p, int tpr, int stages) {
  pdl_launch_dependents();  // the column sums' blocks may be scheduled (they wait for this grid's end)
  rms_bwd_rows<T, NV>(p, tpr, stages);
}
template <typename T>
__global__ void __launch_bounds__(512, 2) rms_bwd_regs2(RmsNormBackward p, int tpr, int stages) {
  pdl_launch_dependents();
  rms_bwd_rows<T, 2>(p, tpr, stages);
}

// ---------------------------------------------------------------- backward, long-row path
template <typename T, int V>
__global__ void __launch_bounds__(1024) rms_bwd_general(RmsNormBackward p) {
  pdl_launch_dependents();
  using A = acc_t<T>;
  __shared__ A smem[1024 / kWarpSize * 2];
  const int64_t nv = p.cols / V;
  const T* w = static_cast<const T*>(p.weight);
  A* ws = p.grad_weight ? static_cast<A*>(p.workspace) + int64_t(blockIdx.x) * p.cols : nullptr;
  const A inv_n = A(1) / A(p.cols);
  // rows of at most KA vectors per thread keep the block's partial gradient row in registers; longer ones
  // accumulate it in the workspace (a read and a write per element and row)
  constexpr int KA = norm::general_acc_vectors<A, V>() > 0 ? norm::general_acc_vectors<A, V>() : 1;
  const bool in_regs = norm::general_acc_vectors<A, V>() > 0 && nv <= int64_t(KA) * blockDim.x;
  A dw[KA][V];
#pragma unroll
  for (int k = 0; k < KA; ++k) {
#pragma unroll
    for (int e = 0; e < V; ++e) dw[k][e] = A(0);
  }
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const bool first = row == blockIdx.x;
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    const T* go = static_cast<const T*>(p.grad_out) + row * p.grad_out_stride;
    A s[2] = {A(0), A(0)};
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      const Vec<T, V> a = load_vec<T, V>(x + i * V), g = load_vec<T, V>(go + i * V);
      Vec<T, V> b;
      if (w) b = load_vec<T, V>(w + i * V);
      add_sums(s, a, g, b, w != nullptr);
    }
    block_sum_k<2>(s, smem);
    const A rstd = A(1) / sqrt(s[0] * inv_n + A(p.eps));
    const A c = rstd * rstd * rstd * s[1] * inv_n;
    T* dx = static_cast<T*>(p.grad_x) + row * p.cols;
    const T* ga = p.grad_add ? static_cast<const T*>(p.grad_add) + row * p.grad_add_stride : nullptr;
    // writes dx of vector i; its terms of the weight gradient into gx
    auto out = [&](int64_t i, A (&gx)[V]) {
      const Vec<T, V> a = load_vec<T, V>(x + i * V), g = load_vec<T, V>(go + i * V);
      Vec<T, V> b, ad;
      if (w) b = load_vec<T, V>(w + i * V);
      if (ga) ad = load_vec<T, V>(ga + i * V);
      Vec<T, V> o;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const A xf = to_acc(a.v[e]), gf = to_acc(g.v[e]);
        A d = (w ? gf * to_acc(b.v[e]) : gf) * rstd - xf * c;
        if (ga) d += to_acc(ad.v[e]);
        o.v[e] = from_acc<T>(d);
        gx[e] = gf * (xf * rstd);
      }
      store_vec<T, V>(dx + i * V, o);
    };
    if (in_regs) {
#pragma unroll
      for (int k = 0; k < KA; ++k) {
        const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
        if (i < nv) {
          A gx[V];
          out(i, gx);
#pragma unroll
          for (int e = 0; e < V; ++e) dw[k][e] += gx[e];
        }
      }
    } else {
      for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        A gx[V];
        out(i, gx);
        if (ws) {
#pragma unroll
          for (int e = 0; e < V; ++e) {
            A* q = ws + i * V + e;  // this thread's own columns: no other thread touches them
            *q = first ? gx[e] : *q + gx[e];
          }
        }
      }
    }
  }
  if (ws && in_regs) {  // every block has at least one row: its partial row is complete
#pragma unroll
    for (int k = 0; k < KA; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      if (i < nv) {
#pragma unroll
        for (int e = 0; e < V; ++e) ws[i * V + e] = dw[k][e];
      }
    }
  }
}

template <typename T>
bool bwd_vec_ok(const RmsNormBackward& p) {
  constexpr int V = kVec<T>;
  return p.cols % V == 0 && p.x_stride % V == 0 && p.grad_out_stride % V == 0 && aligned(p.x, 16) &&
         aligned(p.grad_out, 16) && aligned(p.grad_x, 16) && (p.weight == nullptr || aligned(p.weight, 16)) &&
         (p.grad_add == nullptr || (aligned(p.grad_add, 16) && p.grad_add_stride % V == 0));
}

using BwdRegsKernel = void (*)(RmsNormBackward, int, int);

template <typename T>
BwdRegsKernel bwd_regs_kernel(int nv) {
  if constexpr (std::is_same_v<T, double>) {
    return nullptr;
  } else {
    switch (nv) {
      case 1: return rms_bwd_regs<T, 1>;
      case 2: return rms_bwd_regs2<T>;
      default: return rms_bwd_regs<T, 4>;
    }
  }
}

// The same plan for the workspace query and the launch (same device, same parameters).
template <typename T>
norm::BwdPlan bwd_plan(const RmsNormBackward& p) {
  return norm::plan_bwd<T>(p.rows, p.cols, bwd_vec_ok<T>(p), p.grad_weight != nullptr, sizeof(T) == 2 ? 2 : 4,
                           bwd_regs_kernel<T>, [](int) { return norm::kStageRows<T>; }, YIRAGE_NORM_BWD_STAGES,
                           rms_bwd_general<T, kVec<T>>, rms_bwd_general<T, 1>);
}

template <typename T>
cudaError_t bwd_launch(const RmsNormBackward& p, cudaStream_t stream) {
  using A = acc_t<T>;
  const norm::BwdPlan b = bwd_plan<T>(p);
  if (p.grad_weight && p.workspace == nullptr) return cudaErrorInvalidValue;
  cudaError_t e =
      norm::launch_bwd(b, p, bwd_regs_kernel<T>, rms_bwd_general<T, kVec<T>>, rms_bwd_general<T, 1>, stream);
  if (e != cudaSuccess || !p.grad_weight) return e;
  return norm::colsum<T, A>(static_cast<const A*>(p.workspace), b.grid, p.cols, static_cast<T*>(p.grad_weight),
                            nullptr, stream);
}

}  // namespace

int64_t rms_norm_backward_workspace(const RmsNormBackward& p) {
  if (p.rows <= 0 || p.cols <= 0 || p.grad_weight == nullptr) return 0;
  int64_t n = 0;
  auto get = [&]() -> cudaError_t {
    YIRAGE_CUDA_DISPATCH(p.dtype, T, n = bwd_plan<T>(p).grid * p.cols);
    return cudaSuccess;
  };
  (void)get();
  return n;
}

cudaError_t rms_norm_backward(const RmsNormBackward& p, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return cudaSuccess;
  YIRAGE_CUDA_DISPATCH(p.dtype, T, return bwd_launch<T>(p, stream));
  return cudaErrorInvalidValue;
}

}  // namespace yirage::kernels::cuda
