// Flash-style attention on the CPU, forward and backward (torch-free).
//
// Strategy (FlashAttention-2 on a CPU): the Sq x Sk score matrix is never formed. Work is split into
// query blocks x key blocks so every product is a GEMM on tiles: S = scale * Q_i K_j^T (BQ x BK), and the
// caller's GEMM (a BLAS behind a callback, see GemmCallback) does them at BLAS speed - on AMD CPUs with AVX-512
// our own tiles do instead (gemm_f32_avx512.h, gemm_bf16_avx512.h: torch's MKL runs AVX2 kernels there, about
// 110 GFLOP/s a core against 265 for fp32 tiles and 500 for bf16 ones on an AVX-512 EPYC; the callback then
// serves fp64 only; YIRAGE_CPU_SGEMM=0 keeps the callback, as for matmul). Between the GEMMs,
// vectorized per-ISA loops (isa.h) apply the causal mask, keep the online softmax (running row max m,
// row sum l, accumulator O rescaled by exp(m_old - m_new) when the max grows) and finish O / l.
//   forward : one task per (batch, key/value head, query block), the block's rows of the query heads that
//             share the key/value head (GQA) stacked into one Q tile, so each K/V tile is read once per group
//             and decoding (Sq = 1) is a GEMM with one row per query head; the group is split only when
//             there would be fewer tasks than threads. Per key block: S = scale Q K^T, P = exp(S - m),
//             O = O * alpha + P V. Output O / l and lse = m + log(l) (-inf, with zeros out, for a query row
//             that sees no key). Causal query blocks are handed out long-short-long-short, so the static
//             thread split gets even work.
//   backward: one task per (batch, key/value head), rows of the group's query heads stacked as in the
//             forward, so dK and dV come out summed over the group (GQA); dK and dV of the whole head are
//             accumulated in scratch. D_i = rowsum(dO * O); per query block i and key block j:
//             P = exp(S - lse), dV_j += P^T dO_i, dP = dO_i V_j^T, dS = P * (dP - D_i),
//             dQ_i += scale dS K_j (written when block i is done), dK_j += scale dS^T Q_i. With fewer
//             (batch, key/value head) pairs than threads the query blocks are split over tasks, each with its
//             own dK/dV partial sums for the caller to add up.
// Inputs are any (B, H, S, D) strides with a contiguous last dim (broadcast dims of stride 0 included);
// tiles of fp32 (fp64) inputs with a row stride >= D feed the GEMM in place, other tiles (bf16/fp16, or
// stride-0 rows) are converted into fp32 scratch first - except bf16 in the avx512_bf16 variant on AMD CPUs,
// whose products run bf16 x bf16 -> fp32 on AVX512-BF16 dot products (attention_bf16_impl.h: tiles packed in
// pairs along the products' inner dim, P and dS rounded to bf16, dK / dV accumulated transposed; about 4.6x the
// fp32 GEMM rate of an AVX-512 EPYC core, where on an Intel Xeon with AMX the same tiles ran at 80 GFLOP/s a
// core, below its fp32 ones), and on CPUs with AMX-BF16, whose glue hands the same loops a Bf16GemmCallback on
// the matrix engine. Accumulation in fp32 (fp64 for fp64). Causal
// masks are aligned bottom-right: query i sees keys j <= i + Sk - Sq; key blocks past a query block's
// last visible key are skipped. Any head dim; memory is linear in the sequence lengths (per-thread
// scratch of a few tiles, plus O(Sk * D) per thread in the backward).
#pragma once

#include <cstddef>
#include <cstdint>

#include "types.h"

