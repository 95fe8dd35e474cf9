// Locality-aware aggregation of the persistent neighbourhood collectives (issue 16), on the
// simulated topology (FERRY_TOPOLOGY=4x2: 8 ranks on 4 nodes; the GPU build: 2x2, 4 ranks on one
// GPU, FERRY_AGGREGATE_DEVICE) on host buffers that take Ferry's messages (FERRY_PROTOCOL_TEST), or in the GPU build on
// device buffers. A sparse irregular graph (fixed seeds, each rank 6 random destinations, 64 to
// 1,024 ints a block, some blocks empty) is exchanged with the persistent neighbour alltoallv and
// alltoallw, started twice with new data: every int of every block must arrive where the standard
// puts it, gaps untouched, and the messages that cross nodes must be one per ordered pair of nodes
// that exchange data (FERRY_AGGREGATE=on or auto, which this pattern pays for), or one per crossing
// block (FERRY_AGGREGATE=off).
#include <gtest/gtest.h>
#include <mpi.h>

#include <ferry/ferry_mpi.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#ifdef FERRY_AGGREGATE_DEVICE
#include "gpu_test_util.hpp"
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

// The simulated node of a rank: FERRY_TOPOLOGY=NxM's blocks of M ranks.
int node_of(int rank, int n) {
  const char* t = std::getenv("FERRY_TOPOLOGY");
  const int nodes = t ? std::max(1, std::atoi(t)) : 1;
  return rank * nodes / n;
}

// The ints of a buffer, in device memory in the GPU build: filled and read on the host, moved
// to the device before a start and back after its wait.
class Ints {
 public:
  explicit Ints(std::size_t n, int fill) : host_(n, fill) {
#ifdef FERRY_AGGREGATE_DEVICE
    cudaMalloc(&dev_, n * sizeof(int));
#endif
  }
  ~Ints() {
#ifdef FERRY_AGGREGATE_DEVICE
    cudaFree(dev_);
#endif
  }
  Ints(const Ints&) = delete;
  Ints& operator=(const Ints&) = delete;
  std::vector<int>& host() { return host_; }
  int* data() { return dev_ ? dev_ : host_.data(); }  // what the collective is given
  void to_device() {
#ifdef FERRY_AGGREGATE_DEVICE
    ferry_test::upload(dev_, host_.data(), host_.size() * sizeof(int));
#endif
  }
  void to_host() {
#ifdef FERRY_AGGREGATE_DEVICE
    cudaMemcpy(host_.data(), dev_, host_.size() * sizeof(int), cudaMemcpyDeviceToHost);
#endif
  }

 private:
  std::vector<int> host_;
  int* dev_ = nullptr;
};

// This rank's part of the graph: its neighbours, the edge each block is, a dist graph of them,
// and the blocks' layout (send blocks one after another with a gap of 3 ints; receive blocks in
// reverse order, gap 5).
struct Part {
  std::vector<int> out, in, out_q, in_q, scounts, sdispls, rcounts, rdispls;
  int stotal = 0, rtotal = 0;
  MPI_Comm comm = MPI_COMM_NULL;
};
Part part_of(const std::vector<Edge>& edges, int me) {
  Part p;
  for (int q = 0; q < static_cast<int>(edges.size()); ++q) {
    const Edge& e = edges[static_cast<std::size_t>(q)];
    if (e.s == me) p.out.push_back(e.d), p.out_q.push_back(q);
    if (e.d == me) p.in.push_back(e.s), p.in_q.push_back(q);
  }
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, static_cast<int>(p.in.size()), p.in.data(), MPI_UNWEIGHTED,
                                 static_cast<int>(p.out.size()), p.out.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                 &p.comm);
  for (int q : p.out_q) {
    p.scounts.push_back(edges[static_cast<std::size_t>(q)].ints);
    p.sdispls.push_back(p.stotal);
    p.stotal += p.scounts.back() + 3;
  }
  for (std::size_t j = p.in_q.size(); j-- > 0;) {
    p.rcounts.insert(p.rcounts.begin(), edges[static_cast<std::size_t>(p.in_q[j])].ints);
    p.rdispls.insert(p.rdispls.begin(), p.rtotal);
    p.rtotal += p.rcounts.front() + 5;
  }
  return p;
}

