// Rank reordering through the interposer: MPI_Dist_graph_create_adjacent, MPI_Dist_graph_create
// and MPI_Graph_create with reorder = 1 on random graphs with a planted best layout, on the
// simulated topology (FERRY_TOPOLOGY, CTest sets it). After each call: every neighbour query on the
// new communicator gives the roles' adjacency (role q: the edges graph vertex q was given, in new
// ranks), data sent with MPI_Neighbor_alltoall reaches the right processes, and the weight crossing
// nodes (and GPU links) is no more than before: with Ferry reordering, no more than the planted
// layout's. Where Ferry does not reorder (FERRY_REORDER=0, or one node with one GPU) the MPI's own
// result must be the identity (MPICH 4 does not reorder; Open MPI 4.1 does not with its treematch
// component left out, as the registrations do: tests/CMakeLists.txt says why). Seeds are printed.
#include <cstdio>

#include "reorder_util.hpp"

namespace {

using namespace reorder_test;

const unsigned kSeeds[] = {1, 7, 2024};

// Role q's lists as the new communicator reports them, against the graph's.
void check_dist_neighbours(MPI_Comm c, const Graph& g, bool weighted, bool adjacent) {
  const int q = rank_of(c);
  int status = 0;
  MPI_Topo_test(c, &status);
  EXPECT_EQ(status, MPI_DIST_GRAPH);
  int indeg = -1, outdeg = -1, w = -1;
  ASSERT_EQ(MPI_Dist_graph_neighbors_count(c, &indeg, &outdeg, &w), MPI_SUCCESS);
  ASSERT_EQ(indeg, static_cast<int>(g.in[q].size()));
  ASSERT_EQ(outdeg, static_cast<int>(g.out[q].size()));
  EXPECT_EQ(w != 0, weighted);
  std::vector<int> s(indeg + 1), sw(indeg + 1), d(outdeg + 1), dw(outdeg + 1);
  ASSERT_EQ(MPI_Dist_graph_neighbors(c, indeg, s.data(), weighted ? sw.data() : MPI_UNWEIGHTED,
                                     outdeg, d.data(), weighted ? dw.data() : MPI_UNWEIGHTED),
            MPI_SUCCESS);
  std::vector<std::pair<int, int>> in, out;
  for (int i = 0; i < indeg; ++i) in.push_back({s[i], weighted ? sw[i] : g.in[q][i].second});
  for (int i = 0; i < outdeg; ++i) out.push_back({d[i], weighted ? dw[i] : g.out[q][i].second});
  std::vector<std::pair<int, int>> want_in = g.in[q], want_out = g.out[q];
  if (!weighted) {  // the weights were not given: compare neighbours only
    for (auto& e : want_in) e.second = 0;
    for (auto& e : want_out) e.second = 0;
    for (auto& e : in) e.second = 0;
    for (auto& e : out) e.second = 0;
  }
  if (!adjacent) {  // MPI_Dist_graph_create: the order is the MPI's
    std::sort(in.begin(), in.end()), std::sort(want_in.begin(), want_in.end());
    std::sort(out.begin(), out.end()), std::sort(want_out.begin(), want_out.end());
  }
  EXPECT_EQ(in, want_in) << "sources of role " << q;
  EXPECT_EQ(out, want_out) << "destinations of role " << q;
}

// Block k to the k-th destination holds (sender, receiver); the k-th source's block must say
// (that source, me). Any process with the wrong role, or lists in another order, shows.
void check_alltoall(MPI_Comm c) {
  const int q = rank_of(c), n = size_of(c);
  int indeg = 0, outdeg = 0, w = 0;
  MPI_Dist_graph_neighbors_count(c, &indeg, &outdeg, &w);
  std::vector<int> s(indeg + 1), d(outdeg + 1);
  MPI_Dist_graph_neighbors(c, indeg, s.data(), MPI_UNWEIGHTED, outdeg, d.data(), MPI_UNWEIGHTED);
  std::vector<int> send(outdeg + 1), recv(indeg + 1, -1), want(indeg + 1, -1);
  for (int k = 0; k < outdeg; ++k) send[k] = q * n + d[k];
  for (int k = 0; k < indeg; ++k) want[k] = s[k] * n + q;
  ASSERT_EQ(MPI_Neighbor_alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, c), MPI_SUCCESS);
  EXPECT_EQ(recv, want) << "role " << q;
}

