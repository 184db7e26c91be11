// Per-block timestamps of the sm_80-class attention forward for tuning builds (attention_fwd_kernel.cuh uses
// ATTN_STAMP; benchmarks/cuda/attention_tune.cu sets g_attn_timeline and prints them). Expands to nothing unless
// YIRAGE_ATTN_TIMELINE is 1.
#pragma once

// Tuning builds (-DYIRAGE_ATTN_TIMELINE=1, benchmarks/cuda/attention_tune.cu): thread 0 of each block stamps the
// global timer at its start, when its first K / V tile has landed, after the key loop, after writing its split, and
// after merging, into g_attn_timeline (5 per block) when the harness set it.
#ifndef YIRAGE_ATTN_TIMELINE
#define YIRAGE_ATTN_TIMELINE 0
#endif
#if YIRAGE_ATTN_TIMELINE
__device__ unsigned long long* g_attn_timeline;
__device__ __forceinline__ unsigned long long attn_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
#define ATTN_STAMP(i)                                                                                   \
  do {                                                                                                \
    if (threadIdx.x == 0 && g_attn_timeline != nullptr) {                                             \
      const long long blk_ = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;          \
      g_attn_timeline[blk_ * 5 + (i)] = attn_now();                                                   \
    }                                                                                                 \
  } while (0)
#else
#define ATTN_STAMP(i) do {} while (0)
#endif
