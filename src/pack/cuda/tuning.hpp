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

// Batch kernels (batch_kernels.cuh): block size fixed at compile time, since it is also their
// __launch_bounds__ (FERRY_GPU_THREADS does not change it); 256 as the single-call kernels. At
// least 6 resident blocks per SM caps the lean kernel at 40 registers (ptxas, CUDA 13, sm_90: 46
// uncapped; capped, 0 B spilled but 4 B in the two-shape copy loop at 1-8 B words; 8 blocks, i.e.
// 32 registers, spilled 16-32 B in most loops). Predicted, to be measured (docs/performance.md,
// "Batches of packs, unpacks and copies"): above 50 % occupancy the batch does not depend on it
// (32 B in flight per thread x 1024 threads x 132 SMs = 4.3 MB, above the ~3 MB an H100's HBM
// needs in flight).
constexpr int kBatchThreads = 256;
constexpr int kBatchMinBlocks = 6;

inline LaunchPolicy launch_policy(int /*cc_major*/, int /*cc_minor*/) {
  // sm_90 (H200, 2026-11-22, tools/gpu-check; docs/performance.md "Launch shape"): threads per
  // block 128 / 256 / 512, GB/s packed:
  //   64 MiB, 8 B blocks     283 / 279 / 279      halo face -X  209 / 214 / 212
  //   64 MiB, 64 B blocks   1318 / 1321 / 1374     halo face -Y  216 / 219 / 211
  //   64 MiB, 256 B blocks  1641 / 1647 / 1705     halo face -Z  217 / 222 / 215
  //   64 MiB, 4 KiB blocks  1623 / 1629 / 1637
  // 256 is best on the launch-bound 1.5 MiB faces and within 4% of 512 on large objects.
  // Blocks per SM (grid cap) 8 / 32 / 1024, 256 threads, same run order, GB/s packed:
  //   64 MiB, 8 B blocks     279 / 279 / 279      halo face -X  194 / 202 / 175
  //   64 MiB, 64 B blocks   1293 / 1391 / 1347     halo face -Y  212 / 211 / 173
  //   64 MiB, 256 B blocks  1644 / 1716 / 1664     halo face -Z  208 / 223 / 175
  //   64 MiB, 4 KiB blocks  1601 / 1689 / 1622
  // 32 wins on large objects (+5-8% over 8) and does not lose on faces; an uncapped grid (one
  // trip per thread) is slower on both.
  // Other architectures take the same shape until measured (add a branch with its sweep).
  return {256, 32};
}

}  // namespace ferry::detail
