// The stub protocol of the interposer (IPC and pipelined messages announced by a stub on the
// user's communicator) on machines without a GPU: under FERRY_PROTOCOL_TEST=1 large sends
// (blocking and non-blocking) of host buffers take the pipelined method, so matching, wildcards, probes of every kind,
// truncation, different send and receive types, and progress while the receiver blocks elsewhere
// are checked in CI. Pairs of ranks (0-1, 2-3) exchange.
#include "test_mpi_protocol.hpp"

namespace {

using namespace ferry_protocol_test;

TEST_F(Protocol, BlockingSendsArePipelinedAndArrive) {
  const int other = 1 - pair_rank();
  const long before = ferry_mpi_pipelined_sent();
  if (pair_rank() == 0) {
    auto v = pattern(0, 1);
    ASSERT_EQ(MPI_Send(v.data(), kN, MPI_DOUBLE, other, 5, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Ssend(v.data(), kN, MPI_DOUBLE, other, 6, pair_comm()), MPI_SUCCESS);
    EXPECT_EQ(ferry_mpi_pipelined_sent() - before, 2);
  } else {
    std::vector<double> got(kN + 100, -1.0);
    MPI_Status st;
    ASSERT_EQ(MPI_Recv(got.data(), kN + 100, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, pair_comm(), &st),
              MPI_SUCCESS);
    int count = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, kN);
    EXPECT_EQ(st.MPI_SOURCE, other);
    EXPECT_EQ(st.MPI_TAG, 5);
    EXPECT_EQ(got, [] { auto w = pattern(0, 1); w.resize(kN + 100, -1.0); return w; }());
    // Received as pairs of doubles: a type other than the sender's.
    MPI_Datatype two;
    MPI_Type_contiguous(2, MPI_DOUBLE, &two);
    MPI_Type_commit(&two);
    std::fill(got.begin(), got.end(), -1.0);
    ASSERT_EQ(MPI_Recv(got.data(), kN / 2, two, other, 6, pair_comm(), &st), MPI_SUCCESS);
    MPI_Get_count(&st, two, &count);
    EXPECT_EQ(count, kN / 2);
    EXPECT_EQ(got, [] { auto w = pattern(0, 1); w.resize(kN + 100, -1.0); return w; }())
        << "received as pairs of doubles";
    MPI_Type_free(&two);
  }
  MPI_Barrier(pair_comm());
}

// A strided sender type (chunks of whole elements) into a strided receiver type of another shape,
// whose one element is longer than the message (MPI allows a partial last element): the result
// must be what the MPI itself delivers (PMPI_Send/PMPI_Recv, bypassing the interposer).
// Non-blocking sends are pipelined too: MPI_Isend returns once every chunk is posted, and the
// request completes through every completion call (Wait, Waitall of a window, Test in a loop,
// Waitany); MPI_Issend; a request freed while active still delivers; MPI_Cancel leaves them be.
// Both ranks send and receive at once, so each one's chunks wait for the other's receive.
TEST_F(Protocol, NonBlockingSendsArePipelined) {
  const int me = pair_rank(), other = 1 - me;
  const long before = ferry_mpi_pipelined_sent();
  constexpr int kWindow = 3;
  std::vector<std::vector<double>> out, in;
  for (int k = 0; k < kWindow; ++k) {
    out.push_back(pattern(me, 20 + k));
    in.emplace_back(kN, -1.0);
  }
  std::vector<MPI_Request> sends(kWindow), recvs(kWindow);
  for (int k = 0; k < kWindow; ++k) {
    ASSERT_EQ(MPI_Irecv(in[k].data(), kN, MPI_DOUBLE, other, 70 + k, pair_comm(), &recvs[k]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Isend(out[k].data(), kN, MPI_DOUBLE, other, 70 + k, pair_comm(), &sends[k]), MPI_SUCCESS);
  }
  EXPECT_EQ(ferry_mpi_pipelined_sent() - before, kWindow);
  EXPECT_EQ(MPI_Cancel(&sends[0]), MPI_SUCCESS);  // too late to cancel: it completes normally
  ASSERT_EQ(MPI_Wait(&sends[0], MPI_STATUS_IGNORE), MPI_SUCCESS);
  for (int flag = 0; !flag;) ASSERT_EQ(MPI_Test(&sends[1], &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
  int index = -1;
  ASSERT_EQ(MPI_Waitany(1, &sends[2], &index, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(index, 0);
  ASSERT_EQ(MPI_Waitall(kWindow, recvs.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
  for (int k = 0; k < kWindow; ++k) EXPECT_EQ(in[k], pattern(other, 20 + k)) << "message " << k;

  // Issend, and a request freed while its chunks are still on the way.
  MPI_Request r[2];
  auto v = pattern(me, 30), w = pattern(me, 31);
  std::vector<double> got_v(kN, -1.0), got_w(kN, -1.0);
  ASSERT_EQ(MPI_Issend(v.data(), kN, MPI_DOUBLE, other, 80, pair_comm(), &r[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Isend(w.data(), kN, MPI_DOUBLE, other, 81, pair_comm(), &r[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Request_free(&r[1]), MPI_SUCCESS);
  EXPECT_EQ(r[1], MPI_REQUEST_NULL);
  ASSERT_EQ(MPI_Recv(got_v.data(), kN, MPI_DOUBLE, other, 80, pair_comm(), MPI_STATUS_IGNORE), MPI_SUCCESS);
  ASSERT_EQ(MPI_Recv(got_w.data(), kN, MPI_DOUBLE, other, 81, pair_comm(), MPI_STATUS_IGNORE), MPI_SUCCESS);
  ASSERT_EQ(MPI_Wait(&r[0], MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(got_v, pattern(other, 30));
  EXPECT_EQ(got_w, pattern(other, 31));
  EXPECT_EQ(ferry_mpi_pipelined_sent() - before, kWindow + 2);
  MPI_Barrier(pair_comm());
  // Ferry completes the freed request in the calls that follow.
  EXPECT_EQ(pending_after_progress(), 0) << "the freed request was completed by progress";
}

TEST_F(Protocol, DerivedTypesOnBothSides) {
  const int other = 1 - pair_rank();
  MPI_Datatype rows;  // 64 rows of 512 doubles out of 1024: 256 KiB per element
  MPI_Type_vector(64, 512, 1024, MPI_DOUBLE, &rows);
  MPI_Type_commit(&rows);
  const int elems = 8;  // 8 x 256 KiB = 2 MiB packed
  const int n = 64 * 512 * elems;  // doubles that arrive
  MPI_Datatype grp;  // groups of 3 of every 4 doubles, one group more than the message fills
  MPI_Type_vector(n / 3 + 1, 3, 4, MPI_DOUBLE, &grp);
  MPI_Type_commit(&grp);
  if (pair_rank() == 0) {
    auto v = pattern(0, 2, 64 * 1024 * elems);
    const long before = ferry_mpi_pipelined_sent();
    ASSERT_EQ(MPI_Send(v.data(), elems, rows, other, 7, pair_comm()), MPI_SUCCESS);
    EXPECT_EQ(ferry_mpi_pipelined_sent() - before, 1);
    ASSERT_EQ(PMPI_Send(v.data(), elems, rows, other, 8, pair_comm()), MPI_SUCCESS);
  } else {
    const std::size_t span = static_cast<std::size_t>(n / 3 + 1) * 4 + 8;
    std::vector<double> got(span, -1.0), ref(span, -1.0);
    MPI_Status st, rst;
    ASSERT_EQ(MPI_Recv(got.data(), 1, grp, other, 7, pair_comm(), &st), MPI_SUCCESS);
    ASSERT_EQ(PMPI_Recv(ref.data(), 1, grp, other, 8, pair_comm(), &rst), MPI_SUCCESS);
    int elements = 0, want = 0;
    MPI_Get_elements(&st, MPI_DOUBLE, &elements);
    PMPI_Get_elements(&rst, MPI_DOUBLE, &want);
    EXPECT_EQ(elements, n);
    EXPECT_EQ(elements, want);
    EXPECT_TRUE(got == ref) << "the interposer delivered other bytes than the MPI";
    EXPECT_NE(got[0], -1.0);
  }
  MPI_Type_free(&grp);
  MPI_Type_free(&rows);
  MPI_Barrier(pair_comm());
}

// Probe, Iprobe, Mprobe and Improbe report the real size of a stub message; Recv, Irecv, Mrecv and
// Imrecv then deliver it.
TEST_F(Protocol, ProbesReportTheRealSize) {
  const int other = 1 - pair_rank();
  if (pair_rank() == 0) {
    for (int k = 0; k < 4; ++k) {
      auto v = pattern(0, 10 + k, static_cast<std::size_t>(kN - k));
      ASSERT_EQ(MPI_Send(v.data(), kN - k, MPI_DOUBLE, other, 20 + k, pair_comm()), MPI_SUCCESS);
    }
  } else {
    for (int k = 0; k < 4; ++k) {
      MPI_Status st;
      MPI_Message msg = MPI_MESSAGE_NULL;
      int flag = 0;
      if (k == 0) ASSERT_EQ(MPI_Probe(other, 20, pair_comm(), &st), MPI_SUCCESS);
      if (k == 1)
        while (!flag) ASSERT_EQ(MPI_Iprobe(MPI_ANY_SOURCE, 21, pair_comm(), &flag, &st), MPI_SUCCESS);
      if (k == 2) ASSERT_EQ(MPI_Mprobe(other, MPI_ANY_TAG, pair_comm(), &msg, &st), MPI_SUCCESS);
      if (k == 3)
        while (!flag) ASSERT_EQ(MPI_Improbe(other, 23, pair_comm(), &flag, &msg, &st), MPI_SUCCESS);
      int count = 0;
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      ASSERT_EQ(count, kN - k) << "probe " << k;
      ASSERT_EQ(st.MPI_TAG, 20 + k);
      // A second probe sees the same message, still with its real size.
      if (k == 0) {
        MPI_Status again;
        ASSERT_EQ(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, pair_comm(), &again), MPI_SUCCESS);
        MPI_Get_count(&again, MPI_DOUBLE, &count);
        EXPECT_EQ(count, kN);
        EXPECT_EQ(again.MPI_TAG, 20);
      }
      std::vector<double> got(static_cast<std::size_t>(kN), -1.0);
      MPI_Status rst;
      MPI_Request r;
      if (k == 0)
        ASSERT_EQ(MPI_Recv(got.data(), kN, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, pair_comm(), &rst),
                  MPI_SUCCESS);
      if (k == 1) {
        ASSERT_EQ(MPI_Irecv(got.data(), kN, MPI_DOUBLE, other, 21, pair_comm(), &r), MPI_SUCCESS);
        ASSERT_EQ(MPI_Wait(&r, &rst), MPI_SUCCESS);
      }
      if (k == 2) ASSERT_EQ(MPI_Mrecv(got.data(), kN, MPI_DOUBLE, &msg, &rst), MPI_SUCCESS);
      if (k == 3) {
        ASSERT_EQ(MPI_Imrecv(got.data(), kN, MPI_DOUBLE, &msg, &r), MPI_SUCCESS);
        ASSERT_EQ(MPI_Wait(&r, &rst), MPI_SUCCESS);
      }
      MPI_Get_count(&rst, MPI_DOUBLE, &count);
      EXPECT_EQ(count, kN - k) << "receive " << k;
      EXPECT_EQ(rst.MPI_SOURCE, other);
      EXPECT_EQ(rst.MPI_TAG, 20 + k);
      auto want = pattern(0, 10 + k, static_cast<std::size_t>(kN - k));
      want.resize(kN, -1.0);
      ASSERT_EQ(got, want) << "receive " << k;
    }
  }
  MPI_Barrier(pair_comm());
}

// A persistent receive whose message a probe already took (Ferry received it early to tell its
// size): MPI_Start delivers it at once, and every kind of completion sees it, with the right
// status; the request stays usable for messages that come the normal way. Messages: a pipelined
// one (a stub) and an ordinary one of a stub's size (so taken early as well).
TEST_F(Protocol, PersistentReceivesGetMessagesTakenEarly) {
  const int other = 1 - pair_rank();
  constexpr int kSmall = kStubDoubles;
  if (pair_rank() == 0) {
    for (int k = 0; k < 5; ++k) {
      auto big = pattern(0, 40 + k);
      ASSERT_EQ(MPI_Send(big.data(), kN, MPI_DOUBLE, other, 60, pair_comm()), MPI_SUCCESS);
      auto small = pattern(0, 50 + k, kSmall);
      ASSERT_EQ(MPI_Send(small.data(), kSmall, MPI_DOUBLE, other, 61, pair_comm()), MPI_SUCCESS);
      MPI_Barrier(pair_comm());
    }
  } else {
    std::vector<double> big(kN + 8, -1.0), small(kSmall + 3, -1.0);
    MPI_Datatype pair;  // freed right away: the requests keep what they need
    MPI_Type_contiguous(1, MPI_DOUBLE, &pair);
    MPI_Type_commit(&pair);
    MPI_Request r[2];
    ASSERT_EQ(MPI_Recv_init(big.data(), kN + 8, pair, other, 60, pair_comm(), &r[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Recv_init(small.data(), kSmall + 3, MPI_DOUBLE, MPI_ANY_SOURCE, 61, pair_comm(), &r[1]),
              MPI_SUCCESS);
    MPI_Type_free(&pair);
    for (int k = 0; k < 5; ++k) {
      std::fill(big.begin(), big.end(), -1.0);
      std::fill(small.begin(), small.end(), -1.0);
      // The sender's blocking send of the large message may wait for its receive (as in any
      // MPI), so the small one is probed only after the large one's receive has started.
      MPI_Status ps;
      if (k == 3) {  // one started from a message taken early, the other in MPI
        ASSERT_EQ(MPI_Probe(other, 60, pair_comm(), &ps), MPI_SUCCESS);
        ASSERT_EQ(MPI_Startall(2, r), MPI_SUCCESS);
      } else {
        if (k != 2) ASSERT_EQ(MPI_Probe(other, 60, pair_comm(), &ps), MPI_SUCCESS);
        ASSERT_EQ(MPI_Start(&r[0]), MPI_SUCCESS);
        if (k != 2) ASSERT_EQ(MPI_Probe(MPI_ANY_SOURCE, 61, pair_comm(), &ps), MPI_SUCCESS);
        ASSERT_EQ(MPI_Start(&r[1]), MPI_SUCCESS);
      }  // round 2: no probe, both come through MPI
      MPI_Request keep[2] = {r[0], r[1]};
      MPI_Status st[2];
      if (k == 0 || k == 2) {
        ASSERT_EQ(MPI_Waitall(2, r, st), MPI_SUCCESS);
      } else if (k == 1) {  // "any": an inactive request would count as null there
        int index = -1;
        ASSERT_EQ(MPI_Waitany(2, r, &index, &st[0]), MPI_SUCCESS);
        ASSERT_NE(index, MPI_UNDEFINED);
        int other_index = 1 - index;
        ASSERT_EQ(MPI_Wait(&r[other_index], &st[1]), MPI_SUCCESS);
        if (index == 1) std::swap(st[0], st[1]);
      } else if (k == 3) {  // "some", polled
        int done = 0, got[2] = {0, 0};
        while (done < 2) {
          int out = 0, idx[2];
          MPI_Status ss[2];
          ASSERT_EQ(MPI_Testsome(2, r, &out, idx, ss), MPI_SUCCESS);
          ASSERT_NE(out, MPI_UNDEFINED) << "both requests must count as active";
          for (int j = 0; j < out; ++j) {
            st[idx[j]] = ss[j];
            ++got[idx[j]];
            ++done;
          }
        }
        EXPECT_EQ(got[0], 1);
        EXPECT_EQ(got[1], 1);
      } else {
        int flag = 0;
        while (!flag) ASSERT_EQ(MPI_Request_get_status(r[1], &flag, &st[1]), MPI_SUCCESS);
        ASSERT_EQ(MPI_Wait(&r[0], &st[0]), MPI_SUCCESS);
        ASSERT_EQ(MPI_Test(&r[1], &flag, &st[1]), MPI_SUCCESS);
        EXPECT_TRUE(flag);
      }
      EXPECT_EQ(r[0], keep[0]) << "a persistent request keeps its handle";
      EXPECT_EQ(r[1], keep[1]);
      int count = 0;
      MPI_Get_count(&st[0], MPI_DOUBLE, &count);
      EXPECT_EQ(count, kN) << "round " << k;
      MPI_Get_count(&st[1], MPI_DOUBLE, &count);
      EXPECT_EQ(count, kSmall) << "round " << k;
      EXPECT_EQ(st[0].MPI_SOURCE, other);
      EXPECT_EQ(st[1].MPI_SOURCE, other);
      EXPECT_EQ(st[0].MPI_TAG, 60);
      EXPECT_EQ(st[1].MPI_TAG, 61);
      auto want_big = pattern(0, 40 + k);
      want_big.resize(kN + 8, -1.0);
      auto want_small = pattern(0, 50 + k, kSmall);
      want_small.resize(kSmall + 3, -1.0);
      EXPECT_EQ(big, want_big) << "round " << k;
      EXPECT_EQ(small, want_small) << "round " << k;
      MPI_Barrier(pair_comm());
    }
    ASSERT_EQ(MPI_Request_free(&r[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Request_free(&r[1]), MPI_SUCCESS);
    EXPECT_EQ(r[0], MPI_REQUEST_NULL);
    EXPECT_EQ(ferry_mpi_pending(), 0) << "nothing left with Ferry";
  }
  MPI_Barrier(pair_comm());
}

// An early message too large for the persistent receive that gets it: the wait reports
// MPI_ERR_TRUNCATE through the receive's communicator (errors return there), with the status of
// what fitted; an unrelated receive with a type Ferry never saw still works meanwhile.
TEST_F(Protocol, PersistentReceiveTruncatedFromAnEarlyMessage) {
  const int other = 1 - pair_rank();
  constexpr int kSmall = kStubDoubles;
  MPI_Comm comm;
  MPI_Comm_dup(pair_comm(), &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if (pair_rank() == 0) {
    auto small = pattern(0, 90, kSmall);
    ASSERT_EQ(MPI_Send(small.data(), kSmall, MPI_DOUBLE, other, 1, comm), MPI_SUCCESS);
    int x = 42;
    ASSERT_EQ(MPI_Send(&x, 1, MPI_INT, other, 2, comm), MPI_SUCCESS);
  } else {
    MPI_Status st;
    ASSERT_EQ(MPI_Probe(other, 1, comm, &st), MPI_SUCCESS);  // taken early: stub-sized
    // A type committed past the interposer (Ferry never translated it) while that message waits.
    MPI_Datatype raw;
    PMPI_Type_contiguous(1, MPI_INT, &raw);
    PMPI_Type_commit(&raw);
    int x = 0;
    ASSERT_EQ(MPI_Recv(&x, 1, raw, other, 2, comm, &st), MPI_SUCCESS);
    EXPECT_EQ(x, 42);
    PMPI_Type_free(&raw);
    std::vector<double> got(10, -1.0);
    MPI_Request r;
    ASSERT_EQ(MPI_Recv_init(got.data(), 10, MPI_DOUBLE, other, 1, comm, &r), MPI_SUCCESS);
    ASSERT_EQ(MPI_Start(&r), MPI_SUCCESS);
    EXPECT_EQ(MPI_Wait(&r, &st), MPI_ERR_TRUNCATE);
    int count = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, 10);
    auto want = pattern(0, 90, 10);
    EXPECT_EQ(got, want);
    ASSERT_NE(r, MPI_REQUEST_NULL) << "still the application's persistent request";
    MPI_Request_free(&r);
    EXPECT_EQ(ferry_mpi_pending(), 0);
  }
  MPI_Comm_free(&comm);
  MPI_Barrier(pair_comm());
}

// The rest of the completions on a persistent receive filled from an early message: MPI_Testany,
// MPI_Waitsome, and MPI_Cancel (too late: the request completes normally, not cancelled).
TEST_F(Protocol, PersistentEarlyReceiveOtherCompletions) {
  const int other = 1 - pair_rank();
  constexpr int kSmall = kStubDoubles;
  if (pair_rank() == 0) {
    for (int k = 0; k < 3; ++k) {
      auto v = pattern(0, 100 + k, kSmall);
      ASSERT_EQ(MPI_Send(v.data(), kSmall, MPI_DOUBLE, other, 97, pair_comm()), MPI_SUCCESS);
    }
  } else {
    std::vector<double> got(kSmall, -1.0);
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    ASSERT_EQ(MPI_Recv_init(got.data(), kSmall, MPI_DOUBLE, other, 97, pair_comm(), &r[1]), MPI_SUCCESS);
    for (int k = 0; k < 3; ++k) {
      MPI_Status st;
      ASSERT_EQ(MPI_Probe(other, 97, pair_comm(), &st), MPI_SUCCESS);
      ASSERT_EQ(MPI_Start(&r[1]), MPI_SUCCESS);
      if (k == 0) {
        int index = -1, flag = 0;
        while (!flag) ASSERT_EQ(MPI_Testany(2, r, &index, &flag, &st), MPI_SUCCESS);
        EXPECT_EQ(index, 1);
      } else if (k == 1) {
        int out = 0, idx[2];
        MPI_Status ss[2];
        ASSERT_EQ(MPI_Waitsome(2, r, &out, idx, ss), MPI_SUCCESS);
        ASSERT_EQ(out, 1);
        EXPECT_EQ(idx[0], 1);
        st = ss[0];
      } else {
        ASSERT_EQ(MPI_Cancel(&r[1]), MPI_SUCCESS);
        ASSERT_EQ(MPI_Wait(&r[1], &st), MPI_SUCCESS);
        int cancelled = 1;
        MPI_Test_cancelled(&st, &cancelled);
        EXPECT_EQ(cancelled, 0) << "the data had arrived: the cancel fails";
      }
      int count = 0;
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      EXPECT_EQ(count, kSmall) << "round " << k;
      EXPECT_EQ(st.MPI_TAG, 97);
      EXPECT_EQ(got, pattern(0, 100 + k, kSmall)) << "round " << k;
      EXPECT_NE(r[1], MPI_REQUEST_NULL);
    }
    ASSERT_EQ(MPI_Request_free(&r[1]), MPI_SUCCESS);
    EXPECT_EQ(ferry_mpi_pending(), 0);
  }
  MPI_Barrier(pair_comm());
}

}  // namespace