// Weight across links before (role v on comm_old's rank v) and after (on the new rank v).
// `base`: comm_old in its unscrambled order, whose rank i the planted layout puts position i on.
// Unweighted: every edge weighs 1, as Ferry was told (the planted layout is then no longer a best).
void check_cost(MPI_Comm base, MPI_Comm old, MPI_Comm c, const Graph& g, const char* what,
                bool weighted, bool planted_best = true) {
  std::vector<Edge> edges = g.edges;
  if (!weighted) {
    for (Edge& e : edges) e.weight = 1;
    planted_best = false;
  }
  const std::vector<int> before_at = world_ranks(old), after_at = world_ranks(c);
  const Cost before = cost(edges, before_at), after = cost(edges, after_at);
  const Cost planted = cost(edges, planted_where(g, base));
  if (rank_of(c) == 0)
    std::printf("  %s: inter-node %lld -> %lld (planted %lld), GPU-link %.3g -> %.3g s/B x w\n", what,
                before.inter_node, after.inter_node, planted.inter_node, before.gpu_seconds,
                after.gpu_seconds);
  if (!ferry_reorders()) {
    EXPECT_EQ(after_at, before_at) << "the MPI reordered itself";
    return;
  }
  EXPECT_LE(after.inter_node, before.inter_node);
  if (after.inter_node == before.inter_node)  // then the GPU links decide: never worse
    EXPECT_LE(after.gpu_seconds, before.gpu_seconds * (1 + 1e-9));
  const bool even = group_size(base) > 0;
  if (even && planted_best) {  // the planted layout is a best one: as good is expected
    EXPECT_LE(after.inter_node, planted.inter_node);
    if (after.inter_node == planted.inter_node && topology().nodes() == 1)
      EXPECT_LE(after.gpu_seconds, planted.gpu_seconds * (1 + 1e-9));
  }
}

void adjacent_case(MPI_Comm base, MPI_Comm old, const Graph& g, bool weighted) {
  const int p = rank_of(old);
  std::vector<int> s, sw, d, dw;
  for (const auto& [v, w] : g.in[p]) s.push_back(v), sw.push_back(w);
  for (const auto& [v, w] : g.out[p]) d.push_back(v), dw.push_back(w);
  auto weights = [&](std::vector<int>& w) {
    return !weighted ? MPI_UNWEIGHTED : w.empty() ? MPI_WEIGHTS_EMPTY : w.data();
  };
  MPI_Comm c = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Dist_graph_create_adjacent(old, static_cast<int>(s.size()), s.data(), weights(sw),
                                           static_cast<int>(d.size()), d.data(), weights(dw),
                                           MPI_INFO_NULL, 1, &c),
            MPI_SUCCESS);
  check_dist_neighbours(c, g, weighted, true);
  check_alltoall(c);
  check_cost(base, old, c, g, weighted ? "adjacent, weighted" : "adjacent, unweighted", weighted);
  MPI_Comm_free(&c);
}

TEST(ReorderDistGraph, AdjacentRandomGraphs) {
  const int n = size_of(MPI_COMM_WORLD);
  for (unsigned seed : kSeeds)
    for (bool scramble : {false, true})
      for (bool weighted : {true, false}) {
        SCOPED_TRACE("seed " + std::to_string(seed) + (scramble ? ", scrambled" : "") +
                     (weighted ? ", weighted" : ", unweighted"));
        if (rank_of(MPI_COMM_WORLD) == 0)
          std::printf("seed %u%s\n", seed, scramble ? " (comm_old scrambled)" : "");
        std::mt19937 rng(seed);
        const Graph g = planted_graph(n, group_size(MPI_COMM_WORLD), 0.3, seed == 7, rng);
        MPI_Comm old = scramble ? scrambled(MPI_COMM_WORLD, seed) : MPI_COMM_WORLD;
        adjacent_case(MPI_COMM_WORLD, old, g, weighted);
        if (scramble) MPI_Comm_free(&old);
      }
}

