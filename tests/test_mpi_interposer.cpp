// The interposer (libferry-mpi) linked before the MPI library, under mpiexec -n 2 and -n 4, with
// host buffers: datatypes committed with MPI_Type_commit alone reach Ferry, and every intercepted
// call gives the results the system MPI gives. (GPU buffers: test_mpi_gpu.)
#include <ferry/ferry.h>
#include <ferry/registry.hpp>
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace {

int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int s = 0;
  MPI_Comm_size(c, &s);
  return s;
}

TEST(Interposer, TypeCommitReachesFerry) {
  MPI_Datatype t;
  MPI_Type_vector(10, 2, 5, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);  // intercepted: no ferry_type_commit needed
  int size = 0;
  EXPECT_EQ(ferry_pack_size(1, t, &size), MPI_SUCCESS) << ferry_error_string();
  EXPECT_EQ(size, 160);
  MPI_Datatype copy = t;
  MPI_Type_free(&t);  // intercepted: Ferry forgets the handle
  // Ferry no longer holds it: releasing it again fails. (Asked without the MPI, which must not see
  // a freed handle: MPICH crashes on one.)
  EXPECT_EQ(ferry_type_free(copy), MPI_ERR_TYPE);
}

TEST(Interposer, PackMatchesSystemMpi) {
  MPI_Datatype t;
  int lens[3] = {2, 1, 3}, disps[3] = {0, 4, 7};
  MPI_Type_indexed(3, lens, disps, MPI_INT, &t);
  MPI_Type_commit(&t);
  std::vector<int> in(20);
  std::iota(in.begin(), in.end(), 100);
  std::vector<char> a(64), b(64);
  int pa = 0, pb = 0;
  ASSERT_EQ(MPI_Pack(in.data(), 2, t, a.data(), 64, &pa, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Pack(in.data(), 2, t, b.data(), 64, &pb, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(pa, pb);
  EXPECT_EQ(a, b);
  // And back: MPI_Unpack into a poisoned buffer leaves what PMPI_Unpack leaves, gaps included.
  std::vector<int> ua(20, -1), ub(20, -1);
  pa = pb = 0;
  ASSERT_EQ(MPI_Unpack(a.data(), 64, &pa, ua.data(), 2, t, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Unpack(b.data(), 64, &pb, ub.data(), 2, t, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(pa, pb);
  EXPECT_EQ(ua, ub);
  EXPECT_EQ(ua[0], 100);
  MPI_Type_free(&t);
}

// Every rank sends a strided column to the next and receives one from the previous, with
// MPI_Send/MPI_Recv (even ranks first) and with MPI_Sendrecv.
TEST(Interposer, PointToPointWithDerivedTypes) {
  const int me = rank_of(MPI_COMM_WORLD), n = size_of(MPI_COMM_WORLD);
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  MPI_Datatype col;
  MPI_Type_vector(8, 1, 4, MPI_INT, &col);
  MPI_Type_commit(&col);
  std::vector<int> grid(32), got(32, -1);
  for (int i = 0; i < 32; ++i) grid[static_cast<std::size_t>(i)] = me * 1000 + i;
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  MPI_Status st;
  if (me % 2 == 0) {
    ASSERT_EQ(MPI_Send(grid.data() + 1, 1, col, next, 7, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(MPI_Recv(got.data(), 8, MPI_INT, prev, 7, MPI_COMM_WORLD, &st), MPI_SUCCESS);
  } else {
    ASSERT_EQ(MPI_Recv(got.data(), 8, MPI_INT, prev, 7, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send(grid.data() + 1, 1, col, next, 7, MPI_COMM_WORLD), MPI_SUCCESS);
  }
  int count = 0;
  MPI_Get_count(&st, MPI_INT, &count);
  EXPECT_EQ(count, 8);
  EXPECT_EQ(st.MPI_SOURCE, prev);
  EXPECT_EQ(st.MPI_TAG, 7);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[static_cast<std::size_t>(i)], prev * 1000 + 1 + 4 * i);

  std::fill(got.begin(), got.end(), -1);
  ASSERT_EQ(MPI_Sendrecv(grid.data() + 2, 1, col, next, 9, got.data() + 3, 1, col, prev, 9,
                         MPI_COMM_WORLD, &st),
            MPI_SUCCESS);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[static_cast<std::size_t>(3 + 4 * i)], prev * 1000 + 2 + 4 * i);
  EXPECT_EQ(got[4], -1);
  MPI_Type_free(&col);
}

// A window of non-blocking sends and receives around the ring, completed by Waitall, then by a
// Testany loop.
TEST(Interposer, NonBlockingWindows) {
  const int me = rank_of(MPI_COMM_WORLD), n = size_of(MPI_COMM_WORLD);
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  MPI_Datatype col;
  MPI_Type_vector(16, 2, 6, MPI_FLOAT, &col);
  MPI_Type_commit(&col);
  const int window = 8;
  std::vector<float> src(96 * window), dst(96 * window, -1.f);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(me * 10000 + static_cast<int>(i));
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int round = 0; round < 2; ++round) {
    std::vector<MPI_Request> reqs(2 * window);
    for (int w = 0; w < window; ++w) {
      MPI_Irecv(dst.data() + 96 * w, 1, col, prev, w, MPI_COMM_WORLD, &reqs[static_cast<std::size_t>(w)]);
      MPI_Isend(src.data() + 96 * w, 1, col, next, w, MPI_COMM_WORLD, &reqs[static_cast<std::size_t>(window + w)]);
    }
    if (round == 0) {
      std::vector<MPI_Status> st(2 * window);
      ASSERT_EQ(MPI_Waitall(2 * window, reqs.data(), st.data()), MPI_SUCCESS);
      for (int w = 0; w < window; ++w) EXPECT_EQ(st[static_cast<std::size_t>(w)].MPI_TAG, w);
    } else {
      int left = 2 * window;
      while (left > 0) {
        int index = 0, flag = 0;
        ASSERT_EQ(MPI_Testany(2 * window, reqs.data(), &index, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
        if (flag && index != MPI_UNDEFINED) --left;
      }
    }
    for (int w = 0; w < window; ++w)
      for (int b = 0; b < 16; ++b)
        for (int k = 0; k < 2; ++k)
          ASSERT_EQ(dst[static_cast<std::size_t>(96 * w + 6 * b + k)],
                    static_cast<float>(prev * 10000 + 96 * w + 6 * b + k));
    std::fill(dst.begin(), dst.end(), -1.f);
  }
  MPI_Type_free(&col);
}

// Persistent requests reused in a loop, as halo codes do.
TEST(Interposer, PersistentRequestsInALoop) {
  const int me = rank_of(MPI_COMM_WORLD), n = size_of(MPI_COMM_WORLD);
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  MPI_Datatype col;
  MPI_Type_vector(32, 1, 3, MPI_INT, &col);
  MPI_Type_commit(&col);
  std::vector<int> src(96), dst(96, -1);
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  MPI_Request reqs[2];
  MPI_Recv_init(dst.data(), 1, col, prev, 11, MPI_COMM_WORLD, &reqs[0]);
  MPI_Send_init(src.data(), 1, col, next, 11, MPI_COMM_WORLD, &reqs[1]);
  for (int iter = 0; iter < 5; ++iter) {
    for (int i = 0; i < 96; ++i) src[static_cast<std::size_t>(i)] = me * 1000 + iter * 100 + i;
    ASSERT_EQ(MPI_Startall(2, reqs), MPI_SUCCESS);
    ASSERT_EQ(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    for (int b = 0; b < 32; ++b)
      ASSERT_EQ(dst[static_cast<std::size_t>(3 * b)], prev * 1000 + iter * 100 + 3 * b);
  }
  MPI_Request_free(&reqs[0]);
  MPI_Request_free(&reqs[1]);
  EXPECT_EQ(reqs[0], MPI_REQUEST_NULL);
  MPI_Type_free(&col);
}

// Collectives through the interposer on host buffers, with a derived type.
TEST(Interposer, CollectivesOnHostBuffers) {
  const int me = rank_of(MPI_COMM_WORLD), n = size_of(MPI_COMM_WORLD);
  std::vector<double> a(12), b(12, 0.0);
  for (int i = 0; i < 12; ++i) a[static_cast<std::size_t>(i)] = me + i;
  ASSERT_EQ(MPI_Allreduce(a.data(), b.data(), 12, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(b[static_cast<std::size_t>(i)], n * i + n * (n - 1) / 2.0);
  MPI_Datatype col;
  MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &col);
  MPI_Type_commit(&col);
  ASSERT_EQ(MPI_Bcast(a.data(), 1, col, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(a[static_cast<std::size_t>(i)], i % 3 == 0 ? i : me + i);
  MPI_Type_free(&col);
  std::vector<int> s(static_cast<std::size_t>(n)), r(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) s[static_cast<std::size_t>(i)] = me * 100 + i;
  ASSERT_EQ(MPI_Alltoall(s.data(), 1, MPI_INT, r.data(), 1, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  for (int i = 0; i < n; ++i) EXPECT_EQ(r[static_cast<std::size_t>(i)], i * 100 + me);
}

TEST(Interposer, TruncationIsReported) {
  const int me = rank_of(MPI_COMM_WORLD), n = size_of(MPI_COMM_WORLD);
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<int> buf(16, me);
  if (me == 0) {
    MPI_Send(buf.data(), 16, MPI_INT, 1, 3, MPI_COMM_WORLD);
  } else if (me == 1) {
    MPI_Status st;
    int rc = MPI_Recv(buf.data(), 8, MPI_INT, 0, 3, MPI_COMM_WORLD, &st);
    int cls = 0;
    MPI_Error_class(rc, &cls);
    EXPECT_EQ(cls, MPI_ERR_TRUNCATE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Cancelling a receive nobody sends to, probes and MPI_Get_elements with a derived type, zero-size
// messages and MPI_PROC_NULL: what the system MPI gives.
TEST(Interposer, CancelProbeElementsProcNull) {
  const int me = rank_of(MPI_COMM_WORLD), n = size_of(MPI_COMM_WORLD);
  if (n < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<double> buf(64, 1.0);
  MPI_Request r;
  ASSERT_EQ(MPI_Irecv(buf.data(), 64, MPI_DOUBLE, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &r),
            MPI_SUCCESS);
  ASSERT_EQ(MPI_Cancel(&r), MPI_SUCCESS);
  MPI_Status st;
  ASSERT_EQ(MPI_Wait(&r, &st), MPI_SUCCESS);
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  EXPECT_EQ(cancelled, 1);

  // A pair type {double, int} received as 5 elements' worth of bytes: probe and elements.
  MPI_Datatype pair;
  int lens[2] = {1, 1};
  MPI_Aint disps[2] = {0, 8};
  MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT};
  MPI_Type_create_struct(2, lens, disps, types, &pair);
  MPI_Type_commit(&pair);
  std::vector<char> raw(16 * 8, 0);
  if (me == 0) {
    ASSERT_EQ(MPI_Send(raw.data(), 5, pair, 1, 21, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send(raw.data(), 0, pair, 1, 22, MPI_COMM_WORLD), MPI_SUCCESS);
  } else if (me == 1) {
    ASSERT_EQ(MPI_Probe(0, 21, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    int count = 0, elems = 0;
    MPI_Get_count(&st, pair, &count);
    MPI_Get_elements(&st, pair, &elems);
    EXPECT_EQ(count, 5);
    EXPECT_EQ(elems, 10);
    ASSERT_EQ(MPI_Recv(raw.data(), 8, pair, 0, 21, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    MPI_Get_elements(&st, pair, &elems);
    EXPECT_EQ(elems, 10);
    ASSERT_EQ(MPI_Recv(raw.data(), 8, pair, 0, 22, MPI_COMM_WORLD, &st), MPI_SUCCESS);
    MPI_Get_count(&st, pair, &count);
    EXPECT_EQ(count, 0);
  }
  MPI_Type_free(&pair);
  ASSERT_EQ(MPI_Recv(buf.data(), 4, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st), MPI_SUCCESS);
  EXPECT_EQ(st.MPI_SOURCE, MPI_PROC_NULL);
  EXPECT_EQ(st.MPI_TAG, MPI_ANY_TAG);
  ASSERT_EQ(MPI_Send(buf.data(), 4, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_SUCCESS);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
