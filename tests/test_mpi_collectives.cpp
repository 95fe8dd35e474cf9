// The interposer's collectives (libferry-mpi linked before the MPI library), under mpiexec -n 2 and
// -n 4, on host buffers: every blocking, non-blocking and neighbourhood collective, with a
// contiguous type, a vector with a gap inside each element and a type resized to leave a gap after
// each element (send and receive types differ where MPI allows), in place where MPI allows, with
// zero counts among the blocks and poisoned pointers for the arguments MPI does not look at. Each
// result must be what the same call gives straight from the MPI (PMPI_*, which bypasses the
// interposer), the ints between the elements included; the non-blocking forms are completed by
// MPI_Wait, and two at a time by MPI_Waitall. A last test checks a few results against values
// computed by hand.
//
// The catalogue of calls and the checking (test_mpi_collectives.hpp and
// test_mpi_collectives_cases.hpp) are shared with test_mpi_gpu_collectives, which includes this
// file with FERRY_COLLECTIVES_CATALOGUE_ONLY defined and runs the same calls on GPU buffers.
#include "test_mpi_collectives_cases.hpp"

#include <ferry/ferry_mpi.h>

#include <cstdlib>
#include <functional>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#ifndef FERRY_COLLECTIVES_CATALOGUE_ONLY

