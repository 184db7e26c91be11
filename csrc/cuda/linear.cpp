// CUDA glue for linear, linear_forward and linear_backward.
//
// Forward: out (M, N) = act(x (M, K) @ weight^T + bias). A few rows (M <= 16, fp16/bf16, aligned operands, sm_80
// or newer): one skinny GEMM kernel with the bias and every activation in its epilogue
// (kernels/cuda/linear_epilogue.h). Otherwise one cuBLASLt matmul with the bias and the activation in
// its epilogue where cuBLASLt has them (none; gelu_tanh: cuBLASLt's GELU is the tanh approximation, and
// GELU_AUX also writes z for linear_forward when N is a multiple of 8). gelu (erf) and silu: the BIAS epilogue
// writes z (into pre for linear_forward, else into out) and one element-wise pass (also relu, whose cuBLASLt
// epilogue turns NaN into 0) applies the activation
// (kernels/cuda/linear_epilogue.h). fp64, or a product cuBLASLt finds no algorithm for: cuBLAS GEMM, then the
// element-wise pass adds the bias too. Backward: one kernel dz = grad_out * act'(saved) that also writes
// per-block column sums for the bias gradient (summed by at::sum: deterministic), then grad_x = dz @ weight and
// grad_weight = dz^T @ x through cuBLAS (cuda/blas_gemm.h). torch's handles and workspace for the current
// stream are used: CUDA-graph safe.
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <cublasLt.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "common/cuda_launch.h"
#include "common/rows.h"
#include "cuda/blas_gemm.h"
#include "kernels/cuda/linear_epilogue.h"
#include "ops/linear.h"

