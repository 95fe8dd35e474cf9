// Issue 16's reordering goal through the MPI path: N ranks as a 3-D grid (MPI_Dims_create; 64:
// 4x4x4) with 26 neighbours weighted by the bytes of a face, edge or corner halo (256^3 cells per
// rank, radius 3, 8 fp64 fields: the Astaroth case), the roles randomly permuted over the ranks
// (fixed seed), each rank describing its role's edges to MPI_Dist_graph_create_adjacent with
// reorder = 1. On the simulated topology (FERRY_TOPOLOGY), it prints the inter-node bytes of the
// scrambled layout, of the best node blocks of the grid, after Ferry's reordering, and after the
// MPI's own (PMPI with reorder = 1: Open MPI's treematch where it acts), each computed from where
// every role runs (role q on the process of new rank q), with the bytes inside nodes by GPU link,
// the call's time and the time of the partition + QAP alone (rank 0, median of 5). The goals:
// Ferry's cut within 1.1x of the best blocks, and at least 2x (periodic) / 3x (not) below the
// scrambled one. --check exits 1 when one is missed; --json FILE writes the numbers.
//
//   mpiexec -n 64 --oversubscribe -x FERRY_TOPOLOGY=4x16 build/release/bench/bench_reorder --check
//
// The halo library's own before/after bytes belong here too once it is merged (branch `halo`).
#include <ferry/place.hpp>
#include <ferry/transport.hpp>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using ferry::place::i64;

struct Grid {
  std::array<int, 3> dims{};
  bool periodic = false;
  int cells() const { return dims[0] * dims[1] * dims[2]; }
  int index(const std::array<int, 3>& c) const { return c[0] + dims[0] * (c[1] + dims[1] * c[2]); }
  std::array<int, 3> coords(int i) const { return {i % dims[0], i / dims[0] % dims[1], i / dims[0] / dims[1]}; }
};

struct Edge {
  int src, dst;
  i64 bytes;
};

// Natural cell -> its 26 neighbours with the halo bytes each receives from the cell.
std::vector<Edge> grid_edges(const Grid& g) {
  const i64 n = 256, r = 3, cell = 8 * 8;
  const i64 bytes[4] = {0, n * n * r * cell, n * r * r * cell, r * r * r * cell};
  std::vector<Edge> e;
  for (int i = 0; i < g.cells(); ++i)
    for (int k = 0; k < ferry::place::kDirections; ++k) {
      const auto d = ferry::place::direction(k);
      std::array<int, 3> c = g.coords(i);
      bool inside = true;
      for (int a = 0; a < 3; ++a) {
        c[a] += d[a];
        if (c[a] >= 0 && c[a] < g.dims[a]) continue;
        if (!g.periodic) inside = false;
        c[a] = (c[a] + g.dims[a]) % g.dims[a];
      }
      const int j = g.index(c);
      if (inside && j != i) e.push_back({i, j, bytes[std::abs(d[0]) + std::abs(d[1]) + std::abs(d[2])]});
    }
  return e;
}

// Bytes by link when vertex v runs on world rank at[v].
ferry::place::Traffic traffic(const std::vector<Edge>& edges, const std::vector<int>& at,
                              const ferry::place::Matrix& gpu_cost) {
  const auto& t = ferry::transport::world();
  std::vector<int> node(at.size()), gpu(at.size());
  for (std::size_t v = 0; v < at.size(); ++v) {
    node[v] = t.place(at[v]).node;
    gpu[v] = gpu_cost.empty() ? 0 : std::max(0, t.place(at[v]).gpu);
  }
  std::vector<ferry::place::Flow> flows;
  for (const Edge& e : edges) flows.push_back({e.src, e.dst, e.bytes});
  return ferry::place::traffic(flows, node, gpu, gpu_cost);
}

