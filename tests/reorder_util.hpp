// What the rank-reordering tests share (test_mpi_reorder*.cpp): random graphs with a planted best
// layout, where each role runs before and after a topology constructor, and the bytes that cross
// nodes and GPU links then. A role (graph vertex, grid cell) v runs on the process of rank v in the
// communicator that has the topology: of comm_old before the call, of the new one after.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <map>
#include <set>
#include <ferry/transport.hpp>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "sys/env.hpp"

namespace reorder_test {

inline int size_of(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
  return n;
}
inline int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}

// World rank of each rank of c.
inline std::vector<int> world_ranks(MPI_Comm c) {
  const int n = size_of(c);
  MPI_Group g, w;
  MPI_Comm_group(c, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &w);
  std::vector<int> r(n), out(n);
  std::iota(r.begin(), r.end(), 0);
  MPI_Group_translate_ranks(g, n, r.data(), w, out.data());
  MPI_Group_free(&g);
  MPI_Group_free(&w);
  return out;
}

inline const ferry::transport::Topology& topology() { return ferry::transport::world(); }
inline int most_gpus() {
  int g = 0;
  for (int n = 0; n < topology().nodes(); ++n) g = std::max(g, topology().gpus_on(n));
  return g;
}
// Whether Ferry reorders in this run: FERRY_REORDER on, and more than one node or GPU.
inline bool ferry_reorders() {
  namespace env = ferry::detail::env;
  return env::flag(env::Knob::reorder) && (topology().nodes() > 1 || most_gpus() > 1);
}
// Ranks per placement unit of c's processes that planted graphs group: a node's, or, when they
// share one node, a GPU's; 0 where the units differ in size (no planted layout is then a best).
inline int group_size(MPI_Comm c) {
  std::vector<int> nodes, gpus;
  for (int w : world_ranks(c)) {
    nodes.push_back(topology().place(w).node);
    gpus.push_back(topology().place(w).node * 1000 + topology().place(w).gpu);
  }
  std::vector<int>& units = std::set<int>(nodes.begin(), nodes.end()).size() > 1 ? nodes : gpus;
  std::map<int, int> count;
  for (int u : units) ++count[u];
  const int first = count.begin()->second;
  for (const auto& [u, k] : count)
    if (k != first) return 0;
  return first;
}

// The same communicator with its ranks in a random order (the same on every rank).
inline MPI_Comm scrambled(MPI_Comm c, unsigned seed) {
  std::vector<int> key(size_of(c));
  std::iota(key.begin(), key.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(key.begin(), key.end(), rng);
  MPI_Comm s;
  MPI_Comm_split(c, 0, key[rank_of(c)], &s);
  return s;
}

struct Edge {
  int src, dst, weight;
};
// A directed graph without repeated (source, destination) pairs; each vertex's lists in the order
// the application gives them.
struct Graph {
  int n = 0;
  std::vector<Edge> edges;
  std::vector<std::vector<std::pair<int, int>>> out, in;  // (neighbour, weight)
  std::vector<int> hidden;  // vertex -> position in the planted layout
};

// Planted (group >= 1; 0 is taken as 1): positions hidden[v] in blocks of `group` are joined by heavy edges (500-1000), pairs of
// blocks by medium ones (100-200), anything else by light ones (1-20) with probability `density`;
// an edge and its reverse are independent. `self`: some self loops too. Lists shuffled.
inline Graph planted_graph(int n, int group, double density, bool self, std::mt19937& rng) {
  group = std::max(group, 1);
  Graph g;
  g.n = n;
  g.hidden.resize(n);
  std::iota(g.hidden.begin(), g.hidden.end(), 0);
  std::shuffle(g.hidden.begin(), g.hidden.end(), rng);
  g.out.resize(n);
  g.in.resize(n);
  std::uniform_real_distribution<double> u(0, 1);
  auto between = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      const int bs = g.hidden[s] / group, bd = g.hidden[d] / group;
      int w = -1;
      if (s == d) {
        if (self && u(rng) < 0.3) w = between(1, 5);
      } else if (bs == bd) {
        if (u(rng) < 0.9) w = between(500, 1000);
      } else if (bs / 2 == bd / 2) {
        if (u(rng) < 0.8) w = between(100, 200);
      } else if (u(rng) < density) {
        w = between(1, 20);
      }
      if (w < 0) continue;
      g.edges.push_back({s, d, w});
      g.out[s].push_back({d, w});
      g.in[d].push_back({s, w});
    }
  for (int v = 0; v < n; ++v) {
    std::shuffle(g.out[v].begin(), g.out[v].end(), rng);
    std::shuffle(g.in[v].begin(), g.in[v].end(), rng);
  }
  return g;
}

// Weight by the link it crosses when role v runs on world rank where[v].
struct Cost {
  long long inter_node = 0;
  long long same_gpu = 0;
  double gpu_seconds = 0;  // intra-node weight x 1/bandwidth
};
inline Cost cost(const std::vector<Edge>& edges, const std::vector<int>& where) {
  const auto& t = topology();
  Cost c;
  for (const Edge& e : edges) {
    const auto& a = t.place(where[e.src]);
    const auto& b = t.place(where[e.dst]);
    if (a.node != b.node) {
      c.inter_node += e.weight;
    } else if (a.gpu == b.gpu) {
      c.same_gpu += e.weight;
    } else {
      c.gpu_seconds += e.weight / (t.bandwidth().at(a.gpu, b.gpu) * 1e9);
    }
  }
  return c;
}

// The world ranks a planted layout would use: position i on the world rank of c's rank i, where c
// is the communicator in its unscrambled order (c's ranks fill nodes, then GPUs, in blocks).
inline std::vector<int> planted_where(const Graph& g, MPI_Comm c) {
  const std::vector<int> world = world_ranks(c);
  std::vector<int> w(g.n);
  for (int v = 0; v < g.n; ++v) w[v] = world[g.hidden[v]];
  return w;
}

// True on every rank when it is true on all.
inline bool everywhere(bool ok, MPI_Comm c = MPI_COMM_WORLD) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, c);
  return all == 1;
}

inline int error_class(int rc) {
  int c = rc;
  MPI_Error_class(rc, &c);
  return c;
}

}  // namespace reorder_test