// comm_old a part of the world (the first and second half, on different nodes), scrambled: the
// layout of its processes is the world's, translated.
TEST(ReorderDistGraph, AdjacentOnSubCommunicators) {
  const int n = size_of(MPI_COMM_WORLD), me = rank_of(MPI_COMM_WORLD);
  if (n < 4) GTEST_SKIP() << "needs 4 ranks";
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, me < n / 2 ? 0 : 1, me, &half);
  for (unsigned seed : kSeeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed + 300 + (me < n / 2 ? 0 : 1));
    const Graph g = planted_graph(size_of(half), group_size(half), 0.3, false, rng);
    MPI_Comm old = scrambled(half, seed);
    adjacent_case(half, old, g, true);
    MPI_Comm_free(&old);
  }
  MPI_Comm_free(&half);
}

// Isolated vertices (MPI_WEIGHTS_EMPTY) and MPI_PROC_NULL neighbours, which stay where they are.
TEST(ReorderDistGraph, AdjacentIsolatedAndProcNull) {
  const int n = size_of(MPI_COMM_WORLD);
  std::mt19937 rng(11);
  Graph g = planted_graph(n, group_size(MPI_COMM_WORLD), 0.2, false, rng);
  // Vertex 0 isolated.
  auto keep = [](const Edge& e) { return e.src != 0 && e.dst != 0; };
  std::vector<Edge> kept;
  for (const Edge& e : g.edges)
    if (keep(e)) kept.push_back(e);
  g.edges = kept;
  g.out[0].clear(), g.in[0].clear();
  for (int v = 1; v < n; ++v) {
    auto drop = [](const std::pair<int, int>& x) { return x.first == 0; };
    g.out[v].erase(std::remove_if(g.out[v].begin(), g.out[v].end(), drop), g.out[v].end());
    g.in[v].erase(std::remove_if(g.in[v].begin(), g.in[v].end(), drop), g.in[v].end());
  }
  // Vertex n-1 also lists MPI_PROC_NULL, first among its sources and last among its destinations.
  g.in[n - 1].insert(g.in[n - 1].begin(), {MPI_PROC_NULL, 3});
  g.out[n - 1].push_back({MPI_PROC_NULL, 4});
  const int p = rank_of(MPI_COMM_WORLD);
  std::vector<int> s, sw, d, dw;
  for (const auto& [v, w] : g.in[p]) s.push_back(v), sw.push_back(w);
  for (const auto& [v, w] : g.out[p]) d.push_back(v), dw.push_back(w);
  MPI_Comm c = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Dist_graph_create_adjacent(
                MPI_COMM_WORLD, static_cast<int>(s.size()), s.data(),
                sw.empty() ? MPI_WEIGHTS_EMPTY : sw.data(), static_cast<int>(d.size()), d.data(),
                dw.empty() ? MPI_WEIGHTS_EMPTY : dw.data(), MPI_INFO_NULL, 1, &c),
            MPI_SUCCESS);
  check_dist_neighbours(c, g, true, true);
  check_cost(MPI_COMM_WORLD, MPI_COMM_WORLD, c, g, "adjacent, isolated vertex", true, false);
  MPI_Comm_free(&c);
}

// MPI_Dist_graph_create: each edge named by some rank (a random one), sources repeated.
TEST(ReorderDistGraph, GeneralRandomGraphs) {
  const int n = size_of(MPI_COMM_WORLD);
  for (unsigned seed : kSeeds)
    for (bool weighted : {true, false}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + (weighted ? ", weighted" : ", unweighted"));
      std::mt19937 rng(seed + 100);
      const Graph g = planted_graph(n, group_size(MPI_COMM_WORLD), 0.3, seed == 7, rng);
      MPI_Comm old = scrambled(MPI_COMM_WORLD, seed + 5);
      const int p = rank_of(old);
      std::vector<int> sources, degrees, dests, weights;
      std::uniform_int_distribution<int> who(0, n - 1);
      for (const Edge& e : g.edges) {
        if (who(rng) != p) continue;
        sources.push_back(e.src), degrees.push_back(1);
        dests.push_back(e.dst), weights.push_back(e.weight);
      }
      MPI_Comm c = MPI_COMM_NULL;
      const int* wp = !weighted ? MPI_UNWEIGHTED : weights.empty() ? MPI_WEIGHTS_EMPTY : weights.data();
      ASSERT_EQ(MPI_Dist_graph_create(old, static_cast<int>(sources.size()), sources.data(),
                                      degrees.data(), dests.data(), wp, MPI_INFO_NULL, 1, &c),
                MPI_SUCCESS);
      check_dist_neighbours(c, g, weighted, false);
      check_alltoall(c);
      check_cost(MPI_COMM_WORLD, old, c, g, weighted ? "general, weighted" : "general, unweighted", weighted);
      MPI_Comm_free(&c);
      MPI_Comm_free(&old);
    }
}