namespace collectives {
namespace {

#define FERRY_HOST_TEST(Name, cases)                \
  TEST(Collectives, Name) {                         \
    HostMemory host;                                \
    const std::vector<Case> all = cases();          \
    EXPECT_GE(all.size(), layouts().size());        \
    for (const Case& c : all) check(c, host, host); \
  }
FERRY_COLLECTIVES(FERRY_HOST_TEST)
#undef FERRY_HOST_TEST

// A few results against values computed by hand (every rank's initial values are known).
TEST(Collectives, ByHand) {
  const auto [me, n] = place(MPI_COMM_WORLD);
  const Layout &vec = layouts()[1], &resized = layouts()[2];
  // Gatherv of two vector elements (4 ints) from each rank into resized ints at the root, rank i
  // at element 5 * i: element j of the block is the j-th data int of the sender's vector.
  std::vector<int> send = initial(6, true), recv = initial(n * 10, false);
  const std::vector<int> before = recv;
  std::vector<int> counts(static_cast<std::size_t>(n), 4), displs;
  for (int i = 0; i < n; ++i) displs.push_back(5 * i);
  ASSERT_EQ(MPI_Gatherv(send.data(), 2, vec.type, recv.data(), counts.data(), displs.data(),
                        resized.type, 0, MPI_COMM_WORLD),
            MPI_SUCCESS);
  if (me == 0) {
    const int picked[4] = {0, 2, 3, 5};  // the vector's data ints
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < 10; ++j) {
        const std::size_t at = static_cast<std::size_t>(10 * i + j);
        if (j % 2 == 0 && j < 8)
          EXPECT_EQ(recv[at], sent_value(i, picked[j / 2])) << "rank " << i << " int " << j;
        else
          EXPECT_EQ(recv[at], before[at]) << "gap overwritten at int " << at;
      }
  }
  // Alltoallw: to each peer p, p + 1 ints as MPI_INT at byte 8 * p (the blocks overlap: sending
  // may); received from each peer q as resized ints, me + 1 of them, at int 2 * n * q.
  std::vector<int> scounts, sdispls, rcounts, rdispls;
  std::vector<MPI_Datatype> stypes, rtypes;
  for (int p = 0; p < n; ++p) {
    scounts.push_back(p + 1);
    sdispls.push_back(8 * p);
    stypes.push_back(MPI_INT);
    rcounts.push_back(me + 1);
    rdispls.push_back(2 * n * p * static_cast<int>(sizeof(int)));
    rtypes.push_back(resized.type);
  }
  std::vector<int> ssrc = initial(3 * n, true), rdst = initial(2 * n * n, false);
  std::vector<int> want = rdst;
  ASSERT_EQ(MPI_Alltoallw(ssrc.data(), scounts.data(), sdispls.data(), stypes.data(), rdst.data(),
                          rcounts.data(), rdispls.data(), rtypes.data(), MPI_COMM_WORLD),
            MPI_SUCCESS);
  for (int q = 0; q < n; ++q)
    for (int j = 0; j <= me; ++j)
      want[static_cast<std::size_t>(2 * n * q + 2 * j)] = sent_value(q, 2 * me + j);
  EXPECT_EQ(rdst, want);
  // Reduce_scatter in place: rank i's share is i + 1 ints, the sum over ranks of their inputs.
  std::vector<int> rc;
  int total = 0;
  for (int i = 0; i < n; ++i) total += rc.emplace_back(i + 1);
  std::vector<int> inout = initial(total, true);
  ASSERT_EQ(
      MPI_Reduce_scatter(MPI_IN_PLACE, inout.data(), rc.data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD),
      MPI_SUCCESS);
  const int first = me * (me + 1) / 2;
  for (int j = 0; j <= me; ++j) {
    int sum = 0;
    for (int r = 0; r < n; ++r) sum += sent_value(r, first + j);
    EXPECT_EQ(inout[static_cast<std::size_t>(j)], sum) << "element " << j;
  }
}

// Which calls are made of Ferry's own messages (issue 16): under FERRY_PROTOCOL_TEST, the CPU
// stand-in for GPU buffers, MPI_Alltoall and the neighbourhood collectives are, not in place;
// otherwise host buffers go to the MPI. And the cartesian rule both must follow: on a periodic
// ring the block sent down arrives in the receiver's slot from above (with 2 processes the same
// neighbour is on both sides, so only the direction tells the blocks apart).
TEST(Collectives, MadeOfMessages) {
  const char* env = std::getenv("FERRY_PROTOCOL_TEST");
  const long ours = env && std::string(env) == "1" ? 1 : 0;
  const auto [me, n] = place(MPI_COMM_WORLD);
  std::vector<int> send = initial(n, true), recv = initial(n, false);
  long before = ferry_mpi_collective_messages();
  ASSERT_EQ(MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(ferry_mpi_collective_messages() - before, ours) << "MPI_Alltoall";
  for (int q = 0; q < n; ++q) EXPECT_EQ(recv[static_cast<std::size_t>(q)], sent_value(q, me)) << "from " << q;

  before = ferry_mpi_collective_messages();
  ASSERT_EQ(MPI_Alltoall(MPI_IN_PLACE, 1, MPI_INT, send.data(), 1, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(ferry_mpi_collective_messages() - before, 0) << "MPI_Alltoall in place";
  for (int q = 0; q < n; ++q) EXPECT_EQ(send[static_cast<std::size_t>(q)], sent_value(q, me)) << "in place, from " << q;

  MPI_Comm ring;
  int dims[1] = {n}, periods[1] = {1};
  ASSERT_EQ(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring), MPI_SUCCESS);
  const int lower = (me + n - 1) % n, upper = (me + 1) % n;
  const int out[2] = {10 * me, 10 * me + 1};  // down, up
  for (const bool blocking : {true, false}) {
    const std::string what = blocking ? "MPI_Neighbor_alltoall" : "MPI_Ineighbor_alltoall";
    int in[2] = {-1, -1};
    before = ferry_mpi_collective_messages();
    if (blocking) {
      ASSERT_EQ(MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, ring), MPI_SUCCESS);
    } else {
      MPI_Request r;
      ASSERT_EQ(MPI_Ineighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, ring, &r), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
      EXPECT_EQ(r, MPI_REQUEST_NULL);
    }
    EXPECT_EQ(ferry_mpi_collective_messages() - before, ours) << what;
    // Open MPI 4.1's non-blocking neighbourhood collectives (libnbc) match duplicate neighbours in
    // list order, against the standard (fixed in its main branch, 2026): Ferry's are checked.
    if (!ours && !blocking && n <= 2) {
      if (me == 0) std::printf("not compared: the MPI's own %s on a periodic ring of %d\n", what.c_str(), n);
      continue;
    }
    EXPECT_EQ(in[0], 10 * lower + 1) << what << ", from below: the block the lower neighbour sent up";
    EXPECT_EQ(in[1], 10 * upper) << what << ", from above: the block the upper neighbour sent down";
  }
  MPI_Comm_free(&ring);
}

// A graph whose first process has no in-edges and whose last has no out-edges: their count and
// displacement arrays for that side are null (MPI reads none of them), and every process must still
// take the same path (Ferry's messages under the protocol test, else the MPI's).
TEST(Collectives, NullArraysOfAnEmptySide) {
  const char* env = std::getenv("FERRY_PROTOCOL_TEST");
  const long ours = env && std::string(env) == "1" ? 1 : 0;
  const auto [me, n] = place(MPI_COMM_WORLD);
  std::vector<int> to, from;
  for (int p = me + 1; p < n; ++p) to.push_back(p);
  for (int p = 0; p < me; ++p) from.push_back(p);
  MPI_Comm g = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, static_cast<int>(from.size()), from.data(), MPI_UNWEIGHTED,
                                           static_cast<int>(to.size()), to.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g),
            MPI_SUCCESS);
  std::vector<int> sc(to.size(), 2), sd, rc(from.size(), 2), rd, out, in(2 * from.size(), -1);
  for (std::size_t i = 0; i < to.size(); ++i) {
    sd.push_back(static_cast<int>(2 * i));
    out.insert(out.end(), {100 * me + to[i], 100 * me + to[i] + 50});
  }
  for (std::size_t j = 0; j < from.size(); ++j) rd.push_back(static_cast<int>(2 * j));
  auto or_null = [](std::vector<int>& v) { return v.empty() ? nullptr : v.data(); };
  const long before = ferry_mpi_collective_messages();
  ASSERT_EQ(MPI_Neighbor_alltoallv(or_null(out), or_null(sc), or_null(sd), MPI_INT, or_null(in), or_null(rc), or_null(rd),
                                   MPI_INT, g),
            MPI_SUCCESS);
  EXPECT_EQ(ferry_mpi_collective_messages() - before, ours);
  for (std::size_t j = 0; j < from.size(); ++j) {
    EXPECT_EQ(in[2 * j], 100 * from[j] + me) << "from " << from[j];
    EXPECT_EQ(in[2 * j + 1], 100 * from[j] + me + 50) << "from " << from[j];
  }
  MPI_Comm_free(&g);
  // (A neighbourhood call without a topology and with null arrays is erroneous; Ferry leaves it to
  // the MPI, whose answer differs: Open MPI 4.1 returns MPI_ERR_TOPOLOGY, MPICH 4.0 crashes.)
}

