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
  // What holds it in the middle level of the partition: its GPU; for host memory a simulated GPU
  // (FERRY_TOPOLOGY) or else its process. Keys of GPUs the bandwidth matrix knows are in
  // Domain::Impl::gpu_index.
  std::uint64_t unit;
};

// Partitions d.global with ferry::place (sets d.grid, d.cuts, d.how) and fills slot_of[cell]:
// nodes, then the GPUs of a node (for host memory: its ranks), then the subdomains of each, by
// prime factors so the surface sent is least (§4.3); cells placed by o.placement (node-aware: the
// QAP of §4.4 per node). Nodes or GPUs holding different numbers of subdomains: one level.
void place_default(Domain::Impl& d, const DomainOptions& o, const std::vector<Slot>& slots,
                   std::vector<int>& slot_of);

// A permutation of n from `seed`, the same on every rank (Fisher-Yates over mt19937_64, whose
// sequence the standard fixes).
std::vector<int> shuffled(int n, std::uint64_t seed);

}  // namespace ferry::halo::detail
