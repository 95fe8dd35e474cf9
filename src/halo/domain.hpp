// halo/domain.hpp — the subdomain grid every rank knows whole: cuts per axis, and for each cell
// its rank, its index among that rank's subdomains, its GPU and its node.
#pragma once

#include <ferry/halo.hpp>
#include <ferry/transport.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ferry::halo {

struct Domain::Impl {
  struct Cell {
    int rank = 0;
    int local = 0;          // index among the rank's subdomains
    int device = -1;        // GPU ordinal in the owner's process
    std::uint64_t gpu = 0;  // the GPU's UUID hash (gpu::device_key): equal on the same GPU
    int node = 0;
  };

  MPI_Comm comm = MPI_COMM_NULL;  // a duplicate of the user's
  int rank = 0, size = 1;
  Index3 global{}, grid{};
  std::array<bool, 3> periodic{};
  std::array<std::vector<i64>, 3> cuts;  // grid[a] + 1 boundaries per axis
  std::vector<Cell> cells;               // by cell id (x fastest)
  std::vector<Subdomain> local;
  std::vector<int> node_of_rank;
  int nodes = 1;
  std::string how;            // how the grid was partitioned and placed
  std::string topology_note;  // the transport's topology, for describe()
  PlacementReport report;     // where the halo's points go (default partition only)
  transport::Bandwidth bandwidth;  // a node's GPU-to-GPU GB/s (uniform unless measured or given)
  std::map<std::pair<int, std::uint64_t>, int> gpu_index;  // (node, GPU key) -> row of `bandwidth`

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();

  int id_of(const Index3& c) const {
    return static_cast<int>(c[0] + grid[0] * (c[1] + grid[1] * c[2]));
  }
  Index3 coord_of(int id) const { return {id % grid[0], id / grid[0] % grid[1], id / grid[0] / grid[1]}; }
  Subdomain subdomain(int id) const;
  Index3 extent_of(int id) const {
    const Index3 c = coord_of(id);
    return {cuts[0][c[0] + 1] - cuts[0][c[0]], cuts[1][c[1] + 1] - cuts[1][c[1]],
            cuts[2][c[2] + 1] - cuts[2][c[2]]};
  }
  // The cell next to `id` in direction d (wrapping on periodic axes), or -1 past a boundary.
  int neighbour(int id, Dir d) const;
  // The thinnest subdomain along each axis (the widest halo a neighbour can send).
  Index3 min_extent() const;
};

namespace detail {

// Boundaries of n points in p near-equal parts (the first n % p parts one point longer).
std::vector<i64> even_cuts(i64 n, i64 p);

}  // namespace detail
}  // namespace ferry::halo
