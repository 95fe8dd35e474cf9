// The placement layer, part 2: graphs split into parts of exact sizes (METIS where built, and the
// built-in recursive bisection always), rank reordering with per-node GPU placement, and
// Cartesian grids. Includes issue 16's reordering goal: 64 ranks as a 4x4x4 grid with 26
// weighted neighbours, scrambled, on 4 nodes x 16. One process, no GPU; seeds printed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ferry/error.hpp>
#include <ferry/place.hpp>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace ferry::place;

template <class F>
int error_class(F&& f) {
  try {
    f();
  } catch (const ferry::Error& e) {
    return e.mpi_error_class();
  }
  return MPI_SUCCESS;
}

std::vector<Partitioner> partitioners() {
  std::vector<Partitioner> p{Partitioner::builtin};
  if (metis_available()) p.push_back(Partitioner::metis);
  return p;
}

// An X*Y*Z grid with 26 neighbours weighted as the halo of 256^3 subdomains, radius 3, 8 fp64
// fields would be (face n^2 r, edge n r^2, corner r^3 cells of 64 bytes). Natural vertex
// x + X*(y + Y*z) is labelled label[natural].
Graph grid_graph(int X, int Y, int Z, bool periodic, const std::vector<int>& label) {
  const i64 n = 256, r = 3, cell = 64;
  const i64 w[4] = {0, n * n * r * cell, n * r * r * cell, r * r * r * cell};
  std::vector<Flow> flows;
  for (int z = 0; z < Z; ++z)
    for (int y = 0; y < Y; ++y)
      for (int x = 0; x < X; ++x)
        for (int k = 0; k < kDirections; ++k) {
          const Int3 d = direction(k);
          int c[3] = {x + d[0], y + d[1], z + d[2]};
          const int ext[3] = {X, Y, Z};
          bool ok = true;
          for (int a = 0; a < 3; ++a) {
            if (c[a] >= 0 && c[a] < ext[a]) continue;
            if (!periodic) ok = false;
            c[a] = (c[a] + ext[a]) % ext[a];
          }
          if (!ok) continue;
          const int kind = std::abs(d[0]) + std::abs(d[1]) + std::abs(d[2]);
          flows.push_back(
              {label[x + X * (y + Y * z)], label[c[0] + X * (c[1] + Y * c[2])], w[kind]});
        }
  return graph_from_flows(X * Y * Z, flows);
}

std::vector<int> scrambled(int n, unsigned seed) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

void check_reordering(const Reordering& r, const std::vector<Slot>& slots, const Graph& g) {
  const int n = static_cast<int>(slots.size());
  ASSERT_EQ(static_cast<int>(r.old_of_new.size()), n);
  ASSERT_EQ(static_cast<int>(r.new_of_old.size()), n);
  for (int i = 0; i < n; ++i) {
    ASSERT_GE(r.old_of_new[i], 0);
    ASSERT_LT(r.old_of_new[i], n);
    ASSERT_EQ(r.new_of_old[r.old_of_new[i]], i);
  }
  std::vector<int> node(n);
  for (int i = 0; i < n; ++i) node[i] = slots[r.old_of_new[i]].node;
  EXPECT_EQ(r.cut_after, edge_cut(g, node));
  std::vector<int> before(n);
  for (int i = 0; i < n; ++i) before[i] = slots[i].node;
  EXPECT_EQ(r.cut_before, edge_cut(g, before));
}

