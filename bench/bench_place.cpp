// bench/bench_place.cpp — what placement and rank reordering cost (src/place, one process).
//
//   place/reorder_3072/<partitioner>    reorder(): 3,072 ranks as a periodic 16x16x12 grid with 26
//                                       neighbours (Astaroth-like bytes), scrambled, onto 512
//                                       Summit nodes of 6 GPUs: graph check + partition into 512
//                                       parts of exactly 6 + per-node QAP. Goal (issue 16): <= 50
//                                       ms.
//   place/partition_3072/<partitioner>  partition_graph() alone, same graph and sizes
//   place/qap_exact_8/<matrix>          solve_qap, exact, 8 subdomains onto 8 GPUs: a DGX-1-like
//                                       hybrid cube-mesh, and random distances (no symmetry to use)
//   place/qap_heuristic/<n>             solve_qap, heuristic, n facilities on a random matrix
//   place/partition_grid                partition_grid: 2048^3 cells on 4096 nodes x 8 GPUs
// Counters: cut_vs_blocks (inter-node bytes / those of the Cartesian node blocks) for reordering.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <ferry/place.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "bench_common.hpp"

namespace {

using namespace ferry::place;

Graph grid_graph(int X, int Y, int Z, const std::vector<int>& label) {
  const i64 n = 256, r = 3, cell = 64;  // 256^3 subdomains, radius 3, 8 fp64 fields
  const i64 w[4] = {0, n * n * r * cell, n * r * r * cell, r * r * r * cell};
  std::vector<Flow> flows;
  for (int z = 0; z < Z; ++z)
    for (int y = 0; y < Y; ++y)
      for (int x = 0; x < X; ++x)
        for (int k = 0; k < kDirections; ++k) {
          const Int3 d = direction(k);
          const int c[3] = {(x + d[0] + X) % X, (y + d[1] + Y) % Y, (z + d[2] + Z) % Z};
          const int kind = std::abs(d[0]) + std::abs(d[1]) + std::abs(d[2]);
          flows.push_back(
              {label[x + X * (y + Y * z)], label[c[0] + X * (c[1] + Y * c[2])], w[kind]});
        }
  return graph_from_flows(X * Y * Z, flows);
}

struct Case3072 {
  std::vector<int> label;
  Graph g;
  std::vector<Slot> slots;
  Matrix summit;
  i64 block_cut = 0;
};

const Case3072& case3072() {
  static const Case3072 c = [] {
    Case3072 k;
    k.label.resize(3072);
    std::iota(k.label.begin(), k.label.end(), 0);
    std::mt19937 rng(3072);
    std::shuffle(k.label.begin(), k.label.end(), rng);
    k.g = grid_graph(16, 16, 12, k.label);
    for (int r = 0; r < 3072; ++r) k.slots.push_back({r / 6, r % 6});
    Matrix bw(6);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) bw(i, j) = i == j ? 0 : (i / 3 == j / 3 ? 100e9 : 64e9);
    k.summit = cost_from_bandwidth(bw);
    const CartBlocks cb = cart_blocks({12, 16, 16}, {1, 1, 1}, 512, 1);
    std::vector<int> part(3072);
    for (int v = 0; v < 3072; ++v) part[k.label[v]] = cb.node[v];
    k.block_cut = edge_cut(k.g, part);
    return k;
  }();
  return c;
}

bool usable(benchmark::State& state, Partitioner p) {
  if (p == Partitioner::metis && !metis_available()) {
    state.SkipWithError("this build has no METIS");
    return false;
  }
  return true;
}

void reorder_3072(benchmark::State& state, Partitioner p) {
  if (!usable(state, p)) return;
  const Case3072& c = case3072();
  ReorderOptions o;
  o.graph.partitioner = p;
  i64 cut = 0;
  for (auto _ : state) {
    const Reordering r = reorder(c.g, c.slots, c.summit, o);
    cut = r.cut_after;
    benchmark::DoNotOptimize(r.old_of_new.data());
  }
  state.counters["cut_vs_blocks"] = static_cast<double>(cut) / static_cast<double>(c.block_cut);
}

void partition_3072(benchmark::State& state, Partitioner p) {
  if (!usable(state, p)) return;
  const Case3072& c = case3072();
  GraphOptions o;
  o.partitioner = p;
  const std::vector<int> sizes(512, 6);
  i64 cut = 0;
  for (auto _ : state) {
    const GraphPartition r = partition_graph(c.g, sizes, o);
    cut = r.cut;
    benchmark::DoNotOptimize(r.part.data());
  }
  state.counters["cut_vs_blocks"] = static_cast<double>(cut) / static_cast<double>(c.block_cut);
}

Matrix random_matrix(int n, unsigned seed) {
  std::mt19937 rng(seed);
  Matrix m(n);
  for (double& x : m.a) x = 1 + static_cast<double>(rng() % 100);
  return m;
}

// DGX-1 (V100)-like: two fully connected quads, GPU i linked to i + 4, some pairs on two links;
// the rest go through PCIe and the CPUs.
Matrix dgx1() {
  Matrix bw(8, 10e9);
  for (int i = 0; i < 8; ++i) {
    bw(i, i) = 0;
    for (int j = 0; j < 8; ++j)
      if (i != j && i / 4 == j / 4) bw(i, j) = 25e9;
    bw(i, (i + 4) % 8) = 50e9;
  }
  for (int q = 0; q < 8; q += 4)
    bw(q, q + 3) = bw(q + 3, q) = bw(q + 1, q + 2) = bw(q + 2, q + 1) = 50e9;
  return cost_from_bandwidth(bw);
}

void qap_exact_8(benchmark::State& state, bool random_distances) {
  const Matrix flow = random_matrix(8, 8);
  const Matrix dist = random_distances ? random_matrix(8, 9) : dgx1();
  QapOptions o;
  o.method = QapMethod::exact;
  for (auto _ : state) benchmark::DoNotOptimize(solve_qap(flow, dist, o).cost);
}

void qap_heuristic(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const Matrix flow = random_matrix(n, 1), dist = random_matrix(n, 2);
  QapOptions o;
  o.method = QapMethod::heuristic;
  for (auto _ : state) benchmark::DoNotOptimize(solve_qap(flow, dist, o).cost);
}

void partition_big_grid(benchmark::State& state) {
  const Halo h = Halo::box(3);
  for (auto _ : state)
    benchmark::DoNotOptimize(
        partition_grid({2048, 2048, 2048}, {true, true, true}, {4096, 8, 1}, h).size());
}

}  // namespace

namespace ferry_bench {
void register_benchmarks(int* /*argc*/, char** /*argv*/) {
  for (Partitioner p : {Partitioner::builtin, Partitioner::metis}) {
    benchmark::RegisterBenchmark((std::string("place/reorder_3072/") + name(p)).c_str(),
                                 reorder_3072, p)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("place/partition_3072/") + name(p)).c_str(),
                                 partition_3072, p)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("place/qap_exact_8/dgx1", qap_exact_8, false)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("place/qap_exact_8/random", qap_exact_8, true)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("place/qap_heuristic", qap_heuristic)
      ->Arg(16)
      ->Arg(64)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("place/partition_grid", partition_big_grid)
      ->Unit(benchmark::kMicrosecond);
}
}  // namespace ferry_bench
