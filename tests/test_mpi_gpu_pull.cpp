// MPI_Alltoall(v/w) read in place (FERRY_PULL, src/mpi/coll_pull.cpp) under mpiexec -n 2 and -n 4
// on one node: every process copies the blocks it receives from the senders' GPU buffers with one
// kernel. Each case checks every int that arrived (block b of a call names its sender, its
// receiver, the call and its position), that the call was read in place at every rank
// (ferry_mpi_collective_pulls) or, where one rank's block cannot be, that all ranks took the
// messages instead and still delivered every int. Exits 77 (skipped) where there is no GPU.
#include <cuda_runtime.h>
#include <ferry/ferry_mpi.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <vector>

#include "gpu_test_util.hpp"  // CUDA_OK

namespace {

int value(int from, int to, int call, int k) { return from * 1000000 + to * 10000 + call * 1000 + k % 1000; }

class Pull : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
    ASSERT_GT(devices, 0);
    MPI_Comm_rank(MPI_COMM_WORLD, &me_);
    MPI_Comm_size(MPI_COMM_WORLD, &n_);
    ASSERT_EQ(cudaSetDevice(me_ % devices), cudaSuccess);
  }
  // Every rank read the last call in place (true) or none did (false).
  static bool pulled_everywhere(long before) {
    const int mine = ferry_mpi_collective_pulls() - before == 1 ? 1 : 0;
    int all = 0, any = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(all, any) << "some ranks read in place, others did not";
    return all == 1;
  }
  // MPI_Alltoallv of ints on `comm` with `count(from, to)` ints per block, blocks packed in peer
  // order with a gap of 3 ints between them; the send buffer is written on the legacy stream
  // without a synchronize (Ferry orders its reads after it). Checks every received int and that
  // the gaps stay untouched.
  void alltoallv(MPI_Comm comm, int call, int (*count)(int, int)) {
    int r = 0, n = 0;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    int s_total = 0, r_total = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = count(r, p);
      sd[p] = s_total;
      s_total += sc[p] + 3;
      rc[p] = count(p, r);
      rd[p] = r_total;
      r_total += rc[p] + 3;
    }
    std::vector<int> out(static_cast<std::size_t>(s_total), -1), in(static_cast<std::size_t>(r_total), -7);
    for (int p = 0; p < n; ++p)
      for (int k = 0; k < sc[p]; ++k) out[static_cast<std::size_t>(sd[p] + k)] = value(r, p, call, k);
    ferry_test::Device send_mem(static_cast<std::int64_t>(out.size() * sizeof(int) + 4));
    int* send = ferry_test::as<int>(send_mem);
    ferry_test::Device recv_mem(static_cast<std::int64_t>(in.size() * sizeof(int) + 4));
    int* recv = ferry_test::as<int>(recv_mem);
    CUDA_OK(cudaMemcpy(recv, in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_OK(cudaDeviceSynchronize());
    if (busy_) {  // the legacy stream still copying when the call starts: the readers wait for it
      CUDA_OK(cudaMemcpyAsync(busy_, busy_ + kBusy / 2, kBusy / 2, cudaMemcpyDeviceToDevice, 0));
    }
    CUDA_OK(cudaMemcpyAsync(send, out.data(), out.size() * sizeof(int), cudaMemcpyHostToDevice, 0));
    ASSERT_EQ(MPI_Alltoallv(send, sc.data(), sd.data(), MPI_INT, recv, rc.data(), rd.data(), MPI_INT, comm), MPI_SUCCESS);
    std::vector<int> got(in.size());
    EXPECT_EQ(cudaMemcpy(got.data(), recv, got.size() * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    long wrong = 0;  // counted, not asserted one by one: every rank must reach the next call
    for (int p = 0; p < n; ++p) {
      for (int k = 0; k < rc[p]; ++k) wrong += got[static_cast<std::size_t>(rd[p] + k)] != value(p, r, call, k);
      for (int k = rc[p]; k < rc[p] + 3; ++k) wrong += got[static_cast<std::size_t>(rd[p] + k)] != -7;
    }
    EXPECT_EQ(wrong, 0) << "call " << call;
  }
  static constexpr std::size_t kBusy = std::size_t{1} << 30;  // a 512 MiB copy: ~0.25 ms
  char* busy_ = nullptr;
  int me_ = 0, n_ = 0;
};

int uneven(int from, int to) { return (from * 7 + to * 3) % 5 == 0 ? 0 : 100 * (from + 1) + 17 * to; }
int large(int, int) { return 64 * 1024; }

TEST_F(Pull, AlltoallvUnevenBlocksAndZeros) {
  for (int call = 0; call < 3; ++call) {
    const long before = ferry_mpi_collective_pulls();
    alltoallv(MPI_COMM_WORLD, call, uneven);
    EXPECT_TRUE(pulled_everywhere(before)) << "call " << call;
  }
  const long before = ferry_mpi_collective_pulls();
  alltoallv(MPI_COMM_WORLD, 3, large);
  EXPECT_TRUE(pulled_everywhere(before));
}

TEST_F(Pull, AfterWorkStillQueued) {
  // The send buffers are written behind a long copy on the legacy stream: each sender offers an
  // event, which its readers' streams wait for.
  CUDA_OK(cudaMalloc(&busy_, kBusy));
  for (int call = 11; call < 14; ++call) {
    const long before = ferry_mpi_collective_pulls();
    alltoallv(MPI_COMM_WORLD, call, uneven);
    EXPECT_TRUE(pulled_everywhere(before)) << "call " << call;
  }
  cudaFree(busy_);
  busy_ = nullptr;
}

TEST_F(Pull, ServesAPendingReceiveMeanwhile) {
  // Rank 1 posts a receive of a GPU message, then enters the collective; rank 0 sends that
  // message (over IPC: it waits for rank 1's answer) only later, then enters the collective. Rank
  // 1 must answer while it waits in the collective (a blocking collective of the MPI's would not).
  if (n_ < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::size_t bytes = std::size_t{1} << 20;
  ferry_test::Device msg_mem(static_cast<std::int64_t>(bytes));
  char* msg = ferry_test::as<char>(msg_mem);
  CUDA_OK(cudaMemset(msg, me_ + 1, bytes));
  for (int round = 0; round < 3; ++round) {
    MPI_Request r = MPI_REQUEST_NULL;
    if (me_ == 1) ASSERT_EQ(MPI_Irecv(msg, static_cast<int>(bytes), MPI_BYTE, 0, 5, MPI_COMM_WORLD, &r), MPI_SUCCESS);
    if (me_ == 0) {
      struct timespec nap {0, 200 * 1000 * 1000};
      nanosleep(&nap, nullptr);
      ASSERT_EQ(MPI_Send(msg, static_cast<int>(bytes), MPI_BYTE, 1, 5, MPI_COMM_WORLD), MPI_SUCCESS);
    }
    const long before = ferry_mpi_collective_pulls();
    alltoallv(MPI_COMM_WORLD, 20 + round, uneven);
    EXPECT_TRUE(pulled_everywhere(before));
    if (me_ == 1) {
      ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
      std::vector<char> got(bytes);
      CUDA_OK(cudaMemcpy(got.data(), msg, bytes, cudaMemcpyDeviceToHost));
      EXPECT_EQ(std::count(got.begin(), got.end(), 1), static_cast<long>(bytes));
    }
  }
}

TEST_F(Pull, NotForNonBlockingOrForcedMessages) {
  const int per = 2048;
  ferry_test::Device send_mem(static_cast<std::int64_t>(static_cast<std::size_t>(per) * n_ * sizeof(int)));
  int* send = ferry_test::as<int>(send_mem);
  ferry_test::Device recv_mem(static_cast<std::int64_t>(static_cast<std::size_t>(per) * n_ * sizeof(int)));
  int* recv = ferry_test::as<int>(recv_mem);
  std::vector<int> counts(n_, per), displs(n_);
  for (int p = 0; p < n_; ++p) displs[p] = p * per;
  const long before = ferry_mpi_collective_pulls();
  MPI_Request r = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Ialltoallv(send, counts.data(), displs.data(), MPI_INT, recv, counts.data(), displs.data(), MPI_INT,
                           MPI_COMM_WORLD, &r),
            MPI_SUCCESS);
  ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
  ASSERT_EQ(ferry_mpi_force_collectives("messages"), 0);
  ASSERT_EQ(MPI_Alltoallv(send, counts.data(), displs.data(), MPI_INT, recv, counts.data(), displs.data(), MPI_INT,
                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  ferry_mpi_force_collectives(nullptr);
  EXPECT_EQ(ferry_mpi_collective_pulls(), before);
}

TEST_F(Pull, AbsoluteAddressesFromMpiBottom) {
  // MPI_Alltoallw from MPI_BOTTOM: each send block is one element of a struct type holding the
  // block's absolute address (MPI_Get_address), contiguous to Ferry.
  const int per = 1500;
  ferry_test::Device send_mem(static_cast<std::int64_t>(static_cast<std::size_t>(per) * n_ * sizeof(int)));
  int* send = ferry_test::as<int>(send_mem);
  ferry_test::Device recv_mem(static_cast<std::int64_t>(static_cast<std::size_t>(per) * n_ * sizeof(int)));
  int* recv = ferry_test::as<int>(recv_mem);
  std::vector<int> out(static_cast<std::size_t>(per) * n_), got(out.size());
  for (int p = 0; p < n_; ++p)
    for (int k = 0; k < per; ++k) out[static_cast<std::size_t>(p * per + k)] = value(me_, p, 30, k);
  CUDA_OK(cudaMemcpy(send, out.data(), out.size() * sizeof(int), cudaMemcpyHostToDevice));
  std::vector<MPI_Datatype> st(n_), rt(n_, MPI_INT);
  std::vector<int> sc(n_, 1), sd(n_, 0), rc(n_, per), rd(n_);
  for (int p = 0; p < n_; ++p) {
    MPI_Aint at = 0;
    MPI_Get_address(send + static_cast<std::size_t>(p) * per, &at);
    int len = per;
    MPI_Datatype ints = MPI_INT;
    MPI_Type_create_struct(1, &len, &at, &ints, &st[p]);
    MPI_Type_commit(&st[p]);
    rd[p] = p * per * static_cast<int>(sizeof(int));
  }
  const long before = ferry_mpi_collective_pulls();
  ASSERT_EQ(MPI_Alltoallw(MPI_BOTTOM, sc.data(), sd.data(), st.data(), recv, rc.data(), rd.data(), rt.data(), MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_TRUE(pulled_everywhere(before));
  CUDA_OK(cudaMemcpy(got.data(), recv, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
  long wrong = 0;
  for (int p = 0; p < n_; ++p)
    for (int k = 0; k < per; ++k) wrong += got[static_cast<std::size_t>(p * per + k)] != value(p, me_, 30, k);
  EXPECT_EQ(wrong, 0);
  for (MPI_Datatype& t : st) MPI_Type_free(&t);
}

TEST_F(Pull, SendBufferRewrittenBetweenCalls) {
  // The same buffers, rewritten (without a synchronize) right after each call returns: a reader
  // still reading when its sender returned would see the next call's ints.
  const int per = 4096;
  ferry_test::Device send_mem(static_cast<std::int64_t>(static_cast<std::size_t>(per) * n_ * sizeof(int)));
  int* send = ferry_test::as<int>(send_mem);
  ferry_test::Device recv_mem(static_cast<std::int64_t>(static_cast<std::size_t>(per) * n_ * sizeof(int)));
  int* recv = ferry_test::as<int>(recv_mem);
  std::vector<int> out(static_cast<std::size_t>(per) * n_), got(out.size());
  for (int call = 0; call < 20; ++call) {
    for (int p = 0; p < n_; ++p)
      for (int k = 0; k < per; ++k) out[static_cast<std::size_t>(p * per + k)] = value(me_, p, call, k);
    CUDA_OK(cudaMemcpyAsync(send, out.data(), out.size() * sizeof(int), cudaMemcpyHostToDevice, 0));
    const long before = ferry_mpi_collective_pulls();
    ASSERT_EQ(MPI_Alltoall(send, per, MPI_INT, recv, per, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
    EXPECT_TRUE(pulled_everywhere(before)) << "call " << call;
    CUDA_OK(cudaMemsetAsync(send, 0xff, out.size() * sizeof(int), 0));
    CUDA_OK(cudaMemcpy(got.data(), recv, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
    long wrong = 0;  // a reader still reading after its sender returned would see -1s
    for (int p = 0; p < n_; ++p)
      for (int k = 0; k < per; ++k) wrong += got[static_cast<std::size_t>(p * per + k)] != value(p, me_, call, k);
    EXPECT_EQ(wrong, 0) << "call " << call;
  }
}

TEST_F(Pull, ReorderedSubcommunicator) {
  MPI_Comm reversed = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, 0, n_ - me_, &reversed), MPI_SUCCESS);
  const long before = ferry_mpi_collective_pulls();
  alltoallv(reversed, 5, uneven);
  EXPECT_TRUE(pulled_everywhere(before));
  MPI_Comm_free(&reversed);
}

TEST_F(Pull, AlltoallwOfContiguousTypes) {
  // Four ints as one element of a contiguous type on the way out, as four MPI_INTs on the way in.
  MPI_Datatype four = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(4, MPI_INT, &four);
  MPI_Type_commit(&four);
  const int per = 1000;  // elements of `four` per block
  std::vector<int> sc(n_, per), rc(n_, 4 * per), sd(n_), rd(n_);
  std::vector<MPI_Datatype> st(n_, four), rt(n_, MPI_INT);
  for (int p = 0; p < n_; ++p) sd[p] = rd[p] = p * 4 * per * static_cast<int>(sizeof(int));
  std::vector<int> out(static_cast<std::size_t>(4 * per * n_)), got(out.size());
  for (int p = 0; p < n_; ++p)
    for (int k = 0; k < 4 * per; ++k) out[static_cast<std::size_t>(p * 4 * per + k)] = value(me_, p, 6, k);
  ferry_test::Device send_mem(static_cast<std::int64_t>(out.size() * sizeof(int)));
  int* send = ferry_test::as<int>(send_mem);
  ferry_test::Device recv_mem(static_cast<std::int64_t>(out.size() * sizeof(int)));
  int* recv = ferry_test::as<int>(recv_mem);
  CUDA_OK(cudaMemcpy(send, out.data(), out.size() * sizeof(int), cudaMemcpyHostToDevice));
  const long before = ferry_mpi_collective_pulls();
  ASSERT_EQ(MPI_Alltoallw(send, sc.data(), sd.data(), st.data(), recv, rc.data(), rd.data(), rt.data(), MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_TRUE(pulled_everywhere(before));
  CUDA_OK(cudaMemcpy(got.data(), recv, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
  for (int p = 0; p < n_; ++p)
    for (int k = 0; k < 4 * per; ++k) ASSERT_EQ(got[static_cast<std::size_t>(p * 4 * per + k)], value(p, me_, 6, k));
  MPI_Type_free(&four);
}

TEST_F(Pull, OneRankNotContiguousSendsEveryoneToTheMessages) {
  // Rank 0 receives into a strided type: no rank reads in place, every int still arrives; the
  // next call on the communicator skips the attempt (backoff), the one after reads in place again.
  MPI_Comm comm = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  // Two ints, one of every two, in an element of 4 ints' extent.
  MPI_Datatype gappy = MPI_DATATYPE_NULL, gap_raw = MPI_DATATYPE_NULL;
  MPI_Type_vector(2, 1, 2, MPI_INT, &gap_raw);
  MPI_Type_create_resized(gap_raw, 0, 4 * sizeof(int), &gappy);
  MPI_Type_commit(&gappy);
  MPI_Type_free(&gap_raw);
  // With `gappy` at rank 0 the counts halve there: 2 ints per element.
  long before = ferry_mpi_collective_pulls();
  {
    const int per = 64;
    std::vector<int> sc(n_, 2 * per), sd(n_), rc(n_, me_ == 0 ? per : 2 * per), rd(n_);
    for (int p = 0; p < n_; ++p) {
      sd[p] = p * 2 * per;
      rd[p] = me_ == 0 ? p * per : p * 2 * per;  // in elements of the receive type
    }
    std::vector<int> out(static_cast<std::size_t>(2 * per * n_)), got(static_cast<std::size_t>(4 * per * n_), -7);
    for (int p = 0; p < n_; ++p)
      for (int k = 0; k < 2 * per; ++k) out[static_cast<std::size_t>(p * 2 * per + k)] = value(me_, p, 7, k);
    ferry_test::Device send_mem(static_cast<std::int64_t>(out.size() * sizeof(int)));
    int* send = ferry_test::as<int>(send_mem);
    ferry_test::Device recv_mem(static_cast<std::int64_t>(got.size() * sizeof(int)));
    int* recv = ferry_test::as<int>(recv_mem);
    CUDA_OK(cudaMemcpy(send, out.data(), out.size() * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(recv, got.data(), got.size() * sizeof(int), cudaMemcpyHostToDevice));
    ASSERT_EQ(MPI_Alltoallv(send, sc.data(), sd.data(), MPI_INT, recv, rc.data(), rd.data(), me_ == 0 ? gappy : MPI_INT, comm),
              MPI_SUCCESS);
    CUDA_OK(cudaMemcpy(got.data(), recv, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
    for (int p = 0; p < n_; ++p)
      for (int k = 0; k < 2 * per; ++k) {
        // Rank 0: element e (2 ints) of block p starts at int 4 * (p * per + e); its ints at +0, +2.
        const std::size_t at = me_ == 0 ? static_cast<std::size_t>(4 * (p * per + k / 2) + 2 * (k % 2))
                                        : static_cast<std::size_t>(p * 2 * per + k);
        ASSERT_EQ(got[at], value(p, me_, 7, k)) << "from " << p << " int " << k;
      }
  }
  EXPECT_FALSE(pulled_everywhere(before));
  before = ferry_mpi_collective_pulls();
  alltoallv(comm, 8, uneven);
  EXPECT_FALSE(pulled_everywhere(before)) << "the call after a refusal skips the attempt";
  before = ferry_mpi_collective_pulls();
  alltoallv(comm, 9, uneven);
  EXPECT_TRUE(pulled_everywhere(before));
  MPI_Type_free(&gappy);
  MPI_Comm_free(&comm);
}

TEST_F(Pull, DistGraphOfUnequalDegrees) {
  // Rank r sends to every higher rank and receives from every lower one: in-degree r, out-degree
  // n - 1 - r (rank 0 receives nothing, the last rank sends nothing).
  std::vector<int> to, from;
  for (int p = me_ + 1; p < n_; ++p) to.push_back(p);
  for (int p = 0; p < me_; ++p) from.push_back(p);
  MPI_Comm g = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, static_cast<int>(from.size()), from.data(), MPI_UNWEIGHTED,
                                           static_cast<int>(to.size()), to.data(), MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g),
            MPI_SUCCESS);
  auto count = [](int a, int b) { return 500 + 37 * a + 11 * b; };
  std::vector<int> sc, sd, rc, rd;
  int s_total = 0, r_total = 0;
  for (int p : to) {
    sc.push_back(count(me_, p));
    sd.push_back(s_total);
    s_total += sc.back();
  }
  for (int p : from) {
    rc.push_back(count(p, me_));
    rd.push_back(r_total);
    r_total += rc.back();
  }
  std::vector<int> out(static_cast<std::size_t>(s_total) + 1), got(static_cast<std::size_t>(r_total) + 1);
  for (std::size_t i = 0; i < to.size(); ++i)
    for (int k = 0; k < sc[i]; ++k) out[static_cast<std::size_t>(sd[i] + k)] = value(me_, to[i], 40, k);
  ferry_test::Device send_mem(static_cast<std::int64_t>(out.size() * sizeof(int)));
  int* send = ferry_test::as<int>(send_mem);
  ferry_test::Device recv_mem(static_cast<std::int64_t>(got.size() * sizeof(int)));
  int* recv = ferry_test::as<int>(recv_mem);
  CUDA_OK(cudaMemcpy(send, out.data(), out.size() * sizeof(int), cudaMemcpyHostToDevice));
  const long before = ferry_mpi_collective_pulls();
  ASSERT_EQ(MPI_Neighbor_alltoallv(send, sc.data(), sd.data(), MPI_INT, recv, rc.data(), rd.data(), MPI_INT, g),
            MPI_SUCCESS);
  EXPECT_TRUE(pulled_everywhere(before));
  CUDA_OK(cudaMemcpy(got.data(), recv, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
  long wrong = 0;
  for (std::size_t j = 0; j < from.size(); ++j)
    for (int k = 0; k < rc[j]; ++k) wrong += got[static_cast<std::size_t>(rd[j] + k)] != value(from[j], me_, 40, k);
  EXPECT_EQ(wrong, 0);
  MPI_Comm_free(&g);
}

TEST_F(Pull, HostBuffersAtSomeRanks) {
  // Odd ranks receive into host memory (MPICH's suite mixes memory kinds by rank this way): no
  // rank reads in place, every int still arrives, through the messages.
  MPI_Comm comm = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  const int per = 3000;
  std::vector<int> counts(n_, per), displs(n_);
  for (int p = 0; p < n_; ++p) displs[p] = p * per;
  std::vector<int> out(static_cast<std::size_t>(per) * n_), got(out.size(), -7);
  for (int p = 0; p < n_; ++p)
    for (int k = 0; k < per; ++k) out[static_cast<std::size_t>(p * per + k)] = value(me_, p, 50, k);
  ferry_test::Device send_mem(static_cast<std::int64_t>(out.size() * sizeof(int)));
  int* send = ferry_test::as<int>(send_mem);
  CUDA_OK(cudaMemcpy(send, out.data(), out.size() * sizeof(int), cudaMemcpyHostToDevice));
  ferry_test::Device recv_mem(me_ % 2 == 0 ? static_cast<std::int64_t>(got.size() * sizeof(int)) : 1);
  int* recv = ferry_test::as<int>(recv_mem);
  int* into = me_ % 2 == 0 ? recv : got.data();
  for (int call = 0; call < 2; ++call) {
    const long before = ferry_mpi_collective_pulls();
    ASSERT_EQ(MPI_Alltoallv(send, counts.data(), displs.data(), MPI_INT, into, counts.data(), displs.data(), MPI_INT, comm),
              MPI_SUCCESS);
    EXPECT_FALSE(pulled_everywhere(before));
  }
  if (me_ % 2 == 0) CUDA_OK(cudaMemcpy(got.data(), recv, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
  long wrong = 0;
  for (int p = 0; p < n_; ++p)
    for (int k = 0; k < per; ++k) wrong += got[static_cast<std::size_t>(p * per + k)] != value(p, me_, 50, k);
  EXPECT_EQ(wrong, 0);
  MPI_Comm_free(&comm);
}

TEST_F(Pull, NeighbourhoodRing) {
  // A ring, periodic and not: block 0 goes down, block 1 up; the block from below came up
  // (MPI-4.1 8.6). Periodic on 2 processes both neighbours are the same one: the messages take it
  // (no rank reads in place). Not periodic, the border slots stay as they were.
  for (int periodic = 1; periodic >= 0; --periodic) {
    MPI_Comm ring = MPI_COMM_NULL;
    int dims[1] = {n_}, periods[1] = {periodic};
    ASSERT_EQ(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring), MPI_SUCCESS);
    int r = 0, lower = 0, upper = 0;
    MPI_Comm_rank(ring, &r);
    MPI_Cart_shift(ring, 0, 1, &lower, &upper);
    const int per = 3000 + 10 * n_;
    int counts[2] = {per, per}, displs[2] = {0, per + 5};
    std::vector<int> out(static_cast<std::size_t>(2 * per + 5)), got(out.size()), fresh(out.size(), -7);
    for (int b = 0; b < 2; ++b)
      for (int k = 0; k < per; ++k) out[static_cast<std::size_t>(displs[b] + k)] = value(r, b, 10, k);
    ferry_test::Device send_mem(static_cast<std::int64_t>(out.size() * sizeof(int)));
    int* send = ferry_test::as<int>(send_mem);
    ferry_test::Device recv_mem(static_cast<std::int64_t>(out.size() * sizeof(int)));
    int* recv = ferry_test::as<int>(recv_mem);
    CUDA_OK(cudaMemcpy(send, out.data(), out.size() * sizeof(int), cudaMemcpyHostToDevice));
    for (int call = 0; call < 2; ++call) {
      CUDA_OK(cudaMemcpy(recv, fresh.data(), fresh.size() * sizeof(int), cudaMemcpyHostToDevice));
      const long before = ferry_mpi_collective_pulls();
      if (call == 0) {
        ASSERT_EQ(MPI_Neighbor_alltoallv(send, counts, displs, MPI_INT, recv, counts, displs, MPI_INT, ring), MPI_SUCCESS);
      } else {  // every neighbour gets block 0
        ASSERT_EQ(MPI_Neighbor_allgather(send, per, MPI_INT, recv, per, MPI_INT, ring), MPI_SUCCESS);
      }
      EXPECT_EQ(pulled_everywhere(before), !periodic || n_ > 2) << "periodic " << periodic << " call " << call;
      CUDA_OK(cudaMemcpy(got.data(), recv, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
      const int from[2] = {lower, upper}, block[2] = {call == 0 ? 1 : 0, 0};
      const int at[2] = {0, call == 0 ? per + 5 : per};
      long wrong = 0;
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < per; ++k)
          wrong += got[static_cast<std::size_t>(at[j] + k)] != (from[j] == MPI_PROC_NULL ? -7 : value(from[j], block[j], 10, k));
      EXPECT_EQ(wrong, 0) << "periodic " << periodic << " call " << call;
    }
    MPI_Comm_free(&ring);
  }
}

}  // namespace
