// pack/cuda/kernels.cuh — the pack kernels. Thin __global__ wrappers over one loop (move_words)
// that moves packed words [first, n) of a plan, `kUnroll` words per thread per trip, loads first
// then stores. The plan's index arithmetic (pack/plan.hpp) turns a packed word index into a byte
// offset in memory; LW (log2 word size), ND (dimensions, -1 = run time) and the index width are
// template parameters so the arithmetic is specialized per launch.
#pragma once

#include <cstdint>

#include "pack/cuda/tuning.hpp"
#include "pack/plan.hpp"

namespace ferry::detail {

template <int LW>
struct WordOf;
template <>
struct WordOf<0> {
  using type = std::uint8_t;
};
template <>
struct WordOf<1> {
  using type = std::uint16_t;
};
template <>
struct WordOf<2> {
  using type = std::uint32_t;
};
template <>
struct WordOf<3> {
  using type = std::uint64_t;
};
template <>
struct WordOf<4> {
  using type = uint4;
};

// Offset functors: the strided form with ND known, or the general form.
template <class Idx, int LW, int ND>
struct StridedAt {
  template <class P>
  __device__ __forceinline__ std::int64_t operator()(const P& pl, Idx p) const {
    return strided_offset<Idx, LW, ND>(pl, p);
  }
};
template <class Idx, int LW>
struct GeneralAt {
  __device__ __forceinline__ std::int64_t operator()(const Plan& pl, Idx p) const {
    return general_offset<Idx, LW>(pl, p);
  }
};

// Moves the packed words [0, pl.total) that fall to CUDA block `block` of the `nblocks` sharing
// the job: tiles of blockDim * kUnroll consecutive words, every nblocks-th tile.
template <class Idx, int LW, bool Pack, class At, class P>
__device__ __forceinline__ void move_words(const P& pl, char* __restrict__ mem,
                                           char* __restrict__ packed, Idx block, Idx nblocks) {
  using Word = typename WordOf<LW>::type;
  const Idx n = static_cast<Idx>(pl.total);
  const Idx tile = static_cast<Idx>(blockDim.x) * kUnroll;
  Word* pk = reinterpret_cast<Word*>(packed);
  At at;
  for (Idx base = block * tile + threadIdx.x; base < n; base += nblocks * tile) {
    Word v[kUnroll];
    std::int64_t off[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Idx p = base + static_cast<Idx>(u) * blockDim.x;
      if (p < n) {
        off[u] = at(pl, p);
        v[u] = Pack ? *reinterpret_cast<const Word*>(mem + off[u]) : pk[p];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const Idx p = base + static_cast<Idx>(u) * blockDim.x;
      if (p < n) {
        if (Pack) pk[p] = v[u];
        else *reinterpret_cast<Word*>(mem + off[u]) = v[u];
      }
    }
  }
}

// Strided shapes of ND = 1..3 dimensions take a StridedPlan<ND>; others (ND = -1) the whole Plan.
template <class Idx, int LW, int ND, bool Pack, class P>
__global__ void strided_kernel(const P pl, char* mem, char* packed) {
  move_words<Idx, LW, Pack, StridedAt<Idx, LW, ND>>(pl, mem, packed, blockIdx.x, gridDim.x);
}

template <class Idx, int LW, bool Pack>
__global__ void general_kernel(const Plan pl, char* mem, char* packed) {
  move_words<Idx, LW, Pack, GeneralAt<Idx, LW>>(pl, mem, packed, blockIdx.x, gridDim.x);
}

// One job of a batch, as the batch kernel reads it.
struct DevJob {
  Plan plan;             // total set for lw; general plans point at the type's device tables
  char* mem;             // origin of element 0
  char* packed;
  std::int64_t first_block;  // this job's first block in the grid
  int lw;
  int wide;
};

template <class Idx, bool Pack>
__device__ __forceinline__ void batch_job(const DevJob& job, Idx block, Idx nblocks) {
  const bool general = job.plan.npieces != 0;
#define FERRY_BATCH_CASE(LW)                                                                  \
  case LW:                                                                                   \
    if (general)                                                                             \
      move_words<Idx, LW, Pack, GeneralAt<Idx, LW>>(job.plan, job.mem, job.packed, block,     \
                                                    nblocks);                                \
    else                                                                                     \
      move_words<Idx, LW, Pack, StridedAt<Idx, LW, -1>>(job.plan, job.mem, job.packed, block, \
                                                        nblocks);                            \
    return;
  switch (job.lw) {
    FERRY_BATCH_CASE(0)
    FERRY_BATCH_CASE(1)
    FERRY_BATCH_CASE(2)
    FERRY_BATCH_CASE(3)
    FERRY_BATCH_CASE(4)
  }
#undef FERRY_BATCH_CASE
}

// Block b works on the job whose [first_block, next first_block) holds b.
template <bool Pack>
__global__ void batch_kernel(const DevJob* __restrict__ jobs, int njobs, std::int64_t nblocks) {
  __shared__ int job_index;
  if (threadIdx.x == 0) {
    int lo = 0, hi = njobs - 1;
    const std::int64_t b = blockIdx.x;
    while (lo < hi) {
      int mid = (lo + hi + 1) >> 1;
      if (jobs[mid].first_block <= b) lo = mid;
      else hi = mid - 1;
    }
    job_index = lo;
  }
  __syncthreads();
  const DevJob& job = jobs[job_index];
  const std::int64_t end = job_index + 1 < njobs ? jobs[job_index + 1].first_block : nblocks;
  const std::int64_t block = blockIdx.x - job.first_block, count = end - job.first_block;
  if (job.wide)
    batch_job<std::uint64_t, Pack>(job, static_cast<std::uint64_t>(block),
                                   static_cast<std::uint64_t>(count));
  else
    batch_job<std::uint32_t, Pack>(job, static_cast<std::uint32_t>(block),
                                   static_cast<std::uint32_t>(count));
}

}  // namespace ferry::detail
