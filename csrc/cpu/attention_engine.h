// Whether the CPU attention kernels multiply bf16 tiles on a matrix engine (cpu/attention.cpp).
#pragma once

namespace yirage {

// bf16 attention's products through torch's oneDNN brgemm (AMX tiles): where torch's oneDNN has AMX-BF16 to run
// them on (cpublas::could_pack), unless YIRAGE_CPU_AMX=0; YIRAGE_CPU_AMX=1 takes it wherever oneDNN's brgemm runs
// bf16 (tests on CPUs without AMX). Read once. Used by the avx512_bf16 variant's bf16-product loops only. On an Intel
// Xeon with AMX, 2x16x2048x128: 1.14-1.17x / 1.51-1.66x SDPA forward / forward+backward, against 0.38x / 0.59x
// with the tiles converted to fp32 for MKL and 0.24x / 0.33x on our AVX512-BF16 tiles
// (benchmarks/results/attention-cpu-amx-brgemm-intel-xeon-2026-11-27.md).
bool cpu_bf16_attention_engine();

}  // namespace yirage
