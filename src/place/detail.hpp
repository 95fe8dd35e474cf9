// place/detail.hpp — what the placement layer's files share: a portable seeded generator (results
// must not depend on the standard library's distributions), divisors, and the internal weighted
// graph the partitioners work on.
#pragma once

#include <cstdint>
#include <ferry/place.hpp>
#include <string>
#include <vector>

namespace ferry::place::detail {

// splitmix64: tiny, portable, and good enough for shuffles and tie-breaks.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) for n >= 1 (the modulo bias is below 2^-40 for the sizes used here).
  int below(int n) { return static_cast<int>((next() >> 11) % static_cast<std::uint64_t>(n)); }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (int i = static_cast<int>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[below(i + 1)]);
  }

 private:
  std::uint64_t s_;
};

// The divisors of n >= 1 in increasing order, generated from its prime factors.
std::vector<int> divisors(int n);

// The partitioners' graph: CSR without self loops, vertex weights (coarse vertices stand for
// several ranks) and edge weights.
struct WGraph {
  int n = 0;
  std::vector<int> xadj{0};
  std::vector<int> adj;
  std::vector<i64> w;
  std::vector<i64> vw;
  i64 total_vw = 0;
};
// The checked graph g as a WGraph of unit vertex weights, self loops dropped.
WGraph to_wgraph(const Graph& g);
// The subgraph induced by `vertices` (local index = position in the list).
WGraph induced(const WGraph& g, const std::vector<int>& vertices);

// Built-in multilevel recursive bisection into parts of exactly sizes[i] vertices (unit weights).
std::vector<int> recursive_bisection(const WGraph& g, const std::vector<int>& sizes, Rng& rng);
// Moves vertices from parts above their size to parts below it, each time the move that raises
// the cut least, until every part has exactly sizes[i] vertices (unit weights).
void rebalance(const WGraph& g, const std::vector<int>& sizes, std::vector<int>& part);
// Size-preserving refinement: repeatedly swaps the pair of vertices (in two adjacent parts) that
// lowers the cut most, until no swap lowers it. Returns the cut.
i64 refine_swaps(const WGraph& g, int k, std::vector<int>& part);
i64 cut_of(const WGraph& g, const std::vector<int>& part);

// METIS k-way into parts of the given sizes (target weights); false where METIS is not built in or
// fails (the caller falls back to the built-in partitioner).
bool metis_partition(const WGraph& g, const std::vector<int>& sizes, std::uint64_t seed,
                     std::vector<int>& part);

// partition_graph's pipeline on an internal graph (sizes already checked): METIS or recursive
// bisection, then rebalance and refine_swaps. `used` says which partitioner ran.
std::vector<int> partition_wgraph(const WGraph& g, const std::vector<int>& sizes,
                                  const GraphOptions& o, Partitioner& used);

// Reordering's bookkeeping, shared by reorder() and reorder_cart(): the slots grouped by node
// (dense node index, slots ascending), each part matched to a node of its size (most overlap with
// where its vertices are now first, so a good order stays as it is), vertices put on slots
// (a vertex already on a slot of its node and GPU keeps it), and the result compared with the
// identity.
struct Nodes {
  std::vector<int> of_slot;             // dense node index of each old rank
  std::vector<std::vector<int>> slots;  // old ranks per dense node, ascending
};
Nodes group_nodes(const std::vector<Slot>& slots, const Matrix& gpu_cost);
std::vector<int> match_parts(const std::vector<int>& part, const Nodes& nodes);
std::vector<int> fill_slots(const std::vector<int>& node_of_vertex,
                            const std::vector<int>& gpu_of_vertex, const Nodes& nodes,
                            const std::vector<Slot>& slots);
Reordering finish(const WGraph& g, std::vector<int> old_of_new, const Nodes& nodes,
                  const std::vector<Slot>& slots, const Matrix& gpu_cost, std::string method);

// MPI_ERR_ARG unless x's storage matches its size and every entry is finite and >= 0.
void check_matrix(const Matrix& x, const char* what);

[[noreturn]] void bad(const std::string& what);  // ferry::Error(MPI_ERR_ARG, "ferry::place: ...")

}  // namespace ferry::place::detail
