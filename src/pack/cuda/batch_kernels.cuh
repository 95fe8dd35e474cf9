// pack/cuda/batch_kernels.cuh — the batch kernels (one launch moves every move of a Batch: packs,
// unpacks and copies), the single-call copy kernels, and the kernel that rewrites entries of a
// batch's device table.
//
// The kernels that are not templates are static: batch.cu and pieces.cu both include this file.
//
// A batch kernel's block b moves chunk b (batch_plan.hpp): it loads the chunk, then its move's
// record and both slot pointers into shared memory (two dependent loads in all), then runs a loop
// compiled for the move's word size and kind. Two kernels, one per batch: the lean one for moves
// whose typed sides are strided with at most 3 dimensions and 32-bit indices (halo boxes), whose
// per-word arithmetic is a few multiply-shifts; the general one for everything else (indexed and
// struct forms, up to 16 dimensions, 64-bit indices), with the single-call kernels' arithmetic.
#pragma once

#include <cstdint>

#include "pack/cuda/kernels.cuh"
#include "pack/cuda/tuning.hpp"
#include "pack/job.hpp"

namespace ferry::detail {

// Words a thread moves per loop trip: 32 B in flight per thread at 8 B words, as the single-call
// kernels; 16 B words take two, so the registers holding them stay the same.
template <int LW>
constexpr int batch_unroll() {
  return LW >= 4 ? 2 : kUnroll;
}

// Moves the packed words first, first + blockDim, ... below `end`: batch_unroll words a thread
// per trip (consecutive threads take consecutive words, so a warp's loads are coalesced), all
// loads of a trip before its stores, then `step` words on.
template <int LW, int Kind, class M>
__device__ __noinline__ void lean_loop(const M& m, const char* src, char* dst,
                                          std::uint32_t first, std::uint32_t end,
                                          std::uint32_t step) {
  using Word = typename WordOf<LW>::type;
  constexpr int U = batch_unroll<LW>();
  for (std::uint32_t base = first; base < end; base += step) {
    Word v[U];
    char* out[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::uint32_t p = base + static_cast<std::uint32_t>(u) * blockDim.x;
      if (p < end) {
        std::int64_t s, d;
        lean_offsets<LW, Kind>(m, p, s, d);
        v[u] = *reinterpret_cast<const Word*>(src + s);
        out[u] = dst + d;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (base + static_cast<std::uint32_t>(u) * blockDim.x < end)
        *reinterpret_cast<Word*>(out[u]) = v[u];
  }
}

template <class Idx, int LW>
__device__ __noinline__ void general_loop(const GeneralMove& m, const char* src, char* dst,
                                             Idx first, Idx end, Idx step) {
  using Word = typename WordOf<LW>::type;
  constexpr int U = batch_unroll<LW>();
  for (Idx base = first; base < end; base += step) {
    Word v[U];
    char* out[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const Idx p = base + static_cast<Idx>(u) * blockDim.x;
      if (p < end) {
        std::int64_t s, d;
        general_offsets<Idx, LW>(m, p, s, d);
        v[u] = *reinterpret_cast<const Word*>(src + s);
        out[u] = dst + d;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (base + static_cast<Idx>(u) * blockDim.x < end) *reinterpret_cast<Word*>(out[u]) = v[u];
  }
}

template <int LW>
__device__ __forceinline__ void lean_chunk(const LeanMove& m, const char* src, char* dst,
                                           const Chunk& c) {
  const std::uint32_t first = static_cast<std::uint32_t>(c.begin >> LW) + threadIdx.x;
  const auto end = static_cast<std::uint32_t>(c.end >> LW);
  const std::uint32_t step = blockDim.x * batch_unroll<LW>();
  switch (m.kind) {
    case kPack: return lean_loop<LW, kPack>(m, src, dst, first, end, step);
    case kUnpack: return lean_loop<LW, kUnpack>(m, src, dst, first, end, step);
    case kCopySame: return lean_loop<LW, kCopySame>(m, src, dst, first, end, step);
    default: return lean_loop<LW, kCopyTwo>(m, src, dst, first, end, step);
  }
}

template <class Idx>
__device__ __forceinline__ void general_chunk(const GeneralMove& m, const char* src, char* dst,
                                              const Chunk& c) {
#define FERRY_GENERAL_CASE(LW)                                                                   \
  case LW:                                                                                       \
    return general_loop<Idx, LW>(m, src, dst, static_cast<Idx>(c.begin >> LW) + threadIdx.x,   \
                                 static_cast<Idx>(c.end >> LW),                                 \
                                 static_cast<Idx>(blockDim.x) * batch_unroll<LW>());
  switch (m.lw) {
    FERRY_GENERAL_CASE(0)
    FERRY_GENERAL_CASE(1)
    FERRY_GENERAL_CASE(2)
    FERRY_GENERAL_CASE(3)
    FERRY_GENERAL_CASE(4)
  }
#undef FERRY_GENERAL_CASE
}

// A lean chunk at its move's word size.
__device__ __forceinline__ void lean_any(const LeanMove& m, const char* src, char* dst, const Chunk& c) {
  switch (m.lw) {
    case 0: return lean_chunk<0>(m, src, dst, c);
    case 1: return lean_chunk<1>(m, src, dst, c);
    case 2: return lean_chunk<2>(m, src, dst, c);
    case 3: return lean_chunk<3>(m, src, dst, c);
    default: return lean_chunk<4>(m, src, dst, c);
  }
}

// The block's chunk, its move (copied into shared memory) and its two pointers.
template <class M>
__device__ __forceinline__ Chunk load_chunk(const std::uint64_t* __restrict__ slots,
                                            const M* __restrict__ moves,
                                            const Chunk* __restrict__ chunks, std::uint64_t* raw,
                                            char** ptr) {
  static_assert(sizeof(M) % 8 == 0, "records are copied as 8-byte words");
  const Chunk c = chunks[blockIdx.x];
  const auto* words = reinterpret_cast<const std::uint64_t*>(moves + c.move);
  for (unsigned i = threadIdx.x; i < sizeof(M) / 8; i += blockDim.x) raw[i] = words[i];
  if (threadIdx.x == blockDim.x - 1) ptr[0] = reinterpret_cast<char*>(slots[c.src_slot]);
  if (threadIdx.x == blockDim.x - 2) ptr[1] = reinterpret_cast<char*>(slots[c.dst_slot]);
  __syncthreads();
  return c;
}

static __global__ void __launch_bounds__(kBatchThreads, kBatchMinBlocks)
lean_batch_kernel(const std::uint64_t* __restrict__ slots, const LeanMove* __restrict__ moves,
                  const Chunk* __restrict__ chunks) {
  __shared__ std::uint64_t raw[sizeof(LeanMove) / 8];
  __shared__ char* ptr[2];
  const Chunk c = load_chunk(slots, moves, chunks, raw, ptr);
  const LeanMove& m = *reinterpret_cast<const LeanMove*>(raw);
  lean_any(m, ptr[0] + m.src_off, ptr[1] + m.dst_off, c);
}

static __global__ void __launch_bounds__(kBatchThreads)
general_batch_kernel(const std::uint64_t* __restrict__ slots,
                     const GeneralMove* __restrict__ moves, const Chunk* __restrict__ chunks) {
  __shared__ std::uint64_t raw[sizeof(GeneralMove) / 8];
  __shared__ char* ptr[2];
  const Chunk c = load_chunk(slots, moves, chunks, raw, ptr);
  const GeneralMove& m = *reinterpret_cast<const GeneralMove*>(raw);
  const char* src = ptr[0] + m.src_off;
  char* dst = ptr[1] + m.dst_off;
  if (m.wide) general_chunk<std::uint64_t>(m, src, dst, c);
  else general_chunk<std::uint32_t>(m, src, dst, c);
}

// Single copies (copy_async): the move in kernel arguments, a grid-stride loop over its words.
template <int LW, int Kind>
__global__ void __launch_bounds__(kBatchThreads)
lean_copy_kernel(const __grid_constant__ LeanMove m, const char* src, char* dst,
                 std::uint32_t words) {
  const std::uint32_t tile = blockDim.x * batch_unroll<LW>();
  lean_loop<LW, Kind>(m, src, dst, blockIdx.x * tile + threadIdx.x, words, gridDim.x * tile);
}

template <class Idx, int LW>
__global__ void __launch_bounds__(kBatchThreads)
general_copy_kernel(const __grid_constant__ GeneralMove m, const char* src, char* dst, Idx words) {
  const Idx tile = static_cast<Idx>(blockDim.x) * batch_unroll<LW>();
  general_loop<Idx, LW>(m, src, dst, static_cast<Idx>(blockIdx.x) * tile + threadIdx.x, words,
                        static_cast<Idx>(gridDim.x) * tile);
}

// Entries of a batch's device table (pointer slots and move records) to rewrite, in stream order:
// the host's new values travel in the launch's arguments, so nothing on the host must outlive the
// call and nothing waits.
constexpr int kPatchEntries = 240;  // 2.9 KB of arguments, under the 4 KB every GPU takes
struct Patch {
  std::uint32_t n;
  std::uint32_t index[kPatchEntries];  // 8-byte words of the table
  std::uint64_t value[kPatchEntries];
};

static __global__ void patch_kernel(std::uint64_t* table, const __grid_constant__ Patch patch) {
  for (unsigned i = threadIdx.x; i < patch.n; i += blockDim.x) table[patch.index[i]] = patch.value[i];
}

}  // namespace ferry::detail