TEST(PlaceReorder, Issue16GoalOnFourNodes) {
  const unsigned seed = 16;
  std::printf("seed %u\n", seed);
  std::vector<Slot> slots(64);
  for (int r = 0; r < 64; ++r) slots[r] = {r / 16, (r % 16) / 4};
  for (const bool periodic : {true, false}) {
    const std::vector<int> label = scrambled(64, seed);
    const Graph g = grid_graph(4, 4, 4, periodic, label);
    // The best node-block cut: 2x2x4 blocks.
    std::vector<int> blocks(64);
    for (int z = 0; z < 4; ++z)
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x) blocks[label[x + 4 * (y + 4 * z)]] = x / 2 + 2 * (y / 2);
    const i64 best = edge_cut(g, blocks);
    for (Partitioner part : partitioners()) {
      ReorderOptions o;
      o.graph.partitioner = part;
      o.graph.seed = seed;
      const Reordering r = reorder(g, slots, {}, o);
      check_reordering(r, slots, g);
      std::printf(
          "%s, %s: inter-node bytes scrambled %lld, reordered %lld, 2x2x4 blocks %lld "
          "(%.3fx best, %.2fx lower than scrambled)\n",
          periodic ? "periodic" : "non-periodic", r.method.c_str(),
          static_cast<long long>(r.cut_before), static_cast<long long>(r.cut_after),
          static_cast<long long>(best), static_cast<double>(r.cut_after) / best,
          static_cast<double>(r.cut_before) / r.cut_after);
      EXPECT_EQ(r.method, name(part));
      EXPECT_LE(static_cast<double>(r.cut_after), 1.1 * static_cast<double>(best));
      EXPECT_GE(static_cast<double>(r.cut_before), (periodic ? 2.0 : 3.0) * r.cut_after);
    }
  }
}

TEST(PlaceReorder, GpusOfANode) {
  // Four GPUs per node, 4 ranks each; pairs (0,1) and (2,3) on fast links.
  Matrix bw(4, 50e9);
  for (int i = 0; i < 4; ++i) bw(i, i) = 0, bw(i, i ^ 1) = 150e9;
  const Matrix cost = cost_from_bandwidth(bw);
  std::vector<Slot> slots(64);
  for (int r = 0; r < 64; ++r) slots[r] = {r / 16, (r % 16) / 4};
  const Graph g = grid_graph(4, 4, 4, true, scrambled(64, 99));
  for (Partitioner part : partitioners()) {
    ReorderOptions o;
    o.graph.partitioner = part;
    const Reordering with = reorder(g, slots, cost, o);
    const Reordering without = reorder(g, slots, {}, o);
    check_reordering(with, slots, g);
    EXPECT_EQ(with.cut_after, without.cut_after);  // GPU placement never moves ranks across nodes
    // The same node parts with the ranks put on GPUs in slot order, costed on this matrix.
    double unplaced = 0;
    for (int v = 0; v < 64; ++v)
      for (i64 e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
        const Slot &a = slots[without.old_of_new[v]], &b = slots[without.old_of_new[g.adjncy[e]]];
        if (a.node == b.node) unplaced += static_cast<double>(g.weight[e]) * cost(a.gpu, b.gpu);
      }
    EXPECT_LT(with.gpu_cost_after, 0.8 * unplaced);
    std::printf(
        "%s: intra-node cost (bytes x s/byte) of the reordered nodes: GPUs in slot order "
        "%.4g, placed %.4g\n",
        name(part), unplaced, with.gpu_cost_after);
  }
  // One node, one rank per GPU of a Summit node: a 3x2 grid, heavy along x, must put its rows on
  // the NVLink triples (the brute-force optimum over all 720 layouts).
  Matrix sb(6);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) sb(i, j) = i == j ? 0 : (i / 3 == j / 3 ? 100e9 : 64e9);
  const Matrix summit = cost_from_bandwidth(sb);
  const std::vector<int> lab = scrambled(6, 5);
  std::vector<Flow> f;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) {
      if (x < 2) f.push_back({lab[x + 3 * y], lab[x + 1 + 3 * y], 4});
      if (y < 1) f.push_back({lab[x + 3 * y], lab[x + 3], 1});
    }
  const Graph row = graph_from_flows(6, f);
  std::vector<Slot> one(6);
  for (int r = 0; r < 6; ++r) one[r] = {7, r};
  const Reordering r6 = reorder(row, one, summit);
  check_reordering(r6, one, row);
  std::vector<int> perm(6);
  std::iota(perm.begin(), perm.end(), 0);
  double least = INFINITY;
  do {
    double c = 0;
    for (int v = 0; v < 6; ++v)
      for (i64 e = row.xadj[v]; e < row.xadj[v + 1]; ++e)
        c += static_cast<double>(row.weight[e]) * summit(perm[v], perm[row.adjncy[e]]);
    least = std::min(least, c);
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_NEAR(r6.gpu_cost_after, least, 1e-9 * least);
  // Two GPUs of 4 ranks, two scrambled 4-cliques: each clique ends on one GPU.
  const std::vector<int> lab8 = scrambled(8, 11);
  std::vector<Flow> cl;
  for (int a = 0; a < 8; ++a)
    for (int b = a + 1; b < 8; ++b) cl.push_back({lab8[a], lab8[b], a / 4 == b / 4 ? 100 : 1});
  const Graph cliques = graph_from_flows(8, cl);
  std::vector<Slot> two(8);
  for (int r = 0; r < 8; ++r) two[r] = {0, r % 2};  // GPUs alternate over the ranks
  Matrix c2(2, 1.0);
  c2(0, 0) = c2(1, 1) = 0;
  const Reordering r8 = reorder(cliques, two, c2);
  check_reordering(r8, two, cliques);
  for (int a = 0; a < 8; ++a)
    EXPECT_EQ(two[r8.old_of_new[lab8[a]]].gpu, two[r8.old_of_new[lab8[a / 4 * 4]]].gpu) << a;
}

