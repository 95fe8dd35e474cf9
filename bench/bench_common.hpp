// bench/bench_common.hpp — what the Ferry benchmarks share: the MPI datatypes they measure, a few
// helpers, and the hook each benchmark executable implements to register its benchmarks.
//
// Every benchmark executable links bench_main.cpp, which initializes MPI, parses Google Benchmark's
// flags, calls register_benchmarks() (MPI datatypes can only be built after MPI_Init, so the
// benchmarks are registered at run time, not with the BENCHMARK macro), runs them and finalizes MPI.
#pragma once

#include <ferry/type.hpp>

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ferry_bench {

using i64 = std::int64_t;

// Prints the message and aborts the MPI job (a benchmark setup that cannot work is not a result).
[[noreturn]] void die(const std::string& msg);
// die() unless rc is MPI_SUCCESS.
void check_mpi(int rc, const char* what);

// A recipe for one committed MPI datatype.
struct TypeRecipe {
  TypeRecipe() = default;
  TypeRecipe(std::string n, std::string h, std::function<MPI_Datatype()> b)
      : name(std::move(n)), how(std::move(h)), build(std::move(b)) {}

  std::string name;  // short, used in benchmark names (no spaces or slashes)
  std::string how;   // the MPI calls, for people
  // Builds the datatype and commits it; the caller frees it. Intermediate types are already freed.
  std::function<MPI_Datatype()> build;
  // The StridedBlock its canonical form must be (worked out by hand from the MPI arguments).
  std::optional<ferry::StridedBlock> expect;
};

// §5.1.3 / fig. 5.4 of the TEMPI dissertation: one 3D object of E0 x E1 x E2 = 100 x 13 x 47 floats
// at the origin of an allocation of A0 x A1 x A2 = 256 x 512 x 1024 floats (row pitch 1024 B, plane
// pitch 512 KiB), described in many equivalent ways. All describe the same type map (same bytes, same
// order); their MPI extents differ. The first one is the reference.
//
// The dissertation's text calls A0 "bytes" but its fragments use it as a count of floats
// (MPI_Type_vector(E1, E0, A0, MPI_FLOAT), and A0 x 4 with MPI_BYTE); a 100-float row (400 B) would
// not fit a 256-byte pitch, so A0 is taken as 256 floats here.
std::vector<TypeRecipe> object3d_recipes();

// Halo faces of a 256^3 grid with radius 3 and 8-byte values: allocation 262^3 doubles, no pitch
// padding, so a row (X) is 2096 B and a plane (XY) is 262 * 2096 = 549152 B. Each face is the send
// interior, offset by 3 points in every dimension, built with MPI_Type_create_subarray:
//   halo_-X        3 x 256 x 256 points: 65536 runs of 24 B (row stride 2096 B, plane stride 549152 B)
//   halo_-Y      256 x   3 x 256 points: 768 runs of 2048 B (3 rows per plane)
//   halo_-Z      256 x 256 x   3 points: 768 runs of 2048 B (256 rows in each of 3 planes)
//   halo_-Z_planes 3 whole planes (262 x 262 points each, Y and X not trimmed): one dense run of
//                  1647456 B — the -Z face when the ghost rows travel too.
// With `with_listing`, adds halo_-X_listing5.1: Listing 5.1 verbatim (MPI_BYTE, 512-byte pitch,
// sizes {262, 262, 2560}), whose canonical StridedBlock the dissertation gives (fig. 5.10).
std::vector<TypeRecipe> halo_recipes(bool with_listing);

// Number of points per dimension of the halo allocation and the radius.
constexpr int kHaloN = 256;
constexpr int kHaloR = 3;
constexpr int kHaloA = kHaloN + 2 * kHaloR;  // 262

// MPI_Type_vector(nblocks, blocklen, pitch, MPI_BYTE), committed.
MPI_Datatype vector2d(int nblocks, int blocklen, int pitch);

// Bytes from the buffer origin up to one past the last byte the type touches (lb + true extent):
// how much memory one element needs. From MPI, so it does not depend on Ferry being right.
i64 span_of(MPI_Datatype dt);
i64 size_of(MPI_Datatype dt);  // MPI_Type_size_x

// The canonical form of a translated type in one line: the StridedBlock when there is one,
// otherwise "general(...)".
std::string canonical_summary(const ferry::Type& t);

// Takes "--<name>=<value>" out of argv if present. Returns true and sets *value when found.
bool take_flag(int* argc, char** argv, const std::string& name, std::string* value);

// Implemented by each benchmark executable; may consume its own flags from argv.
void register_benchmarks(int* argc, char** argv);

}  // namespace ferry_bench
