// place/reorder.cpp — graphs, their partition into parts of exact sizes, and rank reordering
// (dissertation §5.7: TEMPI asks a partitioner for N parts of P ranks; here the parts are then also
// placed on the GPUs of their node, which §5.7 left out and §4.4 does for the stencil library).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <tuple>

#include "place/detail.hpp"
#include "sys/error.hpp"

namespace ferry::place {

using detail::bad;

const char* name(Partitioner p) {
  switch (p) {
    case Partitioner::automatic:
      return "automatic";
    case Partitioner::metis:
      return "metis";
    case Partitioner::builtin:
      return "builtin";
  }
  return "unknown";
}

Graph graph_from_flows(int n, const std::vector<Flow>& flows) {
  if (n < 0) bad("negative vertex count");
  std::vector<std::tuple<int, int, i64>> e;
  e.reserve(2 * flows.size());
  for (const Flow& f : flows) {
    if (f.src < 0 || f.src >= n || f.dst < 0 || f.dst >= n)
      bad("flow between vertices outside the graph");
    if (f.bytes < 0) bad("negative flow");
    if (f.src == f.dst) continue;
    e.emplace_back(f.src, f.dst, f.bytes);
    e.emplace_back(f.dst, f.src, f.bytes);
  }
  std::sort(e.begin(), e.end());
  Graph g;
  g.xadj.assign(static_cast<std::size_t>(n) + 1, 0);
  for (std::size_t i = 0; i < e.size(); ++i) {
    const auto [u, v, w] = e[i];
    if (!g.adjncy.empty() && i > 0 && std::get<0>(e[i - 1]) == u && std::get<1>(e[i - 1]) == v) {
      g.weight.back() =
          ferry::detail::checked_add(g.weight.back(), w, MPI_ERR_ARG, "ferry::place: edge weight");
      continue;
    }
    g.adjncy.push_back(v);
    g.weight.push_back(w);
    ++g.xadj[u + 1];
  }
  for (int v = 0; v < n; ++v) g.xadj[v + 1] += g.xadj[v];
  return g;
}

namespace {

void check_structure(const Graph& g) {
  if (g.xadj.empty() || g.xadj[0] != 0) bad("graph xadj must start with 0");
  if (g.xadj.size() - 1 > static_cast<std::size_t>(INT_MAX)) bad("graph has too many vertices");
  const int n = g.vertices();
  for (int v = 0; v < n; ++v)
    if (g.xadj[v + 1] < g.xadj[v]) bad("graph xadj decreases at vertex " + std::to_string(v));
  if (g.xadj[n] != static_cast<i64>(g.adjncy.size()))
    bad("graph xadj does not end at the edge count");
  if (g.adjncy.size() > static_cast<std::size_t>(INT_MAX)) bad("graph has too many edges");
  if (!g.weight.empty() && g.weight.size() != g.adjncy.size())
    bad("graph weights differ in count from edges");
  for (int u : g.adjncy)
    if (u < 0 || u >= n)
      bad("graph edge to vertex " + std::to_string(u) + " outside 0.." + std::to_string(n - 1));
  for (i64 w : g.weight)
    if (w < 0) bad("negative edge weight");
}

void check_sizes(int n, const std::vector<int>& sizes) {
  if (sizes.empty()) bad("no parts");
  if (static_cast<i64>(sizes.size()) > n)
    bad("more parts (" + std::to_string(sizes.size()) + ") than vertices (" + std::to_string(n) +
        ")");
  i64 sum = 0;
  for (int s : sizes) {
    if (s < 1) bad("part size " + std::to_string(s) + " < 1");
    sum += s;
  }
  if (sum != n)
    bad("part sizes sum to " + std::to_string(sum) + ", not the " + std::to_string(n) +
        " vertices");
}

Partitioner resolve(Partitioner p) {
  if (p == Partitioner::metis && !metis_available())
    ferry::detail::fail(MPI_ERR_UNSUPPORTED_OPERATION,
                        "ferry::place: this build has no METIS (configure with FERRY_METIS=ON)");
  if (p == Partitioner::automatic)
    return metis_available() ? Partitioner::metis : Partitioner::builtin;
  return p;
}

}  // namespace

void check_graph(const Graph& g) {
  check_structure(g);
  // Each row sorted by neighbour with duplicates summed, then every entry looked up in its
  // neighbour's row: O(E log degree).
  const int n = g.vertices();
  std::vector<i64> rx(static_cast<std::size_t>(n) + 1, 0);
  std::vector<std::pair<int, i64>> row;
  row.reserve(g.adjncy.size());
  for (int v = 0; v < n; ++v) {
    const std::size_t begin = row.size();
    for (i64 i = g.xadj[v]; i < g.xadj[v + 1]; ++i)
      if (g.adjncy[i] != v) row.emplace_back(g.adjncy[i], g.weight.empty() ? 1 : g.weight[i]);
    std::sort(row.begin() + static_cast<std::ptrdiff_t>(begin), row.end());
    std::size_t out = begin;
    for (std::size_t i = begin; i < row.size(); ++i) {
      if (out > begin && row[out - 1].first == row[i].first)
        row[out - 1].second = ferry::detail::checked_add(row[out - 1].second, row[i].second,
                                                         MPI_ERR_ARG, "ferry::place: edge weight");
      else
        row[out++] = row[i];
    }
    row.resize(out);
    rx[v + 1] = static_cast<i64>(row.size());
  }
  for (int v = 0; v < n; ++v)
    for (i64 i = rx[v]; i < rx[v + 1]; ++i) {
      const auto [u, w] = row[i];
      const auto first = row.begin() + rx[u], last = row.begin() + rx[u + 1];
      const auto it = std::lower_bound(first, last, std::make_pair(v, i64{INT64_MIN}));
      if (it == last || it->first != v || it->second != w)
        bad("graph is not symmetric: edge " + std::to_string(v) + " -> " + std::to_string(u) +
            " has no reverse edge of the same weight");
    }
}

i64 edge_cut(const Graph& g, const std::vector<int>& part) {
  check_structure(g);
  if (static_cast<int>(part.size()) != g.vertices())
    bad("part vector size differs from the vertex count");
  i64 cut = 0;
  for (int v = 0; v < g.vertices(); ++v)
    for (i64 i = g.xadj[v]; i < g.xadj[v + 1]; ++i)
      if (part[g.adjncy[i]] != part[v]) cut += g.weight.empty() ? 1 : g.weight[i];
  return cut / 2;
}

namespace detail {

std::vector<int> partition_wgraph(const WGraph& g, const std::vector<int>& sizes,
                                  const GraphOptions& o, Partitioner& used) {
  used = resolve(o.partitioner);
  const int k = static_cast<int>(sizes.size());
  if (k == 1) return std::vector<int>(g.n, 0);
  std::vector<int> part;
  if (used == Partitioner::metis && !metis_partition(g, sizes, o.seed, part))
    used = Partitioner::builtin;
  if (used == Partitioner::builtin) {
    Rng rng(o.seed);
    part = recursive_bisection(g, sizes, rng);
  }
  rebalance(g, sizes, part);
  refine_swaps(g, k, part);
  return part;
}

Nodes group_nodes(const std::vector<Slot>& slots, const Matrix& gpu_cost) {
  std::vector<int> ids;
  for (const Slot& s : slots) {
    if (s.node < 0 || s.gpu < 0) bad("negative node or GPU in a slot");
    if (!gpu_cost.empty() && s.gpu >= gpu_cost.n)
      bad("slot GPU " + std::to_string(s.gpu) + " outside the " + std::to_string(gpu_cost.n) +
          "-GPU cost matrix");
    ids.push_back(s.node);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  Nodes nodes;
  nodes.slots.resize(ids.size());
  nodes.of_slot.resize(slots.size());
  for (std::size_t r = 0; r < slots.size(); ++r) {
    const int j =
        static_cast<int>(std::lower_bound(ids.begin(), ids.end(), slots[r].node) - ids.begin());
    nodes.of_slot[r] = j;
    nodes.slots[j].push_back(static_cast<int>(r));
  }
  return nodes;
}

std::vector<int> match_parts(const std::vector<int>& part, const Nodes& nodes) {
  const int k = static_cast<int>(nodes.slots.size());
  std::vector<int> size(k, 0);
  std::vector<std::pair<int, int>> pj;  // (part, node where the vertex is now)
  for (std::size_t v = 0; v < part.size(); ++v) {
    ++size[part[v]];
    pj.push_back({part[v], nodes.of_slot[v]});
  }
  std::sort(pj.begin(), pj.end());
  std::vector<std::tuple<int, int, int>> overlap;  // (-count, part, node)
  for (std::size_t i = 0; i < pj.size();) {
    std::size_t j = i;
    while (j < pj.size() && pj[j] == pj[i]) ++j;
    overlap.emplace_back(-static_cast<int>(j - i), pj[i].first, pj[i].second);
    i = j;
  }
  std::sort(overlap.begin(), overlap.end());
  std::vector<int> node_of_part(k, -1), part_of_node(k, -1);
  for (const auto& [c, p, j] : overlap)
    if (node_of_part[p] < 0 && part_of_node[j] < 0 &&
        size[p] == static_cast<int>(nodes.slots[j].size()))
      node_of_part[p] = j, part_of_node[j] = p;
  for (int p = 0; p < k; ++p) {
    if (node_of_part[p] >= 0) continue;
    for (int j = 0; j < k; ++j)
      if (part_of_node[j] < 0 && size[p] == static_cast<int>(nodes.slots[j].size())) {
        node_of_part[p] = j, part_of_node[j] = p;
        break;
      }
    if (node_of_part[p] < 0)
      ferry::detail::fail(MPI_ERR_INTERN, "ferry::place: a part matches no node");
  }
  return node_of_part;
}

std::vector<int> fill_slots(const std::vector<int>& node_of_vertex,
                            const std::vector<int>& gpu_of_vertex, const Nodes& nodes,
                            const std::vector<Slot>& slots) {
  const int n = static_cast<int>(node_of_vertex.size());
  std::vector<int> old_of_new(n, -1);
  std::vector<char> taken(n, 0);
  auto fits = [&](int v, int s) {
    return gpu_of_vertex[v] < 0 || slots[s].gpu == gpu_of_vertex[v];
  };
  for (int v = 0; v < n; ++v)
    if (nodes.of_slot[v] == node_of_vertex[v] && fits(v, v)) old_of_new[v] = v, taken[v] = 1;
  std::vector<std::size_t> next(nodes.slots.size(), 0);  // all slots before it are taken or skipped
  for (int v = 0; v < n; ++v) {
    if (old_of_new[v] >= 0) continue;
    const std::vector<int>& s = nodes.slots[node_of_vertex[v]];
    std::size_t i = gpu_of_vertex[v] < 0 ? next[node_of_vertex[v]] : 0;
    while (i < s.size() && (taken[s[i]] || !fits(v, s[i]))) ++i;
    if (i == s.size()) ferry::detail::fail(MPI_ERR_INTERN, "ferry::place: no free slot for a rank");
    old_of_new[v] = s[i];
    taken[s[i]] = 1;
    if (gpu_of_vertex[v] < 0) next[node_of_vertex[v]] = i;
  }
  return old_of_new;
}

Reordering finish(const WGraph& g, std::vector<int> old_of_new, const Nodes& nodes,
                  const std::vector<Slot>& slots, const Matrix& gpu_cost, std::string method) {
  auto costs = [&](const std::vector<int>& slot_of, i64& cut, double& gc) {
    cut = 0;
    gc = 0;
    for (int v = 0; v < g.n; ++v)
      for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
        const int a = slot_of[v], b = slot_of[g.adj[e]];
        if (nodes.of_slot[a] != nodes.of_slot[b])
          cut += g.w[e];
        else if (!gpu_cost.empty())
          gc += static_cast<double>(g.w[e]) * gpu_cost(slots[a].gpu, slots[b].gpu);
      }
    cut /= 2;
  };
  std::vector<int> identity(g.n);
  std::iota(identity.begin(), identity.end(), 0);
  Reordering r;
  costs(identity, r.cut_before, r.gpu_cost_before);
  costs(old_of_new, r.cut_after, r.gpu_cost_after);
  const bool gain = r.cut_after < r.cut_before ||
                    (r.cut_after == r.cut_before &&
                     r.gpu_cost_after < r.gpu_cost_before - 1e-12 * r.gpu_cost_before);
  if (gain) {
    r.old_of_new = std::move(old_of_new);
    r.method = std::move(method);
  } else {
    r.old_of_new = identity;
    r.cut_after = r.cut_before;
    r.gpu_cost_after = r.gpu_cost_before;
    r.method = "identity";
  }
  r.new_of_old.assign(g.n, -1);
  for (int i = 0; i < g.n; ++i) r.new_of_old[r.old_of_new[i]] = i;
  return r;
}

}  // namespace detail

GraphPartition partition_graph(const Graph& g, const std::vector<int>& sizes,
                               const GraphOptions& o) {
  check_graph(g);
  check_sizes(g.vertices(), sizes);
  const detail::WGraph wg = detail::to_wgraph(g);
  GraphPartition r;
  r.part = detail::partition_wgraph(wg, sizes, o, r.used);
  r.cut = detail::cut_of(wg, r.part);
  return r;
}

namespace {

// The GPUs of one node for its vertices V (ascending) on its slots S: one vertex per GPU, placed by
// the QAP directly; several, grouped first by partition_wgraph (group i sized for GPU i), the
// groups then placed by the QAP among GPUs of the same slot count.
// `local` is -1 for every vertex on entry and on return (scratch for the vertex -> index in V map).
void place_on_gpus(const detail::WGraph& g, const std::vector<int>& V, const std::vector<int>& S,
                   const std::vector<Slot>& slots, const Matrix& gpu_cost, const ReorderOptions& o,
                   int node, std::vector<int>& gpu_of, std::vector<int>& local) {
  std::vector<int> L;  // the node's GPUs, ascending, and the slots each has
  for (int s : S) L.push_back(slots[s].gpu);
  std::sort(L.begin(), L.end());
  std::vector<int> cap;
  for (std::size_t i = 0; i < L.size(); ++i) {
    if (i > 0 && L[i] == L[i - 1])
      ++cap.back();
    else
      cap.push_back(1);
  }
  L.erase(std::unique(L.begin(), L.end()), L.end());
  const int G = static_cast<int>(L.size());
  if (G == 1) {
    for (int v : V) gpu_of[v] = L[0];
    return;
  }
  std::vector<int> group(V.size());
  std::vector<int> start(G);
  std::iota(start.begin(), start.end(), 0);
  const bool single = std::all_of(cap.begin(), cap.end(), [](int c) { return c == 1; });
  if (single) {
    std::iota(group.begin(), group.end(), 0);
    // Start from where the vertices are now, so an optimal layout stays as it is.
    std::vector<char> used(G, 0);
    std::vector<int> pos(V.size(), -1);
    for (std::size_t i = 0; i < V.size(); ++i) {
      const auto it = std::find(S.begin(), S.end(), V[i]);
      if (it == S.end()) continue;
      const int l =
          static_cast<int>(std::lower_bound(L.begin(), L.end(), slots[V[i]].gpu) - L.begin());
      if (!used[l]) pos[i] = l, used[l] = 1;
    }
    int l = 0;
    for (std::size_t i = 0; i < V.size(); ++i) {
      if (pos[i] >= 0) continue;
      while (used[l]) ++l;
      pos[i] = l, used[l] = 1;
    }
    start = pos;
  } else {
    Partitioner used;
    group = detail::partition_wgraph(detail::induced(g, V), cap, o.graph, used);
  }
  Matrix flow(G), dist(G);
  for (std::size_t i = 0; i < V.size(); ++i) local[V[i]] = static_cast<int>(i);
  for (std::size_t i = 0; i < V.size(); ++i)
    for (int e = g.xadj[V[i]]; e < g.xadj[V[i] + 1]; ++e) {
      const int j = local[g.adj[e]];
      if (j >= 0) flow(group[i], group[j]) += static_cast<double>(g.w[e]);
    }
  for (int v : V) local[v] = -1;
  for (int a = 0; a < G; ++a)
    for (int b = 0; b < G; ++b) dist(a, b) = gpu_cost(L[a], L[b]);
  QapOptions qo = o.qap;
  qo.seed = o.qap.seed + static_cast<std::uint64_t>(node);
  qo.facility_class = cap;  // group i was sized for GPU i
  qo.location_class = cap;
  const QapResult r = solve_qap(flow, dist, qo, &start);
  for (std::size_t i = 0; i < V.size(); ++i) gpu_of[V[i]] = L[r.assignment[group[i]]];
}

}  // namespace

Reordering reorder(const Graph& g, const std::vector<Slot>& slots, const Matrix& gpu_cost,
                   const ReorderOptions& o) {
  check_graph(g);
  const int n = g.vertices();
  if (static_cast<int>(slots.size()) != n)
    bad(std::to_string(slots.size()) + " slots for a graph of " + std::to_string(n) + " vertices");
  if (!gpu_cost.empty() && gpu_cost.a.size() != static_cast<std::size_t>(gpu_cost.n) * gpu_cost.n)
    bad("GPU cost matrix storage does not match its size");
  const detail::Nodes nodes = detail::group_nodes(slots, gpu_cost);
  const detail::WGraph wg = detail::to_wgraph(g);
  if (n == 0) return detail::finish(wg, {}, nodes, slots, gpu_cost, "identity");
  const int k = static_cast<int>(nodes.slots.size());
  std::vector<int> sizes(k);
  for (int j = 0; j < k; ++j) sizes[j] = static_cast<int>(nodes.slots[j].size());
  Partitioner used = Partitioner::builtin;
  const std::vector<int> part = detail::partition_wgraph(wg, sizes, o.graph, used);
  const std::vector<int> node_of_part = detail::match_parts(part, nodes);
  std::vector<int> node_of(n), gpu_of(n, -1);
  std::vector<std::vector<int>> members(k);
  for (int v = 0; v < n; ++v) {
    node_of[v] = node_of_part[part[v]];
    members[node_of[v]].push_back(v);
  }
  if (!gpu_cost.empty()) {
    std::vector<int> local(n, -1);
    for (int j = 0; j < k; ++j)
      place_on_gpus(wg, members[j], nodes.slots[j], slots, gpu_cost, o, j, gpu_of, local);
  }
  return detail::finish(wg, detail::fill_slots(node_of, gpu_of, nodes, slots), nodes, slots,
                        gpu_cost, name(used));
}

}  // namespace ferry::place
