// The CUDA side of bench_pingpong: what a user writes by hand to move a halo face without Ferry
// (a pack kernel, an unpack kernel), and a fill of the grid with its check values.
#pragma once

#include <cstdint>

namespace pingpong {

// The grid of the face modes: 256^3 interior, radius 3, 8-byte values, allocated 262^3 with no
// padding (as bench/bench_types.cpp's halo_recipes). C order: z slowest, x contiguous.
struct Grid {
  static constexpr int n = 256, r = 3, a = n + 2 * r;
  static constexpr std::int64_t points = std::int64_t{a} * a * a;
  static constexpr std::int64_t bytes = points * 8;
  static constexpr std::int64_t face_points = std::int64_t{n} * n * r;  // an X face
  static constexpr std::int64_t face_bytes = face_points * 8;           // 1.5 MiB
};

// The value rank `owner` stores at point `i` of its grid: distinct per rank and per point, exact
// in a double.
inline double grid_value(int owner, std::int64_t i) {
  return static_cast<double>(owner) * 1e9 + static_cast<double>(i);
}

// Fills a device grid with grid_value(owner, i) (synchronous).
void fill_grid(double* grid, int owner);

// Packs the X face starting at x = x0 (interior y and z) of a device grid into `packed`, in the
// order MPI packs the subarray (x fastest, then y, then z), or unpacks it back. Asynchronous on
// the legacy default stream, like a user's kernel launch.
void pack_x_face(const double* grid, double* packed, int x0);
void unpack_x_face(const double* packed, double* grid, int x0);

}  // namespace pingpong