TEST(NeighborsAggregate, SparseGraphOnePerNodePair) {
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* mode_env = std::getenv("FERRY_AGGREGATE");
  const std::string mode = mode_env ? mode_env : "auto";
  for (unsigned seed : {3u, 11u}) {
    const std::vector<Edge> edges = graph(seed, n);
    const Part pt = part_of(edges, me);
    ASSERT_NE(pt.comm, MPI_COMM_NULL);
    const auto& [out, in, out_q, in_q, scounts, sdispls, rcounts, rdispls, stotal, rtotal, g_] = pt;
    MPI_Comm g = g_;
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

    std::vector<MPI_Aint> sbytes, rbytes;
    for (int d : sdispls) sbytes.push_back(static_cast<MPI_Aint>(d) * 4);
    for (int d : rdispls) rbytes.push_back(static_cast<MPI_Aint>(d) * 4);
    std::vector<MPI_Datatype> stypes(out_q.size() + 1, MPI_INT), rtypes(in_q.size() + 1, MPI_INT);
    Ints send_buf(static_cast<std::size_t>(stotal) + 1, 0), recv_buf(static_cast<std::size_t>(rtotal) + 1, 0);
    std::vector<int>&send = send_buf.host(), &recv = recv_buf.host();

    for (const bool w : {false, true}) {
      const std::string what = std::string(w ? "alltoallw" : "alltoallv") + ", seed " + std::to_string(seed);
      MPI_Request r = MPI_REQUEST_NULL;
      if (w) {
        ASSERT_EQ(alltoallw_init(send_buf.data(), scounts.data(), sbytes.data(), stypes.data(), recv_buf.data(),
                                 rcounts.data(), rbytes.data(), rtypes.data(), g, MPI_INFO_NULL, &r),
                  MPI_SUCCESS) << what;
      } else {
        ASSERT_EQ(alltoallv_init(send_buf.data(), scounts.data(), sdispls.data(), MPI_INT, recv_buf.data(), rcounts.data(),
                                 rdispls.data(), MPI_INT, g, MPI_INFO_NULL, &r),
                  MPI_SUCCESS) << what;
      }
      for (int start = 0; start < 2; ++start) {
        std::fill(send.begin(), send.end(), -7);
        for (std::size_t i = 0; i < out_q.size(); ++i)
          for (int k = 0; k < scounts[i]; ++k) send[static_cast<std::size_t>(sdispls[i] + k)] = value(out_q[i], k, start);
        std::fill(recv.begin(), recv.end(), -1);
        send_buf.to_device();
        recv_buf.to_device();
        const long before = ferry_mpi_collective_crossings();
        ASSERT_EQ(MPI_Start(&r), MPI_SUCCESS) << what;
        ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS) << what;
        recv_buf.to_host();
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

// De-duplication (ferry_mpi_neighbor_alltoallv_init_ids): each rank owns 200 values (id v, the
// value names its rank, v and the start); every element of a block is a random one of them, so
// blocks to one node repeat values, inside a block and across its processes. Every int must arrive
// where MPI_Neighbor_alltoallv puts it; with aggregation the bytes that cross nodes must be each
// rank's distinct values per node, once (the duplicate fraction cut), in one message per pair of
// nodes; without (FERRY_AGGREGATE=off) every block's bytes, one message each.
int owned(int s, int v, int start) { return 1000000 * (start + 1) + 1000 * s + v; }

TEST(NeighborsAggregate, DuplicatesCrossOnce) {
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char* mode_env = std::getenv("FERRY_AGGREGATE");
  const bool aggregated = !(mode_env && std::string(mode_env) == "off");
  const unsigned seed = 5;
  const std::vector<Edge> edges = graph(seed, n);
  std::vector<std::vector<int>> ids(edges.size());  // per edge, the id of each element
  for (std::size_t q = 0; q < edges.size(); ++q) {
    std::mt19937 rng(seed * 7919u + static_cast<unsigned>(q));
    for (int k = 0; k < edges[q].ints; ++k) ids[q].push_back(static_cast<int>(rng() % 200));
  }
  const Part pt = part_of(edges, me);
  ASSERT_NE(pt.comm, MPI_COMM_NULL);
  const auto& [out, in, out_q, in_q, scounts, sdispls, rcounts, rdispls, stotal, rtotal, g_] = pt;
  MPI_Comm g = g_;
  // What must cross, over all ranks: distinct values per (rank, other node), or every block.
  std::set<std::pair<int, int>> node_pairs;
  std::set<std::tuple<int, int, int>> distinct;  // (source, node, id)
  long blocks = 0, block_bytes = 0;
  for (std::size_t q = 0; q < edges.size(); ++q) {
    const Edge& e = edges[q];
    if (e.ints == 0 || node_of(e.s, n) == node_of(e.d, n)) continue;
    node_pairs.insert({node_of(e.s, n), node_of(e.d, n)});
    ++blocks;
    block_bytes += 4L * e.ints;
    for (int v : ids[q]) distinct.insert({e.s, node_of(e.d, n), v});
  }
  const long want_bytes = aggregated ? 4L * static_cast<long>(distinct.size()) : block_bytes;
  const long want_messages = aggregated ? static_cast<long>(node_pairs.size()) : blocks;
  EXPECT_LT(4L * static_cast<long>(distinct.size()), block_bytes / 2) << "the pattern repeats values";

  std::vector<long long> sendids(static_cast<std::size_t>(stotal) + 1, -1);
  for (std::size_t i = 0; i < out_q.size(); ++i)
    for (int k = 0; k < scounts[i]; ++k)
      sendids[static_cast<std::size_t>(sdispls[i] + k)] = ids[static_cast<std::size_t>(out_q[i])][static_cast<std::size_t>(k)];
  Ints send_buf(static_cast<std::size_t>(stotal) + 1, 0), recv_buf(static_cast<std::size_t>(rtotal) + 1, 0);
  std::vector<int>&send = send_buf.host(), &recv = recv_buf.host();
  MPI_Request r = MPI_REQUEST_NULL;
  ASSERT_EQ(ferry_mpi_neighbor_alltoallv_init_ids(send_buf.data(), scounts.data(), sdispls.data(), sendids.data(), MPI_INT,
                                                  recv_buf.data(), rcounts.data(), rdispls.data(), MPI_INT, g, MPI_INFO_NULL,
                                                  &r),
            MPI_SUCCESS);
  std::fill(sendids.begin(), sendids.end(), -2);  // read at the init only
  for (int start = 0; start < 2; ++start) {
    std::fill(send.begin(), send.end(), -7);
    for (std::size_t i = 0; i < out_q.size(); ++i)
      for (int k = 0; k < scounts[i]; ++k)
        send[static_cast<std::size_t>(sdispls[i] + k)] =
            owned(me, ids[static_cast<std::size_t>(out_q[i])][static_cast<std::size_t>(k)], start);
    std::fill(recv.begin(), recv.end(), -1);
    send_buf.to_device();
    recv_buf.to_device();
    const long before[2] = {ferry_mpi_collective_crossings(), ferry_mpi_collective_crossing_bytes()};
    ASSERT_EQ(MPI_Start(&r), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    recv_buf.to_host();
    long mine[2] = {ferry_mpi_collective_crossings() - before[0], ferry_mpi_collective_crossing_bytes() - before[1]},
         all[2] = {0, 0};
    MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(all[0], want_messages) << "start " << start << ": messages between nodes";
    EXPECT_EQ(all[1], want_bytes) << "start " << start << ": bytes between nodes (" << block_bytes
                                  << " without de-duplication)";
    std::vector<int> want(recv.size(), -1);
    for (std::size_t j = 0; j < in_q.size(); ++j) {
      const std::size_t q = static_cast<std::size_t>(in_q[j]);
      for (int k = 0; k < rcounts[j]; ++k)
        want[static_cast<std::size_t>(rdispls[j] + k)] = owned(edges[q].s, ids[q][static_cast<std::size_t>(k)], start);
    }
    std::size_t wrong = 0, first = recv.size();
    for (std::size_t i = 0; i < recv.size(); ++i)
      if (recv[i] != want[i]) ++wrong, first = std::min(first, i);
    EXPECT_EQ(wrong, 0u) << "start " << start << ": first wrong int " << first << " (" << (first < recv.size() ? recv[first] : 0) << " for " << (first < recv.size() ? want[first] : 0) << ")";
  }
  ASSERT_EQ(MPI_Request_free(&r), MPI_SUCCESS);

  // Bad input: the process with a negative count gets MPI_ERR_COUNT, one without ids MPI_ERR_ARG,
  // the others MPI_ERR_OTHER; nobody hangs.
  {
    std::vector<int> bad = scounts;
    if (me == 0 && !bad.empty()) bad[0] = -1;
    const int rc = ferry_mpi_neighbor_alltoallv_init_ids(send_buf.data(), bad.data(), sdispls.data(),
                                                         me == 1 ? nullptr : sendids.data(), MPI_INT, recv_buf.data(),
                                                         rcounts.data(), rdispls.data(), MPI_INT, g, MPI_INFO_NULL, &r);
    int cls = 0;
    MPI_Error_class(rc, &cls);
    const bool sends = std::any_of(scounts.begin(), scounts.end(), [](int c) { return c > 0; });
    EXPECT_EQ(cls, me == 0 && !bad.empty() ? MPI_ERR_COUNT : me == 1 && sends ? MPI_ERR_ARG : MPI_ERR_OTHER);
  }
  MPI_Comm_free(&g);
}

// Counts that do not match between sender and receiver (erroneous, but never a hang or a write
// past a block): each rank sends 3 ints to the rank two on (another node) and receives from the
// rank two back. A receiver that posts 2 gets MPI_ERR_TRUNCATE from the start and its buffer
// untouched, the others their data; one that posts 0 fails the aggregated init everywhere
// (MPI_ERR_TRUNCATE there, MPI_ERR_OTHER elsewhere). Both the plain and the ids init.
TEST(NeighborsAggregate, MismatchedCountsGetErrors) {
  const char* mode = std::getenv("FERRY_AGGREGATE");
  if (mode && std::string(mode) == "off") return;  // the direct messages: Collectives tests
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const int to = (me + 2) % n, from = (me + n - 2) % n, odd = n - 3;  // `odd` posts the wrong count
  MPI_Comm g;
  ASSERT_EQ(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &from, MPI_UNWEIGHTED, 1, &to, MPI_UNWEIGHTED,
                                           MPI_INFO_NULL, 0, &g),
            MPI_SUCCESS);
  const int sc[1] = {3}, zero[1] = {0};
  long long ids[3] = {7, 7, 8};
  Ints send(3, 0), recv(3, -1);
  send.host() = {me, me, me + 100};
  send.to_device();
  for (const bool named : {false, true}) {
    auto init = [&](const int* rcounts, MPI_Request* r) {
      return named ? ferry_mpi_neighbor_alltoallv_init_ids(send.data(), sc, zero, ids, MPI_INT, recv.data(), rcounts, zero,
                                                           MPI_INT, g, MPI_INFO_NULL, r)
                   : alltoallv_init(send.data(), sc, zero, MPI_INT, recv.data(), rcounts, zero, MPI_INT, g,
                                    MPI_INFO_NULL, r);
    };
    const char* what = named ? "ids" : "plain";
    const int two[1] = {2};
    MPI_Request r = MPI_REQUEST_NULL;
    ASSERT_EQ(init(me == odd ? two : sc, &r), MPI_SUCCESS) << what;
    recv.host() = {-1, -1, -1};
    recv.to_device();
    ASSERT_EQ(MPI_Start(&r), MPI_SUCCESS) << what;
    int cls = 0;
    MPI_Error_class(MPI_Wait(&r, MPI_STATUS_IGNORE), &cls);
    recv.to_host();
    if (me == odd) {
      EXPECT_EQ(cls, MPI_ERR_TRUNCATE) << what;
      EXPECT_EQ(recv.host(), (std::vector<int>{-1, -1, -1})) << what << ": written past a truncated block";
    } else {
      EXPECT_EQ(cls, MPI_SUCCESS) << what;
      EXPECT_EQ(recv.host(), (std::vector<int>{from, from, from + 100})) << what;
    }
    MPI_Request_free(&r);
    MPI_Error_class(init(me == odd ? zero : sc, &r), &cls);
    EXPECT_EQ(cls, me == odd ? MPI_ERR_TRUNCATE : MPI_ERR_OTHER) << what << ": a block with no receive slot";
    if (cls == MPI_SUCCESS) MPI_Request_free(&r);
  }
  MPI_Comm_free(&g);
}

}  // namespace
#endif