// Several blocks between two processes travel as one message (coll_pairs.hpp, Legs), their bytes
// in the order of the directions they travel in: on an n x 1 periodic grid a process sends two
// blocks to itself (down and up the second dimension) and, with 2 processes, two to its one
// neighbour; each must land in the slot the cartesian rule names, with typed blocks (every
// second int sent, contiguous ints received) of different sizes per direction.
TEST(Collectives, BlocksOfOnePairMerged) {
  const char* env = std::getenv("FERRY_PROTOCOL_TEST");
  if (!env || std::string(env) != "1")  // MPICH 4.0's own matches repeated neighbours in reverse
    GTEST_SKIP() << "the MPI's own collective; Ferry's messages run under FERRY_PROTOCOL_TEST";
  const auto [me, n] = place(MPI_COMM_WORLD);
  MPI_Comm grid;
  int dims[2] = {n, 1}, periods[2] = {1, 1};
  ASSERT_EQ(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid), MPI_SUCCESS);
  const int lower = (me + n - 1) % n, upper = (me + 1) % n;
  // Block b (down 0, up 0, down 1, up 1) holds b + 1 ints, from process p: 1000 p + 100 b + i,
  // sent as every second int of 8.
  std::vector<int> send(4 * 8, -7);
  for (int b = 0; b < 4; ++b)
    for (int i = 0; i <= b; ++i) send[static_cast<std::size_t>(8 * b + 2 * i)] = 1000 * me + 100 * b + i;
  std::vector<MPI_Datatype> stypes(4), rtypes(4, MPI_INT);
  std::vector<int> scounts(4, 1), rcounts(4);
  std::vector<MPI_Aint> sdispls(4), rdispls(4);
  std::vector<MPI_Datatype> parts(4);
  for (int b = 0; b < 4; ++b) {
    MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &parts[static_cast<std::size_t>(b)]);
    MPI_Type_contiguous(b + 1, parts[static_cast<std::size_t>(b)], &stypes[static_cast<std::size_t>(b)]);
    MPI_Type_commit(&stypes[static_cast<std::size_t>(b)]);
    sdispls[static_cast<std::size_t>(b)] = static_cast<MPI_Aint>(8 * b * sizeof(int));
  }
  // The slot from below dimension d gets what was sent up it (b = 2d + 1), from above the down block.
  const int from[4] = {lower, upper, me, me}, sent_as[4] = {1, 0, 3, 2};
  MPI_Aint at = 0;
  for (int s = 0; s < 4; ++s) {
    rcounts[static_cast<std::size_t>(s)] = sent_as[s] + 1;
    rdispls[static_cast<std::size_t>(s)] = at;
    at += static_cast<MPI_Aint>((sent_as[s] + 1) * sizeof(int));
  }
  std::vector<int> recv(10, -1);
  ASSERT_EQ(MPI_Neighbor_alltoallw(send.data(), scounts.data(), sdispls.data(), stypes.data(), recv.data(),
                                   rcounts.data(), rdispls.data(), rtypes.data(), grid),
            MPI_SUCCESS);
  std::size_t k = 0;
  for (int s = 0; s < 4; ++s)
    for (int i = 0; i <= sent_as[s]; ++i, ++k)
      EXPECT_EQ(recv[k], 1000 * from[s] + 100 * sent_as[s] + i) << "slot " << s << ", int " << i;
  for (auto* v : {&stypes, &parts})
    for (MPI_Datatype& t : *v) MPI_Type_free(&t);
  MPI_Comm_free(&grid);
}

