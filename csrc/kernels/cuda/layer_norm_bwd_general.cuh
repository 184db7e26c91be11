// The LayerNorm backward's per-vector sums (add_moments, shared by both paths) and its long-row path (ln_bwd_general),
// for layer_norm_bwd.cu, which includes this once, inside its anonymous namespace (its using declarations before); the
// register path, the plan and the launch are there.
#pragma once

// Adds one vector's terms to the sums of the backward, with d = x - base (kShift) or x: sum d, sum d^2, sum g*w,
// sum g*w*d (w: the weight's vector when has_w). Elements are converted one at a time (elem): bf16 by a shift or a
// mask, which took the bf16 4-vector kernel from 24 bytes of spills to none and 157.2 -> 146.7 us at 16384x4096
// (H200); unpacking whole vectors first spilled more and ran slower (cuda-norm-bwd-h200-2026-11-26.md).
template <bool kShift, typename A, typename T, int V>
__device__ __forceinline__ void add_moments(A (&s)[4], const Vec<T, V>& x, const Vec<T, V>& g, const Vec<T, V>& w,
                                            bool has_w, A base) {
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const A d = kShift ? elem(x, e) - base : elem(x, e);
    const A gw = has_w ? elem(g, e) * elem(w, e) : elem(g, e);
    s[0] += d;
    s[1] += d * d;
    s[2] += gw;
    s[3] += gw * d;
  }
}

// ---------------------------------------------------------------- backward, long-row path
template <typename T, int V>
__global__ void __launch_bounds__(1024) ln_bwd_general(LayerNormBackward p) {
  pdl_launch_dependents();
  using A = acc_t<T>;
  __shared__ A smem[1024 / kWarpSize * 4];
  const int64_t nv = p.cols / V;
  const T* w = static_cast<const T*>(p.weight);
  const int64_t part = int64_t(gridDim.x) * p.cols;
  A* wsw = p.grad_weight ? static_cast<A*>(p.workspace) + int64_t(blockIdx.x) * p.cols : nullptr;
  A* wsb = p.grad_bias ? static_cast<A*>(p.workspace) + part + int64_t(blockIdx.x) * p.cols : nullptr;
  const A inv_n = A(1) / A(p.cols);
  // rows of at most KA vectors per thread keep the block's partial gradient rows in registers; longer ones
  // accumulate them in the workspace (a read and a write per element and row)
  constexpr int KA = norm::general_acc_vectors<A, V>() > 0 ? norm::general_acc_vectors<A, V>() : 1;
  const bool in_regs = norm::general_acc_vectors<A, V>() > 0 && nv <= int64_t(KA) * blockDim.x;
  A dw[KA][V], db[KA][V];
#pragma unroll
  for (int k = 0; k < KA; ++k) {
#pragma unroll
    for (int e = 0; e < V; ++e) { dw[k][e] = A(0); db[k][e] = A(0); }
  }
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const bool first = row == blockIdx.x;
    const T* x = static_cast<const T*>(p.x) + row * p.x_stride;
    const T* go = static_cast<const T*>(p.grad_out) + row * p.grad_out_stride;
    // with d = x - base: mean(d), the variance, mean(g*w) and mean(g*w*(x - mean)) from one read of the row
    auto moments = [&](A base, A& off, A& var, A& mean_gw, A& mean_gwc) {
      A s[4] = {A(0), A(0), A(0), A(0)};  // sum d, sum d^2, sum g*w, sum g*w*d
      for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        Vec<T, V> b;
        if (w) b = load_vec<T, V>(w + i * V);
        add_moments<true>(s, load_vec<T, V>(x + i * V), load_vec<T, V>(go + i * V), b, w != nullptr, base);
      }
      norm::block_sum_k<4>(s, smem);
      off = s[0] * inv_n;
      var = s[1] * inv_n - off * off;
      mean_gw = s[2] * inv_n;
      mean_gwc = s[3] * inv_n - off * mean_gw;
    };
    A base = to_acc(x[0]), off, var, mean_gw, mean_gwc;  // x - mean as (x - base) - off, as the forward
    moments(base, off, var, mean_gw, mean_gwc);
    if (off * off > A(16) * var) {  // x[0] far from the mean (as the forward): again around the first estimate
      base += off;
      moments(base, off, var, mean_gw, mean_gwc);
    }
    var = var > A(0) ? var : A(0);
    const A rstd = A(1) / sqrt(var + A(p.eps));
    const A mean_gwx = rstd * mean_gwc;  // mean(g*w*xhat)
    T* dx = static_cast<T*>(p.grad_x) + row * p.cols;
    // writes dx of vector i; its terms of the weight and bias gradients into gx, gb
    auto out = [&](int64_t i, A (&gx)[V], A (&gb)[V]) {
      const Vec<T, V> a = load_vec<T, V>(x + i * V), g = load_vec<T, V>(go + i * V);
      Vec<T, V> b, o;
      if (w) b = load_vec<T, V>(w + i * V);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const A gf = to_acc(g.v[e]);
        const A xhat = ((to_acc(a.v[e]) - base) - off) * rstd;
        const A gw = w ? gf * to_acc(b.v[e]) : gf;
        o.v[e] = from_acc<T>(rstd * (gw - mean_gw - xhat * mean_gwx));
        gx[e] = gf * xhat;
        gb[e] = gf;
      }
      store_vec<T, V>(dx + i * V, o);
    };
    if (in_regs) {
#pragma unroll
      for (int k = 0; k < KA; ++k) {
        const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
        if (i < nv) {
          A gx[V], gb[V];
          out(i, gx, gb);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            dw[k][e] += gx[e];
            db[k][e] += gb[e];
          }
        }
      }
    } else {
      for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        A gx[V], gb[V];
        out(i, gx, gb);
        // this thread's own columns of its block's partial rows: no other thread touches them
#pragma unroll
        for (int e = 0; e < V; ++e) {
          if (wsw) { A* q = wsw + i * V + e; *q = first ? gx[e] : *q + gx[e]; }
          if (wsb) { A* q = wsb + i * V + e; *q = first ? gb[e] : *q + gb[e]; }
        }
      }
    }
  }
  if (in_regs) {  // every block has at least one row: its partial rows are complete
#pragma unroll
    for (int k = 0; k < KA; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
      if (i < nv) {
#pragma unroll
        for (int e = 0; e < V; ++e) {
          if (wsw) wsw[i * V + e] = dw[k][e];
          if (wsb) wsb[i * V + e] = db[k][e];
        }
      }
    }
  }
}
