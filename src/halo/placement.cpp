#include "halo/placement.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>

#include "halo/geometry.hpp"

namespace ferry::halo::detail {

namespace {

double qap_cost(const std::vector<std::vector<double>>& w, const std::vector<std::vector<double>>& dist,
                const std::vector<int>& f) {
  double c = 0;
  for (std::size_t i = 0; i < f.size(); ++i)
    for (std::size_t j = 0; j < f.size(); ++j) c += w[i][j] * dist[f[i]][f[j]];
  return c;
}

// Relative cost of a byte between two slots: the reciprocal of their bandwidth. Without a measured
// matrix every GPU pair is alike, so only what is known for sure is told apart: a copy inside one
// GPU (or one process's host memory) beats a put into another process on the same GPU, which
// beats a transfer between GPUs.
double distance(const Slot& a, const Slot& b) {
  const bool same_gpu = a.gpu != 0 ? a.gpu == b.gpu : (a.device < 0 && b.device < 0);
  if (same_gpu && a.rank == b.rank) return 0.1;
  if (same_gpu) return 0.5;
  return 1.0;
}

}  // namespace

std::vector<int> shuffled(int n, std::uint64_t seed) {
  std::vector<int> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 g(seed);
  for (int i = n - 1; i > 0; --i) std::swap(p[i], p[static_cast<int>(g() % (i + 1))]);
  return p;
}

std::vector<int> solve_qap(const std::vector<std::vector<double>>& w,
                           const std::vector<std::vector<double>>& dist) {
  const int n = static_cast<int>(w.size());
  std::vector<int> f(static_cast<std::size_t>(n));
  std::iota(f.begin(), f.end(), 0);
  if (n <= 8) {
    std::vector<int> best = f;
    double best_cost = qap_cost(w, dist, f);
    while (std::next_permutation(f.begin(), f.end())) {
      const double c = qap_cost(w, dist, f);
      if (c < best_cost) best_cost = c, best = f;
    }
    return best;
  }
  double cost = qap_cost(w, dist, f);
  for (bool improved = true; improved;) {
    improved = false;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) {
        std::swap(f[i], f[j]);
        const double c = qap_cost(w, dist, f);
        if (c + 1e-12 < cost) cost = c, improved = true;
        else std::swap(f[i], f[j]);
      }
  }
  return f;
}

void place_default(Domain::Impl& d, const DomainOptions& o, const std::vector<Slot>& slots,
                   std::vector<int>& slot_of) {
  const int total = static_cast<int>(slots.size());
  std::vector<std::vector<int>> node_slots(static_cast<std::size_t>(d.nodes));
  for (int s = 0; s < total; ++s) node_slots[d.node_of_rank[slots[s].rank]].push_back(s);
  bool uniform = true;
  for (const auto& ns : node_slots) uniform &= ns.size() == node_slots[0].size();
  const char* how = o.placement == Placement::trivial  ? "trivial"
                    : o.placement == Placement::random ? "random"
                                                       : "node-aware";
  if (!uniform) {
    d.grid = prime_split(d.global, total);
    for (int a = 0; a < 3; ++a) d.cuts[a] = even_cuts(d.global[a], d.grid[a]);
    std::vector<int> perm(static_cast<std::size_t>(total));
    std::iota(perm.begin(), perm.end(), 0);
    if (o.placement == Placement::random) perm = shuffled(total, o.seed);
    for (int id = 0; id < total; ++id) slot_of[id] = perm[id];
    d.how = std::string("prime factors over all subdomains (nodes hold different numbers), ") +
            (o.placement == Placement::random ? "random" : "in order");
    return;
  }
  const int per_node = static_cast<int>(node_slots[0].size());
  const Index3 node_dims = prime_split(d.global, d.nodes);
  Index3 block{};
  for (int a = 0; a < 3; ++a) block[a] = d.global[a] / node_dims[a];  // the smallest node block
  const Index3 gpu_dims = prime_split(block, per_node);
  for (int a = 0; a < 3; ++a) {
    d.grid[a] = node_dims[a] * gpu_dims[a];
    const auto outer = even_cuts(d.global[a], node_dims[a]);
    d.cuts[a].assign(1, 0);
    for (i64 k = 0; k < node_dims[a]; ++k) {
      const auto inner = even_cuts(outer[k + 1] - outer[k], gpu_dims[a]);
      for (i64 j = 1; j <= gpu_dims[a]; ++j) d.cuts[a].push_back(outer[k] + inner[j]);
    }
  }
  // Node block b goes to node b; its cells (x fastest inside the block) to the node's slots.
  for (int b = 0; b < d.nodes; ++b) {
    const Index3 bc{b % node_dims[0], b / node_dims[0] % node_dims[1], b / node_dims[0] / node_dims[1]};
    std::vector<int> cells;
    for (int k = 0; k < per_node; ++k) {
      const Index3 g{k % gpu_dims[0], k / gpu_dims[0] % gpu_dims[1], k / gpu_dims[0] / gpu_dims[1]};
      cells.push_back(d.id_of({bc[0] * gpu_dims[0] + g[0], bc[1] * gpu_dims[1] + g[1],
                               bc[2] * gpu_dims[2] + g[2]}));
    }
    std::vector<int> perm(static_cast<std::size_t>(per_node));
    std::iota(perm.begin(), perm.end(), 0);
    if (o.placement == Placement::random) {
      perm = shuffled(per_node, o.seed + static_cast<std::uint64_t>(b));
    } else if (o.placement == Placement::node_aware && per_node > 1) {
      // Flow: points cell i sends to cell j per exchange (§4.4, fig. 4.4), with the hint's widths.
      std::vector<std::vector<double>> w(per_node, std::vector<double>(per_node, 0.0));
      std::vector<std::vector<double>> dist(per_node, std::vector<double>(per_node, 0.0));
      for (int i = 0; i < per_node; ++i)
        for (int k = 0; k < kDirections; ++k) {
          const Dir dir = dir_of(k);
          if (!o.halo_hint.sends(dir)) continue;
          const int nb = d.neighbour(cells[i], dir);
          const auto it = std::find(cells.begin(), cells.end(), nb);
          if (nb < 0 || it == cells.end() || nb == cells[i]) continue;
          const Dir back{-dir.x, -dir.y, -dir.z};
          w[i][it - cells.begin()] += static_cast<double>(
              recv_box(o.halo_hint, back, d.extent_of(nb)).points());
        }
      for (int p = 0; p < per_node; ++p)
        for (int q = 0; q < per_node; ++q)
          if (p != q) dist[p][q] = distance(slots[node_slots[b][p]], slots[node_slots[b][q]]);
      perm = solve_qap(w, dist);
    }
    for (int k = 0; k < per_node; ++k) slot_of[cells[k]] = node_slots[b][perm[k]];
  }
  d.how = "prime factors: nodes " + std::to_string(node_dims[0]) + "x" + std::to_string(node_dims[1]) +
          "x" + std::to_string(node_dims[2]) + ", per node " + std::to_string(gpu_dims[0]) + "x" +
          std::to_string(gpu_dims[1]) + "x" + std::to_string(gpu_dims[2]) + ", " + how + " placement";
}

}  // namespace ferry::halo::detail
