// Locality-aware aggregation of the persistent neighbourhood collectives (issue 16), on the
// simulated topology (FERRY_TOPOLOGY=4x2: 8 ranks on 4 nodes) and on host buffers that take Ferry's
// messages (FERRY_PROTOCOL_TEST). A sparse irregular graph (fixed seeds, each rank 6 random
// destinations, 64 to 1,024 ints a block, some blocks empty) is exchanged with the persistent
// neighbour alltoallv and alltoallw, started twice with new data: every int of every block must
// arrive where the standard puts it, gaps untouched, and the messages that cross nodes must be
// one per ordered pair of nodes that exchange data (FERRY_AGGREGATE=on or auto, which this pattern
// pays for), or one per crossing block (FERRY_AGGREGATE=off).
#include <gtest/gtest.h>
#include <mpi.h>

#include <ferry/ferry_mpi.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#if MPI_VERSION >= 4 || defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
namespace {

#if MPI_VERSION >= 4
const auto alltoallv_init = MPI_Neighbor_alltoallv_init;
const auto alltoallw_init = MPI_Neighbor_alltoallw_init;
#else
const auto alltoallv_init = MPIX_Neighbor_alltoallv_init;
const auto alltoallw_init = MPIX_Neighbor_alltoallw_init;
#endif

struct Edge {
  int s, d, ints;
};

// The same graph at every rank: each rank 6 distinct destinations (not itself), block sizes from
// 64 to 1,024 ints, every seventh block empty.
std::vector<Edge> graph(unsigned seed, int n) {
  std::mt19937 rng(seed);
  std::vector<Edge> e;
  for (int s = 0; s < n; ++s) {
    std::vector<int> others;
    for (int d = 0; d < n; ++d)
      if (d != s) others.push_back(d);
    std::shuffle(others.begin(), others.end(), rng);
    for (int k = 0; k < 6 && k < static_cast<int>(others.size()); ++k) {
      const int ints = static_cast<int>(e.size()) % 7 == 3 ? 0 : 64 + static_cast<int>(rng() % 961);
      e.push_back({s, others[static_cast<std::size_t>(k)], ints});
    }
  }
  return e;
}

// The value of int i of the block edge q carries at start `start`.
int value(int q, int i, int start) { return 1000000 * (start + 1) + 1000 * q + i; }

int node_of(int rank, int n) { return rank * 4 / n; }  // FERRY_TOPOLOGY=4x2's blocks

TEST(NeighborsAggregate, SparseGraphOnePerNodePair) {
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* mode_env = std::getenv("FERRY_AGGREGATE");
  const std::string mode = mode_env ? mode_env : "auto";
  for (unsigned seed : {3u, 11u}) {
    const std::vector<Edge> edges = graph(seed, n);
    std::vector<int> out, in, out_q, in_q;  // neighbours, and the edge each block is
    for (int q = 0; q < static_cast<int>(edges.size()); ++q) {
      const Edge& e = edges[static_cast<std::size_t>(q)];
      if (e.s == me) out.push_back(e.d), out_q.push_back(q);
      if (e.d == me) in.push_back(e.s), in_q.push_back(q);
    }
    MPI_Comm g;
    ASSERT_EQ(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, static_cast<int>(in.size()), in.data(), MPI_UNWEIGHTED,
                                             static_cast<int>(out.size()), out.data(), MPI_UNWEIGHTED, MPI_INFO_NULL,
                                             0, &g),
              MPI_SUCCESS);
    // The crossing messages the collective must send, over all ranks: one per ordered pair of
    // nodes with data, or one per non-empty crossing block.
    std::set<std::pair<int, int>> node_pairs;
    long crossing_blocks = 0;
    for (const Edge& e : edges)
      if (e.ints > 0 && node_of(e.s, n) != node_of(e.d, n)) {
        node_pairs.insert({node_of(e.s, n), node_of(e.d, n)});
        ++crossing_blocks;
      }
    const long want_crossings = mode == "off" ? crossing_blocks : static_cast<long>(node_pairs.size());
    EXPECT_LE(node_pairs.size(), 12u);

    // Send blocks one after another with a gap of 3 ints; receive blocks in reverse order, gap 5.
    std::vector<int> scounts, sdispls, rcounts, rdispls;
    int stotal = 0, rtotal = 0;
    for (int q : out_q) {
      scounts.push_back(edges[static_cast<std::size_t>(q)].ints);
      sdispls.push_back(stotal);
      stotal += scounts.back() + 3;
    }
    for (std::size_t j = in_q.size(); j-- > 0;) {
      rcounts.insert(rcounts.begin(), edges[static_cast<std::size_t>(in_q[j])].ints);
      rdispls.insert(rdispls.begin(), rtotal);
      rtotal += rcounts.front() + 5;
    }
    std::vector<MPI_Aint> sbytes, rbytes;
    for (int d : sdispls) sbytes.push_back(static_cast<MPI_Aint>(d) * 4);
    for (int d : rdispls) rbytes.push_back(static_cast<MPI_Aint>(d) * 4);
    std::vector<MPI_Datatype> stypes(out_q.size() + 1, MPI_INT), rtypes(in_q.size() + 1, MPI_INT);
    std::vector<int> send(static_cast<std::size_t>(stotal) + 1), recv(static_cast<std::size_t>(rtotal) + 1);

    for (const bool w : {false, true}) {
      const std::string what = std::string(w ? "alltoallw" : "alltoallv") + ", seed " + std::to_string(seed);
      MPI_Request r = MPI_REQUEST_NULL;
      if (w) {
        ASSERT_EQ(alltoallw_init(send.data(), scounts.data(), sbytes.data(), stypes.data(), recv.data(),
                                 rcounts.data(), rbytes.data(), rtypes.data(), g, MPI_INFO_NULL, &r),
                  MPI_SUCCESS) << what;
      } else {
        ASSERT_EQ(alltoallv_init(send.data(), scounts.data(), sdispls.data(), MPI_INT, recv.data(), rcounts.data(),
                                 rdispls.data(), MPI_INT, g, MPI_INFO_NULL, &r),
                  MPI_SUCCESS) << what;
      }
      for (int start = 0; start < 2; ++start) {
        std::fill(send.begin(), send.end(), -7);
        for (std::size_t i = 0; i < out_q.size(); ++i)
          for (int k = 0; k < scounts[i]; ++k) send[static_cast<std::size_t>(sdispls[i] + k)] = value(out_q[i], k, start);
        std::fill(recv.begin(), recv.end(), -1);
        const long before = ferry_mpi_collective_crossings();
        ASSERT_EQ(MPI_Start(&r), MPI_SUCCESS) << what;
        ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS) << what;
        long mine = ferry_mpi_collective_crossings() - before, all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        EXPECT_EQ(all, want_crossings) << what << ", start " << start << ": messages between nodes";
        std::vector<int> want(recv.size(), -1);
        for (std::size_t j = 0; j < in_q.size(); ++j)
          for (int k = 0; k < rcounts[j]; ++k) want[static_cast<std::size_t>(rdispls[j] + k)] = value(in_q[j], k, start);
        std::size_t wrong = 0, first = recv.size();
        for (std::size_t i = 0; i < recv.size(); ++i)
          if (recv[i] != want[i]) ++wrong, first = std::min(first, i);
        EXPECT_EQ(wrong, 0u) << what << ", start " << start << ": first wrong int " << first;
      }
      ASSERT_EQ(MPI_Request_free(&r), MPI_SUCCESS);
    }
    MPI_Comm_free(&g);
  }
}

}  // namespace
#endif
