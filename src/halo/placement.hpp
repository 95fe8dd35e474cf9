// halo/placement.hpp — the default partition (§4.3) and the placement of cells on slots (§4.4).
#pragma once

#include <cstdint>
#include <vector>

#include "halo/domain.hpp"

namespace ferry::halo::detail {

// A place for one subdomain: (rank, index among its subdomains) with its GPU.
struct Slot {
  int rank, local, device;
  std::uint64_t gpu;
};

// Partitions d.global (sets d.grid, d.cuts, d.how) and fills slot_of[cell]. Nodes with equal
// numbers of slots: node blocks by prime factors, then each block by the slots of a node, its
// cells placed on them by o.placement. Otherwise one level over all slots.
void place_default(Domain::Impl& d, const DomainOptions& o, const std::vector<Slot>& slots,
                   std::vector<int>& slot_of);

// A permutation of n from `seed`, the same on every rank (Fisher-Yates over mt19937_64, whose
// sequence the standard fixes).
std::vector<int> shuffled(int n, std::uint64_t seed);

// The quadratic assignment problem: the permutation f minimizing sum w[i][j] * dist[f(i)][f(j)].
// Exact (every permutation) for n <= 8, else a greedy start improved by pairwise swaps.
std::vector<int> solve_qap(const std::vector<std::vector<double>>& w,
                           const std::vector<std::vector<double>>& dist);

}  // namespace ferry::halo::detail