namespace yirage {
namespace {

namespace kcu = kernels::cuda;

// The largest power of two (<= 256) that divides the address: what cuBLASLt may assume about alignment.
uint32_t linear_cuda_alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

// Owns the cuBLASLt descriptors of one call.
struct LinearLtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LinearLtDescs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

#define YIRAGE_LT_TRY(expr)                                  \
  do {                                                       \
    if ((expr) != CUBLAS_STATUS_SUCCESS) return false;       \
  } while (0)

// d (M, N) contiguous = epilogue(x2 (M, K) @ w^T), w (N, K); x2 and w with contiguous last dims. epilogue:
// none, relu or gelu_tanh (the tanh-approximated GELU of cuBLASLt), with the bias when given; aux (M, N)
// contiguous receives z + bias for gelu_tanh when set. False when cuBLASLt declines (no algorithm, or a
// setup error): the caller then takes the cuBLAS path. An error of the matmul itself raises.
bool linear_cuda_lt(const char* opname, const at::Tensor& x2, const at::Tensor& w, const at::Tensor& bias,
                    Activation act, void* d, void* aux) {
  const at::ScalarType st = x2.scalar_type();
  if (st != at::kFloat && st != at::kHalf && st != at::kBFloat16) return false;
  const int64_t m = x2.size(0), k = x2.size(1), n = w.size(0);
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) return false;
  const cudaDataType_t type = st == at::kFloat ? CUDA_R_32F : st == at::kHalf ? CUDA_R_16F : CUDA_R_16BF;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (st == at::kFloat && at::globalContext().allowTF32CuBLAS()) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  LinearLtDescs ds;
  YIRAGE_LT_TRY(cublasLtMatmulDescCreate(&ds.op, compute, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  YIRAGE_LT_TRY(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  YIRAGE_LT_TRY(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const bool has_bias = bias.defined();
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  switch (act) {
    case Activation::none: epi = has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; break;
    case Activation::relu: epi = has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case Activation::gelu_tanh:
      if (aux != nullptr) epi = has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      else epi = has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      break;
    default: return false;
  }
  YIRAGE_LT_TRY(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (has_bias) {
    const void* bp = bias.const_data_ptr();
    YIRAGE_LT_TRY(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
  }
  if (aux != nullptr) {
    if (act != Activation::gelu_tanh || n % 8 != 0) return false;
    const int64_t ld = n;
    YIRAGE_LT_TRY(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    YIRAGE_LT_TRY(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
  }
  // column-major: D^T (N x M) = W (N x K, stored as K x N) ^T-op * X^T (K x M)
  const int64_t lda = n == 1 ? std::max<int64_t>(k, 1) : w.stride(0);
  const int64_t ldb = m == 1 ? std::max<int64_t>(k, 1) : x2.stride(0);
  if (lda < k || ldb < k) return false;
  YIRAGE_LT_TRY(cublasLtMatrixLayoutCreate(&ds.a, type, uint64_t(k), uint64_t(n), lda));
  YIRAGE_LT_TRY(cublasLtMatrixLayoutCreate(&ds.b, type, uint64_t(k), uint64_t(m), ldb));
  YIRAGE_LT_TRY(cublasLtMatrixLayoutCreate(&ds.c, type, uint64_t(n), uint64_t(m), n));
  YIRAGE_LT_TRY(cublasLtMatmulPreferenceCreate(&ds.pref));
  const size_t ws_size = at::cuda::getCUDABlasLtWorkspaceSize();
  YIRAGE_LT_TRY(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size,
                                                      sizeof(ws_size)));
  const uint32_t al_a = linear_cuda_alignment(w.const_data_ptr()), al_b = linear_cuda_alignment(x2.const_data_ptr());
  const uint32_t al_d = linear_cuda_alignment(d);
  YIRAGE_LT_TRY(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                                      sizeof(al_a)));
  YIRAGE_LT_TRY(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                                      sizeof(al_b)));
  YIRAGE_LT_TRY(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d,
                                                      sizeof(al_d)));
  YIRAGE_LT_TRY(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d,
                                                      sizeof(al_d)));
  if (st != at::kFloat) {  // torch's setting for fp16/bf16 reductions in reduced precision / split-k
    const at::CuBLASReductionOption red = st == at::kHalf ? at::globalContext().allowFP16ReductionCuBLAS()
                                                          : at::globalContext().allowBF16ReductionCuBLAS();
    uint32_t mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    if (red == at::CuBLASReductionOption::DisallowReducedPrecisionAllowSplitK) {
      mask = CUBLASLT_REDUCTION_SCHEME_MASK & ~uint32_t(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
    } else if (red == at::CuBLASReductionOption::DisallowReducedPrecisionDisallowSplitK) {
      mask = CUBLASLT_REDUCTION_SCHEME_NONE;
    }
    YIRAGE_LT_TRY(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                                        sizeof(mask)));
  }
  cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(handle, ds.op, ds.a, ds.b, ds.c, ds.c, ds.pref, 1, &heur, &found) !=
          CUBLAS_STATUS_SUCCESS ||
      found == 0) {
    return false;
  }
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t s =
      cublasLtMatmul(handle, ds.op, &one, w.const_data_ptr(), ds.a, x2.const_data_ptr(), ds.b, &zero, d, ds.c, d,
                     ds.c, &heur.algo, at::cuda::getCUDABlasLtWorkspace(), ws_size, current_stream());
  if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_INVALID_VALUE) return false;  // the cuBLAS path
  TORCH_CHECK(s == CUBLAS_STATUS_SUCCESS, "yirage.", opname, ": cuBLASLt matmul failed with status ", static_cast<int>(s));
  return true;
}

#undef YIRAGE_LT_TRY

// The most rows of x the skinny kernel takes: kLinearSkinnyMaxRows, or less when the environment variable
// YIRAGE_LINEAR_SKINNY_MAX_ROWS (read once) says so; 0 sends every product to cuBLASLt.
int64_t linear_cuda_skinny_max_rows() {
  static const int64_t rows = [] {
    const char* env = std::getenv("YIRAGE_LINEAR_SKINNY_MAX_ROWS");
    if (env == nullptr || *env == '\0') return kcu::kLinearSkinnyMaxRows;
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    TORCH_CHECK(end != env && *end == '\0' && v >= 0, "yirage: YIRAGE_LINEAR_SKINNY_MAX_ROWS must be an integer >= 0, got '",
                env, "'");
    return std::min<int64_t>(v, kcu::kLinearSkinnyMaxRows);
  }();
  return rows;
}

// out (and pre, when set) from the skinny kernel; false when it does not take these operands or this GPU.
bool linear_cuda_skinny(const char* op, const at::Tensor& x2, const at::Tensor& w, const at::Tensor& bias,
                        Activation act, void* out, void* pre) {
  if (x2.size(0) > linear_cuda_skinny_max_rows()) return false;
  kcu::LinearSkinny p;
  p.x = x2.const_data_ptr();
  p.ldx = x2.stride(0);
  p.w = w.const_data_ptr();
  p.ldw = w.stride(0);
  p.bias = bias.defined() ? bias.const_data_ptr() : nullptr;
  p.out = out;
  p.pre = pre;
  p.m = x2.size(0);
  p.n = w.size(0);
  p.k = x2.size(1);
  p.act = act;
  p.dtype = cuda_kernel_dtype(op, x2.scalar_type());
  if (!kcu::linear_skinny_ok(p) || at::cuda::getCurrentDeviceProperties()->major < 8) return false;
  check_launch(op, kcu::linear_skinny(p, current_stream()));
  return true;
}

void linear_cuda_epilogue(const char* op, const at::Tensor& z, const at::Tensor& bias, void* pre, void* out,
                          Activation act) {
  kcu::LinearEpilogue p;
  p.z = z.const_data_ptr();
  p.bias = bias.defined() ? bias.const_data_ptr() : nullptr;
  p.pre = pre;
  p.out = out;
  p.cols = z.size(-1);
  p.rows = p.cols > 0 ? z.numel() / p.cols : 0;
  p.act = act;
  p.dtype = cuda_kernel_dtype(op, z.scalar_type());
  check_launch(op, kcu::linear_epilogue(p, current_stream()));
}

std::tuple<at::Tensor, at::Tensor> linear_cuda_impl(const char* op, const at::Tensor& x, const at::Tensor& weight,
                                                    const std::optional<at::Tensor>& bias, Activation act,
                                                    bool save_pre) {
  const c10::cuda::CUDAGuard guard(x.device());
  (void)cuda_kernel_dtype(op, x.scalar_type());
  const int64_t n = weight.size(0), kdim = weight.size(1);
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end() - 1);
  sizes.push_back(n);
  const bool want_pre = save_pre && kernels::activation_needs_pre(act);
  at::Tensor out = at::empty(sizes, x.options());
  at::Tensor pre = want_pre ? at::empty(sizes, x.options()) : at::empty({0}, x.options());
  if (out.numel() == 0) return {out, pre};
  const int64_t m = out.numel() / n;
  const at::Tensor b = has(bias) ? bias->contiguous() : at::Tensor();
  // z lands in pre when it is kept, else in out (the activation then runs in place)
  const at::Tensor z = want_pre ? pre.view({m, n}) : out.view({m, n});
  if (kdim == 0) {
    z.zero_();
    linear_cuda_epilogue(op, z, b, want_pre ? z.data_ptr() : nullptr, out.data_ptr(), act);
    return {out, pre};
  }
  at::Tensor x2 = x.reshape({m, kdim});
  if (x2.stride(1) != 1 || (m > 1 && x2.stride(0) < kdim)) x2 = x2.contiguous();
  at::Tensor w = weight;
  if (w.stride(1) != 1 || (n > 1 && w.stride(0) < kdim)) w = w.contiguous();
  if (linear_cuda_skinny(op, x2, w, b, act, out.data_ptr(), want_pre ? pre.data_ptr() : nullptr)) return {out, pre};
  // relu is not left to cuBLASLt: its RELU epilogue maps NaN to 0, torch.relu keeps NaN
  const bool lt_act = act == Activation::none || act == Activation::gelu_tanh;
  if (lt_act && !want_pre) {  // everything in the GEMM's epilogue
    if (linear_cuda_lt(op, x2, w, b, act, out.data_ptr(), nullptr)) return {out, pre};
  } else if (act == Activation::gelu_tanh) {  // out and z from one GEMM (GELU_AUX)
    if (linear_cuda_lt(op, x2, w, b, act, out.data_ptr(), pre.data_ptr())) return {out, pre};
  }
  // z = x @ w^T + bias by cuBLASLt, then the activation element-wise
  if (linear_cuda_lt(op, x2, w, b, Activation::none, z.data_ptr(), nullptr)) {
    if (act != Activation::none) linear_cuda_epilogue(op, z, at::Tensor(), nullptr, out.data_ptr(), act);
    return {out, pre};
  }
  // fp64 or no cuBLASLt algorithm: cuBLAS GEMM into z, then bias and activation element-wise
  blas_mm_into(op, z, x2, w.t());
  if (b.defined() || act != Activation::none) {
    linear_cuda_epilogue(op, z, b, want_pre ? z.data_ptr() : nullptr, out.data_ptr(), act);
  }
  return {out, pre};
}

at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       c10::string_view activation) {
  const Activation act = check_linear("linear", x, weight, bias, activation);
  return std::get<0>(linear_cuda_impl("linear", x, weight, bias, act, /*save_pre=*/false));
}

