#!/usr/bin/env bash
# A/B of this tree's CPU kernels (rms_norm, fused add + rms_norm, layer_norm, softmax, log_softmax, silu_and_mul,
# gelu_and_mul, gelu, gelu_tanh forwards; fp32, bf16, fp16) against another commit's, in one process, one thread,
# data in cache (benchmarks/cpu/kernel_ab.cpp). Kernel objects are built with the package's flags (-O3 -std=c++20;
# each ISA variant for its own target inside the file), the other commit's with its namespace renamed.
#   benchmarks/cpu/kernel_ab.sh [REF [REPS [FILTER]]]    REF: the commit to compare with (default HEAD, so that
#                                                       uncommitted changes are measured); FILTER: a substring of
#                                                       the case names ("bf16", "softmax 64x1024 fp32", ...)
#   YIRAGE_CPU_ISA=avx2 (or avx512, avx512_bf16, generic) runs that variant of both (a commit without it runs its
#   widest); by default the best the CPU has.
# Build directory: build/kernel_ab (AB_DIR to change). Needs g++ with C++20.
set -euo pipefail
cd "$(dirname "$0")/../.."
ref=${1:-HEAD}
reps=${2:-31}
filter=${3:-}
out=${AB_DIR:-build/kernel_ab}
rm -rf "$out"
mkdir -p "$out/old"
git archive "$ref" csrc | tar -x -C "$out/old"
# GCC's #pragma once takes two headers of the same size, time and contents for one file: mark the old ones
find "$out/old/csrc" -name '*.h' -exec sh -c 'echo "// the old tree (kernel_ab)" >> "$1"' _ {} \;
flags=(-O3 -std=c++20 -g0)
srcs=(isa rms_norm layer_norm softmax activation)
pids=()
for s in "${srcs[@]}"; do
  g++ "${flags[@]}" -Dyirage=yirage_old -I"$out/old/csrc" -c "$out/old/csrc/kernels/cpu/$s.cpp" -o "$out/old_$s.o" &
  pids+=($!)
  g++ "${flags[@]}" -Icsrc -c "csrc/kernels/cpu/$s.cpp" -o "$out/new_$s.o" &
  pids+=($!)
done
g++ "${flags[@]}" -Icsrc -I"$out" -c benchmarks/cpu/kernel_ab.cpp -o "$out/driver.o" &
pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
g++ -o "$out/kernel_ab" "$out"/*.o
echo "kernel_ab: $(git rev-parse --short "$ref") (old) against the working tree (new), ISA ${YIRAGE_CPU_ISA:-auto}"
"$out/kernel_ab" "$reps" ${filter:+"$filter"}
