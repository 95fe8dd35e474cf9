// pack/job.hpp — one move of a batch (pack, unpack or copy) as the batch kernels read it, and the
// index arithmetic that turns a packed word number into a byte offset on each side.
//
// Compiled for host and device, like plan.hpp: tests/test_plan.cpp runs the same arithmetic on the
// CPU against the CPU engine, so CI checks the batch kernels' addressing without a GPU.
//
// A move reads packed word p (words of 1 << lw bytes) from its source and writes it to its
// destination. A side with a layout ("typed") finds word p through a plan; a packed side holds the
// words back to back. Pack: typed source, packed destination; unpack: the reverse; copy: both
// typed, with no packed buffer in between. Pointers are not in the records: each side is a pointer
// slot (a table the host can rewrite between launches) plus a byte offset.
#pragma once

#include <cstdint>

#include "pack/plan.hpp"

namespace ferry::detail {

// A strided shape of at most three dimensions with 32-bit indices and strides: what halo boxes of
// 3-D arrays are (two dimensions for one box, three for a pair of faces or a count of
// quantities). The lean batch kernel keeps such shapes in shared memory and needs no loop over 16
// dimensions per word. Strides are 32-bit (below 2 GiB: rows and planes of any array that fits a
// GPU but the largest) so that an offset term is one 32 x 32 -> 64-bit multiply-add and a copy
// between two shapes keeps both sets of strides in registers (with 64-bit strides the copy loops
// spilled 12-16 B at a 40-register cap); the start stays 64-bit.
struct Shape3 {
  std::int64_t start;      // bytes from the side's base to the first block
  std::int32_t stride[3];  // bytes; dimension 0 is the innermost above the contiguous block
  std::uint32_t words;     // words in one contiguous block
  std::uint32_t count[3];
  FastDiv fwords;          // divides by words
  FastDiv fcount[2];       // by count[0] and count[1]; the outermost index needs no division
  std::int32_t nd;         // 0..3
};

// index (< 2^31) times stride, as one wide multiply.
FERRY_HD std::int64_t stride_term(std::uint32_t index, std::int32_t stride) {
  return static_cast<std::int64_t>(static_cast<std::int32_t>(index)) * stride;
}

// Byte offset from the side's base of packed word p (p < 2^31).
template <int LW>
FERRY_HD std::int64_t shape3_offset(const Shape3& s, std::uint32_t p) {
  const std::uint32_t block = s.fwords.div(p);
  std::int64_t off = s.start + (static_cast<std::int64_t>(p - block * s.words) << LW);
  if (s.nd == 0) return off;
  if (s.nd == 1) return off + stride_term(block, s.stride[0]);
  const std::uint32_t q = s.fcount[0].div(block);
  off += stride_term(block - q * s.count[0], s.stride[0]);
  if (s.nd == 2) return off + stride_term(q, s.stride[1]);
  const std::uint32_t q2 = s.fcount[1].div(q);
  off += stride_term(q - q2 * s.count[1], s.stride[1]);
  return off + stride_term(q2, s.stride[2]);
}

// Byte offsets of packed word p through two shapes with the same block and counts but their own
// starts and strides (a copy between a halo's interior and its image, or between two interleaved
// faces whose pair strides differ): the divisions once, then one sum per side.
template <int LW>
FERRY_HD void shape3_offsets(const Shape3& a, const Shape3& b, std::uint32_t p, std::int64_t& oa,
                             std::int64_t& ob) {
  const std::uint32_t block = a.fwords.div(p);
  const std::int64_t word = static_cast<std::int64_t>(p - block * a.words) << LW;
  oa = a.start + word;
  ob = b.start + word;
  if (a.nd == 0) return;
  if (a.nd == 1) {
    oa += stride_term(block, a.stride[0]);
    ob += stride_term(block, b.stride[0]);
    return;
  }
  const std::uint32_t q = a.fcount[0].div(block);
  const std::uint32_t i0 = block - q * a.count[0];
  oa += stride_term(i0, a.stride[0]);
  ob += stride_term(i0, b.stride[0]);
  if (a.nd == 2) {
    oa += stride_term(q, a.stride[1]);
    ob += stride_term(q, b.stride[1]);
    return;
  }
  const std::uint32_t q2 = a.fcount[1].div(q);
  const std::uint32_t i1 = q - q2 * a.count[1];
  oa += stride_term(i1, a.stride[1]) + stride_term(q2, a.stride[2]);
  ob += stride_term(i1, b.stride[1]) + stride_term(q2, b.stride[2]);
}

// What a lean move does, known per CUDA block and compiled into the loop.
enum MoveKind : std::int32_t {
  kPack = 0,      // source through `a`, destination packed
  kUnpack = 1,    // source packed, destination through `a`
  kCopySame = 2,  // source through `a`, destination through `b`, which has a's block and counts
  kCopyTwo = 3,   // source through `a`, destination through `b`
};
constexpr int kMoveKinds = 4;

// One move of the lean kernel: every side strided with at most 3 dimensions, < 2^31 bytes.
struct LeanMove {
  Shape3 a;
  Shape3 b;
  std::int64_t src_off;  // bytes from the source slot's pointer to the source base
  std::int64_t dst_off;
  std::int32_t lw;
  std::int32_t kind;
};

template <int LW, int Kind, class M>
FERRY_HD void lean_offsets(const M& m, std::uint32_t p, std::int64_t& src, std::int64_t& dst) {
  const std::int64_t linear = static_cast<std::int64_t>(p) << LW;
  if constexpr (Kind == kPack) {
    src = shape3_offset<LW>(m.a, p);
    dst = linear;
  } else if constexpr (Kind == kUnpack) {
    src = linear;
    dst = shape3_offset<LW>(m.a, p);
  } else if constexpr (Kind == kCopySame) {
    shape3_offsets<LW>(m.a, m.b, p, src, dst);
  } else {
    src = shape3_offset<LW>(m.a, p);
    dst = shape3_offset<LW>(m.b, p);
  }
}

// One move of the general kernel: full plans (general forms, up to 16 dimensions, 64-bit indices).
struct GeneralMove {
  Plan src;  // read when src_typed; pieces and shapes point at the type's device tables
  Plan dst;
  std::int64_t src_off;
  std::int64_t dst_off;
  std::int32_t lw;
  std::int32_t wide;  // 64-bit indices
  std::int32_t src_typed;
  std::int32_t dst_typed;
};

template <class Idx, int LW>
FERRY_HD void general_offsets(const GeneralMove& m, Idx p, std::int64_t& src, std::int64_t& dst) {
  const std::int64_t linear = static_cast<std::int64_t>(p) << LW;
  src = m.src_typed ? plan_offset<Idx, LW>(m.src, p) : linear;
  dst = m.dst_typed ? plan_offset<Idx, LW>(m.dst, p) : linear;
}

// The share of one move that one CUDA block moves: packed bytes [begin, end) of move `move`. The
// slots are here, not in the move, so a block loads its move and both pointers at once.
struct Chunk {
  std::int64_t begin;  // a multiple of 16 (any word size divides it)
  std::int64_t end;    // a multiple of 16, or the move's size
  std::uint32_t move;
  std::uint32_t src_slot;
  std::uint32_t dst_slot;
  std::uint32_t unused;
};

}  // namespace ferry::detail
