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

// FERRY_HALO_TIMEOUT (0 = never): seconds a halo exchange waits for a neighbour before it fails
// with a message that names the neighbour (a rank that never calls exchange() hangs it otherwise).
double halo_timeout();
// FERRY_HALO_VERBOSE (0): 1 prints each halo plan's methods, bytes and messages on rank 0.
bool halo_verbose();
// FERRY_HALO_METHOD (unset): force a halo method (local, peer, ipc, staged, pipelined, mpi) in
// every plan whose options do not name one; "" when unset.
const char* halo_method();

}  // namespace ferry::detail::env
