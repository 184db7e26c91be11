// Block sizes and scratch layout of the attention kernels; instantiates the tile loops once per ISA and
// picks one at run time (isa.h).
#include "attention.h"
#include "sgemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <array>
#include <type_traits>
#include <vector>

namespace yirage::kernels::cpu {
namespace {

// Scratch regions start on 64-byte boundaries (16 floats; 8 doubles use 128 bytes, harmless).
constexpr int64_t kAlign = 16;
int64_t padded(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Offsets (in accumulation-type elements) of one thread's forward scratch for tiles of R stacked query rows:
// the score tile S/P (R, BK), the output accumulator (R, D), converted Q (R, D), K and V (BK, D) tiles, and
// the row max and sum.
struct FwdScratch {
  int64_t s, acc, q, k, v, m, l, total;
};
FwdScratch fwd_scratch(int64_t bq, int64_t bk, int64_t d) {
  FwdScratch o{};
  int64_t at = 0;
  const auto take = [&](int64_t n) { const int64_t r = at; at += padded(n); return r; };
  o.s = take(bq * bk);
  o.acc = take(bq * d);
  o.q = take(bq * d);
  o.k = take(bk * d);
  o.v = take(bk * d);
  o.m = take(bq);
  o.l = take(bq);
  o.total = at;
  return o;
}

// The backward's for tiles of R stacked query rows: the dK and dV accumulators of a whole key/value head
// (Sk, D), converted Q and dO (R, D), the dQ accumulator (R, D), D_i and lse of the rows, converted K and
// V tiles (BK, D), and the P and dP/dS tiles (R, BK).
struct BwdScratch {
  int64_t dk, dv, q, dout, dq, di, lse, k, v, s, dp, total;
};
BwdScratch bwd_scratch(int64_t sk, int64_t rows, int64_t bk, int64_t d) {
  BwdScratch o{};
  int64_t at = 0;
  const auto take = [&](int64_t n) { const int64_t r = at; at += padded(n); return r; };
  o.dk = take(sk * d);
  o.dv = take(sk * d);
  o.q = take(rows * d);
  o.dout = take(rows * d);
  o.dq = take(rows * d);
  o.di = take(rows);
  o.lse = take(rows);
  o.k = take(bk * d);
  o.v = take(bk * d);
  o.s = take(rows * bk);
  o.dp = take(rows * bk);
  o.total = at;
  return o;
}

// The scratch of the bf16-product loops (attention_bf16_impl.h), in bytes, each region 64-byte aligned.
// Forward, for tiles of `rows` stacked query rows: S/P (rows, bk) fp32, the output accumulator (rows, d), row max
// and sum; Q (rows, d rounded up to even) and P (rows, bk rounded up to even) in bf16; the K tile packed as K^T
// (d/2 pair rows of packed_ld(bk) words) and the V tile packed (bk/2 pair rows of packed_ld(d)).
struct Bf16FwdScratch {
  size_t s, acc, m, l, q, p, k, v, total;
};
int64_t even_up(int64_t n) { return (n + 1) / 2 * 2; }
int64_t up16(int64_t n) { return (n + 15) / 16 * 16; }
// Row length (words, or floats) of a packed B operand or a transposed accumulator of n columns: n rounded up to 16,
// plus 16, so that rows of a power-of-two length do not all map to the same cache sets (the packing of a 512-key
// tile ran 5x slower, its GEMM 4% slower, with rows of exactly 512 words).
int64_t packed_ld(int64_t n) { return up16(n) + 16; }
Bf16FwdScratch bf16_fwd_scratch(int64_t rows, int64_t bk, int64_t d) {
  Bf16FwdScratch o{};
  size_t at = 0;
  const auto take = [&](int64_t bytes) { const size_t r = at; at += (size_t(bytes) + 63) / 64 * 64; return r; };
  o.s = take(rows * bk * 4);
  o.acc = take(rows * d * 4);
  o.m = take(rows * 4);
  o.l = take(rows * 4);
  o.q = take(rows * even_up(d) * 2);
  o.p = take(rows * even_up(bk) * 2);
  o.k = take(even_up(d) / 2 * packed_ld(bk) * 4);
  o.v = take(even_up(bk) / 2 * packed_ld(d) * 4);
  o.total = at;
  return o;
}

// Backward: dK^T and dV^T of the whole head (d, packed_ld(sk)) fp32; the head's K^T and V^T packed (d/2 pair rows
// of packed_ld(sk) words) and K packed (sk/2 pair rows of packed_ld(d)); Q and dO (rows, d even) and their
// transposes (d, rows even) in bf16; dQ (rows, d), D_i and lse fp32; S/P and dP/dS (rows, bk) fp32; P and dS
// packed in pairs of rows (rows/2, packed_ld(bk) words), dS row-major in bf16 (rows, bk even); a transpose buffer
// (16, d) fp32.
struct Bf16BwdScratch {
  size_t dkt, dvt, kt, vt, kr, q, dout, qt, dot, dq, di, lse, s, dp, pv, dsv, dsb, tr, total;
};
Bf16BwdScratch bf16_bwd_scratch(int64_t sk, int64_t rows, int64_t bk, int64_t d) {
  Bf16BwdScratch o{};
  size_t at = 0;
  const auto take = [&](int64_t bytes) { const size_t r = at; at += (size_t(bytes) + 63) / 64 * 64; return r; };
  const int64_t dp = even_up(d), rp = even_up(rows);
  o.dkt = take(d * packed_ld(sk) * 4);
  o.dvt = take(d * packed_ld(sk) * 4);
  o.kt = take(dp / 2 * packed_ld(sk) * 4);
  o.vt = take(dp / 2 * packed_ld(sk) * 4);
  o.kr = take(even_up(sk) / 2 * packed_ld(d) * 4);
  o.q = take(rows * dp * 2);
  o.dout = take(rows * dp * 2);
  o.qt = take(d * rp * 2);
  o.dot = take(d * rp * 2);
  o.dq = take(rows * d * 4);
  o.di = take(rows * 4);
  o.lse = take(rows * 4);
  o.s = take(rows * bk * 4);
  o.dp = take(rows * bk * 4);
  o.pv = take(rp / 2 * packed_ld(bk) * 4);
  o.dsv = take(rp / 2 * packed_ld(bk) * 4);
  o.dsb = take(rows * even_up(bk) * 2);
  o.tr = take(16 * d * 4);
  o.total = at;
  return o;
}

size_t acc_size(DType t) { return t == DType::f64 ? sizeof(double) : sizeof(float); }

size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace
}  // namespace yirage::kernels::cpu

// GCC 12 also reports the AVX-512 intrinsics headers' `__Y = __Y` placeholders under -Wuninitialized once
// vexp and vmax are inlined here (target.h silences only -Wmaybe-uninitialized).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define YR_KERNEL_IMPL "attention_impl.h"
#include "per_isa.h"

namespace yirage::kernels::cpu {
namespace {

// Products on our own tiles where sgemm_preferred() holds (AMD CPUs in an AVX-512 variant, YIRAGE_CPU_SGEMM not
// 0); bf16 inputs then take the bf16-product loops in the avx512_bf16 variant, as they do with a matrix engine's
// callback (engine: the glue set one).
bool own_products(DType t) { return t != DType::f64 && sgemm_preferred(); }
bool bf16_products(DType t, bool engine) {
#if YR_HAVE_X86_VARIANTS
  return t == DType::bf16 && (own_products(t) || engine) && active_isa() == Isa::avx512_bf16;
#else
  (void)t;
  (void)engine;
  return false;
#endif
}

}  // namespace

// Forward blocks: a task's Q tile has about 256 rows (head rows x query rows) for long sequences, so the
// GEMMs run near BLAS peak and each K/V tile is reused 256 times; fewer rows for short ones, to have tasks
// for every thread. BK = 512 keys per tile: S is then 512 KiB of fp32.
AttentionPlan attention_forward_plan(AttentionForward& p, int64_t threads) {
  const AttentionDims& d = p.dims;
  const int64_t group = d.heads_q / d.heads_kv, rows_per_kv_head = group * d.seq_q;
  const int64_t rows = rows_per_kv_head >= 768 ? 256 : rows_per_kv_head >= 192 ? 64 : 32;
  const int64_t bk = 512;
  p.block_q = std::max<int64_t>(1, std::min(rows / group, d.seq_q));
  p.block_kv = std::max<int64_t>(1, std::min<int64_t>(bk, d.seq_kv));
  const int64_t blocks = (d.seq_q + p.block_q - 1) / p.block_q;
  // split a group only as far as needed to give every thread a task
  p.heads_per_task = group;
  while (p.heads_per_task % 2 == 0 && d.batch * d.heads_kv * (group / p.heads_per_task) * blocks < threads) {
    p.heads_per_task /= 2;
  }
  AttentionPlan plan;
  plan.tasks = d.batch * (d.heads_q / p.heads_per_task) * blocks;
  p.bf16_products = bf16_products(d.dtype, p.bf16_gemm.fn != nullptr);
  p.own_products = own_products(d.dtype);
  plan.scratch_bytes =
      p.bf16_products
          ? bf16_fwd_scratch(p.heads_per_task * p.block_q, p.block_kv, d.head_dim).total
          : round64(size_t(fwd_scratch(p.heads_per_task * p.block_q, p.block_kv, d.head_dim).total) *
                    acc_size(d.dtype));
  return plan;
}

// Backward blocks: stacked Q tiles of about 256 rows and 256-key tiles keep all five GEMMs (inner dims D,
// BK or rows) large. Query blocks are split over tasks only when the (batch, key/value head) pairs are
// fewer than the threads.
AttentionPlan attention_backward_plan(AttentionBackward& p, int64_t threads) {
  const AttentionDims& d = p.dims;
  const int64_t group = d.heads_q / d.heads_kv;
  p.block_q = std::max<int64_t>(1, std::min<int64_t>(256 / group, d.seq_q));
  p.block_kv = std::max<int64_t>(1, std::min<int64_t>(256, d.seq_kv));
  const int64_t blocks = (d.seq_q + p.block_q - 1) / p.block_q;
  p.splits = 1;
  while (d.batch * d.heads_kv * p.splits < threads && p.splits < blocks) ++p.splits;
  AttentionPlan plan;
  plan.tasks = d.batch * d.heads_kv * p.splits;
  p.bf16_products = bf16_products(d.dtype, p.bf16_gemm.fn != nullptr);
  p.own_products = own_products(d.dtype);
  plan.scratch_bytes =
      p.bf16_products
          ? bf16_bwd_scratch(d.seq_kv, group * p.block_q, p.block_kv, d.head_dim).total
          : round64(size_t(bwd_scratch(d.seq_kv, group * p.block_q, p.block_kv, d.head_dim).total) * acc_size(d.dtype));
  return plan;
}

Status attention_forward(const AttentionForward& p, int64_t task_begin, int64_t task_end, void* scratch) {
  if (p.gemm.fn == nullptr || p.dims.heads_kv <= 0 || p.block_q <= 0 || p.block_kv <= 0 ||
      p.heads_per_task <= 0 || (p.dims.heads_q / p.dims.heads_kv) % p.heads_per_task != 0) {
    return Status::invalid_argument;
  }
  if (p.dims.dtype == DType::f64) {
    return generic::attn_forward_tasks<generic::VecD, double>(p, task_begin, task_end, scratch);
  }
  if (p.bf16_products) {
#if YR_HAVE_X86_VARIANTS
    if (p.dims.dtype == DType::bf16 && best_isa() == Isa::avx512_bf16) {
      return avx512_bf16::attn_forward_bf16(p, task_begin, task_end, scratch);
    }
#endif
    return Status::invalid_argument;
  }
  YR_DISPATCH_ISA(attn_forward_dispatch, p, task_begin, task_end, scratch);
}

Status attention_backward(const AttentionBackward& p, int64_t task_begin, int64_t task_end, void* scratch) {
  if (p.gemm.fn == nullptr || p.dims.heads_kv <= 0 || p.block_q <= 0 || p.block_kv <= 0 || p.splits <= 0) {
    return Status::invalid_argument;
  }
  if (p.dims.dtype == DType::f64) {
    return generic::attn_backward_tasks<generic::VecD, double>(p, task_begin, task_end, scratch);
  }
  if (p.bf16_products) {
#if YR_HAVE_X86_VARIANTS
    if (p.dims.dtype == DType::bf16 && best_isa() == Isa::avx512_bf16) {
      return avx512_bf16::attn_backward_bf16(p, task_begin, task_end, scratch);
    }
#endif
    return Status::invalid_argument;
  }
  YR_DISPATCH_ISA(attn_backward_dispatch, p, task_begin, task_end, scratch);
}

}  // namespace yirage::kernels::cpu
