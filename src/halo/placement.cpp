#include "halo/placement.hpp"

#include <ferry/place.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <tuple>

namespace ferry::halo::detail {

std::vector<int> shuffled(int n, std::uint64_t seed) {
  std::vector<int> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 g(seed);
  for (int i = n - 1; i > 0; --i) std::swap(p[i], p[static_cast<int>(g() % (i + 1))]);
  return p;
}

void place_default(Domain::Impl& d, const DomainOptions& o, const std::vector<Slot>& slots,
                   std::vector<int>& slot_of) {
  const int total = static_cast<int>(slots.size());
  // The middle level of the hierarchy is what holds subdomains: a GPU, or for host memory the
  // process (its subdomains share one memory as a GPU's do).
  auto unit = [](const Slot& s) { return s.unit; };
  const bool gpus = (slots[0].unit >> 63) == 0;  // the middle level is GPUs (real or simulated)
  std::vector<std::vector<std::uint64_t>> units(static_cast<std::size_t>(d.nodes));
  std::map<std::pair<int, std::uint64_t>, std::vector<int>> unit_slots;
  for (int s = 0; s < total; ++s) {
    const int node = d.node_of_rank[slots[s].rank];
    units[node].push_back(unit(slots[s]));
    unit_slots[{node, unit(slots[s])}].push_back(s);
  }
  for (auto& u : units) {
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
  }
  bool uniform = true;
  for (const auto& u : units) uniform &= u.size() == units[0].size();
  for (const auto& [key, ss] : unit_slots) uniform &= ss.size() == unit_slots.begin()->second.size();
  place::Shape shape;
  if (uniform) {
    shape.nodes = d.nodes;
    shape.gpus_per_node = static_cast<int>(units[0].size());
    shape.subdomains_per_gpu = static_cast<int>(unit_slots.begin()->second.size());
  } else {
    shape.subdomains_per_gpu = total;  // one level over every slot, in rank order
  }
  place::Halo h;
  for (int a = 0; a < 3; ++a) h.minus[a] = o.halo_hint.side(a, -1), h.plus[a] = o.halo_hint.side(a, +1);
  for (int k = 0; k < place::kDirections; ++k) {
    const place::Int3 v = place::direction(k);
    h.exchange[k] = o.halo_hint.sends({v[0], v[1], v[2]});
  }
  const place::Partition part = place::partition_grid(d.global, d.periodic, shape, h);
  place::PlaceOptions po;
  po.strategy = o.placement == Placement::trivial  ? place::Strategy::trivial
                : o.placement == Placement::random ? place::Strategy::random
                                                   : place::Strategy::qap;
  po.seed = o.seed;
  // The QAP's distances: 1 / the bandwidth between the node's GPUs (the transport's matrix,
  // FERRY_BANDWIDTH or measured; uniform otherwise), where every unit is a GPU it knows; else every
  // link alike (an empty matrix).
  place::Matrix cost;
  if (uniform && gpus && d.bandwidth.source() != "uniform") {
    const auto& u = units[0];
    bool known = true;
    for (std::uint64_t k : u) known &= d.gpu_index.count({0, k}) > 0;
    if (known) {
      place::Matrix bw(static_cast<int>(u.size()));
      for (std::size_t i = 0; i < u.size(); ++i)
        for (std::size_t j = 0; j < u.size(); ++j)
          bw(static_cast<int>(i), static_cast<int>(j)) =
              i == j ? 0.0 : d.bandwidth.at(d.gpu_index.at({0, u[i]}), d.gpu_index.at({0, u[j]}));
      cost = place::cost_from_bandwidth(bw);
    }
  }
  const place::Placement pl = place::place(part, h, 1, {shape.nodes, shape.gpus_per_node, cost}, po);
  const place::Int3 g = part.grid();
  for (int a = 0; a < 3; ++a) {
    d.grid[a] = g[a];
    d.cuts[a].assign(static_cast<std::size_t>(g[a] + 1), d.global[a]);
  }
  for (const place::Subdomain& sd : part.subdomains)
    for (int a = 0; a < 3; ++a) d.cuts[a][sd.coords[a]] = sd.box.origin[a];
  // A unit's slots take its subdomains in the order of their index inside its block (random and
  // trivial placements mix blocks, so that index alone does not tell the slot).
  std::vector<int> order(static_cast<std::size_t>(part.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return std::make_tuple(pl.node[x], pl.gpu[x], part.subdomains[x].sub) <
           std::make_tuple(pl.node[y], pl.gpu[y], part.subdomains[y].sub);
  });
  std::map<std::pair<int, int>, int> next;
  for (int i : order) {
    const place::Subdomain& sd = part.subdomains[i];
    const int cell = d.id_of({sd.coords[0], sd.coords[1], sd.coords[2]});
    const int k = next[{pl.node[i], pl.gpu[i]}]++;
    slot_of[cell] = uniform ? unit_slots.at({pl.node[i], units[pl.node[i]][pl.gpu[i]]}).at(k) : k;
  }
  const char* how = o.placement == Placement::trivial  ? "trivial"
                    : o.placement == Placement::random ? "random"
                                                       : "node-aware (QAP)";
  auto dims = [](const place::Int3& v) {
    return std::to_string(v[0]) + "x" + std::to_string(v[1]) + "x" + std::to_string(v[2]);
  };
  d.how = std::string(uniform ? "" : "nodes hold different numbers of subdomains, one level: ") +
          "nodes " + dims(part.node_grid) + ", per node " + dims(part.gpu_grid) + ", per " +
          (gpus ? "GPU " : "rank ") + dims(part.sub_grid) + ", " + how + " placement";
  // Where the halo's bytes go under this placement (per byte of element, with the hint's widths):
  // inside a GPU, between nodes, and between the GPUs of a node by the cost of their link, so a
  // placement on uneven links shows what it keeps off the slow ones.
  const place::Traffic tr = place::traffic(place::halo_flows(part, h, 1), pl.node, pl.gpu, cost);
  d.report.same_gpu = tr.same_gpu;
  d.report.inter_node = tr.inter_node;
  for (const place::LinkClass& lc : tr.intra_node)
    d.report.links.emplace_back(cost.empty() || lc.cost <= 0 ? 0.0 : 1.0 / lc.cost, lc.bytes);
  d.how += "; halo points per exchange: inside a " + std::string(gpus ? "GPU " : "rank ") +
           std::to_string(tr.same_gpu) + ", between nodes " + std::to_string(tr.inter_node);
  for (const place::LinkClass& lc : tr.intra_node) {
    if (cost.empty() || lc.cost <= 0) {
      d.how += ", between " + std::string(gpus ? "GPUs" : "ranks") + " of a node " + std::to_string(lc.bytes);
      continue;
    }
    char gbps[32];
    std::snprintf(gbps, sizeof gbps, "%.0f", 1.0 / lc.cost);
    d.how += ", over " + std::string(gbps) + " GB/s links " + std::to_string(lc.bytes);
  }
}

}  // namespace ferry::halo::detail