// The persistent collectives (MPI-4's MPI_*_init, Open MPI 4.1's MPIX_*_init): each init once,
// started three times with new data, every result checked by hand (on the world and on a periodic
// ring, where the block sent down arrives in the slot from above); under FERRY_PROTOCOL_TEST each
// start is made of Ferry's messages.
// Processes that pass different kinds of memory to one collective (MPICH's test suite runs even
// ranks on host and odd ranks on device memory) must still take the same path: the first call of
// each kind on a communicator agrees. Here only the odd ranks "have GPU buffers"
// (ferry_mpi_collective_wish), and every rank's MPI_Alltoall and MPI_Ialltoallv are then Ferry's
// messages, with the right data; on a communicator where no rank wishes, none is. An MPI_Alltoall
// of blocks up to FERRY_MIRROR_MAX (8 KiB) goes to the MPI at every process whatever they wish
// (Ferry's messages only in the protocol test), without agreeing first; except on more than 2
// processes of one node with the protocol on (a GPU machine) and FERRY_PULL, where they agree too.
TEST(Collectives, MixedProcessesAgree) {
  const auto [me, n] = place(MPI_COMM_WORLD);
  const char* env = std::getenv("FERRY_PROTOCOL_TEST");
  const char* pull = std::getenv("FERRY_PULL");
  const bool protocol = env && std::string(env) == "1";
  const bool small_agree =  // ferry_mpi_locality answers only while the protocol is on
      protocol || (n > 2 && ferry_mpi_locality(0, 0) != nullptr && !(pull && std::string(pull) == "0"));
  for (const int odd_wish : {1, 0}) {
    MPI_Comm comm;
    ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);  // no agreement yet
    ferry_mpi_collective_wish(me % 2 == 1 ? odd_wish : 0);
    const long ours = odd_wish && n > 1 ? 1 : 0;
    for (const int block : {1, 4096}) {  // 4 B, then 16 KiB to each process
      std::vector<int> send = initial(n * block, true), recv = initial(n * block, false);
      const long before = ferry_mpi_collective_messages();
      ASSERT_EQ(MPI_Alltoall(send.data(), block, MPI_INT, recv.data(), block, MPI_INT, comm), MPI_SUCCESS);
      EXPECT_EQ(ferry_mpi_collective_messages() - before, block > 1 || small_agree ? ours : 0)
          << "MPI_Alltoall of " << block << " int(s), odd ranks wish " << odd_wish;
      for (int q = 0; q < n; ++q)
        for (int k = 0; k < block; k += block > 1 ? 1023 : 1)
          EXPECT_EQ(recv[static_cast<std::size_t>(q * block + k)], sent_value(q, me * block + k))
              << "from " << q << ", int " << k << " of " << block;
    }
    std::vector<int> send = initial(n, true), recv = initial(n, false);
    // The next kind agrees at its own first call.
    std::vector<int> ones(static_cast<std::size_t>(n), 1), at(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) at[static_cast<std::size_t>(i)] = i;
    std::fill(recv.begin(), recv.end(), -1);
    const long before = ferry_mpi_collective_messages();
    MPI_Request r;
    ASSERT_EQ(MPI_Ialltoallv(send.data(), ones.data(), at.data(), MPI_INT, recv.data(), ones.data(), at.data(),
                             MPI_INT, comm, &r),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(ferry_mpi_collective_messages() - before, ours) << "MPI_Ialltoallv, odd ranks wish " << odd_wish;
    for (int q = 0; q < n; ++q) EXPECT_EQ(recv[static_cast<std::size_t>(q)], sent_value(q, me)) << "from " << q;
    ferry_mpi_collective_wish(-1);
    MPI_Comm_free(&comm);
  }
}