// The least inter-node bytes of blocks of the grid, each one node's ranks (equal nodes only): the
// best layout a person would write by hand. -1 where nodes differ in size or no shape fits.
i64 best_blocks(const Grid& g, const std::vector<Edge>& natural_edges, int nodes) {
  const int per = g.cells() / nodes;
  if (per * nodes != g.cells()) return -1;
  i64 best = -1;
  for (int bx = 1; bx <= g.dims[0]; ++bx)
    for (int by = 1; by <= g.dims[1]; ++by) {
      if (per % (bx * by) != 0) continue;
      const int bz = per / (bx * by);
      if (g.dims[0] % bx || g.dims[1] % by || bz > g.dims[2] || g.dims[2] % bz) continue;
      auto block = [&](int i) {
        const auto c = g.coords(i);
        return c[0] / bx + g.dims[0] / bx * (c[1] / by + g.dims[1] / by * (c[2] / bz));
      };
      i64 cut = 0;
      for (const Edge& e : natural_edges) cut += block(e.src) != block(e.dst) ? e.bytes : 0;
      if (best < 0 || cut < best) best = cut;
    }
  return best;
}

// The world rank each rank of c runs on.
std::vector<int> world_of(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
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

std::string links(const ferry::place::Traffic& t) {
  std::string s = "same GPU " + std::to_string(t.same_gpu);
  for (const auto& c : t.intra_node) s += ", other GPU " + std::to_string(c.bytes);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  bool check = false;
  const char* json = nullptr;
  unsigned seed = 16;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--check")) check = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = static_cast<unsigned>(std::stoul(argv[++i]));
  }
  if (!ferry::transport::initialized()) {
    if (rank == 0) std::fprintf(stderr, "bench_reorder: run it through Ferry's interposer\n");
    MPI_Finalize();
    return 2;
  }
  const auto& topo = ferry::transport::world();
  // The GPU cost matrix the interposer sees (uniform links unless FERRY_BANDWIDTH says otherwise).
  int gpus = 0;
  bool gpus_known = true;
  for (int r = 0; r < size; ++r) gpus_known = gpus_known && topo.place(r).gpu >= 0, gpus = std::max(gpus, topo.place(r).gpu + 1);
  ferry::place::Matrix gpu_cost;
  if (gpus_known && gpus > 0) {
    ferry::place::Matrix bw(gpus);
    for (int i = 0; i < gpus; ++i)
      for (int j = 0; j < gpus; ++j) bw(i, j) = i == j ? 0 : topo.bandwidth().at(i, j) * 1e9;
    gpu_cost = ferry::place::cost_from_bandwidth(bw);
  }
  if (rank == 0) std::printf("bench_reorder: %s; seed %u\n", topo.describe().c_str(), seed);

  bool met = true;
  std::string out = "[";
  for (bool periodic : {true, false}) {
    Grid g;
    g.periodic = periodic;
    int dims[3] = {0, 0, 0};
    MPI_Dims_create(size, 3, dims);
    g.dims = {dims[0], dims[1], dims[2]};
    const std::vector<Edge> natural = grid_edges(g);
    // Vertex label[i] is natural cell i: the application's roles, scrambled over the ranks.
    std::vector<int> label(size);
    std::iota(label.begin(), label.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(label.begin(), label.end(), rng);
    std::vector<Edge> edges;
    for (const Edge& e : natural) edges.push_back({label[e.src], label[e.dst], e.bytes});
    std::vector<int> src, sw, dst, dw;  // this rank's role: vertex `rank`
    for (const Edge& e : edges) {
      if (e.dst == rank) src.push_back(e.src), sw.push_back(static_cast<int>(e.bytes / 64));
      if (e.src == rank) dst.push_back(e.dst), dw.push_back(static_cast<int>(e.bytes / 64));
    }
    // Weights in cells (bytes / 64) keep them in int; the cut is reported in bytes.
    auto create = [&](bool through_ferry, double* seconds) {
      MPI_Comm c;
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      const int rc = (through_ferry ? MPI_Dist_graph_create_adjacent : PMPI_Dist_graph_create_adjacent)(
          MPI_COMM_WORLD, static_cast<int>(src.size()), src.data(), sw.data(), static_cast<int>(dst.size()),
          dst.data(), dw.data(), MPI_INFO_NULL, 1, &c);
      double t = MPI_Wtime() - t0;
      MPI_Allreduce(&t, seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (rc != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
      std::vector<int> at = world_of(c);
      MPI_Comm_free(&c);
      return at;
    };
    double t_ferry = 0, t_mpi = 0;
    std::vector<int> identity(size);
    std::iota(identity.begin(), identity.end(), 0);
    const std::vector<int> at_ferry = create(true, &t_ferry);
    const std::vector<int> at_mpi = create(false, &t_mpi);
    // Partition + QAP alone, as the interposer runs it (rank 0, in process).
    double t_place = 0;
    if (rank == 0) {
      std::vector<ferry::place::Flow> flows;
      for (const Edge& e : edges) flows.push_back({e.src, e.dst, e.bytes / 64});
      const ferry::place::Graph graph = ferry::place::graph_from_flows(size, flows);
      std::vector<ferry::place::Slot> slots(size);
      for (int r = 0; r < size; ++r) slots[r] = {topo.place(r).node, gpu_cost.empty() ? 0 : topo.place(r).gpu};
      std::vector<double> ms;
      for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        (void)ferry::place::reorder(graph, slots, gpu_cost);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      t_place = ms[2];
    }
    const auto before = traffic(edges, identity, gpu_cost), after = traffic(edges, at_ferry, gpu_cost),
               mpi = traffic(edges, at_mpi, gpu_cost);
    const i64 blocks = best_blocks(g, natural, topo.nodes());
    const double vs_blocks = blocks > 0 ? double(after.inter_node) / double(blocks) : 0;
    const double vs_scrambled = after.inter_node > 0 ? double(before.inter_node) / double(after.inter_node) : 0;
    const double need = periodic ? 2.0 : 3.0;
    const bool goal_blocks = blocks < 0 || after.inter_node <= 1.1 * double(blocks);
    const bool goal_scrambled = after.inter_node == 0 || vs_scrambled >= need;
    met = met && goal_blocks && goal_scrambled;
    if (rank == 0) {
      std::printf("%dx%dx%d %s, inter-node bytes:\n", g.dims[0], g.dims[1], g.dims[2],
                  periodic ? "periodic" : "not periodic");
      std::printf("  scrambled     %14lld   (%s)\n", static_cast<long long>(before.inter_node), links(before).c_str());
      std::printf("  best blocks   %14lld\n", static_cast<long long>(blocks));
      std::printf("  Ferry         %14lld   (%s)  %.2fx the blocks, %.2fx below scrambled: goals %s, %s\n",
                  static_cast<long long>(after.inter_node), links(after).c_str(), vs_blocks, vs_scrambled,
                  goal_blocks ? "met" : "MISSED", goal_scrambled ? "met" : "MISSED");
      std::printf("  MPI's own     %14lld   (%s)%s\n", static_cast<long long>(mpi.inter_node), links(mpi).c_str(),
                  at_mpi == identity ? "  [did not reorder]" : "");
      std::printf("  time: MPI_Dist_graph_create_adjacent %.2f ms through Ferry, %.2f ms the MPI's; "
                  "partition + QAP %.2f ms\n",
                  t_ferry * 1e3, t_mpi * 1e3, t_place);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s{\"grid\":[%d,%d,%d],\"periodic\":%s,\"ranks\":%d,\"nodes\":%d,\"scrambled\":%lld,"
                    "\"best_blocks\":%lld,\"ferry\":%lld,\"mpi_own\":%lld,\"mpi_reordered\":%s,"
                    "\"call_ms\":%.3f,\"mpi_call_ms\":%.3f,\"place_ms\":%.3f,\"goals_met\":%s}",
                    out.size() > 1 ? "," : "", g.dims[0], g.dims[1], g.dims[2], periodic ? "true" : "false",
                    size, topo.nodes(), static_cast<long long>(before.inter_node),
                    static_cast<long long>(blocks), static_cast<long long>(after.inter_node),
                    static_cast<long long>(mpi.inter_node), at_mpi == identity ? "false" : "true",
                    t_ferry * 1e3, t_mpi * 1e3, t_place, goal_blocks && goal_scrambled ? "true" : "false");
      out += buf;
    }
  }
  out += "]\n";
  if (rank == 0) {
    std::printf("halo library: not in this build (branch halo not merged); its before/after bytes skipped\n");
    if (json) {
      if (FILE* f = std::fopen(json, "w")) std::fputs(out.c_str(), f), std::fclose(f);
    }
  }
  MPI_Finalize();
  return check && !met ? 1 : 0;
}
