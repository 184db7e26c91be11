#!/usr/bin/env bash
# Tuning run of the CUDA attention forward (on a GPU machine): builds attention_tune.cu once per configuration
# (CONFIGS="name:D:warps_m:m_tiles:warps_n:block_n:stages ...", in parallel) and times each on prefill and decode
# shapes, checking the small ones against a naive fp32 reference. Usage: bash benchmarks/cuda/attention_tune.sh
set -u
cd "$(dirname "$0")"
mkdir -p /tmp/tune
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
build() { # name D WM MT WN BN ST
  $NVCC -std=c++20 -O3 --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -I../../csrc/kernels/cuda \
    -DCFG_D=$2 -DCFG_WM=$3 -DCFG_MT=$4 -DCFG_WN=$5 -DCFG_BN=$6 -DCFG_ST=$7 -o /tmp/tune/$1 attention_tune.cu > /tmp/tune/$1.log 2>&1 || echo "BUILD FAIL $1: $(head -5 /tmp/tune/$1.log)"
}
CONFIGS=${CONFIGS:-"p128a:128:4:2:1:64:2 p128b:128:8:1:1:64:2 p128c:128:4:1:1:64:2 p128d:128:8:1:1:128:2 p128e:128:4:2:1:32:2 p64a:64:4:2:1:64:2 p64b:64:8:1:1:64:2 p64c:64:4:2:1:128:2 p64d:64:8:1:1:128:2 p256a:256:4:1:1:32:2 p256b:256:4:1:1:64:2 d128a:128:1:1:4:64:2 d128b:128:1:1:4:128:2 d128c:128:1:1:4:64:3 d128d:128:1:1:2:64:3"}
for c in $CONFIGS; do IFS=: read n d wm mt wn bn st <<< "$c"; build $n $d $wm $mt $wn $bn $st & done; wait
for c in $CONFIGS; do
  IFS=: read n d wm mt wn bn st <<< "$c"; b=/tmp/tune/$n; [ -x $b ] || continue
  if [[ $n == p* ]]; then
    $b 1 4 2 300 301 1 0 2; $b 2 8 8 1000 1000 0 0 2; $b 1 8 1 129 4000 1 0 2
    $b 4 32 32 4096 4096 0 0 10; $b 4 32 32 4096 4096 1 0 10; $b 1 32 32 16384 16384 0 0 3
  else
    $b 1 32 8 1 1000 0 0 2; $b 2 32 8 3 4097 1 0 2
    $b 1 32 8 1 32768 0 0 50; $b 64 32 8 1 32768 0 0 10; $b 1 32 8 1 131072 0 0 20; $b 64 32 8 1 131072 0 0 3
  fi
done