#if MPI_VERSION >= 4 || defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
using FanInit = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Info, MPI_Request*);
using GathervInit = int (*)(const void*, int, MPI_Datatype, void*, const int*, const int*, MPI_Datatype,
                            MPI_Comm, MPI_Info, MPI_Request*);
using VInit = int (*)(const void*, const int*, const int*, MPI_Datatype, void*, const int*, const int*,
                      MPI_Datatype, MPI_Comm, MPI_Info, MPI_Request*);
template <class Disp>
using WInit = int (*)(const void*, const int*, const Disp*, const MPI_Datatype*, void*, const int*,
                      const Disp*, const MPI_Datatype*, MPI_Comm, MPI_Info, MPI_Request*);
struct Inits {
  FanInit alltoall;
  VInit alltoallv;
  WInit<int> alltoallw;
  FanInit neighbor_alltoall;
  VInit neighbor_alltoallv;
  WInit<MPI_Aint> neighbor_alltoallw;
  FanInit neighbor_allgather;
  GathervInit neighbor_allgatherv;
};
#if MPI_VERSION >= 4
const Inits inits{MPI_Alltoall_init, MPI_Alltoallv_init, MPI_Alltoallw_init, MPI_Neighbor_alltoall_init,
                  MPI_Neighbor_alltoallv_init, MPI_Neighbor_alltoallw_init, MPI_Neighbor_allgather_init,
                  MPI_Neighbor_allgatherv_init};
#else
const Inits inits{MPIX_Alltoall_init, MPIX_Alltoallv_init, MPIX_Alltoallw_init, MPIX_Neighbor_alltoall_init,
                  MPIX_Neighbor_alltoallv_init, MPIX_Neighbor_alltoallw_init, MPIX_Neighbor_allgather_init,
                  MPIX_Neighbor_allgatherv_init};
