// Flash attention forward on tensor cores (FlashAttention-2 scheme, mma.sync m16n8k16, fp32 accumulation):
// prefill and decode, fp16/bf16, head dims 64/128/256. The kernel is in attention_fwd_kernel.cuh, the configurations
// per head dim and the decode rule in attention_fwd_plan.cuh; here: the split-KV heuristic, the combine kernel
// (prefill splits, or no counters given; decode blocks merge their splits themselves: split_merge), the launch, and
// the entry points of attention.h.
#include "compat.cuh"

#include "attention.h"

#if YIRAGE_HIP

namespace yirage::kernels::cuda {
// ROCm: the tensor-core kernels are CUDA-only; the glue keeps the portable kernel there.
bool attention_native(DType, int64_t, int, int64_t) { return false; }
bool attention_layout_ok(const AttentionOperand&) { return false; }
int attention_forward_splits(const AttentionShape&, int) { return 1; }
cudaError_t attention_forward(const AttentionForward&, cudaStream_t) { return cudaErrorNotSupported; }
}  // namespace yirage::kernels::cuda

#else

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <type_traits>


#include "attention_fwd_kernel.cuh"
#include "attention_fwd_plan.cuh"
#include "attention_fwd_sm90.cuh"
#include "attention_tma_map.h"

