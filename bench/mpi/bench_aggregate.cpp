// Issue 16's aggregation goal through the interposer: N ranks on the simulated topology
// (FERRY_TOPOLOGY), each sending fp64 blocks to 20 random other ranks (fixed seed; 256 B to 4 KiB
// each), every element one of the sender's --values values chosen at random, so blocks to one node
// repeat values. The persistent MPI_Neighbor_alltoallv runs three ways on the same buffers: direct
// (FERRY_AGGREGATE=off), aggregated (=on), and aggregated with the values named
// (ferry_mpi_neighbor_alltoallv_init_ids). For each it prints the messages and bytes that cross
// nodes per start (all ranks), against what the goal asks: one message per ordered pair of nodes
// that exchange data (at most 12 on 4 nodes), the blocks' bytes, and with ids only each rank's
// distinct values per node (the duplicate fraction cut); every start's result is checked against
// the standard's. Times per start (slowest rank, median) are printed too; on an oversubscribed CPU
// they say little. --check exits 1 when a count or a byte is wrong; --json FILE writes the numbers.
//
//   mpiexec -n 64 --oversubscribe -x FERRY_TOPOLOGY=4x16 -x FERRY_PROTOCOL_TEST=1 build/cpu/bench/bench_aggregate --check
//
// (FERRY_PROTOCOL_TEST=1: host buffers take Ferry's messages, as GPU buffers do.)
#include <ferry/ferry_mpi.h>
#include <mpi.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#if MPI_VERSION >= 4
#define FERRY_BENCH_INIT MPI_Neighbor_alltoallv_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define FERRY_BENCH_INIT MPIX_Neighbor_alltoallv_init
#endif

namespace {

struct Edge {
  int s, d;
  std::vector<long long> ids;
};

double value(int s, long long id, int start) { return 1e6 * (start + 1) + 1e3 * s + static_cast<double>(id); }

struct Result {
  std::string mode;
  long messages = 0, bytes = 0;
  double us = 0;
  bool correct = true;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int neighbours = 20, values = 1024, reps = 20;
  bool check = false;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check") check = true;
    else if (a == "--json" && i + 1 < argc) json = argv[++i];
    else if (a == "--neighbours" && i + 1 < argc) neighbours = std::atoi(argv[++i]);
    else if (a == "--values" && i + 1 < argc) values = std::max(1, std::atoi(argv[++i]));
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
  }
#ifndef FERRY_BENCH_INIT
  if (me == 0) std::printf("bench_aggregate: the MPI has no persistent neighbourhood collectives\n");
  MPI_Finalize();
  return 0;
#else
  const char* topo = std::getenv("FERRY_TOPOLOGY");
  const int nodes = topo ? std::max(1, std::atoi(topo)) : 1;
  auto node_of = [&](int r) { return r * nodes / n; };
  // The same graph at every rank.
  std::mt19937 rng(2026);
  std::vector<Edge> edges;
  for (int s = 0; s < n; ++s) {
    std::vector<int> others;
    for (int d = 0; d < n; ++d)
      if (d != s) others.push_back(d);
    std::shuffle(others.begin(), others.end(), rng);
    for (int k = 0; k < neighbours && k < static_cast<int>(others.size()); ++k) {
      Edge e{s, others[static_cast<std::size_t>(k)], {}};
      const int elems = 32 + static_cast<int>(rng() % 481);  // 256 B to 4 KiB of fp64
      for (int x = 0; x < elems; ++x) e.ids.push_back(static_cast<long long>(rng() % static_cast<unsigned>(values)));
      edges.push_back(std::move(e));
    }
  }
  std::set<std::pair<int, int>> node_pairs;
  std::set<std::tuple<int, int, long long>> distinct;
  long block_bytes = 0;
  for (const Edge& e : edges) {
    if (node_of(e.s) == node_of(e.d)) continue;
    node_pairs.insert({node_of(e.s), node_of(e.d)});
    block_bytes += 8L * static_cast<long>(e.ids.size());
    for (long long v : e.ids) distinct.insert({e.s, node_of(e.d), v});
  }
  const long unique_bytes = 8L * static_cast<long>(distinct.size());