#endif
struct PersistentCall {
  const char* name;
  bool ring;  // on the ring (else the world)
  bool gather;  // one block to every neighbour (allgather), else one each
  std::function<int(const int* send, int* recv, MPI_Comm comm, MPI_Request* request)> init;
};

TEST(Collectives, Persistent) {
  const char* env = std::getenv("FERRY_PROTOCOL_TEST");
  const long ours = env && std::string(env) == "1" ? 1 : 0;
  const auto [me, n] = place(MPI_COMM_WORLD);
  MPI_Comm ring;
  int dims[1] = {n}, periods[1] = {1};
  ASSERT_EQ(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring), MPI_SUCCESS);
  const int lower = (me + n - 1) % n, upper = (me + 1) % n;
  std::vector<int> ones(static_cast<std::size_t>(n), 1), at, bytes;
  std::vector<MPI_Aint> abytes;
  std::vector<MPI_Datatype> ints(static_cast<std::size_t>(n), MPI_INT);
  for (int i = 0; i < n; ++i) {
    at.push_back(i);
    bytes.push_back(i * static_cast<int>(sizeof(int)));
    abytes.push_back(i * static_cast<MPI_Aint>(sizeof(int)));
  }
  const MPI_Info none = MPI_INFO_NULL;
  const std::vector<PersistentCall> calls = {
      {"alltoall", false, false, [&](const int* s, int* r, MPI_Comm c, MPI_Request* q) {
         return inits.alltoall(s, 1, MPI_INT, r, 1, MPI_INT, c, none, q); }},
      {"alltoallv", false, false, [&](const int* s, int* r, MPI_Comm c, MPI_Request* q) {
         return inits.alltoallv(s, ones.data(), at.data(), MPI_INT, r, ones.data(), at.data(), MPI_INT, c, none, q); }},
      {"alltoallw", false, false, [&](const int* s, int* r, MPI_Comm c, MPI_Request* q) {
         return inits.alltoallw(s, ones.data(), bytes.data(), ints.data(), r, ones.data(), bytes.data(), ints.data(), c, none, q); }},
      {"neighbor_alltoall", true, false, [&](const int* s, int* r, MPI_Comm c, MPI_Request* q) {
         return inits.neighbor_alltoall(s, 1, MPI_INT, r, 1, MPI_INT, c, none, q); }},
      {"neighbor_alltoallv", true, false, [&](const int* s, int* r, MPI_Comm c, MPI_Request* q) {
         return inits.neighbor_alltoallv(s, ones.data(), at.data(), MPI_INT, r, ones.data(), at.data(), MPI_INT, c, none, q); }},
      {"neighbor_alltoallw", true, false, [&](const int* s, int* r, MPI_Comm c, MPI_Request* q) {
         return inits.neighbor_alltoallw(s, ones.data(), abytes.data(), ints.data(), r, ones.data(), abytes.data(), ints.data(), c, none, q); }},
      {"neighbor_allgather", true, true, [&](const int* s, int* r, MPI_Comm c, MPI_Request* q) {
         return inits.neighbor_allgather(s, 1, MPI_INT, r, 1, MPI_INT, c, none, q); }},
      {"neighbor_allgatherv", true, true, [&](const int* s, int* r, MPI_Comm c, MPI_Request* q) {
         return inits.neighbor_allgatherv(s, 1, MPI_INT, r, ones.data(), at.data(), MPI_INT, c, none, q); }},
  };
  for (const PersistentCall& call : calls) {
    const int blocks = call.ring ? 2 : n;
    std::vector<int> send(static_cast<std::size_t>(blocks)), recv(static_cast<std::size_t>(blocks));
    MPI_Request q = MPI_REQUEST_NULL;
    ASSERT_EQ(call.init(send.data(), recv.data(), call.ring ? ring : MPI_COMM_WORLD, &q), MPI_SUCCESS) << call.name;
    for (int start = 0; start < 3; ++start) {
      const std::string what = std::string(call.name) + ", start " + std::to_string(start);
      // Block i of process p holds 1000 p + i + 100 start (an allgather's one block: i = 0).
      for (int i = 0; i < blocks; ++i) send[static_cast<std::size_t>(i)] = 1000 * me + (call.gather ? 0 : i) + 100 * start;
      std::fill(recv.begin(), recv.end(), -1);
      const long before = ferry_mpi_collective_messages();
      ASSERT_EQ(MPI_Start(&q), MPI_SUCCESS) << what;
      ASSERT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS) << what;
      EXPECT_NE(q, MPI_REQUEST_NULL) << what << ": a persistent request stays";
      EXPECT_EQ(ferry_mpi_collective_messages() - before, ours) << what;
      std::vector<int> want;
      if (call.ring && call.gather) {
        want = {1000 * lower, 1000 * upper};
      } else if (call.ring) {
        want = {1000 * lower + 1, 1000 * upper};  // the lower one's block up, the upper one's down
      } else {
        for (int p = 0; p < n; ++p) want.push_back(1000 * p + me);
      }
      for (int& w : want) w += 100 * start;
      if (!ours && call.ring && !call.gather && n <= 2) continue;  // Open MPI's own: see MadeOfMessages
      EXPECT_EQ(recv, want) << what;
    }
    EXPECT_EQ(MPI_Request_free(&q), MPI_SUCCESS) << call.name;
    EXPECT_EQ(q, MPI_REQUEST_NULL) << call.name;
  }
  MPI_Comm_free(&ring);
}