TEST(PlaceReorder, GoodOrderStaysAndBadInput) {
  // Labels that already put 2x2x4 blocks on the nodes: nothing better exists, so nothing moves.
  std::vector<int> label(64);
  for (int z = 0; z < 4; ++z)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x)
        label[x + 4 * (y + 4 * z)] = 16 * (x / 2 + 2 * (y / 2)) + (x % 2) + 2 * (y % 2) + 4 * z;
  const Graph g = grid_graph(4, 4, 4, true, label);
  std::vector<Slot> slots(64);
  for (int r = 0; r < 64; ++r) slots[r] = {10 + r / 16, 0};
  for (Partitioner part : partitioners()) {
    ReorderOptions o;
    o.graph.partitioner = part;
    const Reordering r = reorder(g, slots, {}, o);
    EXPECT_EQ(r.method, "identity");
    for (int i = 0; i < 64; ++i) EXPECT_EQ(r.old_of_new[i], i);
  }
  EXPECT_EQ(error_class([&] { reorder(g, std::vector<Slot>(63), {}); }), MPI_ERR_ARG);
  std::vector<Slot> bad = slots;
  bad[3].gpu = 4;
  EXPECT_EQ(error_class([&] { reorder(g, bad, Matrix(4)); }), MPI_ERR_ARG);
  bad[3] = {-1, 0};
  EXPECT_EQ(error_class([&] { reorder(g, bad, {}); }), MPI_ERR_ARG);
}

TEST(PlaceGraph, ExactSizesOnRandomGraphs) {
  const unsigned seed = 31337;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int t = 0; t < 40; ++t) {
    const int n = 2 + static_cast<int>(rng() % 300);
    std::vector<Flow> f;
    const int edges = t % 10 == 0 ? 0 : static_cast<int>(rng() % (4 * n));  // some with no edges
    for (int e = 0; e < edges; ++e)
      f.push_back({static_cast<int>(rng() % n), static_cast<int>(rng() % n),
                   static_cast<i64>(rng() % 1000)});
    const Graph g = graph_from_flows(n, f);
    check_graph(g);
    const int k = 1 + static_cast<int>(rng() % std::min(n, 40));
    std::vector<int> sizes(k, 1);
    for (int i = k; i < n; ++i) ++sizes[rng() % k];
    for (Partitioner part : partitioners()) {
      GraphOptions o;
      o.partitioner = part;
      o.seed = seed + t;
      const GraphPartition p = partition_graph(g, sizes, o);
      ASSERT_EQ(static_cast<int>(p.part.size()), n);
      std::vector<int> count(k, 0);
      for (int x : p.part) {
        ASSERT_GE(x, 0);
        ASSERT_LT(x, k);
        ++count[x];
      }
      EXPECT_EQ(count, sizes) << "case " << t << " n=" << n << " k=" << k << " " << name(part);
      EXPECT_EQ(p.cut, edge_cut(g, p.part));
      EXPECT_EQ(p.used, part);
    }
  }
}

