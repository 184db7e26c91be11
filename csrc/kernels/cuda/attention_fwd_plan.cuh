// The sm_80-class forward's configurations per head dim (prefill / decode), which decode calls take the wide Hopper
// configurations (decode_wide), and what the split-KV heuristic needs of a configuration (split_inputs); host code
// beside the kernel (attention_fwd_kernel.cuh), included by attention_fwd.cu only.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "attention.h"
#include "attention_fwd_kernel.cuh"
#include "launch_facts.cuh"

namespace yirage::kernels::cuda {
namespace {

// Configurations (tuned on an H100; see benchmarks/results). Prefill: warps on the rows. Decode (at most 16
// stacked rows): warps on the keys of one 16-row tile.
template <int kD> struct Prefill;
template <> struct Prefill<64> { using type = FwdConfig<64, 4, 2, 1, 128>; };
template <> struct Prefill<128> { using type = FwdConfig<128, 4, 2, 1, 64>; };
template <> struct Prefill<256> { using type = FwdConfig<256, 4, 1, 1, 32>; };
template <int kD> struct Decode;
template <> struct Decode<64> { using type = FwdConfig<64, 1, 1, 4, 64, 3>; };
template <> struct Decode<128> { using type = FwdConfig<128, 1, 1, 4, 64, 3>; };
template <> struct Decode<256> { using type = FwdConfig<256, 1, 1, 2, 32>; };

// Hopper's 227 KB of shared memory a block: D = 128 decode on 128-key tiles, 3 stages (196 KB; two 128-key tiles of
// K and V, 128 KB, in flight). Taken where the (batch, key/value head) blocks do not fill the GPU and the keys
// are more than 1024 (decode_wide): there each block's split is short or the call is bound by the bytes a block
// keeps in flight, and the wider tiles halve the tile steps. H200, bf16, Hq 32, Hk 8, against Decode<128>: kernel
// alone at the same split counts, B1 Sk2048 8.6 -> 8.2 us, Sk4096 10.2 -> 9.5, Sk8192 13.3 -> 11.7, B2 Sq3 Sk4097
// causal 16.7 -> 15.7, B1 Sk32768 and B16 Sk8192 level, slower at B1 Sk1024 (7.5 -> 8.2) and B64 Sk2048 (123.3 ->
// 124.3), which keep Decode<128>; through the op (launch and the L2 flush included) 0.5-1.1% faster at B1..B16
// with up to 8192 keys and B16 Sk16384 248.2 -> 243.0 us (SDPA's best 245.0)
// (benchmarks/results/cuda-attention-decode-wide-h200-2026-11-27.md).
struct DecodeWide128 { using type = FwdConfig<128, 1, 1, 4, 128, 3>; };
// D = 256 on Hopper: 4 warps on 64-key tiles, 2 stages (136 KB; Decode<256>: 2 warps on 32-key tiles, 72 KB), its
// twice the bytes in flight a block halving the splits the heuristic gives. Through the op (H200, bf16, Hq 32, Hk 8,
// L2 flushed): B1 Sk1024..8192 1.20-1.23x (Sk4096 22.2 -> 18.1 us), Sk32768 1.13x, B2 Sq4 Sk8192 causal 1.31x, Hq 16
// Hk 1 Sk9000 1.81x, B64 Sk2048 1.08x, B4..B16 Sk8192 1.005-1.03x, B4 Sk32768 level; slower at B32 Sk1024 (0.97x;
// probably its 256 blocks, resident at once with Decode<256>, taking two waves at one block a SM), so calls whose
// blocks fill the GPU with at most 1024 keys keep Decode<256> (decode_wide;
// benchmarks/results/cuda-attention-decode-wide-h200-2026-11-27.md).
struct DecodeWide256 { using type = FwdConfig<256, 1, 1, 4, 64, 2>; };
// D = 64 on 128-key tiles, 3 stages (98 KB), where the (batch, key/value head) blocks do not fill the GPU. Through the
// op (H200, bf16, Hq 32, Hk 8 unless named; HEAD and this side by side, three passes in turns, us): B1 Sk1024 8.8 ->
// 8.4, Sk8192 13.1 -> 12.6, Sk32768 25.8 -> 23.8, B16 Sk8192 68.4 -> 66.2, B2 Sq4 Sk8192 causal 20.3 -> 18.9, Hq 16
// Hk 1 Sk9000 24.2 -> 20.2, B4 Sk8192 / Sk32768 level; calls whose blocks fill the GPU keep Decode<64> (B64 Sk2048
// was 0.99x with it) (benchmarks/results/cuda-attention-decode-merge-h200-2026-11-27.md).
struct DecodeWide64 { using type = FwdConfig<64, 1, 1, 4, 128, 3>; };

constexpr int kDecodeRows = 16;  // stacked rows up to which the decode configuration is used
// bytes of K / V loads in flight per SM that the decode splits aim at (attention_forward_splits)
constexpr int64_t kDecodeInflight = int64_t(64) << 10;
constexpr int kMaxGridZ = 65535;

bool is_decode(const AttentionShape& s) { return s.heads_q / s.heads_k * s.seq_q <= kDecodeRows; }

// Whether a decode call takes DecodeWide128 / DecodeWide256 (above); the split heuristic and the launch ask the same.
bool decode_wide(const AttentionShape& s) {
  if (!is_decode(s)) return false;
  const int smem = smem_optin();  // launch_facts.cuh: asked once per device
  const bool few_blocks = s.batch * s.heads_k < sm_count();
  if (s.head_dim == 256) return smem >= DecodeWide256::type::kSmem && (few_blocks || s.seq_k > 1024);
  if (s.head_dim == 64) return smem >= DecodeWide64::type::kSmem && few_blocks;
  if (s.head_dim != 128 || s.seq_k <= 1024) return false;
  return smem >= DecodeWide128::type::kSmem && few_blocks;
}

// What the split heuristic needs of a configuration: blocks per split, key tiles, resident blocks per SM.
struct SplitInputs {
  int64_t blocks = 0, key_tiles = 0, resident = 1;
  int64_t inflight = 1;  // bytes of K / V tiles a block has in flight (kStages - 1 tiles of each)
};

template <typename Cfg>
SplitInputs split_inputs(const AttentionShape& s) {
  SplitInputs in;
  const int64_t rows = s.heads_q / s.heads_k * s.seq_q;
  in.blocks = (rows + Cfg::kBlockM - 1) / Cfg::kBlockM * s.heads_k * s.batch;
  in.key_tiles = (s.seq_k + Cfg::kBlockN - 1) / Cfg::kBlockN;
  in.inflight = int64_t(Cfg::kStages - 1) * 2 * Cfg::kTileKV;
  // resident blocks per multiprocessor of the current device (the same for fp16 and bf16), asked once per device
  // (launch_facts.cuh); the kernel's shared memory is raised first, as its launch does
  static std::atomic<uint64_t> smem_raised{0};
  const auto kernel = flash_attention_fwd_kernel<bf16, Cfg>;
  if (raise_smem_once(smem_raised, reinterpret_cast<const void*>(kernel), Cfg::kSmem) == cudaSuccess) {
    in.resident = blocks_per_sm(kernel, Cfg::kThreads, Cfg::kSmem);
  } else {
    (void)cudaGetLastError();  // the launch reports it
  }
  return in;
}

}  // namespace
}  // namespace yirage::kernels::cuda