namespace yirage::kernels::cuda {
namespace {


// Merges the key splits of every row: out = sum_s exp(lse_s - lse) out_s, lse = log sum_s exp(lse_s), for the
// configurations that do not merge in the split kernel (see split_merge_fits). One block per row. The split weights go to shared memory first; then each thread takes one 4-column chunk
// of every groups-th split (groups = kCombineThreads / (d / 4)), so a row's splits are read by independent
// loads, many in flight, and the groups' partial sums meet in shared memory. (One warp per row walking the
// splits in turn was bound by load latency: 18.8 us for 32 rows x 32 splits on an H100, 40% of the split
// kernel's own time.)
constexpr int kCombineThreads = 128;

template <typename T>
__global__ void __launch_bounds__(kCombineThreads) flash_attention_combine_kernel(const float* split_out,
                                                                                  const float* split_lse, T* out,
                                                                                  float* lse, int64_t rows, int d,
                                                                                  int splits) {
  extern __shared__ float s_w[];  // [splits]: exp(lse_s - max); 0 for a split that saw no key
  __shared__ float4 s_part[kCombineThreads];
  __shared__ float s_red[kCombineThreads / kWarpSize];
  const int64_t row = blockIdx.x;
  const int tid = threadIdx.x;
  float m = -INFINITY;
  for (int s = tid; s < splits; s += kCombineThreads) m = fmaxf(m, split_lse[s * rows + row]);
  m = block_max(m, s_red);
  float l = 0.f;
  for (int s = tid; s < splits; s += kCombineThreads) {
    const float x = split_lse[s * rows + row];
    const float w = x == -INFINITY ? 0.f : __expf(x - m);
    s_w[s] = w;
    l += w;
  }
  l = block_sum(l, s_red);  // ends with a barrier: every weight is in s_w
  const int chunks = d / 4, groups = kCombineThreads / chunks;  // d in {64, 128, 256}: 2..8 groups
  const int c = tid % chunks, grp = tid / chunks;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
  for (int s = grp; s < splits; s += groups) {
    const float w = s_w[s];
    const float4 v = reinterpret_cast<const float4*>(split_out + (s * rows + row) * d)[c];
    if (w != 0.f) {
      acc.x += w * v.x; acc.y += w * v.y; acc.z += w * v.z; acc.w += w * v.w;
    }
  }
  s_part[tid] = acc;
  __syncthreads();
  if (tid < chunks) {
    for (int g = 1; g < groups; ++g) {
      const float4 v = s_part[g * chunks + tid];
      acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    Vec<T, 4> o;
    o.v[0] = from_acc<T>(acc.x * inv);
    o.v[1] = from_acc<T>(acc.y * inv);
    o.v[2] = from_acc<T>(acc.z * inv);
    o.v[3] = from_acc<T>(acc.w * inv);
    *reinterpret_cast<Vec<T, 4>*>(out + row * d + 4 * tid) = o;
  }
  if (tid == 0 && lse != nullptr) lse[row] = l > 0.f ? m + __logf(l) : -INFINITY;
}

// The parameters of one (key/value head, batch) slice, shared by both forward kernels (grid and split fields
// are the launcher's).
FwdParams forward_params(const AttentionForward& a) {
  const AttentionShape& s = a.shape;
  FwdParams p{};
  p.q = a.q.ptr; p.k = a.k.ptr; p.v = a.v.ptr;
  p.q_b = a.q.batch_stride; p.q_h = a.q.head_stride; p.q_s = a.q.seq_stride;
  p.k_b = a.k.batch_stride; p.k_h = a.k.head_stride; p.k_s = a.k.seq_stride;
  p.v_b = a.v.batch_stride; p.v_h = a.v.head_stride; p.v_s = a.v.seq_stride;
  p.out = a.out; p.lse = a.lse;
  p.num_splits = 1;
  p.heads_k = static_cast<int>(s.heads_k);
  p.group = static_cast<int>(s.heads_q / s.heads_k);
  p.seq_q = static_cast<int>(s.seq_q);
  p.seq_k = static_cast<int>(s.seq_k);
  p.rows = s.heads_q / s.heads_k * s.seq_q;
  p.rows_all = s.batch * s.heads_q * s.seq_q;
  p.scale_log2 = s.scale * kLog2e;
  p.causal = s.causal;
  return p;
}

template <typename T, typename Cfg>
cudaError_t launch_forward(const AttentionForward& a, cudaStream_t stream) {
  const AttentionShape& s = a.shape;
  auto kernel = flash_attention_fwd_kernel<T, Cfg>;
  if (Cfg::kSmem > 48 * 1024) {
    static std::atomic<uint64_t> smem_raised{0};
    const cudaError_t e = raise_smem_once(smem_raised, reinterpret_cast<const void*>(kernel), Cfg::kSmem);
    if (e != cudaSuccess) return e;
  }
  FwdParams p = forward_params(a);
  p.num_splits = std::max(1, a.num_splits);
  p.split_out = a.split_out; p.split_lse = a.split_lse;
  // the blocks merge the splits themselves where the glue gave counters and the weights fit shared memory
  p.split_count = p.num_splits > 1 && split_merge_fits<Cfg>(p.num_splits) ? a.split_count : nullptr;
  const int64_t tiles = (p.rows + Cfg::kBlockM - 1) / Cfg::kBlockM;
  const int64_t batch_step = std::max<int64_t>(1, kMaxGridZ / p.num_splits);
  for (int64_t b0 = 0; b0 < s.batch; b0 += batch_step) {
    p.batch_offset = static_cast<int>(b0);
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(s.heads_k),
                    static_cast<unsigned>(std::min(batch_step, s.batch - b0) * p.num_splits));
    {
      flash_attention_fwd_kernel<T, Cfg><<<grid, Cfg::kThreads, Cfg::kSmem, stream>>>(p);
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  if (p.num_splits > 1 && p.split_count == nullptr) {
    static_assert(kCombineThreads % (Cfg::kD / 4) == 0, "whole 4-column chunks per group of the combine");
    {
      flash_attention_combine_kernel<T><<<static_cast<unsigned>(p.rows_all), kCombineThreads,
                                          p.num_splits * sizeof(float), stream>>>(
          a.split_out, a.split_lse, static_cast<T*>(a.out), a.lse, p.rows_all, Cfg::kD, p.num_splits);
    }
    return cudaGetLastError();
  }
  return cudaSuccess;
}

// The Hopper forward (attention_fwd_sm90.cuh): prefill without splits. Configurations from sweeps with
// attention_sm90_tune.cu (B4 H32 S2048-16384 on an H200, see benchmarks/results). D = 128, two of them:
//   - 176-key tiles in two stages by TMA, the products overlapped, 240-register consumers: unmasked calls over more
//     than kSm90ShortKeys keys and causal calls over more than kSm90CausalLongKeys. Against the unoverlapped
//     cp.async kernel shipped until 2026-11-28 (kernel alone, H200, three rounds, TFLOP/s): B4 H32 S4096 637-639 ->
//     678-680, B2 S8192 651-668 -> 698-717, B1 Hq32 Hk8 S16384 624-636 -> 674-685, S2048 606-610 -> 615, S3072
//     642-644 -> 653-655; causal B2 S8192 647-648 -> 664-665, causal S4096 level, causal S2048 0.97x
//     (cuda-attention-fwd-d128-regs-h200-2026-11-28.md). At 224 registers (the cp.async producer's share) the
//     overlap spilled and ran 0.97-0.98x of this.
//   - 128-key tiles in three stages by TMA with the overlap (Sm90Prefill<128, true>): the rest. Unmasked over 1024
//     keys it was level with the 176-key tiles (513-514 against 511-512 TFLOP/s).
// D = 64: 128-key tiles in three stages, the overlap, three consumer warpgroups (192-row tiles: 9-19% faster than
// two; 160 registers, 44 bytes of spills). D = 256: 80-key tiles (m64n80 products of Q K^T; two stages of 80 fill the
// shared memory) with the overlap and 240-register consumers, both masks: 1.12-1.20x the 64-key tiles without it
// (kernel alone, H200, B4 H16 S2048 / S4096 and B2 S8192, full and causal; cuda-attention-fwd-d256-h200-2026-11-28.md).
// K/V tiles by the tensor memory accelerator (kTma) everywhere (H200, kernel alone, B4 H32 S4096 unless named,
// TFLOP/s: causal D128 541-543 -> 566-579, S2048 441-446 -> 467-474; D64 464-471 -> 491-495, causal 394 -> 416;
// benchmarks/results/cuda-attention-fwd-tma-h200-2026-11-27.md); where no tensor map can be made, the producer
// warpgroup's cp.async copies (Sm90FwdConfig::CpAsync).
template <int kD, bool kCausal> struct Sm90Prefill;
template <bool kCausal> struct Sm90Prefill<64, kCausal> { using type = Sm90FwdConfig<64, 128, 3, true, 3, true>; };
template <> struct Sm90Prefill<128, false> { using type = Sm90FwdConfig<128, 176, 2, true, 2, true>; };
template <> struct Sm90Prefill<128, true> { using type = Sm90FwdConfig<128, 128, 3, true, 2, true>; };
template <bool kCausal> struct Sm90Prefill<256, kCausal> { using type = Sm90FwdConfig<256, 80, 2, true, 2, true>; };
constexpr int kSm90ShortKeys = 1024;
constexpr int kSm90CausalLongKeys = 4096;
// Whether a D = 128 call takes Sm90Prefill<128, true> (the 128-key tiles) rather than the 176-key tiles.
inline bool sm90_short_tiles(bool causal, int64_t seq_k) {
  return seq_k <= (causal ? kSm90CausalLongKeys : kSm90ShortKeys);
}

template <typename T, typename Cfg>
cudaError_t launch_forward_sm90(const AttentionForward& a, cudaStream_t stream) {
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
  const AttentionShape& sh = a.shape;
  CUtensorMap tm_k{}, tm_v{}, tm_q{};
  if constexpr (Cfg::kTma) {
    if (!tensor_map(&tm_k, a.k, sh, sh.seq_k, sh.heads_k, kBf16, Cfg::kBlockN) ||
        !tensor_map(&tm_v, a.v, sh, sh.seq_k, sh.heads_k, kBf16, Cfg::kBlockN)) {
      return launch_forward_sm90<T, typename Cfg::CpAsync>(a, stream);  // the producer warpgroup's copies instead
    }
  }
  // The query tile by TMA where no tile of stacked rows spans two query heads (else the consumers' cp.async).
  const bool q_tma = (sh.heads_q == sh.heads_k || sh.seq_q % Cfg::kBlockM == 0) &&
                     tensor_map(&tm_q, a.q, sh, sh.seq_q, sh.heads_q, kBf16, Cfg::kBlockM);
  auto kernel = flash_attention_fwd_sm90_kernel<T, Cfg>;
  static std::atomic<uint64_t> smem_raised{0};
  const cudaError_t e = raise_smem_once(smem_raised, reinterpret_cast<const void*>(kernel), Cfg::kSmem);
  if (e != cudaSuccess) return e;
  FwdParams p = forward_params(a);
  const int64_t tiles = (p.rows + Cfg::kBlockM - 1) / Cfg::kBlockM;
  for (int64_t b0 = 0; b0 < a.shape.batch; b0 += kMaxGridZ) {
    p.batch_offset = static_cast<int>(b0);
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(a.shape.heads_k),
                    static_cast<unsigned>(std::min<int64_t>(kMaxGridZ, a.shape.batch - b0)));
    {
      kernel<<<grid, Cfg::kThreads, Cfg::kSmem, stream>>>(p, q_tma, tm_k, tm_v, tm_q);
    }
    const cudaError_t le = cudaGetLastError();
    if (le != cudaSuccess) return le;
  }
  return cudaSuccess;
}

// Whether the current device runs the Hopper forward (sm90::kernel_ready; YIRAGE_CUDA_ATTENTION_WGMMA=0: the
// sm_80-class kernel everywhere).
bool sm90_forward_ready() {
  static std::atomic<signed char> state[sm90::kMaxReadyDevices] = {};
  return sm90::kernel_ready(reinterpret_cast<const void*>(&flash_attention_fwd_sm90_kernel<bf16, Sm90Prefill<128, true>::type>),
                            state);
}

template <typename T, int kD>
cudaError_t forward_for(const AttentionForward& a, cudaStream_t stream) {
  if (is_decode(a.shape)) {
    if constexpr (kD == 64) {
      if (decode_wide(a.shape)) return launch_forward<T, DecodeWide64::type>(a, stream);
    } else if constexpr (kD == 128) {
      if (decode_wide(a.shape)) return launch_forward<T, DecodeWide128::type>(a, stream);
    } else if constexpr (kD == 256) {
      if (decode_wide(a.shape)) return launch_forward<T, DecodeWide256::type>(a, stream);
    }
    return launch_forward<T, typename Decode<kD>::type>(a, stream);
  }
  if (a.num_splits <= 1 && sm90_forward_ready()) {
    // D = 64 and 256 have one configuration for both masks
    const bool short_tiles = kD == 128 ? sm90_short_tiles(a.shape.causal, a.shape.seq_k) : a.shape.causal;
    return short_tiles ? launch_forward_sm90<T, typename Sm90Prefill<kD, true>::type>(a, stream)
                       : launch_forward_sm90<T, typename Sm90Prefill<kD, false>::type>(a, stream);
  }
  return launch_forward<T, typename Prefill<kD>::type>(a, stream);
}

template <typename T>
cudaError_t forward_typed(const AttentionForward& a, cudaStream_t stream) {
  switch (a.shape.head_dim) {
    case 64: return forward_for<T, 64>(a, stream);
    case 128: return forward_for<T, 128>(a, stream);
    case 256: return forward_for<T, 256>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

bool attention_native(DType dtype, int64_t head_dim, int sm, int64_t max_smem) {
  if ((dtype != DType::bf16 && dtype != DType::f16) || sm < 80) return false;
  int64_t fwd = 0;
  switch (head_dim) {
    case 64: fwd = std::max(Prefill<64>::type::kSmem, Decode<64>::type::kSmem); break;
    case 128: fwd = std::max(Prefill<128>::type::kSmem, Decode<128>::type::kSmem); break;
    case 256: fwd = std::max(Prefill<256>::type::kSmem, Decode<256>::type::kSmem); break;
    default: return false;
  }
  return std::max(fwd, attention_backward_smem(head_dim)) <= max_smem;
}

bool attention_layout_ok(const AttentionOperand& t) {
  return reinterpret_cast<uintptr_t>(t.ptr) % 16 == 0 && t.batch_stride % 8 == 0 && t.head_stride % 8 == 0 &&
         t.seq_stride % 8 == 0;
}

int attention_forward_splits(const AttentionShape& s, int sm_count) {
  if (s.batch == 0 || s.heads_q == 0 || s.seq_q == 0 || s.seq_k == 0 || sm_count <= 0) return 1;
  SplitInputs in;
  switch (s.head_dim) {
    case 64:
      in = decode_wide(s)  ? split_inputs<DecodeWide64::type>(s)
           : is_decode(s) ? split_inputs<Decode<64>::type>(s)
                          : split_inputs<Prefill<64>::type>(s);
      break;
    case 128:
      in = decode_wide(s)  ? split_inputs<DecodeWide128::type>(s)
           : is_decode(s) ? split_inputs<Decode<128>::type>(s)
                          : split_inputs<Prefill<128>::type>(s);
      break;
    case 256:
      in = decode_wide(s)  ? split_inputs<DecodeWide256::type>(s)
           : is_decode(s) ? split_inputs<Decode<256>::type>(s)
                          : split_inputs<Prefill<256>::type>(s);
      break;
    default: return 1;
  }
  if (is_decode(s)) {
    // Decoding reads K and V once and is bound by memory: as many splits as give each SM about kDecodeInflight
    // bytes of K / V loads in flight (one block of the D = 128 configuration, two of D = 64 or 256), but for short
    // key ranges no more than one block per SM where that would leave splits under 4 * per_sm key tiles long (the
    // merge of many short splits costs more than it overlaps). H200, bf16, against the prefill rule below:
    // B x Sk (Hq 32, Hk 8) D=128 1x1024 12.0 -> 10.8 us, 1x8192 21.8 -> 20.2, 16x1024 29.5 -> 27.6, 16x8192 134.3
    // -> 132.2; D=256 8x8192 137.3 -> 136.3, 32x1024 85.2 -> 74.9, 4x32768 256.2 -> 252.5; D=64 4x32768 77.8 -> 76.6,
    // the rest level (benchmarks/results/cuda-attention-decode-splits-h200-2026-11-27.md).
    const int64_t per_sm = std::max<int64_t>(1, kDecodeInflight / in.inflight);
    const int64_t cap = std::max<int64_t>(sm_count / in.blocks, in.key_tiles / (4 * per_sm));
    const int64_t n = std::min<int64_t>(sm_count * per_sm / in.blocks, cap);
    return static_cast<int>(std::clamp<int64_t>(n, 1, std::min<int64_t>(128, in.key_tiles)));
  }
  // Prefill, FlashAttention-2's rule: no split when the grid nearly fills the GPU; otherwise the fewest splits whose
  // waves of blocks are as full as the best (each split at least 4 key tiles long, at most 128 splits).
  const int64_t slots = static_cast<int64_t>(sm_count) * in.resident;
  if (in.blocks * 5 >= slots * 4) return 1;
  const int64_t max_splits = std::min<int64_t>({128, in.key_tiles / 4, slots});
  if (max_splits <= 1) return 1;
  const auto efficiency = [&](int64_t n) {
    const double waves = static_cast<double>(in.blocks * n) / static_cast<double>(slots);
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int64_t n = 1; n <= max_splits; ++n) best = std::max(best, efficiency(n));
  for (int64_t n = 1; n <= max_splits; ++n) {
    if (efficiency(n) >= 0.95 * best) return static_cast<int>(n);
  }
  return 1;
}

cudaError_t attention_forward(const AttentionForward& a, cudaStream_t stream) {
  const AttentionShape& s = a.shape;
  if (s.batch == 0 || s.heads_q == 0 || s.seq_q == 0) return cudaSuccess;
  if (s.heads_k <= 0 || s.heads_q % s.heads_k != 0 || (a.num_splits > 1 && (!a.split_out || !a.split_lse))) {
    return cudaErrorInvalidValue;
  }
  // the kernels' 32-bit row indices (as the backward's): stacked query rows per key/value head and Sk under 2^31
  if (s.heads_q / s.heads_k * s.seq_q > 0x7fffffff - 256 || s.seq_k > 0x7fffffff - 256) return cudaErrorInvalidValue;
  switch (s.dtype) {
    case DType::bf16: return forward_typed<bf16>(a, stream);
    case DType::f16: return forward_typed<f16>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace yirage::kernels::cuda

#endif  // YIRAGE_HIP