namespace yirage::kernels::cpu {

// C (m x n) = alpha * op(A) op(B) + beta * C on row-major matrices of the accumulation type (float, or
// double when f64): op(A) is m x k (A stored k x m when trans_a), op(B) is k x n (B stored n x k when
// trans_b); ld* are row strides. beta == 0 means C is not read. Supplied by the caller (the glue passes
// one backed by torch's BLAS) so this code stays framework-free; it may throw.
struct GemmCallback {
  void (*fn)(void* ctx, bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
             const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc) = nullptr;
  void* ctx = nullptr;
};

// bf16 x bf16 -> fp32 products on a matrix engine, for the bf16-product loops (bf16_products): C (m x n) = A B, or
// C += A B with accumulate; A row-major bf16 (m x k, row stride lda elements, k even), B packed in pairs along K as
// gemm_bf16_avx512.h packs it (k / 2 rows of ldb 32-bit words, word (p, j) = (B[2p][j], B[2p + 1][j]): the VNNI
// layout of AMX), C fp32 (row stride ldc). Supplied by the glue where the CPU has AMX-BF16 (torch's oneDNN brgemm);
// null elsewhere, where our AVX512-BF16 tiles multiply. It may throw.
struct Bf16GemmCallback {
  void (*fn)(void* ctx, int64_t m, int64_t n, int64_t k, const bf16* a, int64_t lda, const uint32_t* b, int64_t ldb,
             float* c, int64_t ldc, bool accumulate) = nullptr;
  void* ctx = nullptr;
};

// Element strides of a (B, H, S, D) tensor whose last dim is contiguous.
struct Strides4 {
  int64_t b = 0, h = 0, s = 0;
};

struct AttentionDims {
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  bool causal = false;
  double scale = 1.0;
  DType dtype = DType::f32;
};

struct AttentionForward {
  AttentionDims dims;
  const void* q = nullptr;  // (B, Hq, Sq, D)
  const void* k = nullptr;  // (B, Hk, Sk, D)
  const void* v = nullptr;  // (B, Hk, Sk, D)
  Strides4 q_strides, k_strides, v_strides;
  void* out = nullptr;  // (B, Hq, Sq, D) contiguous
  void* lse = nullptr;  // null, or (B, Hq, Sq) contiguous of the accumulation type
  GemmCallback gemm;
  Bf16GemmCallback bf16_gemm;  // set before the plan: bf16 inputs then take the bf16-product loops on it
  // Set by attention_forward_plan: query rows per head and keys per tile, and how many query heads of a
  // GQA group share one task (their rows are stacked, so each K/V tile is read once for all of them);
  // bf16_products: bf16 inputs with the avx512_bf16 variant active, whose products run bf16 x bf16 -> fp32
  // (P rounded to bf16 before P V) instead of on fp32 copies of the tiles.
  int64_t block_q = 0, block_kv = 0, heads_per_task = 1;
  bool bf16_products = false;
  // own_products: fp32 products on gemm_f32_avx512.h instead of the callback (the AVX-512 variants, where
  // sgemm_preferred() holds: AMD CPUs, whose MKL runs AVX2 kernels; set by the plan)
  bool own_products = false;
};

struct AttentionBackward {
  AttentionDims dims;
  const void* grad_out = nullptr;  // (B, Hq, Sq, D)
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* out = nullptr;  // (B, Hq, Sq, D): the forward's output
  const void* lse = nullptr;  // (B, Hq, Sq) contiguous, accumulation type: the forward's log-sum-exp
  Strides4 grad_out_strides, q_strides, k_strides, v_strides, out_strides;
  void* grad_q = nullptr;  // (B, Hq, Sq, D) contiguous
  // splits == 1: (B, Hk, Sk, D) contiguous, the input dtype. splits > 1: (B, Hk, splits, Sk, D) contiguous
  // of the accumulation type, partial sums over disjoint query blocks, for the caller to add over dim 2.
  void* grad_k = nullptr;
  void* grad_v = nullptr;
  GemmCallback gemm;
  Bf16GemmCallback bf16_gemm;  // as in AttentionForward
  // Set by attention_backward_plan: query rows per head and keys per tile, and into how many tasks the
  // query blocks of one (batch, key/value head) are split; bf16_products as in AttentionForward (P and dS
  // rounded to bf16 before their products).
  int64_t block_q = 0, block_kv = 0, splits = 1;
  bool bf16_products = false;
  bool own_products = false;  // as in AttentionForward
};

// Work split of a call: independent tasks, and the scratch one thread needs (64-byte multiple).
struct AttentionPlan {
  int64_t tasks = 0;
  size_t scratch_bytes = 0;
};

// Choose the block sizes (stored in p) and size the work for `threads` workers. Dims must be validated
// and non-empty.
AttentionPlan attention_forward_plan(AttentionForward& p, int64_t threads);
AttentionPlan attention_backward_plan(AttentionBackward& p, int64_t threads);

// Run tasks [task_begin, task_end) with `scratch` (plan.scratch_bytes, 64-byte aligned) private to the
// calling thread. Tasks write disjoint outputs, so threads may run any task ranges concurrently.
Status attention_forward(const AttentionForward& p, int64_t task_begin, int64_t task_end, void* scratch);
Status attention_backward(const AttentionBackward& p, int64_t task_begin, int64_t task_end, void* scratch);

}  // namespace yirage::kernels::cpu
