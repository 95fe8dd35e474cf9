// tests/random_type.hpp — a seeded generator of random, valid MPI derived datatypes for the
// property tests, with an independent reference type map for each, and helpers that read back the
// bytes the system MPI actually packs.
//
// Every type comes from one seed: TypeGenerator(seed).next() always builds the same type, so a
// failure reproduces from the seed alone. The generator uses every MPI type constructor (named
// types, contiguous, vector, hvector, indexed, hindexed, indexed_block, hindexed_block, struct,
// subarray, darray, resized, dup), nests them up to max_depth levels, and keeps sizes and extents
// bounded (see Limits) so that thousands of types run quickly.
//
// The reference type map is computed from the construction parameters by the definitions of the MPI
// standard (chapter 4), using only the extents MPI reports for the children: it does not read the
// type back through MPI_Type_get_contents and does not pack through MPI. It lets the tests tell an
// Open MPI packing bug (Open MPI 4.1 packs some types against their own type map, e.g.
// MPI_Type_vector(4, 1, -1, MPI_CHAR)) from a Ferry bug.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace ferry_test {

// An integer knob of the seeded tests (FERRY_SEED, FERRY_PLAN_TYPES, ...), or `fallback`.
inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

// Hard limits on every generated type (the top level and every intermediate one).
struct Limits {
  static constexpr std::int64_t max_size = 256 * 1024;  // MPI_Type_size
  static constexpr std::int64_t max_span = 1024 * 1024;  // |lb|, |ub|, |true lb|, |true ub|
};

struct RandomType {
  MPI_Datatype type = MPI_DATATYPE_NULL;  // not committed; a named type when `named`
  bool named = false;                     // a predefined type: never commit or free it
  std::string description;                // how it was built, for failure messages
  int depth = 0;                          // constructor levels above the named leaves
  // Upper bound on the number of tree nodes a translation that never unrolls a count needs
  // (each constructor contributes a few nodes per distinct block, times its children).
  std::int64_t node_bound = 1;
  // Reference type map of one element: entry j is the byte offset (from the buffer origin) of
  // packed byte j, in type-map order.
  std::vector<std::int64_t> map;
};

class TypeGenerator {
 public:
  explicit TypeGenerator(std::uint64_t seed, int max_depth = 4);
  // A fresh type; the caller owns it (MPI_Type_free unless `named`). Intermediate types are
  // already freed.
  RandomType next();

 private:
  struct Built {
    MPI_Datatype type = MPI_DATATYPE_NULL;
    bool named = true;
    std::string desc;
    int depth = 0;
    std::int64_t node_bound = 1;
    std::vector<std::int64_t> map;  // reference type map
    // MPI's metadata of `type`.
    std::int64_t size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  };
  struct Budget {
    std::int64_t size;
    std::int64_t span;
  };

  Built build(int depth_left, Budget budget);
  Built named_type();
  bool derived(int which, int depth_left, Budget budget, Built& out);
  Built finish(MPI_Datatype t, std::string desc, int depth, std::int64_t node_bound,
               std::vector<std::int64_t> map);
  static void release(Built& b);
  static bool within(const Built& b, Budget budget);

  int uniform(int lo, int hi);  // inclusive
  std::int64_t uniform64(std::int64_t lo, std::int64_t hi);
  bool chance(double p);
  int small_count(std::int64_t cap);  // a count in [1, cap], mostly small, occasionally 0

  std::mt19937_64 rng_;
  int max_depth_;
};

// MPI's metadata of a type.
struct MpiMeta {
  std::int64_t size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
};
MpiMeta mpi_meta(MPI_Datatype type);

// The type map of `count` elements: element i is `map` shifted by i * extent.
std::vector<std::int64_t> repeat_map(const std::vector<std::int64_t>& map, std::int64_t extent,
                                     int count);

// The byte offsets (from the origin) MPI_Pack reads for `count` elements of a committed type, in
// packed order: found by packing a buffer whose bytes are labelled with their own offsets. The
// labelled bytes are [lo - 4096, hi + 4096); lo/hi should cover what the type should touch.
std::vector<std::int64_t> mpi_packed_map(MPI_Datatype type, int count, std::int64_t lo,
                                         std::int64_t hi);

// True when `map` touches some byte twice (unpacking into it is erroneous).
bool map_overlaps(const std::vector<std::int64_t>& map);

// Number of maximal contiguous runs in the type map, in type-map order.
std::int64_t map_runs(const std::vector<std::int64_t>& map);

}  // namespace ferry_test
