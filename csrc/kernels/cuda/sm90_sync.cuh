// Hopper (sm_90a) synchronization and asynchronous memory operations: shared-memory barriers (mbarrier, including
// the arrival of a thread's cp.async copies and of tensor-memory-accelerator loads), named barriers, setmaxnreg,
// and bulk reductions into global memory.
// Used by the sm_90a attention forward (attention_fwd_sm90.cuh) and backward (attention_bwd_sm90.cuh); included by
// wgmma_sm90.cuh.
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
// One arrival on `bar` that also expects `bytes` more of asynchronous copies (tma_load_4d) on its current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if YIRAGE_SM90A_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// A box of a 4-D tensor (the tensor map `map`, a __grid_constant__ kernel parameter) at coordinates c0..c3 into
// shared memory at `dst`, by the tensor memory accelerator; its bytes complete on `bar` (mbar_arrive_expect_tx).
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, int c0, int c1, int c2, int c3,
                                            uint32_t bar) {
#if YIRAGE_SM90A_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
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

// Bulk reductions by the copy engine (TMA): dst[i] += src[i] for `bytes` / 4 floats, dst in global memory, src in
// this block's shared memory (both 16-byte aligned, bytes a multiple of 16), each element added atomically. The
// thread that issues them closes a group (commit), then waits until at most N of its groups still read their
// source (wait_read: the shared memory may be rewritten) or are not yet complete (wait).
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, uint32_t src, uint32_t bytes) {
#if YIRAGE_SM90A_DEVICE
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if YIRAGE_SM90A_DEVICE
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
#if YIRAGE_SM90A_DEVICE
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait() {
#if YIRAGE_SM90A_DEVICE
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace yirage::kernels::cuda::sm90

#endif  // !YIRAGE_HIP