TEST(PlaceGraph, LargeGridOnSummitNodes) {
  // 3,072 ranks (16x16x12, periodic, 26 neighbours), scrambled, on 512 Summit nodes of 6.
  const unsigned seed = 3072;
  std::printf("seed %u\n", seed);
  const std::vector<int> label = scrambled(3072, seed);
  const Graph g = grid_graph(16, 16, 12, true, label);
  std::vector<Slot> slots(3072);
  for (int r = 0; r < 3072; ++r) slots[r] = {r / 6, r % 6};
  Matrix sb(6);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) sb(i, j) = i == j ? 0 : (i / 3 == j / 3 ? 100e9 : 64e9);
  // The Cartesian blocks as the reference (natural order is row-major over {12, 16, 16}).
  const CartBlocks cb = cart_blocks({12, 16, 16}, {1, 1, 1}, 512, 1);
  std::vector<int> blocks(3072);
  for (int v = 0; v < 3072; ++v) blocks[label[v]] = cb.node[v];
  const i64 block_cut = edge_cut(g, blocks);
  for (Partitioner part : partitioners()) {
    ReorderOptions o;
    o.graph.partitioner = part;
    const auto t0 = std::chrono::steady_clock::now();
    const Reordering r = reorder(g, slots, cost_from_bandwidth(sb), o);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    check_reordering(r, slots, g);
    std::printf(
        "%s: inter-node bytes scrambled %lld, reordered %lld, %dx%dx%d blocks %lld (%.3fx); "
        "%.1f ms (not a goal here: see bench_place)\n",
        r.method.c_str(), static_cast<long long>(r.cut_before), static_cast<long long>(r.cut_after),
        cb.node_block[0], cb.node_block[1], cb.node_block[2], static_cast<long long>(block_cut),
        static_cast<double>(r.cut_after) / block_cut, ms);
    // Parts of 6 with 26 neighbours each: even the best blocks cut 62 % of the bytes.
    EXPECT_LE(static_cast<double>(r.cut_after), 1.1 * static_cast<double>(block_cut));
    EXPECT_LT(r.cut_after, r.cut_before);
    std::vector<int> per_node(512, 0);
    for (int i = 0; i < 3072; ++i) ++per_node[slots[r.old_of_new[i]].node];
    for (int c : per_node) ASSERT_EQ(c, 6);
  }
}