// MPI lets processes start persistent collectives in different orders, and the application free a
// datatype once the init has it: two alltoalls of a vector type freed after their inits, started
// A then B on even ranks and B then A on odd ones, each with its own data.
TEST(Collectives, PersistentStartOrderAndFreedType) {
  const auto [me, n] = place(MPI_COMM_WORLD);
  MPI_Datatype pair;  // 2 ints 3 apart
  MPI_Type_vector(2, 1, 3, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  const int span = 4 * n;  // ints per buffer: one pair element per peer, extent 4 ints
  std::vector<int> send[2], recv[2];
  MPI_Request q[2];
  for (int c = 0; c < 2; ++c) {
    send[c].assign(static_cast<std::size_t>(span), 0);
    for (int p = 0; p < n; ++p) {
      send[c][static_cast<std::size_t>(4 * p)] = 10000 * c + 100 * me + p;
      send[c][static_cast<std::size_t>(4 * p + 3)] = -(10000 * c + 100 * me + p);
    }
    recv[c].assign(static_cast<std::size_t>(span), -1);
    ASSERT_EQ(inits.alltoall(send[c].data(), 1, pair, recv[c].data(), 1, pair, MPI_COMM_WORLD, MPI_INFO_NULL, &q[c]),
              MPI_SUCCESS);
  }
  // Open MPI 4.1's own persistent alltoall (libnbc) crashes when the type is freed after the init:
  // freed only where Ferry's messages take the call (and kept, then freed at the end, elsewhere).
  const char* env = std::getenv("FERRY_PROTOCOL_TEST");
  const bool ours = env && std::string(env) == "1";
  if (ours) MPI_Type_free(&pair);
  const int first = me % 2;
  ASSERT_EQ(MPI_Start(&q[first]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Start(&q[1 - first]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Waitall(2, q, MPI_STATUSES_IGNORE), MPI_SUCCESS);
  for (int c = 0; c < 2; ++c) {
    std::vector<int> want(static_cast<std::size_t>(span), -1);
    for (int p = 0; p < n; ++p) {
      want[static_cast<std::size_t>(4 * p)] = 10000 * c + 100 * p + me;
      want[static_cast<std::size_t>(4 * p + 3)] = -(10000 * c + 100 * p + me);
    }
    EXPECT_EQ(recv[c], want) << "collective " << c;
    EXPECT_EQ(MPI_Request_free(&q[c]), MPI_SUCCESS);
  }
  if (!ours) MPI_Type_free(&pair);
}
#endif

}  // namespace
}  // namespace collectives

#endif  // FERRY_COLLECTIVES_CATALOGUE_ONLY
