// sys/env.hpp — every environment variable Ferry reads, declared once with its default and meaning.
// Values are read on first use and cached.
#pragma once

#include <cstdint>

namespace ferry::detail::env {

// FERRY_DEBUG_SYNC (0): synchronize the stream and check for errors after every GPU launch.
bool debug_sync();
// FERRY_GPU_THREADS (0 = tuning table): threads per block of the pack kernels, for tuning runs.
int gpu_threads();

}  // namespace ferry::detail::env
