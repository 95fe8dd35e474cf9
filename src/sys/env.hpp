// sys/env.hpp — every environment variable Ferry reads, declared once with its default and meaning.
// Values are read on first use and cached.
#pragma once

#include <cstdint>

namespace ferry::detail::env {

// FERRY_DEBUG_SYNC (0): synchronize the stream and check for errors after every GPU launch.
bool debug_sync();
// FERRY_GPU_THREADS (0 = tuning table): threads per block of the pack kernels, for tuning runs.
int gpu_threads();
// FERRY_GPU_ROWS (1): strided shapes with blocks of 8 words or more use the row kernel (a group of
// threads per block); 0 forces the flat kernel (one thread per word), for comparisons.
bool gpu_rows();

}  // namespace ferry::detail::env
