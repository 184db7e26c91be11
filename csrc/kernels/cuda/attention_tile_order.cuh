// The order in which the blocks of a query-tile grid (blockIdx.x: query tile, y: key/value head, z: batch, or batch
// and key split) take their tiles under a causal mask (device code, torch-free; CUDA only). Used by the Hopper
// forward (attention_fwd_sm90.cuh) and the Hopper dQ kernel of head dim 256 (attention_bwd_dq_sm90.cuh); the dK/dV
// kernels order their 1-D grid the same way (BwdBlock, attention_bwd_tile.cuh). The sm_80-class forward keeps each
// head's tiles together (slower with groups: attention_fwd_kernel.cuh).
#pragma once

#include "compat.cuh"

#include <cstdint>

namespace yirage::kernels::cuda {
namespace {

// Causal: the (y, z) pairs ("heads") go in groups of kCausalLptHeads; within a group, every head's last (longest)
// tile first, then every head's next-to-last, and so on. Blocks start in the grid's linear order, so without the
// groups the last heads' longest tiles started among the last and the GPU ran them out alone; groups keep a few
// heads' K and V shared in L2. Hopper forward, H200, 2026-11-28, kernel alone, against each head's tiles from the last,
// head by head: D128 B4 H32 S2048 1.04x, S4096 1.01x, D64 S4096 1.03x, D256 B4 H16 S4096 1.04x, GQA (Hk 8) S2048
// 1.05x, B2 S8192 1.01-1.04x; groups of 4 or 16 within 4% of 8, either way. Hopper dQ kernel (D 256, whole backward
// in the harness): B4 H16 S4096 1.01-1.02x, S2048 1.04x, GQA (Hq 32, Hk 8) S2048 1.02x.
constexpr int kCausalLptHeads = 8;

struct QueryTileBlock {
  int tile, y, z;  // the tile and the grid coordinates it stands for (the caller's head and batch)
};

// This block's tile: blockIdx as is without a mask; the order above with one.
__device__ __forceinline__ QueryTileBlock query_tile_block(bool causal) {
  QueryTileBlock t{static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z)};
  if (causal) {
    constexpr int64_t kLpt = kCausalLptHeads;
    const int64_t lin = blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) * blockIdx.z);
    const int64_t per_group = kLpt * gridDim.x, grp = lin / per_group, in = lin - grp * per_group;
    const int64_t heads = int64_t(gridDim.y) * gridDim.z;
    const int64_t here = heads - grp * kLpt < kLpt ? heads - grp * kLpt : kLpt;
    const int64_t head = grp * kLpt + in % here;
    t.tile = static_cast<int>(gridDim.x - 1 - in / here);
    t.y = static_cast<int>(head % gridDim.y);
    t.z = static_cast<int>(head / gridDim.y);
  }
  return t;
}

}  // namespace
}  // namespace yirage::kernels::cuda