// MPI_Graph_create: the symmetric graph, every node's list in order; with one node fewer than
// processes, one process gets MPI_COMM_NULL.
TEST(ReorderGraph, RandomGraphs) {
  const int n = size_of(MPI_COMM_WORLD);
  for (unsigned seed : kSeeds)
    for (int nnodes : {n, n - 1}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(nnodes) + " nodes");
      std::mt19937 rng(seed + 200);
      const Graph directed = planted_graph(n, group_size(MPI_COMM_WORLD), 0.3, false, rng);
      std::vector<std::vector<int>> adj(nnodes);
      Graph g;  // the symmetric graph's edges, both ways, weight 1
      g.n = nnodes;
      for (const Edge& e : directed.edges) {
        if (e.src >= nnodes || e.dst >= nnodes || e.src == e.dst) continue;
        for (auto [a, b] : {std::pair{e.src, e.dst}, std::pair{e.dst, e.src}})
          if (std::find(adj[a].begin(), adj[a].end(), b) == adj[a].end()) adj[a].push_back(b);
      }
      std::vector<int> index, edges;
      for (int v = 0; v < nnodes; ++v) {
        std::shuffle(adj[v].begin(), adj[v].end(), rng);
        for (int u : adj[v]) edges.push_back(u), g.edges.push_back({v, u, 1});
        index.push_back(static_cast<int>(edges.size()));
      }
      MPI_Comm old = scrambled(MPI_COMM_WORLD, seed + 9), c = MPI_COMM_NULL;
      ASSERT_EQ(MPI_Graph_create(old, nnodes, index.data(), edges.data(), 1, &c), MPI_SUCCESS);
      int members = c != MPI_COMM_NULL, total = 0;
      MPI_Allreduce(&members, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      EXPECT_EQ(total, nnodes);
      // Where each role runs, for every process to see (MPI_COMM_NULL: none).
      const int q = c != MPI_COMM_NULL ? rank_of(c) : -1;
      std::vector<int> role_of(n);
      MPI_Allgather(&q, 1, MPI_INT, role_of.data(), 1, MPI_INT, old);
      const std::vector<int> old_world = world_ranks(old);
      std::vector<int> before(nnodes), after(nnodes, -1);
      for (int v = 0; v < nnodes; ++v) before[v] = old_world[v];
      for (int r = 0; r < n; ++r)
        if (role_of[r] >= 0) after[role_of[r]] = old_world[r];
      if (c != MPI_COMM_NULL) {
        int status = 0, nn = 0, ne = 0;
        MPI_Topo_test(c, &status);
        EXPECT_EQ(status, MPI_GRAPH);
        MPI_Graphdims_get(c, &nn, &ne);
        EXPECT_EQ(nn, nnodes);
        EXPECT_EQ(ne, static_cast<int>(edges.size()));
        for (int v = 0; v < nnodes; ++v) {  // the whole graph, as every member sees it
          int k = -1;
          MPI_Graph_neighbors_count(c, v, &k);
          std::vector<int> nb(k + 1);
          MPI_Graph_neighbors(c, v, k, nb.data());
          nb.resize(k);
          EXPECT_EQ(nb, adj[v]) << "node " << v;
        }
        std::vector<int> send(adj[q].size() + 1), recv(adj[q].size() + 1, -1), want(adj[q].size() + 1, -1);
        for (std::size_t k = 0; k < adj[q].size(); ++k)
          send[k] = q * n + adj[q][k], want[k] = adj[q][k] * n + q;
        EXPECT_EQ(MPI_Neighbor_alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, c), MPI_SUCCESS);
        EXPECT_EQ(recv, want) << "role " << q;
      }
      const Cost b = cost(g.edges, before), a = cost(g.edges, after);
      if (rank_of(MPI_COMM_WORLD) == 0)
        std::printf("  graph, %d nodes: inter-node %lld -> %lld\n", nnodes, b.inter_node, a.inter_node);
      if (ferry_reorders())
        EXPECT_LE(a.inter_node, b.inter_node);
      else
        EXPECT_EQ(after, before) << "the MPI reordered itself";
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
      MPI_Comm_free(&old);
    }
}

}  // namespace
