// CUDA glue for attention, attention_forward and attention_backward: checks, device guard, operand strides
// (no copy for the usual layouts: contiguous, q/k/v sliced from one packed qkv tensor, (B, S, H, D) transposed to
// (B, H, S, D), heads broadcast), the split-KV workspace, then the tensor-core kernels (kernels/cuda/attention.h)
// for fp16/bf16 with head dims 64, 128 and 256 on sm_80 and newer. Everything else (fp32, fp64, other head
// dims, older GPUs, a ROCm build) runs the portable kernel, which is correct but slower.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <cuda_runtime_api.h>
#include <torch/library.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <tuple>
#include <vector>

#include "common/cuda_launch.h"
#include "kernels/cuda/attention.h"
#include "ops/attention.h"
#include "portable/attention.h"

namespace yirage {
namespace {

namespace kcu = kernels::cuda;

struct AttentionDevice {
  int sm = 0;          // compute capability, major * 10 + minor
  int sm_count = 0;    // multiprocessors
  int max_smem = 0;    // shared memory a block may opt in to
};

// Compute capability and multiprocessor count per device, read once (device attributes, no synchronization).
const AttentionDevice& attention_device(int index) {
  static std::mutex mutex;
  static std::vector<AttentionDevice> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.empty()) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();
      count = 0;
    }
    cache.resize(std::max(count, index + 1));
    for (int i = 0; i < count; ++i) {
      int major = 0, minor = 0, sms = 0, smem = 0;
      if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) != cudaSuccess ||
          cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, i) != cudaSuccess ||
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, i) != cudaSuccess ||
          cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, i) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      cache[i] = {major * 10 + minor, sms, smem};
    }
  }
  static const AttentionDevice none{};
  return index >= 0 && index < static_cast<int>(cache.size()) ? cache[index] : none;
}

// The split counters of the forward (kcu::AttentionForward::split_count, at least n): zero on entry, left zero
// by the kernel. Outside CUDA-graph capture, one buffer per (device, stream) serves every call on that stream
// (stream order keeps its calls apart; calls on two streams never share counters), zeroed once when it is made
// or grown. While the stream is being captured, a fresh zeroed buffer per call: the graph then holds its
// memset, and a replay never depends on the state of a buffer outside the graph. The cached buffers are never
// freed (a few bytes per stream; freeing at exit could run after the CUDA runtime is gone).
unsigned* split_counters(const at::Tensor& like, int64_t n, at::Tensor& fresh) {
  const cudaStream_t stream = current_stream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_launch("attention", cudaStreamIsCapturing(stream, &capture));
  const auto zeros = [&](int64_t count) { return at::zeros({count}, like.options().dtype(at::kInt)); };
  if (capture != cudaStreamCaptureStatusNone) {
    fresh = zeros(n);
    return reinterpret_cast<unsigned*>(fresh.data_ptr<int>());
  }
  static std::mutex mutex;
  static auto* cache = new std::map<std::pair<int, cudaStream_t>, at::Tensor>();
  std::lock_guard<std::mutex> lock(mutex);
  at::Tensor& buf = (*cache)[{static_cast<int>(like.device().index()), stream}];
  if (!buf.defined() || buf.numel() < n) buf = zeros(std::max<int64_t>(n, 2 * (buf.defined() ? buf.numel() : 64)));
  return reinterpret_cast<unsigned*>(buf.data_ptr<int>());
}

bool attention_cuda_native(const at::Tensor& q) {
  if (q.scalar_type() != at::kHalf && q.scalar_type() != at::kBFloat16) return false;
  const AttentionDevice& dev = attention_device(q.device().index());
  return kcu::attention_native(cuda_kernel_dtype("attention", q.scalar_type()), q.size(3), dev.sm, dev.max_smem);
}

// The strides the kernels take (size-1 dims contribute nothing: stride 0).
kcu::AttentionOperand attention_operand(const at::Tensor& t) {
  const auto stride = [&](int d) { return t.size(d) == 1 ? int64_t{0} : t.stride(d); };
  return {t.const_data_ptr(), stride(0), stride(1), stride(2)};
}

// t itself when its rows are contiguous and 16-byte aligned with strides in whole 16-byte chunks, else a
// contiguous copy (a new allocation, aligned).
at::Tensor attention_rows(const at::Tensor& t) {
  const bool rows_contiguous = t.size(3) == 1 || t.stride(3) == 1;
  if (rows_contiguous && kcu::attention_layout_ok(attention_operand(t))) return t;
  return at::empty(t.sizes(), t.options()).copy_(t);
}

kcu::AttentionShape attention_shape(const at::Tensor& q, const at::Tensor& k, bool causal,
                                    std::optional<double> scale) {
  kcu::AttentionShape s;
  s.batch = q.size(0);
  s.heads_q = q.size(1);
  s.heads_k = k.size(1);
  s.seq_q = q.size(2);
  s.seq_k = k.size(2);
  s.head_dim = q.size(3);
  s.scale = static_cast<float>(attention_scale(q, scale));
  s.causal = causal;
  s.dtype = cuda_kernel_dtype("attention", q.scalar_type());
  return s;
}

