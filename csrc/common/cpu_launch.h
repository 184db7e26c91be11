// What every CPU glue file needs to call a torch-free kernel: the dtype mapping and a row-parallel
// launcher that turns a kernel's error status into an exception naming the op.
#pragma once

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "common/checks.h"
#include "common/cpu_memory.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/types.h"

namespace yirage {

inline kernels::cpu::DType cpu_kernel_dtype(const char* op, at::ScalarType t) {
  switch (t) {
    case at::kFloat: return kernels::cpu::DType::f32;
    case at::kHalf: return kernels::cpu::DType::f16;
    case at::kBFloat16: return kernels::cpu::DType::bf16;
    case at::kDouble: return kernels::cpu::DType::f64;
    default: TORCH_CHECK_TYPE(false, "yirage.", op, ": no CPU kernel for dtype ", dtype_name(t));
  }
}

// Whether a row kernel that reads and writes `bytes` in all (inputs and outputs) should write its outputs with
// non-temporal stores: when the traffic exceeds the last-level cache one core sees (cpuid; 32 MiB where it is
// unknown), a cached store first reads the line it writes (write-allocate), a third stream of memory traffic, and
// evicts input lines; torch's own large copies stream too (glibc's memcpy). Measured on a 2-core AVX-512 EPYC
// (32 MiB L3 a core complex), in a loop, STREAM=0 against =1 twice each: at 4096x4096 softmax fp32 59-65% of the
// copy -> 72-74%, bf16 64-69% -> 74-82%, silu_and_mul bf16 75-87% -> 108-115%, gelu and rms_norm level, layer_norm
// bf16 129-148% -> 109-119% (its output partly stays in the two core complexes' caches between calls otherwise);
// at 4096x1024 fp32 (32 MiB of traffic, not streamed) streaming made layer_norm and rms_norm 10-20% slower.
// rotary_embedding's forward (fp32: a vector is a line) 4096x32x128 6.4-6.5 -> 5.2-5.5 ms (copy 45 GB/s).
// YIRAGE_CPU_STREAM=0 turns this off, =1 makes every call stream (tests); read once.
inline bool cpu_stream_outputs(int64_t bytes) {
  static const int mode = [] {
    const char* env = std::getenv("YIRAGE_CPU_STREAM");
    if (env == nullptr || *env == '\0') return -1;
    TORCH_CHECK(std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0,
                "YIRAGE_CPU_STREAM: expected 0 or 1, got '", env, "'");
    return *env - '0';
  }();
  if (mode >= 0) return mode == 1;
  static const int64_t llc = [] {
    const unsigned long long b = kernels::cpu::cpu_features().llc_bytes;
    return b > 0 ? static_cast<int64_t>(b) : int64_t{32} << 20;
  }();
  return bytes > llc;
}

inline int64_t cpu_dtype_size(kernels::cpu::DType t) {
  return t == kernels::cpu::DType::f64 ? 8 : t == kernels::cpu::DType::f32 ? 4 : 2;
}

// Rows per task of cpu_for_rows: enough work (~32K elements) to be worth a thread.
inline int64_t cpu_row_grain(int64_t cols) {
  return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(cols, 1));
}

// Runs fn(begin, end) over rows on torch's intra-op threads, with enough work per task (~32K elements)
// to be worth a thread, and raises if any call returned an error status.
template <typename Fn>
void cpu_for_rows(const char* op, int64_t rows, int64_t cols, const Fn& fn) {
  const int64_t grain = cpu_row_grain(cols);
  std::atomic<int> status{0};
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    const kernels::cpu::Status s = fn(begin, end);
    if (s != kernels::cpu::Status::ok) status.store(static_cast<int>(s));
  });
  TORCH_CHECK(status.load() == 0, "yirage.", op, ": CPU kernel failed with status ", status.load());
}

// Per-task partial sums of a column reduction done inside cpu_for_rows (a norm's or linear's weight or bias
// gradient): a zeroed (tasks, cols) buffer in the accumulation type whose row at::get_thread_num() a task adds
// into. As many rows as cpu_for_rows will run tasks (one for a small input: then no reduction is needed after
// the kernel), at most one per thread; called inside another parallel region, the tasks run inline under that
// region's thread numbers, so every thread gets a row.
struct ColumnPartials {
  at::Tensor acc;  // (tasks, cols); undefined when not wanted

  ColumnPartials(bool wanted, int64_t rows, int64_t cols, const at::TensorOptions& acc_options) {
    if (!wanted) return;
    const int64_t threads = at::get_num_threads(), grain = cpu_row_grain(cols);
    const int64_t tasks =
        at::in_parallel_region() ? threads : std::clamp<int64_t>((rows + grain - 1) / grain, 1, threads);
    acc = at::zeros({tasks, cols}, acc_options);
  }
  // The calling task's row (nullptr when not wanted).
  void* row() const {
    if (!acc.defined()) return nullptr;
    return static_cast<char*>(acc.data_ptr()) + at::get_thread_num() * acc.size(1) * acc.element_size();
  }
  // The column sums in `dtype`: (cols,), or an empty tensor when not wanted.
  at::Tensor sum(at::ScalarType dtype, const at::TensorOptions& empty_options) const {
    if (!acc.defined()) return at::empty({0}, empty_options);
    return (acc.size(0) == 1 ? acc.select(0, 0) : acc.sum(0)).to(dtype);
  }
};

// The part of a CPU backend policy of the shared glue (ops/*_glue.h) that every op has in common: no device
// guard, new outputs from cpu_empty (the cache of large blocks, huge pages), the dtype mapping. An op's policy
// derives from it and adds the kernel calls.
struct CpuGlueBackend {
  struct NoGuard {};
  static NoGuard guard(const at::Tensor&) { return {}; }
  static at::Tensor empty(at::IntArrayRef sizes, const at::TensorOptions& options) {
    return cpu_empty(sizes, options);
  }
  static kernels::DType dtype(const char* op, at::ScalarType t) { return cpu_kernel_dtype(op, t); }
};

}  // namespace yirage
