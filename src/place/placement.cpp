// place/placement.cpp — the placement strategies of the dissertation's fig. 4.11 for a grid
// partition (trivial, random, node blocks, node blocks + QAP) and the traffic report: bytes by the
// link they cross.
#include <map>
#include <numeric>

#include "place/detail.hpp"

namespace ferry::place {

using detail::bad;

Placement place(const Partition& p, const Halo& halo, i64 bytes_per_cell, const Machine& mc,
                const PlaceOptions& o) {
  const int N = p.nodes(), P = p.gpus_per_node(), S = p.subdomains_per_gpu();
  if (mc.nodes != N || mc.gpus_per_node != P)
    bad("machine of " + std::to_string(mc.nodes) + " nodes x " + std::to_string(mc.gpus_per_node) +
        " GPUs does not match the partition's " + std::to_string(N) + " x " + std::to_string(P));
  if (!mc.gpu_cost.empty() && mc.gpu_cost.n != P)
    bad("GPU cost matrix size differs from GPUs per node");
  if (!mc.gpu_cost.empty()) detail::check_matrix(mc.gpu_cost, "GPU cost matrix");
  const int total = p.size();
  Placement pl;
  pl.node.resize(total);
  pl.gpu.resize(total);
  if (o.strategy == Strategy::trivial || o.strategy == Strategy::random) {
    // Rank order = the global grid's linear order, x fastest: what a code without node blocks does.
    const Int3 g = p.grid();
    std::vector<int> order(total);
    for (int i = 0; i < total; ++i) {
      const Int3 c = p.subdomains[i].coords;
      order[c[0] + g[0] * (c[1] + g[1] * c[2])] = i;
    }
    if (o.strategy == Strategy::random) {
      detail::Rng rng(o.seed);
      rng.shuffle(order);
    }
    for (int k = 0; k < total; ++k) {
      pl.node[order[k]] = k / (P * S);
      pl.gpu[order[k]] = (k % (P * S)) / S;
    }
    return pl;
  }
  for (int i = 0; i < total; ++i) {
    pl.node[i] = p.subdomains[i].node;
    pl.gpu[i] = p.subdomains[i].gpu;
  }
  if (o.strategy == Strategy::node_aware || mc.gpu_cost.empty() || P == 1) return pl;
  // Per node, the bytes between its GPU blocks, then the blocks onto GPUs.
  const std::vector<Flow> flows = halo_flows(p, halo, bytes_per_cell);
  std::vector<Matrix> between(N, Matrix(P));
  for (const Flow& f : flows) {
    const Subdomain& s = p.subdomains[f.src];
    const Subdomain& d = p.subdomains[f.dst];
    if (s.node == d.node) between[s.node](s.gpu, d.gpu) += static_cast<double>(f.bytes);
  }
  std::vector<int> identity(P);
  std::iota(identity.begin(), identity.end(), 0);
  for (int node = 0; node < N; ++node) {
    QapOptions qo = o.qap;
    qo.seed = o.qap.seed + static_cast<std::uint64_t>(node);
    const QapResult r = solve_qap(between[node], mc.gpu_cost, qo, &identity);
    for (int i = node * P * S; i < (node + 1) * P * S; ++i)
      pl.gpu[i] = r.assignment[p.subdomains[i].gpu];
  }
  return pl;
}

Traffic traffic(const std::vector<Flow>& flows, const std::vector<int>& node,
                const std::vector<int>& gpu, const Matrix& gpu_cost) {
  if (node.size() != gpu.size()) bad("node and GPU vectors differ in size");
  if (!gpu_cost.empty()) detail::check_matrix(gpu_cost, "GPU cost matrix");
  const int n = static_cast<int>(node.size());
  std::map<double, i64> classes;
  Traffic t;
  for (const Flow& f : flows) {
    if (f.src < 0 || f.src >= n || f.dst < 0 || f.dst >= n) bad("flow between unknown subdomains");
    if (f.bytes < 0) bad("negative flow");
    if (node[f.src] != node[f.dst]) {
      t.inter_node += f.bytes;
    } else if (gpu[f.src] == gpu[f.dst]) {
      t.same_gpu += f.bytes;
    } else {
      double c = 0;
      if (!gpu_cost.empty()) {
        if (gpu[f.src] < 0 || gpu[f.src] >= gpu_cost.n || gpu[f.dst] < 0 ||
            gpu[f.dst] >= gpu_cost.n)
          bad("GPU index outside the cost matrix");
        c = gpu_cost(gpu[f.src], gpu[f.dst]);
      }
      classes[c] += f.bytes;
      t.cost += c * static_cast<double>(f.bytes);
    }
  }
  for (const auto& [c, b] : classes) t.intra_node.push_back({c, b});
  return t;
}

}  // namespace ferry::place