TEST(PlaceGraph, BadInput) {
  const Graph ok = graph_from_flows(4, {{0, 1, 5}, {1, 2, 5}, {2, 3, 5}});
  auto err = [](auto&& f) { return error_class(f); };
  EXPECT_EQ(err([&] { partition_graph(ok, {2, -1, 3}); }), MPI_ERR_ARG);  // negative size
  EXPECT_EQ(err([&] { partition_graph(ok, {2, 0, 2}); }), MPI_ERR_ARG);   // empty part
  EXPECT_EQ(err([&] { partition_graph(ok, {1, 1, 1, 1, 0}); }), MPI_ERR_ARG);
  EXPECT_EQ(err([&] {
              partition_graph(ok, {1, 1, 1, 1, 1});
            }),
            MPI_ERR_ARG);                                             // more parts than vertices
  EXPECT_EQ(err([&] { partition_graph(ok, {2, 1}); }), MPI_ERR_ARG);  // sums to 3, not 4
  EXPECT_EQ(err([&] { partition_graph(ok, {}); }), MPI_ERR_ARG);
  Graph asym = ok;
  asym.weight[0] = 6;  // 0->1 weighs 6, 1->0 weighs 5
  EXPECT_EQ(err([&] { partition_graph(asym, {2, 2}); }), MPI_ERR_ARG);
  Graph one_way;
  one_way.xadj = {0, 1, 1};
  one_way.adjncy = {1};
  EXPECT_EQ(err([&] { check_graph(one_way); }), MPI_ERR_ARG);
  Graph outside = ok;
  outside.adjncy[0] = 9;
  EXPECT_EQ(err([&] { check_graph(outside); }), MPI_ERR_ARG);
  Graph neg = ok;
  neg.weight[0] = neg.weight[1] = -1;
  EXPECT_EQ(err([&] { check_graph(neg); }), MPI_ERR_ARG);
  Graph broken = ok;
  broken.xadj.back() = 99;
  EXPECT_EQ(err([&] { check_graph(broken); }), MPI_ERR_ARG);
  broken = ok;
  broken.xadj[2] = 0;  // decreasing
  EXPECT_EQ(err([&] { check_graph(broken); }), MPI_ERR_ARG);
  broken = ok;
  broken.xadj.clear();
  EXPECT_EQ(err([&] { check_graph(broken); }), MPI_ERR_ARG);
  EXPECT_EQ(err([&] { graph_from_flows(3, {{0, 3, 1}}); }), MPI_ERR_ARG);
  EXPECT_EQ(err([&] { graph_from_flows(3, {{0, 1, -1}}); }), MPI_ERR_ARG);
  EXPECT_EQ(err([&] { graph_from_flows(-1, {}); }), MPI_ERR_ARG);
  EXPECT_EQ(err([&] { edge_cut(ok, {0, 1}); }), MPI_ERR_ARG);
  GraphOptions metis;
  metis.partitioner = Partitioner::metis;
  if (metis_available())
    EXPECT_EQ(partition_graph(ok, {2, 2}, metis).cut, 5);
  else
    EXPECT_EQ(err([&] { partition_graph(ok, {2, 2}, metis); }), MPI_ERR_UNSUPPORTED_OPERATION);
  // Duplicates and self loops are allowed: a self loop is ignored, duplicates are summed.
  Graph dup;
  dup.xadj = {0, 3, 5};
  dup.adjncy = {0, 1, 1, 0, 0};
  dup.weight = {7, 2, 3, 4, 1};
  EXPECT_NO_THROW(check_graph(dup));
  EXPECT_EQ(edge_cut(dup, {0, 1}), 5);
}

// ---- Cartesian grids --------------------------------------------------------------------------

// Every block shape dividing dims with the given product.
void all_shapes(const std::vector<int>& within, int count, std::vector<int>& cur,
                std::vector<std::vector<int>>& out) {
  if (cur.size() == within.size()) {
    if (count == 1) out.push_back(cur);
    return;
  }
  const int d = within[cur.size()];
  for (int b = 1; b <= d; ++b) {
    if (d % b || count % b) continue;
    cur.push_back(b);
    all_shapes(within, count / b, cur, out);
    cur.pop_back();
  }
}

std::vector<int> blocks_of(const std::vector<int>& dims, const std::vector<int>& b) {
  int n = 1;
  for (int d : dims) n *= d;
  std::vector<int> part(n);
  for (int r = 0; r < n; ++r) {
    int rest = r, id = 0, mult = 1;
    for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
      const int c = rest % dims[i];
      rest /= dims[i];
      id += (c / b[i]) * mult;
      mult *= dims[i] / b[i];
    }
    part[r] = id;
  }
  return part;
}

