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

}  // namespace ferry::detail::env