  std::vector<int> out, in, scounts, sdispls, rcounts, rdispls;
  std::vector<std::size_t> out_q, in_q;
  for (std::size_t q = 0; q < edges.size(); ++q) {
    if (edges[q].s == me) out.push_back(edges[q].d), out_q.push_back(q);
    if (edges[q].d == me) in.push_back(edges[q].s), in_q.push_back(q);
  }
  int stotal = 0, rtotal = 0;
  for (std::size_t q : out_q) {
    scounts.push_back(static_cast<int>(edges[q].ids.size()));
    sdispls.push_back(stotal);
    stotal += scounts.back();
  }
  for (std::size_t q : in_q) {
    rcounts.push_back(static_cast<int>(edges[q].ids.size()));
    rdispls.push_back(rtotal);
    rtotal += rcounts.back();
  }
  std::vector<long long> sendids;
  for (std::size_t q : out_q) sendids.insert(sendids.end(), edges[q].ids.begin(), edges[q].ids.end());
  std::vector<double> send(static_cast<std::size_t>(stotal) + 1), recv(static_cast<std::size_t>(rtotal) + 1);
  MPI_Comm g;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, static_cast<int>(in.size()), in.data(), MPI_UNWEIGHTED,
                                 static_cast<int>(out.size()), out.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g);

  std::vector<Result> results;
  for (const std::string mode : {"direct", "aggregated", "aggregated + ids"}) {
    setenv("FERRY_AGGREGATE", mode == "direct" ? "off" : "on", 1);
    MPI_Request r = MPI_REQUEST_NULL;
    if (mode == "aggregated + ids")
      ferry_mpi_neighbor_alltoallv_init_ids(send.data(), scounts.data(), sdispls.data(), sendids.data(), MPI_DOUBLE,
                                            recv.data(), rcounts.data(), rdispls.data(), MPI_DOUBLE, g, MPI_INFO_NULL,
                                            &r);
    else
      FERRY_BENCH_INIT(send.data(), scounts.data(), sdispls.data(), MPI_DOUBLE, recv.data(), rcounts.data(),
                       rdispls.data(), MPI_DOUBLE, g, MPI_INFO_NULL, &r);
    Result res{mode};
    std::vector<double> times;
    for (int start = 0; start < reps + 2; ++start) {
      std::size_t at = 0;
      for (std::size_t q : out_q)
        for (long long id : edges[q].ids) send[at++] = value(me, id, start);
      std::fill(recv.begin(), recv.end(), -1.0);
      const long before[2] = {ferry_mpi_collective_crossings(), ferry_mpi_collective_crossing_bytes()};
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Start(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      double t = MPI_Wtime() - t0, slowest = 0;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (start >= 2) times.push_back(slowest * 1e6);
      long mine[2] = {ferry_mpi_collective_crossings() - before[0], ferry_mpi_collective_crossing_bytes() - before[1]},
           all[2] = {0, 0};
      MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      res.messages = all[0];
      res.bytes = all[1];
      int ok = 1, every = 0;
      at = 0;
      for (std::size_t j = 0; j < in_q.size(); ++j)
        for (long long id : edges[in_q[j]].ids) ok = ok && recv[at++] == value(edges[in_q[j]].s, id, start);
      MPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      res.correct = res.correct && every == 1;
    }
    MPI_Request_free(&r);
    std::sort(times.begin(), times.end());
    res.us = times[times.size() / 2];
    results.push_back(res);
  }
  MPI_Comm_free(&g);

  bool good = node_pairs.size() <= 12 || nodes > 4;
  for (const Result& r : results) {
    const long want_messages = r.mode == "direct" ? -1 : static_cast<long>(node_pairs.size());
    const long want_bytes = r.mode == "aggregated + ids" ? unique_bytes : block_bytes;
    good = good && r.correct && r.bytes == want_bytes && (want_messages < 0 || r.messages == want_messages);
  }
  if (me == 0) {
    std::printf("bench_aggregate: %d ranks on %d simulated nodes, %d neighbours each, 256 B-4 KiB blocks, %d values a "
                "rank; %zu ordered node pairs exchange data\n",
                n, nodes, std::min(neighbours, n - 1), values, node_pairs.size());
    std::printf("crossing blocks' bytes %ld; distinct values per (rank, node) %ld bytes: duplicate fraction %.3f\n",
                block_bytes, unique_bytes, 1.0 - static_cast<double>(unique_bytes) / static_cast<double>(block_bytes));
    std::printf("%-18s %12s %14s %10s %14s\n", "mode", "messages", "bytes", "correct", "us/start");
    for (const Result& r : results)
      std::printf("%-18s %12ld %14ld %10s %14.1f\n", r.mode.c_str(), r.messages, r.bytes, r.correct ? "yes" : "NO",
                  r.us);
    std::printf("goal (one message per node pair, same bytes, ids cut the duplicate fraction): %s\n",
                good ? "met" : "MISSED");
    if (json) {
      nlohmann::json j = {{"ranks", n},           {"nodes", nodes},
                          {"neighbours", neighbours}, {"values", values},
                          {"node_pairs", node_pairs.size()}, {"block_bytes", block_bytes},
                          {"unique_bytes", unique_bytes}, {"goal_met", good}};
      for (const Result& r : results)
        j["modes"].push_back(
            {{"mode", r.mode}, {"messages", r.messages}, {"bytes", r.bytes}, {"correct", r.correct}, {"us", r.us}});
      if (FILE* f = std::fopen(json, "w")) std::fputs((j.dump(1) + "\n").c_str(), f), std::fclose(f);
    }
  }
  MPI_Finalize();
  return check && !good ? 1 : 0;
#endif
}
