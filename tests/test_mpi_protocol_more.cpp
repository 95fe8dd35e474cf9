// tests/test_mpi_protocol_more.cpp — test_mpi_protocol, part 2: sendrecv, progress, order, threads.
#include "test_mpi_protocol.hpp"

#include <chrono>

namespace {

using namespace ferry_protocol_test;

// MPI_Sendrecv whose receive half matches a message a probe already took early.
TEST_F(Protocol, SendrecvGetsAMessageTakenEarly) {
  const int other = 1 - pair_rank();
  constexpr int kSmall = kStubDoubles;  // taken early by the probe
  if (pair_rank() == 0) {
    auto v = pattern(0, 95, kSmall);
    ASSERT_EQ(MPI_Send(v.data(), kSmall, MPI_DOUBLE, other, 95, pair_comm()), MPI_SUCCESS);
    int back = 0;
    ASSERT_EQ(MPI_Recv(&back, 1, MPI_INT, other, 96, pair_comm(), MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(back, 7);
  } else {
    MPI_Status st;
    ASSERT_EQ(MPI_Probe(other, 95, pair_comm(), &st), MPI_SUCCESS);
    std::vector<double> got(kSmall, -1.0);
    int seven = 7;
    ASSERT_EQ(MPI_Sendrecv(&seven, 1, MPI_INT, other, 96, got.data(), kSmall, MPI_DOUBLE, other, 95,
                           pair_comm(), &st),
              MPI_SUCCESS);
    EXPECT_EQ(got, pattern(0, 95, kSmall));
    EXPECT_EQ(st.MPI_TAG, 95);
  }
  MPI_Barrier(pair_comm());
}

// Truncation: into a smaller large buffer, and into a buffer smaller than a megabyte (no stub is
// expected there, but a stub fits). Both report MPI_ERR_TRUNCATE and the sender completes.
TEST_F(Protocol, TruncationIsReportedAndTheSenderCompletes) {
  const int other = 1 - pair_rank();
  if (pair_rank() == 0) {
    auto v = pattern(0, 3);
    ASSERT_EQ(MPI_Send(v.data(), kN, MPI_DOUBLE, other, 30, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send(v.data(), kN, MPI_DOUBLE, other, 31, pair_comm()), MPI_SUCCESS);
  } else {
    std::vector<double> got(kN, -1.0);
    MPI_Status st;
    int rc = MPI_Recv(got.data(), kN / 2, MPI_DOUBLE, other, 30, pair_comm(), &st);
    int cls = 0;
    MPI_Error_class(rc, &cls);
    EXPECT_EQ(cls, MPI_ERR_TRUNCATE);
    EXPECT_EQ(got[kN / 2 - 1], 3e6 + kN / 2 - 1);  // what fits arrived
    EXPECT_EQ(got[kN / 2], -1.0);
    rc = MPI_Recv(got.data(), 100, MPI_DOUBLE, other, 31, pair_comm(), &st);
    MPI_Error_class(rc, &cls);
    EXPECT_EQ(cls, MPI_ERR_TRUNCATE);
  }
  MPI_Barrier(pair_comm());
}

// The receiver posts Irecv, then blocks in a synchronous send to the sender before it waits: the
// sender's pipelined send must still complete (the receiver serves its pending receive).
TEST_F(Protocol, ProgressWhileTheReceiverBlocksElsewhere) {
  const int other = 1 - pair_rank();
  double token = 0;
  if (pair_rank() == 0) {
    auto v = pattern(0, 4);
    ASSERT_EQ(MPI_Send(v.data(), kN, MPI_DOUBLE, other, 40, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Recv(&token, 1, MPI_DOUBLE, other, 41, pair_comm(), MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(token, 7.0);
  } else {
    std::vector<double> got(kN, -1.0);
    MPI_Request r;
    ASSERT_EQ(MPI_Irecv(got.data(), kN, MPI_DOUBLE, other, 40, pair_comm(), &r), MPI_SUCCESS);
    token = 7.0;
    ASSERT_EQ(MPI_Ssend(&token, 1, MPI_DOUBLE, other, 41, pair_comm()), MPI_SUCCESS);
    MPI_Status st;
    ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS);
    int count = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, kN);
    EXPECT_EQ(got, pattern(0, 4));
  }
  MPI_Barrier(pair_comm());
}

// Both directions at once through MPI_Sendrecv, and messages in flight back to back: order kept.
TEST_F(Protocol, ExchangesAndOrder) {
  const int other = 1 - pair_rank();
  auto mine = pattern(pair_rank(), 5);
  std::vector<double> got(kN, -1.0);
  MPI_Status st;
  ASSERT_EQ(MPI_Sendrecv(mine.data(), kN, MPI_DOUBLE, other, 50, got.data(), kN, MPI_DOUBLE, other,
                         50, pair_comm(), &st),
            MPI_SUCCESS);
  EXPECT_EQ(got, pattern(other, 5));
  if (pair_rank() == 0) {
    for (int k = 0; k < 3; ++k) {
      auto v = pattern(0, 60 + k);
      ASSERT_EQ(MPI_Send(v.data(), kN, MPI_DOUBLE, other, 60, pair_comm()), MPI_SUCCESS);
    }
  } else {
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(MPI_Recv(got.data(), kN, MPI_DOUBLE, other, 60, pair_comm(), MPI_STATUS_IGNORE),
                MPI_SUCCESS);
      ASSERT_EQ(got[1], 0 * 1e7 + (60 + k) * 1e6 + 1) << "message " << k << " out of order";
    }
  }
  MPI_Barrier(pair_comm());
}

// MPI_Sendrecv_replace both ways at once with pipelined messages (it must not wait inside MPI for
// its own stub), and a receive freed with MPI_Request_free while active: Ferry still delivers it.
TEST_F(Protocol, SendrecvReplaceAndFreedRequests) {
  const int other = 1 - pair_rank();
  auto buf = pattern(pair_rank(), 8);
  MPI_Status st;
  ASSERT_EQ(MPI_Sendrecv_replace(buf.data(), kN, MPI_DOUBLE, other, 80, other, 80, pair_comm(), &st),
            MPI_SUCCESS);
  int count = 0;
  MPI_Get_count(&st, MPI_DOUBLE, &count);
  EXPECT_EQ(count, kN);
  EXPECT_EQ(buf, pattern(other, 8));

  double token = 0;
  if (pair_rank() == 0) {
    auto v = pattern(0, 9);
    ASSERT_EQ(MPI_Send(v.data(), kN, MPI_DOUBLE, other, 90, pair_comm()), MPI_SUCCESS);
    token = 1;
    ASSERT_EQ(MPI_Send(&token, 1, MPI_DOUBLE, other, 91, pair_comm()), MPI_SUCCESS);
  } else {
    std::vector<double> got(kN, -1.0);
    MPI_Request r;
    ASSERT_EQ(MPI_Irecv(got.data(), kN, MPI_DOUBLE, other, 90, pair_comm(), &r), MPI_SUCCESS);
    ASSERT_EQ(MPI_Request_free(&r), MPI_SUCCESS);
    EXPECT_EQ(r, MPI_REQUEST_NULL);
    // The sender finishes its message before it sends the token, so once the token is here the
    // freed receive has its data.
    ASSERT_EQ(MPI_Recv(&token, 1, MPI_DOUBLE, other, 91, pair_comm(), MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(got, pattern(0, 9));
  }
  MPI_Barrier(pair_comm());
}

// MPI_Request_get_status: once it says complete, the data is in the buffer (before any wait), and
// the status has the real size; the wait that follows agrees.
TEST_F(Protocol, RequestGetStatusDeliversFirst) {
  const int other = 1 - pair_rank();
  if (pair_rank() == 0) {
    auto v = pattern(0, 11);
    ASSERT_EQ(MPI_Send(v.data(), kN, MPI_DOUBLE, other, 95, pair_comm()), MPI_SUCCESS);
  } else {
    std::vector<double> got(kN, -1.0);
    MPI_Request r;
    ASSERT_EQ(MPI_Irecv(got.data(), kN, MPI_DOUBLE, other, 95, pair_comm(), &r), MPI_SUCCESS);
    int flag = 0;
    MPI_Status st;
    while (!flag) ASSERT_EQ(MPI_Request_get_status(r, &flag, &st), MPI_SUCCESS);
    int count = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, kN);
    EXPECT_EQ(got, pattern(0, 11));
    ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS);
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, kN);
  }
  MPI_Barrier(pair_comm());
}

// The receiver posts Irecv and enters MPI_Barrier before waiting, the sender sends (blocking) and
// then enters the barrier: the barrier must serve the pending receive, or both wait for ever.
// Then barriers of every rank of the world and of a split communicator still synchronize.
TEST_F(Protocol, BarrierServesPendingReceives) {
  const int other = 1 - pair_rank();
  if (pair_rank() == 0) {
    auto v = pattern(0, 12);
    ASSERT_EQ(MPI_Send(v.data(), kN, MPI_DOUBLE, other, 97, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Barrier(pair_comm()), MPI_SUCCESS);
  } else {
    std::vector<double> got(kN, -1.0);
    MPI_Request r;
    ASSERT_EQ(MPI_Irecv(got.data(), kN, MPI_DOUBLE, other, 97, pair_comm(), &r), MPI_SUCCESS);
    ASSERT_EQ(MPI_Barrier(pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(got, pattern(0, 12));
  }
  // A barrier orders: every rank writes its mark before the barrier, reads all after it.
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Win win;
  int* marks = nullptr;
  MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &marks, &win);
  for (int round = 1; round <= 3; ++round) {
    MPI_Win_lock_all(0, win);
    *marks = round;
    MPI_Win_sync(win);
    MPI_Win_unlock_all(win);
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
    MPI_Win_lock_all(0, win);
    for (int p = 0; p < world; ++p) {
      MPI_Aint size = 0;
      int disp = 0;
      int* theirs = nullptr;
      MPI_Win_shared_query(win, p, &size, &disp, &theirs);
      EXPECT_GE(*theirs, round) << "rank " << p << " round " << round;
    }
    MPI_Win_unlock_all(win);
    ASSERT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  }
  MPI_Win_free(&win);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  EXPECT_EQ(MPI_Barrier(half), MPI_SUCCESS);
  EXPECT_EQ(MPI_Comm_free(&half), MPI_SUCCESS);
}

// A receive posted before a blocking collective whose sender blocks in its send until the
// receiver serves it: the receiver is inside MPI_Allreduce meanwhile (legal MPI: the receive is
// posted, so the send must complete). Under MPI_THREAD_MULTIPLE Ferry serves it from a helper
// thread while the collective blocks; otherwise this deadlocks (docs/design.md, Limits).
TEST_F(Protocol, BlockingCollectivesServeWhileTheyBlock) {
  int level = 0;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE) GTEST_SKIP() << "the MPI gives no MPI_THREAD_MULTIPLE";
  const int other = 1 - pair_rank();
  for (int round = 0; round < 3; ++round) {
    // Rounds 0 and 1: MPI_Allreduce; round 2: MPI_Bcast from the receiver.
    auto collective = [&](int* sum) {
      int mine = pair_rank() + 10 * round;
      if (round < 2) return MPI_Allreduce(&mine, sum, 1, MPI_INT, MPI_SUM, pair_comm());
      if (pair_rank() == 1) *sum = 1 + 20 * round;
      return MPI_Bcast(sum, 1, MPI_INT, 1, pair_comm());
    };
    int sum = -1;
    if (pair_rank() == 0) {
      auto v = pattern(0, 70 + round);
      ASSERT_EQ(MPI_Send(v.data(), kN, MPI_DOUBLE, other, 80, pair_comm()), MPI_SUCCESS);
      ASSERT_EQ(collective(&sum), MPI_SUCCESS);
    } else {
      std::vector<double> got(kN, -1.0);
      MPI_Request r;
      ASSERT_EQ(MPI_Irecv(got.data(), kN, MPI_DOUBLE, other, 80, pair_comm(), &r), MPI_SUCCESS);
      ASSERT_EQ(collective(&sum), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
      EXPECT_EQ(got, pattern(0, 70 + round)) << "round " << round;
    }
    EXPECT_EQ(sum, 1 + 20 * round) << "round " << round;
  }
  MPI_Barrier(pair_comm());
}

// Under MPI_THREAD_MULTIPLE: threads send and receive pipelined messages at once, each on its own
// tag, both directions, with non-blocking receives completed by MPI_Wait.
TEST_F(Protocol, Threads) {
  int level = 0;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE) GTEST_SKIP() << "the MPI gives no MPI_THREAD_MULTIPLE";
  const int other = 1 - pair_rank();
  const int threads = 4, rounds = 3;
  std::vector<int> bad(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<double> got(kN);
      for (int k = 0; k < rounds; ++k) {
        auto mine = pattern(pair_rank(), t * 10 + k);
        MPI_Request r;
        MPI_Irecv(got.data(), kN, MPI_DOUBLE, other, 200 + t, pair_comm(), &r);
        if (MPI_Send(mine.data(), kN, MPI_DOUBLE, other, 200 + t, pair_comm()) != MPI_SUCCESS)
          ++bad[static_cast<std::size_t>(t)];
        if (MPI_Wait(&r, MPI_STATUS_IGNORE) != MPI_SUCCESS) ++bad[static_cast<std::size_t>(t)];
        if (got != pattern(other, t * 10 + k)) ++bad[static_cast<std::size_t>(t)];
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(bad[static_cast<std::size_t>(t)], 0) << "thread " << t;
  MPI_Barrier(pair_comm());
}

// Under MPI_THREAD_MULTIPLE: threads whose small messages Ferry does not track complete them in
// MPI_Waitall while other threads post tracked (pipelined) ones. MPI hands a handle it freed in
// one thread's wait to another thread's new request at once; the first thread's completion must
// not take the new request's entry for its own (it did: the other receive then kept the stub as
// its data, or its staging went back to the pool while in use).
TEST_F(Protocol, ThreadsReusingHandles) {
  int level = 0;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE) GTEST_SKIP() << "the MPI gives no MPI_THREAD_MULTIPLE";
  const int other = 1 - pair_rank();
  const int threads = 4;
  const int n_large = (1 << 17) + 8;  // just over 1 MiB: pipelined under FERRY_PIPELINE_MIN=1 MiB
  std::vector<int> bad(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const bool large = t % 2 == 1;
      const int n = large ? n_large : 8;
      const int rounds = large ? 12 : 3000;
      std::vector<double> got(static_cast<std::size_t>(n));
      for (int k = 0; k < rounds; ++k) {
        const auto mine = pattern(pair_rank(), t * 10 + k % 7, static_cast<std::size_t>(n));
        MPI_Request r[2];
        MPI_Irecv(got.data(), n, MPI_DOUBLE, other, 300 + t, pair_comm(), &r[0]);
        MPI_Isend(mine.data(), n, MPI_DOUBLE, other, 300 + t, pair_comm(), &r[1]);
        if (MPI_Waitall(2, r, MPI_STATUSES_IGNORE) != MPI_SUCCESS) ++bad[static_cast<std::size_t>(t)];
        if (got != pattern(other, t * 10 + k % 7, static_cast<std::size_t>(n))) ++bad[static_cast<std::size_t>(t)];
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(bad[static_cast<std::size_t>(t)], 0) << "thread " << t;
  MPI_Barrier(pair_comm());
}

// A process that only posts (MPI_Isend and MPI_Irecv, no wait or test) still serves the stub
// receives it has pending, at most kOpenPassGap (100 us) apart: a blocking pipelined send to it
// completes while it posts, not once it waits 2 s later.
TEST_F(Protocol, PostingServesPendingReceives) {
  const int other = 1 - pair_rank();
  const std::vector<double> mine = pattern(pair_rank(), 5);
  std::vector<double> got(kN);
  MPI_Request big;
  ASSERT_EQ(MPI_Irecv(got.data(), kN, MPI_DOUBLE, other, 400, pair_comm(), &big), MPI_SUCCESS);
  MPI_Barrier(pair_comm());
  if (pair_rank() == 0) {
    const double t0 = MPI_Wtime();
    ASSERT_EQ(MPI_Send(mine.data(), kN, MPI_DOUBLE, other, 400, pair_comm()), MPI_SUCCESS);
    EXPECT_LT(MPI_Wtime() - t0, 1.0) << "the receiver served its pending receive only once it waited";
    ASSERT_EQ(MPI_Wait(&big, MPI_STATUS_IGNORE), MPI_SUCCESS);
  } else {
    const int posts = 4000;  // about 2 s of posting, one small message to itself every 0.5 ms
    std::vector<int> in(posts, -1), out(posts);
    std::vector<MPI_Request> small;
    small.reserve(2 * posts);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < posts && MPI_Wtime() - t0 < 2.0; ++i) {
      out[static_cast<std::size_t>(i)] = i;
      small.emplace_back();
      MPI_Irecv(&in[static_cast<std::size_t>(i)], 1, MPI_INT, pair_rank(), 401, pair_comm(), &small.back());
      small.emplace_back();
      MPI_Isend(&out[static_cast<std::size_t>(i)], 1, MPI_INT, pair_rank(), 401, pair_comm(), &small.back());
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    ASSERT_EQ(MPI_Waitall(static_cast<int>(small.size()), small.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
    for (std::size_t i = 0; i < small.size() / 2; ++i) EXPECT_EQ(in[i], static_cast<int>(i));
    ASSERT_EQ(MPI_Send(mine.data(), kN, MPI_DOUBLE, other, 400, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&big, MPI_STATUS_IGNORE), MPI_SUCCESS);
  }
  EXPECT_EQ(got, pattern(other, 5));
  MPI_Barrier(pair_comm());
}

}  // namespace