TEST(PlaceCart, GraphAndBlocksAgainstBruteForce) {
  const Graph g = cart_graph({2, 5}, {1, 0});
  check_graph(g);
  EXPECT_EQ(edge_cut(g, {0, 0, 0, 0, 0, 1, 1, 1, 1, 1}),
            10);  // 5 pairs across dim 0, weight 2 each
  struct Case {
    std::vector<int> dims, periods;
    int nodes, gpus;
  };
  const std::vector<Case> cases{{{4, 6}, {0, 0}, 4, 2},       {{6, 4, 2}, {1, 0, 1}, 4, 3},
                                {{5, 3, 4}, {1, 1, 1}, 5, 2}, {{12}, {1}, 3, 2},
                                {{4, 4, 4}, {1, 1, 1}, 4, 4}, {{3, 8, 9}, {0, 1, 0}, 6, 6}};
  for (const Case& c : cases) {
    const Graph cg = cart_graph(c.dims, c.periods);
    const int n = cg.vertices();
    const CartBlocks cb = cart_blocks(c.dims, c.periods, c.nodes, c.gpus);
    std::vector<int> per_node(c.nodes, 0), per_gpu(c.nodes * c.gpus, 0);
    for (int r = 0; r < n; ++r) ++per_node[cb.node[r]], ++per_gpu[cb.node[r] * c.gpus + cb.gpu[r]];
    for (int x : per_node) EXPECT_EQ(x, n / c.nodes);
    for (int x : per_gpu) EXPECT_EQ(x, n / c.nodes / c.gpus);
    std::vector<int> fine(n);  // (node, gpu) as one part id
    for (int r = 0; r < n; ++r) fine[r] = cb.node[r] * c.gpus + cb.gpu[r];
    std::vector<std::vector<int>> shapes;
    std::vector<int> cur;
    all_shapes(c.dims, n / c.nodes, cur, shapes);
    i64 best_node = INT64_MAX, best_total = INT64_MAX;
    for (const auto& b : shapes) {
      const i64 cut = edge_cut(cg, blocks_of(c.dims, b));
      std::vector<std::vector<int>> inner;
      all_shapes(b, n / c.nodes / c.gpus, cur, inner);
      for (const auto& s : inner) {
        const i64 total = edge_cut(cg, blocks_of(c.dims, s));
        if (cut < best_node || (cut == best_node && total < best_total))
          best_node = cut, best_total = total;
      }
    }
    EXPECT_EQ(edge_cut(cg, cb.node), best_node);
    EXPECT_EQ(edge_cut(cg, fine), best_total);
  }
  EXPECT_EQ(error_class([] { cart_blocks({4, 4}, {0, 0}, 3, 1); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([] { cart_blocks({4, 4}, {0, 0}, 4, 3); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([] { cart_blocks({4, 0}, {0, 0}, 1, 1); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([] { cart_graph({4, 4}, {0}); }), MPI_ERR_ARG);
}

TEST(PlaceCart, ReorderCart) {
  const std::vector<int> dims{4, 6, 4}, periods{1, 1, 0};
  const Graph g = cart_graph(dims, periods);
  // 4 nodes x 24 ranks, 4 GPUs per node with fast pairs; the nodes' ranks interleaved.
  std::vector<Slot> slots(96);
  for (int r = 0; r < 96; ++r) slots[r] = {r % 4, (r / 4) % 4};
  Matrix bw(4, 50e9);
  for (int i = 0; i < 4; ++i) bw(i, i) = 0, bw(i, i ^ 1) = 150e9;
  const Reordering r = reorder_cart(dims, periods, slots, cost_from_bandwidth(bw));
  check_reordering(r, slots, g);
  EXPECT_EQ(r.method, "cartesian");
  const CartBlocks cb = cart_blocks(dims, periods, 4, 4);
  EXPECT_EQ(r.cut_after, edge_cut(g, cb.node));
  EXPECT_LT(r.gpu_cost_after, r.gpu_cost_before);
  // Ranks whose nodes already form the best blocks: nothing moves.
  const CartBlocks best = cart_blocks(dims, periods, 4, 1);
  std::vector<Slot> good(96);
  for (int i = 0; i < 96; ++i) good[i] = {best.node[i], 0};
  const Reordering same = reorder_cart(dims, periods, good, {});
  EXPECT_EQ(same.method, "identity");
  // Uneven nodes: the graph path.
  std::vector<Slot> uneven(96);
  for (int i = 0; i < 96; ++i) {  // 40, 30 and 26 ranks, interleaved
    const int s = (i * 7) % 96;
    uneven[i] = {s < 40 ? 0 : s < 70 ? 1 : 2, 0};
  }
  const Reordering ur = reorder_cart(dims, periods, uneven, {});
  check_reordering(ur, uneven, g);
  EXPECT_NE(ur.method, "cartesian");
  EXPECT_LT(ur.cut_after, ur.cut_before);
  EXPECT_EQ(error_class([&] { reorder_cart(dims, periods, good, Matrix(0)); }), MPI_SUCCESS);
  EXPECT_EQ(error_class([&] { reorder_cart({4, 4}, {0, 0}, good, {}); }), MPI_ERR_ARG);
}

}  // namespace
