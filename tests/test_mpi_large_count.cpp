// MPI-4's large-count entry points (MPI_Send_c, ...) through the interposer, with host buffers
// under FERRY_PROTOCOL_TEST (large host sends take Ferry's pipelined protocol, so a send that
// reached Ferry is counted): every _c entry Ferry defines gives the int entry's result, the large
// sends went through Ferry, and a count past INT_MAX takes the contiguous-type path. Built against
// an MPI-3 header (Open MPI 4.1), the MPI has no _c calls and the test reports skipped.
#include <ferry/ferry_mpi.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

namespace {

#if MPI_VERSION >= 4

constexpr MPI_Count kBig = MPI_Count{1} << 18;  // doubles: 2 MiB, pipelined under the protocol test

int rank_of(MPI_Comm c = MPI_COMM_WORLD) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c = MPI_COMM_WORLD) {
  int s = 0;
  MPI_Comm_size(c, &s);
  return s;
}
std::vector<double> pattern(int who, int salt, MPI_Count n = kBig) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = who * 1e7 + salt * 1e5 + static_cast<double>(i % 99991);
  return v;
}

// Ranks 0 and 1 exchange (others idle): every point-to-point _c entry, each checked.
TEST(LargeCount, PointToPoint) {
  const int me = rank_of();
  if (me > 1) return;
  const int peer = 1 - me;
  const long pipelined = ferry_mpi_pipelined_sent();
  std::vector<double> got(static_cast<std::size_t>(kBig));
  MPI_Status st;
  MPI_Count n = 0;
  auto expect = [&](int salt) {
    EXPECT_EQ(got, pattern(peer, salt)) << "salt " << salt;
    std::fill(got.begin(), got.end(), -1.0);
  };
  const auto mine = [&](int salt) { return pattern(me, salt); };
  // Blocking modes, each answered: 0 sends first.
  for (int salt = 1; salt <= 2; ++salt) {
    auto v = mine(salt);
    auto send = [salt](const void* b, MPI_Count c, MPI_Datatype t, int to, int tag, MPI_Comm comm) {
      return salt == 1 ? MPI_Send_c(b, c, t, to, tag, comm) : MPI_Ssend_c(b, c, t, to, tag, comm);
    };
    if (me == 0) {
      ASSERT_EQ(send(v.data(), kBig, MPI_DOUBLE, peer, salt, MPI_COMM_WORLD), MPI_SUCCESS);
      ASSERT_EQ(MPI_Recv_c(got.data(), kBig, MPI_DOUBLE, peer, salt, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    } else {
      ASSERT_EQ(MPI_Recv_c(got.data(), kBig, MPI_DOUBLE, peer, salt, MPI_COMM_WORLD, &st), MPI_SUCCESS);
      ASSERT_EQ(send(v.data(), kBig, MPI_DOUBLE, peer, salt, MPI_COMM_WORLD), MPI_SUCCESS);
    }
    MPI_Get_count_c(&st, MPI_DOUBLE, &n);
    EXPECT_EQ(n, kBig);
    expect(salt);
    // The large send reached Ferry: its pipelined protocol counted it.
    EXPECT_EQ(ferry_mpi_pipelined_sent() - pipelined, salt) << "salt " << salt;
  }
  // Ready mode: the receive is posted before the barrier.
  {
    MPI_Request r;
    auto v = mine(4);
    ASSERT_EQ(MPI_Irecv_c(got.data(), kBig, MPI_DOUBLE, peer, 4, MPI_COMM_WORLD, &r), MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_Rsend_c(v.data(), kBig, MPI_DOUBLE, peer, 4, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS);
    expect(4);
  }
  // Buffered, blocking and not.
  {
    std::vector<char> attached(static_cast<std::size_t>(2 * (kBig * 8 + MPI_BSEND_OVERHEAD)));
    MPI_Buffer_attach(attached.data(), static_cast<int>(attached.size()));
    auto v = mine(5), w = mine(6);
    MPI_Request r[2];
    ASSERT_EQ(MPI_Bsend_c(v.data(), kBig, MPI_DOUBLE, peer, 5, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(MPI_Ibsend_c(w.data(), kBig, MPI_DOUBLE, peer, 6, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Recv_c(got.data(), kBig, MPI_DOUBLE, peer, 5, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    expect(5);
    ASSERT_EQ(MPI_Wait(&r[0], MPI_STATUS_IGNORE), MPI_SUCCESS);
    ASSERT_EQ(MPI_Recv_c(got.data(), kBig, MPI_DOUBLE, peer, 6, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    expect(6);
    void* detached = nullptr;
    int size = 0;
    MPI_Buffer_detach(&detached, &size);
  }
  // Non-blocking sends of each mode against non-blocking receives.
  {
    auto a = mine(7), b = mine(8), c = mine(9);
    std::vector<double> ga(got.size()), gb(got.size()), gc(got.size());
    MPI_Request r[6];
    ASSERT_EQ(MPI_Irecv_c(ga.data(), kBig, MPI_DOUBLE, peer, 7, MPI_COMM_WORLD, &r[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Irecv_c(gb.data(), kBig, MPI_DOUBLE, peer, 8, MPI_COMM_WORLD, &r[1]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Irecv_c(gc.data(), kBig, MPI_DOUBLE, peer, 9, MPI_COMM_WORLD, &r[2]), MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(MPI_Isend_c(a.data(), kBig, MPI_DOUBLE, peer, 7, MPI_COMM_WORLD, &r[3]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Issend_c(b.data(), kBig, MPI_DOUBLE, peer, 8, MPI_COMM_WORLD, &r[4]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Irsend_c(c.data(), kBig, MPI_DOUBLE, peer, 9, MPI_COMM_WORLD, &r[5]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Waitall(6, r, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(ga, pattern(peer, 7));
    EXPECT_EQ(gb, pattern(peer, 8));
    EXPECT_EQ(gc, pattern(peer, 9));
  }
  // Persistent: each send mode once, into one persistent receive.
  {
    MPI_Request recv;
    ASSERT_EQ(MPI_Recv_init_c(got.data(), kBig, MPI_DOUBLE, peer, 10, MPI_COMM_WORLD, &recv), MPI_SUCCESS);
    std::vector<char> attached(static_cast<std::size_t>(kBig * 8 + MPI_BSEND_OVERHEAD));
    MPI_Buffer_attach(attached.data(), static_cast<int>(attached.size()));
    using Init = int (*)(const void*, MPI_Count, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
    const Init inits[] = {MPI_Rsend_init_c, MPI_Bsend_init_c, MPI_Send_init_c, MPI_Ssend_init_c};
    for (int k = 0; k < 4; ++k) {
      auto v = mine(10 + k);
      MPI_Request send;
      ASSERT_EQ(inits[k](v.data(), kBig, MPI_DOUBLE, peer, 10, MPI_COMM_WORLD, &send), MPI_SUCCESS);
      ASSERT_EQ(MPI_Start(&recv), MPI_SUCCESS);
      MPI_Barrier(MPI_COMM_WORLD);  // Rsend: the receive is posted
      ASSERT_EQ(MPI_Start(&send), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&send, MPI_STATUS_IGNORE), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&recv, MPI_STATUS_IGNORE), MPI_SUCCESS);
      EXPECT_EQ(got, pattern(peer, 10 + k)) << "persistent send " << k;
      MPI_Request_free(&send);
    }
    MPI_Request_free(&recv);
    void* detached = nullptr;
    int size = 0;
    MPI_Buffer_detach(&detached, &size);
  }
  // Matched probes, then Mrecv_c and Imrecv_c.
  {
    auto v = mine(20), w = mine(21);
    MPI_Request r[2];
    MPI_Isend_c(v.data(), kBig, MPI_DOUBLE, peer, 20, MPI_COMM_WORLD, &r[0]);
    MPI_Isend_c(w.data(), kBig, MPI_DOUBLE, peer, 21, MPI_COMM_WORLD, &r[1]);
    MPI_Message m;
    ASSERT_EQ(MPI_Mprobe(peer, 20, MPI_COMM_WORLD, &m, &st), MPI_SUCCESS);
    ASSERT_EQ(MPI_Mrecv_c(got.data(), kBig, MPI_DOUBLE, &m, &st), MPI_SUCCESS);
    expect(20);
    ASSERT_EQ(MPI_Mprobe(peer, 21, MPI_COMM_WORLD, &m, &st), MPI_SUCCESS);
    MPI_Request ir;
    ASSERT_EQ(MPI_Imrecv_c(got.data(), kBig, MPI_DOUBLE, &m, &ir), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&ir, &st), MPI_SUCCESS);
    expect(21);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
  }
  // Sendrecv_c and Sendrecv_replace_c.
  {
    auto v = mine(30);
    ASSERT_EQ(MPI_Sendrecv_c(v.data(), kBig, MPI_DOUBLE, peer, 30, got.data(), kBig, MPI_DOUBLE, peer, 30,
                             MPI_COMM_WORLD, &st), MPI_SUCCESS);
    expect(30);
    auto x = mine(31);
    ASSERT_EQ(MPI_Sendrecv_replace_c(x.data(), kBig, MPI_DOUBLE, peer, 31, peer, 31, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    EXPECT_EQ(x, pattern(peer, 31));
  }
  // More of them reached Ferry than the first two (buffered sends are the MPI's: they complete
  // locally, with no stub).
  EXPECT_GE(ferry_mpi_pipelined_sent() - pipelined, 8);
}

// A count past INT_MAX: one element of a contiguous type of that many. A zero-size element type
// keeps the message empty while the count takes that path.
TEST(LargeCount, CountPastIntMax) {
  const int me = rank_of();
  if (me > 1) return;
  const int peer = 1 - me;
  MPI_Datatype empty;
  MPI_Type_contiguous(0, MPI_INT, &empty);
  MPI_Type_commit(&empty);
  const MPI_Count huge = MPI_Count{INT_MAX} + 5;
  char b = 0;
  MPI_Status st;
  MPI_Request r;
  ASSERT_EQ(MPI_Irecv_c(&b, huge, empty, peer, 40, MPI_COMM_WORLD, &r), MPI_SUCCESS);
  ASSERT_EQ(MPI_Send_c(&b, huge, empty, peer, 40, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS);
  MPI_Count bytes = -1;
  MPI_Get_elements_c(&st, MPI_BYTE, &bytes);
  EXPECT_EQ(bytes, 0);
  MPI_Type_free(&empty);
}

TEST(LargeCount, PackUnpack) {
  MPI_Datatype t;
  MPI_Type_vector(10, 2, 5, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  std::vector<double> in(100), back(100, -1), ref_back(100, -1);
  std::iota(in.begin(), in.end(), 1.0);
  std::vector<char> a(640), b(640);
  MPI_Count pa = 8;
  int pb = 8;
  ASSERT_EQ(MPI_Pack_c(in.data(), 2, t, a.data(), 640, &pa, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Pack(in.data(), 2, t, b.data(), 640, &pb, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(pa, pb);
  EXPECT_TRUE(std::equal(a.begin() + 8, a.begin() + pb, b.begin() + 8));
  pa = 8;
  pb = 8;
  ASSERT_EQ(MPI_Unpack_c(a.data(), 640, &pa, back.data(), 2, t, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Unpack(b.data(), 640, &pb, ref_back.data(), 2, t, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(pa, pb);
  EXPECT_EQ(back, ref_back);
  MPI_Type_free(&t);
}

// Every collective _c entry against what the int entry computes (small counts; all ranks).
TEST(LargeCount, Collectives) {
  const int me = rank_of(), p = size_of();
  const MPI_Count k = 3;
  std::vector<double> send(static_cast<std::size_t>(k * p)), got(send.size()), want(send.size());
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = me * 100 + static_cast<double>(i);
  MPI_Request r;
  // Exscan leaves rank 0's result undefined: not compared there.
  auto both = [&](const char* what, auto&& blocking, auto&& nonblocking, auto&& reference) {
    const bool compare = std::string(what) != "Exscan" || me != 0;
    std::fill(want.begin(), want.end(), -1.0);
    reference();
    std::fill(got.begin(), got.end(), -1.0);
    ASSERT_EQ(blocking(), MPI_SUCCESS) << what;
    if (compare) EXPECT_EQ(got, want) << what;
    std::fill(got.begin(), got.end(), -1.0);
    ASSERT_EQ(nonblocking(), MPI_SUCCESS) << what << " (non-blocking)";
    ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    if (compare) EXPECT_EQ(got, want) << what << " (non-blocking)";
  };
  const MPI_Comm w = MPI_COMM_WORLD;
  const int ik = static_cast<int>(k);
  both("Bcast",
       [&] { got = send; return MPI_Bcast_c(got.data(), k, MPI_DOUBLE, 1 % p, w); },
       [&] { got = send; return MPI_Ibcast_c(got.data(), k, MPI_DOUBLE, 1 % p, w, &r); },
       [&] { want = send; PMPI_Bcast(want.data(), ik, MPI_DOUBLE, 1 % p, w); });
  both("Gather", [&] { return MPI_Gather_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, 0, w); },
       [&] { return MPI_Igather_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, 0, w, &r); },
       [&] { PMPI_Gather(send.data(), ik, MPI_DOUBLE, want.data(), ik, MPI_DOUBLE, 0, w); });
  both("Scatter", [&] { return MPI_Scatter_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, 0, w); },
       [&] { return MPI_Iscatter_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, 0, w, &r); },
       [&] { PMPI_Scatter(send.data(), ik, MPI_DOUBLE, want.data(), ik, MPI_DOUBLE, 0, w); });
  both("Allgather", [&] { return MPI_Allgather_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, w); },
       [&] { return MPI_Iallgather_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, w, &r); },
       [&] { PMPI_Allgather(send.data(), ik, MPI_DOUBLE, want.data(), ik, MPI_DOUBLE, w); });
  both("Alltoall", [&] { return MPI_Alltoall_c(send.data(), 1, MPI_DOUBLE, got.data(), 1, MPI_DOUBLE, w); },
       [&] { return MPI_Ialltoall_c(send.data(), 1, MPI_DOUBLE, got.data(), 1, MPI_DOUBLE, w, &r); },
       [&] { PMPI_Alltoall(send.data(), 1, MPI_DOUBLE, want.data(), 1, MPI_DOUBLE, w); });
  both("Allreduce", [&] { return MPI_Allreduce_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_SUM, w); },
       [&] { return MPI_Iallreduce_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_SUM, w, &r); },
       [&] { PMPI_Allreduce(send.data(), want.data(), ik, MPI_DOUBLE, MPI_SUM, w); });
  both("Reduce", [&] { return MPI_Reduce_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_MAX, 0, w); },
       [&] { return MPI_Ireduce_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_MAX, 0, w, &r); },
       [&] { PMPI_Reduce(send.data(), want.data(), ik, MPI_DOUBLE, MPI_MAX, 0, w); });
  both("Scan", [&] { return MPI_Scan_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_SUM, w); },
       [&] { return MPI_Iscan_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_SUM, w, &r); },
       [&] { PMPI_Scan(send.data(), want.data(), ik, MPI_DOUBLE, MPI_SUM, w); });
  both("Exscan", [&] { return MPI_Exscan_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_SUM, w); },
       [&] { return MPI_Iexscan_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_SUM, w, &r); },
       [&] { PMPI_Exscan(send.data(), want.data(), ik, MPI_DOUBLE, MPI_SUM, w); });
  both("Reduce_scatter_block",
       [&] { return MPI_Reduce_scatter_block_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_SUM, w); },
       [&] { return MPI_Ireduce_scatter_block_c(send.data(), got.data(), k, MPI_DOUBLE, MPI_SUM, w, &r); },
       [&] { PMPI_Reduce_scatter_block(send.data(), want.data(), ik, MPI_DOUBLE, MPI_SUM, w); });
  // Neighbourhood collectives on a periodic ring.
  MPI_Comm ring;
  const int dims[1] = {p}, periods[1] = {1};
  MPI_Cart_create(w, 1, dims, periods, 0, &ring);
  both("Neighbor_allgather",
       [&] { return MPI_Neighbor_allgather_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, ring); },
       [&] { return MPI_Ineighbor_allgather_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, ring, &r); },
       [&] { PMPI_Neighbor_allgather(send.data(), ik, MPI_DOUBLE, want.data(), ik, MPI_DOUBLE, ring); });
  both("Neighbor_alltoall",
       [&] { return MPI_Neighbor_alltoall_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, ring); },
       [&] { return MPI_Ineighbor_alltoall_c(send.data(), k, MPI_DOUBLE, got.data(), k, MPI_DOUBLE, ring, &r); },
       [&] { PMPI_Neighbor_alltoall(send.data(), ik, MPI_DOUBLE, want.data(), ik, MPI_DOUBLE, ring); });
  MPI_Comm_free(&ring);
}

// The v- and w-collectives' _c entries (large_count_v.cpp): MPI_Count counts and MPI_Aint
// displacements, blocking and non-blocking (whose int copies must outlive the call), each against
// the int call straight to the MPI. Peer i's block: i % 2 + 1 doubles at element 3 i.
TEST(LargeCount, VCollectives) {
  const int me = rank_of(), p = size_of();
  const MPI_Comm w = MPI_COMM_WORLD;
  std::vector<double> send(static_cast<std::size_t>(3 * p)), got(send.size()), want(send.size());
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = me * 100 + static_cast<double>(i);
  std::vector<MPI_Count> cc;
  std::vector<MPI_Aint> cd, cb;  // element and byte displacements
  std::vector<int> ic, id, ib;
  std::vector<MPI_Datatype> types(static_cast<std::size_t>(p), MPI_DOUBLE);
  for (int i = 0; i < p; ++i) {
    ic.push_back(i % 2 + 1);
    id.push_back(3 * i);
    ib.push_back(3 * i * static_cast<int>(sizeof(double)));
    cc.push_back(ic.back());
    cd.push_back(id.back());
    cb.push_back(ib.back());
  }
  const MPI_Count mine = me % 2 + 1;
  const int imine = static_cast<int>(mine);
  MPI_Request r;
  auto both = [&](const char* what, auto&& blocking, auto&& nonblocking, auto&& reference) {
    std::fill(want.begin(), want.end(), -1.0);
    reference();
    std::fill(got.begin(), got.end(), -1.0);
    ASSERT_EQ(blocking(), MPI_SUCCESS) << what;
    EXPECT_EQ(got, want) << what;
    std::fill(got.begin(), got.end(), -1.0);
    ASSERT_EQ(nonblocking(), MPI_SUCCESS) << what << " (non-blocking)";
    ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(got, want) << what << " (non-blocking)";
  };
  double* s = send.data();
  double* g = got.data();
  double* x = want.data();
  both("Allgatherv", [&] { return MPI_Allgatherv_c(s, mine, MPI_DOUBLE, g, cc.data(), cd.data(), MPI_DOUBLE, w); },
       [&] { return MPI_Iallgatherv_c(s, mine, MPI_DOUBLE, g, cc.data(), cd.data(), MPI_DOUBLE, w, &r); },
       [&] { PMPI_Allgatherv(s, imine, MPI_DOUBLE, x, ic.data(), id.data(), MPI_DOUBLE, w); });
  // Alltoall-v/w: peer i sends i % 2 + 1 to everyone, so what each receives from i is i's count.
  std::vector<MPI_Count> sc(static_cast<std::size_t>(p), mine);
  std::vector<int> isc(static_cast<std::size_t>(p), imine);
  both("Alltoallv", [&] { return MPI_Alltoallv_c(s, sc.data(), cd.data(), MPI_DOUBLE, g, cc.data(), cd.data(), MPI_DOUBLE, w); },
       [&] { return MPI_Ialltoallv_c(s, sc.data(), cd.data(), MPI_DOUBLE, g, cc.data(), cd.data(), MPI_DOUBLE, w, &r); },
       [&] { PMPI_Alltoallv(s, isc.data(), id.data(), MPI_DOUBLE, x, ic.data(), id.data(), MPI_DOUBLE, w); });
  both("Alltoallw",
       [&] { return MPI_Alltoallw_c(s, sc.data(), cb.data(), types.data(), g, cc.data(), cb.data(), types.data(), w); },
       [&] { return MPI_Ialltoallw_c(s, sc.data(), cb.data(), types.data(), g, cc.data(), cb.data(), types.data(), w, &r); },
       [&] { PMPI_Alltoallw(s, isc.data(), ib.data(), types.data(), x, ic.data(), ib.data(), types.data(), w); });
  both("Gatherv", [&] { return MPI_Gatherv_c(s, mine, MPI_DOUBLE, g, cc.data(), cd.data(), MPI_DOUBLE, 0, w); },
       [&] { return MPI_Igatherv_c(s, mine, MPI_DOUBLE, g, cc.data(), cd.data(), MPI_DOUBLE, 0, w, &r); },
       [&] { PMPI_Gatherv(s, imine, MPI_DOUBLE, x, ic.data(), id.data(), MPI_DOUBLE, 0, w); });
  both("Scatterv", [&] { return MPI_Scatterv_c(s, cc.data(), cd.data(), MPI_DOUBLE, g, mine, MPI_DOUBLE, 0, w); },
       [&] { return MPI_Iscatterv_c(s, cc.data(), cd.data(), MPI_DOUBLE, g, mine, MPI_DOUBLE, 0, w, &r); },
       [&] { PMPI_Scatterv(s, ic.data(), id.data(), MPI_DOUBLE, x, imine, MPI_DOUBLE, 0, w); });
  both("Reduce_scatter", [&] { return MPI_Reduce_scatter_c(s, g, cc.data(), MPI_DOUBLE, MPI_SUM, w); },
       [&] { return MPI_Ireduce_scatter_c(s, g, cc.data(), MPI_DOUBLE, MPI_SUM, w, &r); },
       [&] { PMPI_Reduce_scatter(s, x, ic.data(), MPI_DOUBLE, MPI_SUM, w); });
  // The neighbourhood forms on a ring that is not periodic (the MPIs agree there).
  MPI_Comm line;
  const int dims[1] = {p}, periods[1] = {0};
  MPI_Cart_create(w, 1, dims, periods, 0, &line);
  // (What goes down arrives in the lower one's slot from above: counts alike both ways.)
  const MPI_Count nc[2] = {2, 2};
  const MPI_Aint nd[2] = {0, 3}, nb[2] = {0, 3 * sizeof(double)};
  const int inc[2] = {2, 2}, ind[2] = {0, 3};
  const MPI_Datatype nt[2] = {MPI_DOUBLE, MPI_DOUBLE};
  both("Neighbor_allgatherv",
       [&] { return MPI_Neighbor_allgatherv_c(s, 2, MPI_DOUBLE, g, nc, nd, MPI_DOUBLE, line); },
       [&] { return MPI_Ineighbor_allgatherv_c(s, 2, MPI_DOUBLE, g, nc, nd, MPI_DOUBLE, line, &r); },
       [&] { PMPI_Neighbor_allgatherv(s, 2, MPI_DOUBLE, x, inc, ind, MPI_DOUBLE, line); });
  both("Neighbor_alltoallv",
       [&] { return MPI_Neighbor_alltoallv_c(s, nc, nd, MPI_DOUBLE, g, nc, nd, MPI_DOUBLE, line); },
       [&] { return MPI_Ineighbor_alltoallv_c(s, nc, nd, MPI_DOUBLE, g, nc, nd, MPI_DOUBLE, line, &r); },
       [&] { PMPI_Neighbor_alltoallv(s, inc, ind, MPI_DOUBLE, x, inc, ind, MPI_DOUBLE, line); });
  both("Neighbor_alltoallw",
       [&] { return MPI_Neighbor_alltoallw_c(s, nc, nb, nt, g, nc, nb, nt, line); },
       [&] { return MPI_Ineighbor_alltoallw_c(s, nc, nb, nt, g, nc, nb, nt, line, &r); },
       [&] { PMPI_Neighbor_alltoallw(s, inc, nb, nt, x, inc, nb, nt, line); });
  MPI_Comm_free(&line);
}

// The persistent collectives' _init_c entries: one init, two starts, against the int call
// straight to the MPI; the int copies of the v-forms' arrays must outlive the init (every start
// reads them). Under FERRY_PROTOCOL_TEST host buffers take Ferry's stand-ins or messages, so each
// init must have reached Ferry.
TEST(LargeCount, PersistentCollectives) {
  const int me = rank_of(), p = size_of();
  const MPI_Comm w = MPI_COMM_WORLD;
  const MPI_Count k = 3;
  const int ik = static_cast<int>(k);
  std::vector<double> send(static_cast<std::size_t>(3 * p)), got(send.size()), want(send.size());
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = me * 100 + static_cast<double>(i);
  std::vector<MPI_Count> cc, sc(static_cast<std::size_t>(p), 1);
  std::vector<MPI_Aint> cd;
  std::vector<int> ic, id, isc(static_cast<std::size_t>(p), 1);
  for (int i = 0; i < p; ++i) {
    ic.push_back(1);
    id.push_back(3 * i);
    cc.push_back(1);
    cd.push_back(3 * i);
  }
  const char* protocol = std::getenv("FERRY_PROTOCOL_TEST");
  const bool ours = protocol && std::string(protocol) == "1";
  // `bcast`: the buffer is the input at the root, the send data before each start.
  // `compare` false: the result is undefined here (MPI_Exscan at rank 0).
  auto persist = [&](const char* what, auto&& init, auto&& reference, bool bcast = false, bool compare = true) {
    std::fill(want.begin(), want.end(), -1.0);
    reference();
    const long before = ferry_mpi_persistent_standins() + ferry_mpi_collective_messages();
    MPI_Request q = MPI_REQUEST_NULL;
    std::fill(got.begin(), got.end(), -1.0);
    ASSERT_EQ(init(&q), MPI_SUCCESS) << what;
    for (int start = 0; start < 2; ++start) {
      std::fill(got.begin(), got.end(), -1.0);
      if (bcast) got = send;  // (the same storage: the request keeps its address)
      ASSERT_EQ(MPI_Start(&q), MPI_SUCCESS) << what;
      ASSERT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS) << what;
      if (compare) EXPECT_EQ(got, want) << what << ", start " << start + 1;
    }
    EXPECT_EQ(MPI_Request_free(&q), MPI_SUCCESS) << what;
    if (ours)
      EXPECT_GT(ferry_mpi_persistent_standins() + ferry_mpi_collective_messages(), before)
          << what << ": the init did not reach Ferry";
  };
  double* s = send.data();
  double* g = got.data();
  double* x = want.data();
  const MPI_Info i0 = MPI_INFO_NULL;
  persist("Bcast_init", [&](MPI_Request* q) { return MPI_Bcast_init_c(g, k * p, MPI_DOUBLE, 0, w, i0, q); },
          [&] { want = send; PMPI_Bcast(x, static_cast<int>(want.size()), MPI_DOUBLE, 0, w); }, true);
  persist("Gather_init", [&](MPI_Request* q) { return MPI_Gather_init_c(s, k, MPI_DOUBLE, g, k, MPI_DOUBLE, 0, w, i0, q); },
          [&] { PMPI_Gather(s, ik, MPI_DOUBLE, x, ik, MPI_DOUBLE, 0, w); });
  persist("Allreduce_init", [&](MPI_Request* q) { return MPI_Allreduce_init_c(s, g, k, MPI_DOUBLE, MPI_SUM, w, i0, q); },
          [&] { PMPI_Allreduce(s, x, ik, MPI_DOUBLE, MPI_SUM, w); });
  persist("Reduce_scatter_block_init",
          [&](MPI_Request* q) { return MPI_Reduce_scatter_block_init_c(s, g, 1, MPI_DOUBLE, MPI_MAX, w, i0, q); },
          [&] { PMPI_Reduce_scatter_block(s, x, 1, MPI_DOUBLE, MPI_MAX, w); });
  persist("Alltoallv_init",
          [&](MPI_Request* q) {
            return MPI_Alltoallv_init_c(s, sc.data(), cd.data(), MPI_DOUBLE, g, cc.data(), cd.data(), MPI_DOUBLE, w, i0, q);
          },
          [&] { PMPI_Alltoallv(s, isc.data(), id.data(), MPI_DOUBLE, x, ic.data(), id.data(), MPI_DOUBLE, w); });
  persist("Gatherv_init",
          [&](MPI_Request* q) { return MPI_Gatherv_init_c(s, 1, MPI_DOUBLE, g, cc.data(), cd.data(), MPI_DOUBLE, 0, w, i0, q); },
          [&] { PMPI_Gatherv(s, 1, MPI_DOUBLE, x, ic.data(), id.data(), MPI_DOUBLE, 0, w); });
  persist("Scatter_init", [&](MPI_Request* q) { return MPI_Scatter_init_c(s, 1, MPI_DOUBLE, g, 1, MPI_DOUBLE, 0, w, i0, q); },
          [&] { PMPI_Scatter(s, 1, MPI_DOUBLE, x, 1, MPI_DOUBLE, 0, w); });
  persist("Scatterv_init",
          [&](MPI_Request* q) { return MPI_Scatterv_init_c(s, cc.data(), cd.data(), MPI_DOUBLE, g, 1, MPI_DOUBLE, 0, w, i0, q); },
          [&] { PMPI_Scatterv(s, ic.data(), id.data(), MPI_DOUBLE, x, 1, MPI_DOUBLE, 0, w); });
  persist("Allgather_init", [&](MPI_Request* q) { return MPI_Allgather_init_c(s, 1, MPI_DOUBLE, g, 1, MPI_DOUBLE, w, i0, q); },
          [&] { PMPI_Allgather(s, 1, MPI_DOUBLE, x, 1, MPI_DOUBLE, w); });
  persist("Allgatherv_init",
          [&](MPI_Request* q) { return MPI_Allgatherv_init_c(s, 1, MPI_DOUBLE, g, cc.data(), cd.data(), MPI_DOUBLE, w, i0, q); },
          [&] { PMPI_Allgatherv(s, 1, MPI_DOUBLE, x, ic.data(), id.data(), MPI_DOUBLE, w); });
  persist("Alltoall_init", [&](MPI_Request* q) { return MPI_Alltoall_init_c(s, 1, MPI_DOUBLE, g, 1, MPI_DOUBLE, w, i0, q); },
          [&] { PMPI_Alltoall(s, 1, MPI_DOUBLE, x, 1, MPI_DOUBLE, w); });
  std::vector<MPI_Aint> cb;
  std::vector<int> ib;
  std::vector<MPI_Datatype> types(static_cast<std::size_t>(p), MPI_DOUBLE);
  for (int i = 0; i < p; ++i) {
    ib.push_back(3 * i * static_cast<int>(sizeof(double)));
    cb.push_back(ib.back());
  }
  persist("Alltoallw_init",
          [&](MPI_Request* q) {
            return MPI_Alltoallw_init_c(s, sc.data(), cb.data(), types.data(), g, cc.data(), cb.data(), types.data(), w, i0, q);
          },
          [&] { PMPI_Alltoallw(s, isc.data(), ib.data(), types.data(), x, ic.data(), ib.data(), types.data(), w); });
  persist("Reduce_init", [&](MPI_Request* q) { return MPI_Reduce_init_c(s, g, k, MPI_DOUBLE, MPI_MAX, 0, w, i0, q); },
          [&] { PMPI_Reduce(s, x, ik, MPI_DOUBLE, MPI_MAX, 0, w); });
  persist("Scan_init", [&](MPI_Request* q) { return MPI_Scan_init_c(s, g, k, MPI_DOUBLE, MPI_SUM, w, i0, q); },
          [&] { PMPI_Scan(s, x, ik, MPI_DOUBLE, MPI_SUM, w); });
  persist("Exscan_init", [&](MPI_Request* q) { return MPI_Exscan_init_c(s, g, k, MPI_DOUBLE, MPI_SUM, w, i0, q); },
          [&] { PMPI_Exscan(s, x, ik, MPI_DOUBLE, MPI_SUM, w); }, false, me != 0);
  persist("Reduce_scatter_init",
          [&](MPI_Request* q) { return MPI_Reduce_scatter_init_c(s, g, cc.data(), MPI_DOUBLE, MPI_SUM, w, i0, q); },
          [&] { PMPI_Reduce_scatter(s, x, ic.data(), MPI_DOUBLE, MPI_SUM, w); });
  // The neighbourhood forms on a line (not periodic: the MPIs agree there).
  MPI_Comm line;
  const int dims[1] = {p}, periods[1] = {0};
  MPI_Cart_create(w, 1, dims, periods, 0, &line);
  const MPI_Count nc[2] = {1, 1};
  const MPI_Aint nd[2] = {0, 3}, nb[2] = {0, 3 * sizeof(double)};
  const int inc[2] = {1, 1}, ind[2] = {0, 3};
  const MPI_Datatype nt[2] = {MPI_DOUBLE, MPI_DOUBLE};
  persist("Neighbor_allgather_init",
          [&](MPI_Request* q) { return MPI_Neighbor_allgather_init_c(s, 1, MPI_DOUBLE, g, 1, MPI_DOUBLE, line, i0, q); },
          [&] { PMPI_Neighbor_allgather(s, 1, MPI_DOUBLE, x, 1, MPI_DOUBLE, line); });
  persist("Neighbor_allgatherv_init",
          [&](MPI_Request* q) { return MPI_Neighbor_allgatherv_init_c(s, 1, MPI_DOUBLE, g, nc, nd, MPI_DOUBLE, line, i0, q); },
          [&] { PMPI_Neighbor_allgatherv(s, 1, MPI_DOUBLE, x, inc, ind, MPI_DOUBLE, line); });
  persist("Neighbor_alltoall_init",
          [&](MPI_Request* q) { return MPI_Neighbor_alltoall_init_c(s, 1, MPI_DOUBLE, g, 1, MPI_DOUBLE, line, i0, q); },
          [&] { PMPI_Neighbor_alltoall(s, 1, MPI_DOUBLE, x, 1, MPI_DOUBLE, line); });
  persist("Neighbor_alltoallv_init",
          [&](MPI_Request* q) { return MPI_Neighbor_alltoallv_init_c(s, nc, nd, MPI_DOUBLE, g, nc, nd, MPI_DOUBLE, line, i0, q); },
          [&] { PMPI_Neighbor_alltoallv(s, inc, ind, MPI_DOUBLE, x, inc, ind, MPI_DOUBLE, line); });
  persist("Neighbor_alltoallw_init",
          [&](MPI_Request* q) { return MPI_Neighbor_alltoallw_init_c(s, nc, nb, nt, g, nc, nb, nt, line, i0, q); },
          [&] { PMPI_Neighbor_alltoallw(s, inc, nb, nt, x, inc, nb, nt, line); });
  MPI_Comm_free(&line);
}

#else

TEST(LargeCount, NeedsAnMpi4Header) {
  GTEST_SKIP() << "the MPI's header is MPI " << MPI_VERSION << "." << MPI_SUBVERSION
               << ": it has no large-count (_c) calls, and Ferry defines none";
}

#endif

}  // namespace
