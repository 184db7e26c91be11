// Row-major GEMMs through cuBLAS for the CUDA glue (matmul, linear's backward and fallbacks): the operands'
// strides mapped onto cuBLAS's column-major arguments without copies where cuBLAS can read them (row-major or
// transposed matrices, stride-0 broadcast batches), torch's handle for the current stream (its workspace comes
// from the caching allocator: CUDA-graph safe), and torch's precision settings (TF32 for fp32 when
// torch.backends.cuda.matmul.allow_tf32 / float32 matmul precision allows it; fp16/bf16 reduced-precision
// reductions only when torch allows them). Included only by csrc/cuda/*.cpp (one translation unit).
#pragma once

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>
#include <cublas_v2.h>

#include <algorithm>
#include <climits>

namespace yirage {

// One operand of a row-major product C = A @ B as cuBLAS sees it: the transposed product C^T = B^T A^T in
// column-major order, so a row-major matrix is read with CUBLAS_OP_N and a transposed one with CUBLAS_OP_T.
struct BlasOperand {
  const void* ptr = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

// A (rows, cols) matrix with strides (sr, sc) as a cuBLAS operand, if cuBLAS can read it in place.
inline bool blas_operand_of(int64_t rows, int64_t cols, int64_t sr, int64_t sc, BlasOperand* out) {
  const int64_t ld_n = rows <= 1 ? std::max<int64_t>(1, cols) : sr;
  if ((sc == 1 || cols <= 1) && ld_n >= std::max<int64_t>(1, cols) && ld_n <= INT_MAX) {
    out->op = CUBLAS_OP_N;
    out->ld = ld_n;
    return true;
  }
  const int64_t ld_t = cols <= 1 ? std::max<int64_t>(1, rows) : sc;
  if ((sr == 1 || rows <= 1) && ld_t >= std::max<int64_t>(1, rows) && ld_t <= INT_MAX) {
    out->op = CUBLAS_OP_T;
    out->ld = ld_t;
    return true;
  }
  return false;
}

// t (..., rows, cols) with its last two dims as an operand; *holder keeps a contiguous copy when one is needed.
inline BlasOperand blas_operand(const at::Tensor& t, at::Tensor* holder) {
  BlasOperand o;
  const int64_t r = t.size(-2), c = t.size(-1);
  if (blas_operand_of(r, c, t.stride(-2), t.stride(-1), &o)) {
    *holder = t;
  } else {
    *holder = t.contiguous();
    blas_operand_of(r, c, holder->stride(-2), holder->stride(-1), &o);
  }
  o.ptr = holder->const_data_ptr();
  o.batch_stride = holder->dim() > 2 ? holder->stride(0) : 0;
  return o;
}

inline void blas_check(const char* op, cublasStatus_t s) {
  TORCH_CHECK(s == CUBLAS_STATUS_SUCCESS, "yirage.", op, ": cuBLAS failed with status ", static_cast<int>(s));
}

// c[i] (m, n), row stride ldc, = a[i] (m, k) @ b[i] (k, n) for i < batch, c's batches stride_c apart.
// m, n, k > 0. dtype: float, half, bfloat16 or double.
inline void blas_gemm_rowmajor(const char* op, at::ScalarType dtype, int64_t batch, int64_t m, int64_t n, int64_t k,
                                 const BlasOperand& a, const BlasOperand& b, void* c, int64_t ldc,
                                 int64_t stride_c) {
  TORCH_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && ldc <= INT_MAX, "yirage.", op,
              ": matrix dims above 2^31 - 1 are not supported on CUDA, got M=", m, " N=", n, " K=", k);
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
  // C^T (n x m) = op(B^T) (n x k) * op(A^T) (k x m)
  const int im = int(n), in = int(m), ik = int(k);
  const void* A = b.ptr;
  const void* B = a.ptr;
  const int lda = int(b.ld), ldb = int(a.ld), ldcc = int(ldc);
  const long long sa = b.batch_stride, sb = a.batch_stride, sc = stride_c;
  for (int64_t done = 0; done < batch;) {  // cuBLAS takes an int batch count
    const int count = int(std::min<int64_t>(batch - done, INT_MAX));
    const size_t esz = c10::elementSize(dtype);
    const char* Ap = static_cast<const char*>(A) + done * sa * esz;
    const char* Bp = static_cast<const char*>(B) + done * sb * esz;
    char* Cp = static_cast<char*>(c) + done * sc * esz;
    if (dtype == at::kDouble) {
      const double one = 1.0, zero = 0.0;
      blas_check(op, cublasDgemmStridedBatched(handle, b.op, a.op, im, in, ik, &one,
                                                 reinterpret_cast<const double*>(Ap), lda, sa,
                                                 reinterpret_cast<const double*>(Bp), ldb, sb, &zero,
                                                 reinterpret_cast<double*>(Cp), ldcc, sc, count));
    } else {
      cudaDataType_t type;
      cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
      if (dtype == at::kFloat) {
        type = CUDA_R_32F;
        if (at::globalContext().allowTF32CuBLAS()) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      } else {
        const bool fp16 = dtype == at::kHalf;
        TORCH_CHECK(fp16 || dtype == at::kBFloat16, "yirage.", op, ": no cuBLAS path for ", dtype);
        type = fp16 ? CUDA_R_16F : CUDA_R_16BF;
#if !defined(USE_ROCM)  // hipBLAS has no math-mode switch: its reductions are fp32
        const at::CuBLASReductionOption red =
            fp16 ? at::globalContext().allowFP16ReductionCuBLAS() : at::globalContext().allowBF16ReductionCuBLAS();
        int flags = CUBLAS_DEFAULT_MATH;
        if (red != at::CuBLASReductionOption::AllowReducedPrecisionWithSplitK) {
          flags |= CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
        }
        blas_check(op, cublasSetMathMode(handle, static_cast<cublasMath_t>(flags)));
#endif
      }
      const float one = 1.0f, zero = 0.0f;
      if (count == 1) {
        blas_check(op, cublasGemmEx(handle, b.op, a.op, im, in, ik, &one, Ap, type, lda, Bp, type, ldb, &zero, Cp,
                                      type, ldcc, compute, CUBLAS_GEMM_DEFAULT_TENSOR_OP));
      } else {
        blas_check(op, cublasGemmStridedBatchedEx(handle, b.op, a.op, im, in, ik, &one, Ap, type, lda, sa, Bp,
                                                    type, ldb, sb, &zero, Cp, type, ldcc, sc, count, compute,
                                                    CUBLAS_GEMM_DEFAULT_TENSOR_OP));
      }
    }
    done += count;
  }
}

// out (m, n), last dim contiguous, = a (m, k) @ b (k, n) with any strides; zeros when k == 0.
inline void blas_mm_into(const char* op, const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    out.zero_();
    return;
  }
  at::Tensor ha, hb;
  const BlasOperand oa = blas_operand(a, &ha), ob = blas_operand(b, &hb);
  blas_gemm_rowmajor(op, out.scalar_type(), 1, m, n, k, oa, ob, out.data_ptr(), out.stride(0), 0);
}

}  // namespace yirage
