// Runtime CPU-feature dispatch for the CPU kernels (torch-free).
//
// One build runs everywhere: each kernel body is compiled once per instruction set in the same
// translation unit (see target.h) and the variant is chosen at run time from what the CPU supports.
// The choice can be narrowed (never widened past what the CPU has) with the environment variable
// YIRAGE_CPU_ISA=generic|avx2|avx512|avx512_bf16, read once, or with set_isa() at run time (tests use it to check
// every variant on one machine).
#pragma once

namespace yirage::kernels::cpu {

// Each variant needs the CPU features of the one before it: avx512_bf16 is the avx512 code with bf16 results rounded
// by AVX512-BF16's conversion instructions (the same bits), and on AMD CPUs bf16 attention's products on AVX512-BF16
// dot products (bf16 x bf16 -> fp32, P and dS rounded to bf16 first: not the same bits as avx512's fp32 products).
enum class Isa : int { generic = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3 };

const char* isa_name(Isa isa);
// Parses "generic", "avx2", "avx512", "avx512_bf16"; returns false for anything else.
bool parse_isa(const char* name, Isa* out);
// The widest variant this CPU (and OS) supports, ignoring any override.
Isa best_isa();
// The variant kernels use now: best_isa(), narrowed by YIRAGE_CPU_ISA or set_isa().
Isa active_isa();
// Selects a variant; returns false (and changes nothing) if the CPU does not support it.
bool set_isa(Isa isa);

// What the CPU is, for the backend registry and diagnostics (read once with cpuid; empty strings and
// false on other architectures).
struct CpuFeatures {
  char vendor[13];      // "GenuineIntel", "AuthenticAMD", ...
  char brand[49];       // e.g. "Intel(R) Xeon(R) Platinum 8480+"
  bool avx2_fma;        // AVX2 with FMA
  bool avx512f;         // AVX-512 Foundation, with the OS saving the ZMM state
  bool amx_tile;        // AMX tiles (CPUID.7.0:EDX[24]), with the OS saving the tile state (XCR0[18:17])
  bool amx_bf16;        // AMX BF16 (CPUID.7.0:EDX[22])
  bool amx_int8;        // AMX INT8 (CPUID.7.0:EDX[25])
  // The last-level cache one core sees (cpuid's cache parameters: e.g. one CCX's L3 on AMD), in bytes; 0 when
  // cpuid does not list it (then callers assume 32 MiB).
  unsigned long long llc_bytes;
};
const CpuFeatures& cpu_features();

}  // namespace yirage::kernels::cpu
