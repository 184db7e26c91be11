// CPU glue for attention, attention_forward and attention_backward: checks, strides, the BLAS callback,
// per-thread scratch and the thread split. The tile loops (kernels/cpu/attention.h) are vectorized per ISA
// and chosen at run time; their GEMMs run on torch's CPU BLAS through at::cpu::addmm_out, except on AMD CPUs in
// the AVX-512 variants, which multiply fp32 and bf16 tiles themselves (kernels/cpu/attention.h), and bf16 on CPUs
// with AMX-BF16, multiplied on AMX through torch's oneDNN brgemm (cpu/attention_engine.h).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUBlas.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <limits>
#include <tuple>

#include "common/cpu_launch.h"
#include "common/cpu_memory.h"
#include "cpu/attention_engine.h"
#include "kernels/cpu/attention.h"
#include "ops/attention.h"

namespace yirage {
namespace {

namespace k = kernels::cpu;

// kernels::cpu::GemmCallback on torch's CPU BLAS (MKL/OpenBLAS sgemm/dgemm; single-threaded inside a
// parallel region). The operands are wrapped without copies; the direct at::cpu entry skips the dispatcher.
void aten_gemm(void*, bool f64, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t kk, double alpha,
               const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
  const auto opts = at::TensorOptions().dtype(f64 ? at::kDouble : at::kFloat);
  const std::array<int64_t, 2> sa = trans_a ? std::array<int64_t, 2>{1, lda} : std::array<int64_t, 2>{lda, 1};
  const std::array<int64_t, 2> sb = trans_b ? std::array<int64_t, 2>{1, ldb} : std::array<int64_t, 2>{ldb, 1};
  const at::Tensor ta = at::from_blob(const_cast<void*>(a), {m, kk}, sa, opts);
  const at::Tensor tb = at::from_blob(const_cast<void*>(b), {kk, n}, sb, opts);
  at::Tensor tc = at::from_blob(c, {m, n}, {ldc, 1}, opts);
  at::cpu::addmm_out(tc, tc, ta, tb, beta, alpha);
}

// kernels::cpu::Bf16GemmCallback on torch's oneDNN brgemm (at::native::cpublas: B in the VNNI layout, fp32 C),
// which runs on AMX tiles where the CPU has AMX-BF16. Each thread that used it releases the engine
// (brgemm_release) when its tasks are done.
void aten_brgemm_bf16(void*, int64_t m, int64_t n, int64_t kk, const k::bf16* a, int64_t lda, const uint32_t* b,
                      int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  at::native::cpublas::brgemm(m, n, kk, lda, ldb, ldc, accumulate, reinterpret_cast<const at::BFloat16*>(a),
                              reinterpret_cast<const at::BFloat16*>(b), c, /*is_vnni=*/true);
}

k::Bf16GemmCallback bf16_gemm_for(const at::Tensor& q) {
  if (q.scalar_type() != at::kBFloat16 || !cpu_bf16_attention_engine()) return {};
  return {&aten_brgemm_bf16, nullptr};
}

k::Strides4 strides_of(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// The kernels read rows of D contiguous elements; any other strides are theirs to handle.
at::Tensor rows_contiguous(const at::Tensor& t) { return t.stride(3) == 1 || t.size(3) == 1 ? t : t.contiguous(); }

k::AttentionDims dims_of(const char* op, const at::Tensor& q, const at::Tensor& kt, bool causal,
                         std::optional<double> scale) {
  k::AttentionDims d;
  d.batch = q.size(0);
  d.heads_q = q.size(1);
  d.seq_q = q.size(2);
  d.head_dim = q.size(3);
  d.heads_kv = kt.size(1);
  d.seq_kv = kt.size(2);
  d.causal = causal;
  d.scale = attention_scale(q, scale);
  d.dtype = cpu_kernel_dtype(op, q.scalar_type());
  return d;
}

at::ScalarType acc_type(const at::Tensor& q) { return q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

// Runs plan.tasks tasks on torch's intra-op threads, each thread with its own scratch (allocated once per
// call and thread), and raises if a kernel call returned an error status.
// engine: the tasks multiply on the matrix engine (each thread releases it after them).
template <typename Fn>
void run_tasks(const char* op, const k::AttentionPlan& plan, bool engine, const Fn& fn) {
  std::atomic<int> status{0};
  at::parallel_for(0, plan.tasks, 1, [&](int64_t begin, int64_t end) {
    at::Tensor scratch = at::empty({static_cast<int64_t>(plan.scratch_bytes)}, at::TensorOptions().dtype(at::kByte));
    struct Release {
      bool on;
      ~Release() {
        if (on) at::native::cpublas::brgemm_release(/*is_vnni=*/true);
      }
    } release{engine};
    const k::Status s = fn(begin, end, scratch.data_ptr());
    if (s != k::Status::ok) status.store(static_cast<int>(s));
  });
  TORCH_CHECK(status.load() == 0, "yirage.", op, ": CPU kernel failed with status ", status.load());
}

std::tuple<at::Tensor, at::Tensor> forward(const char* op, const at::Tensor& q, const at::Tensor& kt,
                                           const at::Tensor& v, bool causal, std::optional<double> scale,
                                           bool want_lse) {
  check_attention(op, q, kt, v, scale);
  const k::AttentionDims d = dims_of(op, q, kt, causal, scale);
  at::Tensor out = cpu_empty({d.batch, d.heads_q, d.seq_q, d.head_dim}, q.options());
  at::Tensor lse = want_lse ? at::empty({d.batch, d.heads_q, d.seq_q}, q.options().dtype(acc_type(q))) : at::Tensor();
  if (out.numel() == 0) return {out, lse};
  const at::Tensor qc = rows_contiguous(q), kc = rows_contiguous(kt), vc = rows_contiguous(v);
  k::AttentionForward p;
  p.dims = d;
  p.q = qc.const_data_ptr();
  p.k = kc.const_data_ptr();
  p.v = vc.const_data_ptr();
  p.q_strides = strides_of(qc);
  p.k_strides = strides_of(kc);
  p.v_strides = strides_of(vc);
  p.out = out.data_ptr();
  p.lse = want_lse ? lse.data_ptr() : nullptr;
  p.gemm = {&aten_gemm, nullptr};
  p.bf16_gemm = bf16_gemm_for(q);
  const k::AttentionPlan plan = k::attention_forward_plan(p, at::get_num_threads());
  run_tasks(op, plan, p.bf16_products && p.bf16_gemm.fn != nullptr,
            [&](int64_t b, int64_t e, void* s) { return k::attention_forward(p, b, e, s); });
  return {out, lse};
}

at::Tensor attention_cpu(const at::Tensor& q, const at::Tensor& kt, const at::Tensor& v, bool causal,
                         std::optional<double> scale) {
  return std::get<0>(forward("attention", q, kt, v, causal, scale, /*want_lse=*/false));
}

std::tuple<at::Tensor, at::Tensor> attention_forward_cpu(const at::Tensor& q, const at::Tensor& kt,
                                                         const at::Tensor& v, bool causal,
                                                         std::optional<double> scale) {
  return forward("attention_forward", q, kt, v, causal, scale, /*want_lse=*/true);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward_cpu(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& kt, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, std::optional<double> scale) {
  const char* op = "attention_backward";
  check_attention_backward(grad_out, q, kt, v, out, lse, scale);
  const k::AttentionDims d = dims_of(op, q, kt, causal, scale);
  at::Tensor dq = cpu_empty(q.sizes(), q.options());
  if (q.numel() == 0 || kt.numel() == 0) {  // no query rows, or no keys: every gradient is zero
    return {dq.zero_(), at::zeros(kt.sizes(), kt.options()), at::zeros(v.sizes(), v.options())};
  }
  const at::Tensor gc = rows_contiguous(grad_out), qc = rows_contiguous(q), kc = rows_contiguous(kt),
                   vc = rows_contiguous(v), oc = rows_contiguous(out), lc = lse.contiguous();
  k::AttentionBackward p;
  p.dims = d;
  p.grad_out = gc.const_data_ptr();
  p.q = qc.const_data_ptr();
  p.k = kc.const_data_ptr();
  p.v = vc.const_data_ptr();
  p.out = oc.const_data_ptr();
  p.lse = lc.const_data_ptr();
  p.grad_out_strides = strides_of(gc);
  p.q_strides = strides_of(qc);
  p.k_strides = strides_of(kc);
  p.v_strides = strides_of(vc);
  p.out_strides = strides_of(oc);
  p.gemm = {&aten_gemm, nullptr};
  p.bf16_gemm = bf16_gemm_for(q);
  const k::AttentionPlan plan = k::attention_backward_plan(p, at::get_num_threads());
  // one task per (batch, key/value head) writes dk and dv; when the query blocks are split over several
  // tasks, each writes partial sums in the accumulation type, added up below
  const std::array<int64_t, 5> part_shape = {d.batch, d.heads_kv, p.splits, d.seq_kv, d.head_dim};
  const auto part_opts = p.splits > 1 ? q.options().dtype(acc_type(q)) : q.options();
  at::Tensor dk = cpu_empty(part_shape, part_opts), dv = cpu_empty(part_shape, part_opts);
  p.grad_q = dq.data_ptr();
  p.grad_k = dk.data_ptr();
  p.grad_v = dv.data_ptr();
  run_tasks(op, plan, p.bf16_products && p.bf16_gemm.fn != nullptr,
            [&](int64_t b, int64_t e, void* s) { return k::attention_backward(p, b, e, s); });
  if (p.splits > 1) {
    dk = at::sum(dk, {2}).to(q.scalar_type());
    dv = at::sum(dv, {2}).to(q.scalar_type());
  } else {
    dk = dk.view(kt.sizes());
    dv = dv.view(kt.sizes());
  }
  return {dq, dk, dv};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CPU, m) {
  m.impl("attention", &attention_cpu);
  m.impl("attention_forward", &attention_forward_cpu);
  m.impl("attention_backward", &attention_backward_cpu);
}

}  // namespace yirage
