// tests/type_pairs.hpp — seeded pairs of layouts that hold the same number of bytes, for the copy
// tests (ferry::copy, ferry::gpu::copy_async, copy moves of a Batch): (src type, src count) and
// (dst type, dst count). Each pair comes from one seed, built by one of several recipes so that
// every path of the engines runs: two generator types (random_type.hpp) whose sizes have a small
// ratio; a generator type against a byte-indexed, a byte-vector or a contiguous layout of its size;
// and two 3-D boxes of equal extents in arrays of the same or of different shapes (the halo case).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace ferry_test {

struct TypePair {
  MPI_Datatype src = MPI_DATATYPE_NULL;  // committed (or named); release() frees them
  MPI_Datatype dst = MPI_DATATYPE_NULL;
  bool src_named = false, dst_named = false;
  int src_count = 1, dst_count = 1;
  bool dst_overlaps = false;  // dst's type map writes some byte twice (unpack order matters)
  std::string description;
};

TypePair make_pair(std::uint64_t seed);
void release(TypePair& pair);

// Where `count` elements of `type` fit in a buffer: the origin's offset (a multiple of 16) and the
// buffer's size, with at least 64 bytes of margin on both sides.
struct Span {
  std::int64_t origin = 0;
  std::int64_t size = 0;
};
Span span_of(MPI_Datatype type, int count);

// `base + offset` for an origin that may lie far outside the buffer (a type whose data sits at a
// huge displacement): computed as an integer, since pointer arithmetic past the object is
// undefined.
inline char* offset_by(char* base, std::int64_t offset) {
  return reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(base) +
                                 static_cast<std::uintptr_t>(offset));
}

// Two boxes of one shape at random places in a source array (they may overlap: sources are only
// read), two more of that shape in a destination array twice as deep (the second box in the second
// half, so the destinations never overlap; which of the two lies lower is random, so a pair's
// stride is negative half the time), elements of 1-12 bytes, and a piece size that divides the
// rows: what ferry::interleave pairs (tests/test_plan.cpp, tests/test_gpu_pack_batch.cpp).
struct BoxPair {
  MPI_Datatype src[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};  // committed; release() frees them
  MPI_Datatype dst[2] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};
  std::int64_t src_bytes = 0, dst_bytes = 0;  // the arrays' sizes; the types' origin is their start
  int piece = 0;
  std::string description;
};
BoxPair make_box_pair(std::uint64_t seed);
void release(BoxPair& pair);

}  // namespace ferry_test
