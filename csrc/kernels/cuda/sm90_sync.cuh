// Hopper (sm_90a) synchronization for warp-specialized kernels: shared-memory barriers (mbarrier, including the
// arrival of a thread's cp.async copies), named barriers, and setmaxnreg. Used by the sm_90a attention forward
// (attention_fwd_sm90.cuh); included by wgmma_sm90.cuh.
//
// CUDA only, and only in a device pass for sm_90a: elsewhere the mbarrier and setmaxnreg functions compile to
// nothing (the kernels using them trap there; see wgmma_sm90.cuh).
#pragma once

#include "compat.cuh"

#if !YIRAGE_HIP

#include <cstdint>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define YIRAGE_SM90A_DEVICE 1
#else
#define YIRAGE_SM90A_DEVICE 0  // host pass, or a device pass for another architecture
#endif

namespace yirage::kernels::cuda::sm90 {

// Shared-memory barriers (mbarrier) and named barriers, for kernels whose warps run different roles.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if YIRAGE_SM90A_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if YIRAGE_SM90A_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// Arrives on `bar` once every cp.async this thread issued before has landed (the barrier's count includes it).
__device__ __forceinline__ void mbar_arrive_cp_async(uint32_t bar) {
#if YIRAGE_SM90A_DEVICE
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}
// Waits until the phase of parity `parity` has completed (a fresh barrier: parity 1 passes at once).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if YIRAGE_SM90A_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
// Hands registers back to (dec) or takes them from (inc) the SM's pool, for every thread of the warpgroup:
// a producer warpgroup shrinks so that the consumer warpgroups can grow past the launch's even share.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
#if YIRAGE_SM90A_DEVICE
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
#if YIRAGE_SM90A_DEVICE
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}
// Named barrier `id` (1..15) over `threads` threads: sync waits, arrive only counts this warp in.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace yirage::kernels::cuda::sm90

#endif  // !YIRAGE_HIP
