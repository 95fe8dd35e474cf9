// pack/cuda/tuning.hpp — launch shapes of the pack kernels, one entry per GPU architecture, with
// the measurement that chose it beside it (docs/performance.md has the full sweeps).
#pragma once

namespace ferry::detail {

struct LaunchPolicy {
  int threads;        // threads per block
  int blocks_per_sm;  // most resident blocks per multiprocessor the grid asks for (grid-stride
                      // loops cover the rest)
};

// Words each thread moves per loop trip: loads are issued together, then the stores, so several
// memory requests are in flight per thread.
constexpr int kUnroll = 4;

inline LaunchPolicy launch_policy(int cc_major, int /*cc_minor*/) {
  // sm_90 (H100, H200): 256 threads x 8 blocks/SM. Sweep in docs/performance.md ("GPU launch
  // shape"), 64 MiB, 8-byte blocks at 512 B pitch and 24-byte halo faces.
  if (cc_major >= 9) return {256, 8};
  // Older parts: the same shape; not measured here.
  return {256, 8};
}

}  // namespace ferry::detail
