// sys/env.hpp — every environment variable Ferry reads, declared once with its default and meaning.
// Values are read on first use and cached.
#pragma once

#include <cstdint>

namespace ferry::detail::env {

// FERRY_DEBUG_SYNC (0): synchronize the stream and check for errors after every GPU launch.
bool debug_sync();
// FERRY_GPU_THREADS (0 = tuning table): threads per block of the pack kernels, for tuning runs.
int gpu_threads();
// FERRY_GPU_BLOCKS_PER_SM (0 = tuning table): most blocks per multiprocessor a pack grid asks for.
int gpu_blocks_per_sm();

// FERRY_BATCH_CHUNK (0 = chosen from the batch's size): bytes per CUDA block of a Batch, for tuning.
std::int64_t batch_chunk();
// FERRY_BATCH_ORDER (1): 1 runs a Batch's chunks in the order of the addresses they read or write
// (neighbouring memory at the same time); 0 in the order of the moves.
int batch_order();

}  // namespace ferry::detail::env
