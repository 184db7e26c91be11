// Compile the code between YR_TARGET_BEGIN(...) and YR_TARGET_END for a wider instruction set than
// the translation unit's baseline, without -march flags: GCC's `#pragma GCC target`, clang's
// `#pragma clang attribute`. Code inside such a region must only run after the runtime check in
// isa.cpp, and must live in its own namespace (one per ISA) so no inline function of one variant is
// merged with another's by the linker. Standard headers are included before any region, so their
// templates are instantiated for the baseline target and are safe to inline into wider code.
#pragma once

#define YR_PRAGMA(x) _Pragma(#x)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define YR_HAVE_X86_VARIANTS 1
// Vector arguments of internal functions: the ABI note does not concern us.
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12 reports the intrinsics headers' own `__Y = __Y` placeholders as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#if defined(__clang__)
#define YR_TARGET_BEGIN(t) YR_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#define YR_TARGET_END YR_PRAGMA(clang attribute pop)
#else
#define YR_TARGET_BEGIN(t) YR_PRAGMA(GCC push_options) YR_PRAGMA(GCC target(t))
#define YR_TARGET_END YR_PRAGMA(GCC pop_options)
#endif
#else
#define YR_HAVE_X86_VARIANTS 0
#endif

#define YR_AVX2_TARGET "avx2,fma,f16c"
#define YR_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
#define YR_AVX512_BF16_TARGET "avx512bf16,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"
