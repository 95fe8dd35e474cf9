// pack/cuda/kernels.cuh — the single-call pack kernels (batches: batch_kernels.cuh). Thin __global__ wrappers over one loop (move_words)
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

}  // namespace ferry::detail