std::tuple<at::Tensor, at::Tensor> linear_forward_cuda(const at::Tensor& x, const at::Tensor& weight,
                                                       const std::optional<at::Tensor>& bias,
                                                       c10::string_view activation) {
  const Activation act = check_linear("linear_forward", x, weight, bias, activation);
  return linear_cuda_impl("linear_forward", x, weight, bias, act, /*save_pre=*/true);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> linear_backward_cuda(
    const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& saved,
    c10::string_view activation, bool x_grad, bool weight_grad, bool bias_grad) {
  const char* op = "linear_backward";
  const Activation act = check_linear_backward(grad_out, x, weight, saved, activation);
  const c10::cuda::CUDAGuard guard(x.device());
  const kcu::DType kdt = cuda_kernel_dtype(op, x.scalar_type());
  const int64_t n = weight.size(0), kdim = weight.size(1);
  const int64_t m = c10::multiply_integers(x.sizes().slice(0, x.dim() - 1));
  const auto empty = [&] { return at::empty({0}, x.options()); };
  at::Tensor dz;
  at::Tensor db = bias_grad ? at::zeros({n}, x.options()) : empty();
  const bool need_dz = x_grad || weight_grad;
  if (act == Activation::none && (!bias_grad || m == 0)) {
    dz = grad_out.reshape({m, n});
  } else if (m > 0 && n > 0) {
    const Rows g = as_rows(grad_out);
    const Rows s = act == Activation::none ? Rows{} : as_rows(*saved);
    const bool write_dz = need_dz && act != Activation::none;
    dz = write_dz ? at::empty({m, n}, x.options()) : grad_out.reshape({m, n});
    const auto acc = x.options().dtype(x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
    const int64_t splits = kcu::linear_act_grad_splits(m, n);
    const at::Tensor partial = bias_grad ? at::empty({splits, n}, acc) : at::Tensor();
    if (write_dz || bias_grad) {
      kcu::LinearActGrad p;
      p.grad_out = g.tensor.const_data_ptr();
      p.grad_stride = g.stride;
      p.saved = s.tensor.defined() ? s.tensor.const_data_ptr() : nullptr;
      p.saved_stride = s.stride;
      p.grad_pre = write_dz ? dz.data_ptr() : nullptr;
      p.bias_partial = bias_grad ? partial.data_ptr() : nullptr;
      p.rows = m;
      p.cols = n;
      p.act = act;
      p.dtype = kdt;
      check_launch(op, kcu::linear_act_grad(p, current_stream()));
    }
    if (bias_grad) db = partial.sum(0).to(x.scalar_type());
  } else {
    dz = at::zeros({m, n}, x.options());
  }
  at::Tensor dx = empty(), dw = empty();
  if (x_grad) {
    dx = at::empty(x.sizes(), x.options());
    if (dx.numel() > 0) {
      if (n == 0) dx.zero_();
      else blas_mm_into(op, dx.view({m, kdim}), dz, weight);
    }
  }
  if (weight_grad) {
    dw = at::empty({n, kdim}, x.options());
    if (dw.numel() > 0) {
      if (m == 0) dw.zero_();
      else blas_mm_into(op, dw, dz.t(), x.reshape({m, kdim}));
    }
  }
  return {dx, dw, db};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) {
  m.impl("linear", &linear_cuda);
  m.impl("linear_forward", &linear_forward_cuda);
  m.impl("linear_backward", &linear_backward_cuda);
}

}  // namespace yirage