std::tuple<at::Tensor, at::Tensor> attention_forward_cuda_impl(const char* op, const at::Tensor& q_in,
                                                               const at::Tensor& k_in, const at::Tensor& v_in,
                                                               bool causal, std::optional<double> scale,
                                                               bool want_lse) {
  check_attention(op, q_in, k_in, v_in, scale);
  if (!attention_cuda_native(q_in)) return attention_forward_portable(op, q_in, k_in, v_in, causal, scale);
  const c10::cuda::CUDAGuard guard(q_in.device());
  at::Tensor out = at::empty(q_in.sizes(), q_in.options());
  at::Tensor lse = at::empty({q_in.size(0), q_in.size(1), q_in.size(2)}, q_in.options().dtype(at::kFloat));
  if (out.numel() == 0) return {out, lse};
  const at::Tensor q = attention_rows(q_in), k = attention_rows(k_in), v = attention_rows(v_in);
  kcu::AttentionForward p;
  p.shape = attention_shape(q, k, causal, scale);
  p.q = attention_operand(q);
  p.k = attention_operand(k);
  p.v = attention_operand(v);
  p.out = out.data_ptr();
  p.lse = want_lse ? lse.data_ptr<float>() : nullptr;
  p.num_splits = kcu::attention_forward_splits(p.shape, attention_device(q.device().index()).sm_count);
  at::Tensor split_out, split_lse, split_count;
  if (p.num_splits > 1) {  // workspace from the caching allocator (CUDA-graph safe)
    const int64_t rows = q.size(0) * q.size(1) * q.size(2);
    split_out = at::empty({p.num_splits, rows, q.size(3)}, q.options().dtype(at::kFloat));
    split_lse = at::empty({p.num_splits, rows}, q.options().dtype(at::kFloat));
    p.split_out = split_out.data_ptr<float>();
    p.split_lse = split_lse.data_ptr<float>();
    p.split_count = split_counters(q, rows, split_count);
  }
  check_launch(op, kcu::attention_forward(p, current_stream()));
  return {out, lse};
}

at::Tensor attention_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                          std::optional<double> scale) {
  return std::get<0>(attention_forward_cuda_impl("attention", q, k, v, causal, scale, /*want_lse=*/false));
}

std::tuple<at::Tensor, at::Tensor> attention_forward_cuda(const at::Tensor& q, const at::Tensor& k,
                                                          const at::Tensor& v, bool causal,
                                                          std::optional<double> scale) {
  return attention_forward_cuda_impl("attention_forward", q, k, v, causal, scale, /*want_lse=*/true);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward_cuda(
    const at::Tensor& grad_out_in, const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
    const at::Tensor& out_in, const at::Tensor& lse_in, bool causal, std::optional<double> scale) {
  check_attention_backward(grad_out_in, q_in, k_in, v_in, out_in, lse_in, scale);
  if (!attention_cuda_native(q_in)) {
    return attention_backward_portable(grad_out_in, q_in, k_in, v_in, out_in, lse_in, causal, scale);
  }
  const c10::cuda::CUDAGuard guard(q_in.device());
  at::Tensor dq = at::empty(q_in.sizes(), q_in.options());
  at::Tensor dk = at::empty(k_in.sizes(), k_in.options()), dv = at::empty(v_in.sizes(), v_in.options());
  if (dq.numel() == 0 && dk.numel() == 0) return {dq, dk, dv};
  if (dq.numel() == 0 || dk.numel() == 0) {  // no query or no key: nothing flows
    return {at::zeros(q_in.sizes(), q_in.options()), at::zeros(k_in.sizes(), k_in.options()),
            at::zeros(v_in.sizes(), v_in.options())};
  }
  const at::Tensor q = attention_rows(q_in), k = attention_rows(k_in), v = attention_rows(v_in);
  const at::Tensor out = attention_rows(out_in), grad_out = attention_rows(grad_out_in);
  const at::Tensor lse = lse_in.contiguous();
  at::Tensor delta = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  kcu::AttentionBackward p;
  p.shape = attention_shape(q, k, causal, scale);
  p.q = attention_operand(q);
  p.k = attention_operand(k);
  p.v = attention_operand(v);
  p.out = attention_operand(out);
  p.grad_out = attention_operand(grad_out);
  p.lse = lse.const_data_ptr<float>();
  p.grad_q = dq.data_ptr();
  p.grad_k = dk.data_ptr();
  p.grad_v = dv.data_ptr();
  p.delta = delta.data_ptr<float>();
  at::Tensor dq_accum;  // fp32 workspace, unless the kernels write grad_q without it
  if (kcu::attention_backward_needs_dq_accum(p)) {
    dq_accum = at::empty(q.sizes(), q.options().dtype(at::kFloat));
    p.dq_accum = dq_accum.data_ptr<float>();
  }
  check_launch("attention_backward", kcu::attention_backward(p, current_stream()));
  return {dq, dk, dv};
}

}  // namespace

TORCH_LIBRARY_IMPL(yirage, CUDA, m) {
  m.impl("attention", &attention_cuda);
  m.impl("attention_forward", &attention_forward_cuda);
  m.impl("attention_backward", &attention_backward_cuda);
}

}  // namespace yirage
