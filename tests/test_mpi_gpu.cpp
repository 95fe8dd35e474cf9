// The interposer with GPU buffers, 2 ranks (each on GPU rank % devices): blocking point-to-point
// and MPI_Pack with device memory on either or both sides, strided and contiguous datatypes,
// against the values the host computes. Exits 77 (skipped) where there is no GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include "mpi_pairs.hpp"

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

struct Device {
  double* p = nullptr;
  explicit Device(std::size_t n) { cudaMalloc(&p, n * sizeof(double)); }
  ~Device() { cudaFree(p); }
};

class MpiGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    cudaGetDeviceCount(&n);
    cudaSetDevice(world_rank() % n);
    int size = 0;
    MPI_Comm_size(pair_comm(), &size);
    if (size != 2) GTEST_SKIP() << "needs an even number of ranks";
  }
};

std::vector<double> values(int rank, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = rank * 1e6 + static_cast<double>(i);
  return v;
}

// Rank 0 sends a strided column of device memory; rank 1 receives it into device memory, into
// host memory, and into a strided device column.
TEST_F(MpiGpu, SendRecvDeviceBuffers) {
  const int me = pair_rank();
  MPI_Datatype col;
  MPI_Type_vector(256, 1, 8, MPI_DOUBLE, &col);
  MPI_Type_commit(&col);
  const std::size_t n = 256 * 8;
  std::vector<double> host = values(me, n);
  Device dev(n);
  CUDA_OK(cudaMemcpy(dev.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  if (me == 0) {
    ASSERT_EQ(MPI_Send(dev.p + 3, 1, col, 1, 1, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send(dev.p + 3, 1, col, 1, 2, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Ssend(dev.p + 3, 1, col, 1, 3, pair_comm()), MPI_SUCCESS);
  } else {
    Device got(n);
    CUDA_OK(cudaMemset(got.p, 0xFF, n * sizeof(double)));
    MPI_Status st;
    ASSERT_EQ(MPI_Recv(got.p, 512, MPI_DOUBLE, 0, 1, pair_comm(), &st), MPI_SUCCESS);
    int count = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, 256);
    std::vector<double> back(n);
    CUDA_OK(cudaMemcpy(back.data(), got.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 256; ++i) ASSERT_EQ(back[static_cast<std::size_t>(i)], 0 * 1e6 + 3 + 8 * i);
    std::vector<unsigned char> raw(sizeof(double));
    std::memcpy(raw.data(), &back[256], sizeof(double));
    EXPECT_EQ(raw[0], 0xFF) << "wrote past the received elements";

    std::vector<double> hostgot(256, -1);
    ASSERT_EQ(MPI_Recv(hostgot.data(), 256, MPI_DOUBLE, 0, 2, pair_comm(), MPI_STATUS_IGNORE),
              MPI_SUCCESS);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(hostgot[static_cast<std::size_t>(i)], 3 + 8 * i);

    CUDA_OK(cudaMemset(got.p, 0, n * sizeof(double)));
    ASSERT_EQ(MPI_Recv(got.p + 5, 1, col, 0, 3, pair_comm(), MPI_STATUS_IGNORE), MPI_SUCCESS);
    CUDA_OK(cudaMemcpy(back.data(), got.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 256; ++i) ASSERT_EQ(back[static_cast<std::size_t>(5 + 8 * i)], 3 + 8 * i);
    EXPECT_EQ(back[6], 0.0);
  }
  MPI_Type_free(&col);
}

// Host data into a device buffer, and both ranks exchanging device data with MPI_Sendrecv.
TEST_F(MpiGpu, HostToDeviceAndSendrecv) {
  const int me = pair_rank(), other = 1 - me;
  const std::size_t n = 4096;
  std::vector<double> host = values(me, n);
  Device dev(n), got(n);
  CUDA_OK(cudaMemcpy(dev.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  if (me == 0) {
    ASSERT_EQ(MPI_Send(host.data(), static_cast<int>(n), MPI_DOUBLE, 1, 4, pair_comm()),
              MPI_SUCCESS);
  } else {
    ASSERT_EQ(MPI_Recv(got.p, static_cast<int>(n), MPI_DOUBLE, 0, 4, pair_comm(),
                       MPI_STATUS_IGNORE),
              MPI_SUCCESS);
    std::vector<double> back(n);
    CUDA_OK(cudaMemcpy(back.data(), got.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    EXPECT_EQ(back, values(0, n));
  }
  MPI_Status st;
  ASSERT_EQ(MPI_Sendrecv(dev.p, static_cast<int>(n), MPI_DOUBLE, other, 5, got.p,
                         static_cast<int>(n), MPI_DOUBLE, other, 5, pair_comm(), &st),
            MPI_SUCCESS);
  EXPECT_EQ(st.MPI_SOURCE, other);
  std::vector<double> back(n);
  CUDA_OK(cudaMemcpy(back.data(), got.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, values(other, n));
}

// Small dense device messages (3 B to 4 KiB, odd sizes at odd addresses) received into a larger
// buffer, and a send of data that a copy on the default stream is still writing: the staging copy
// must be ordered after it, as a copy on the default stream of a CUDA-aware MPI would be.
TEST_F(MpiGpu, SmallMessagesAndTheDefaultStream) {
  const int me = pair_rank(), other = 1 - me;
  unsigned char* dev = nullptr;
  CUDA_OK(cudaMalloc(&dev, 8192));
  for (int n : {3, 8, 1000, 4096, 4093}) {
    for (int from = 0; from < 2; ++from) {
      std::vector<unsigned char> want(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) want[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i * 13 + n + from);
      if (me == from) {
        // Odd sizes at an odd offset, the others aligned.
        unsigned char* at = n % 2 ? dev + 1 : dev;
        CUDA_OK(cudaMemcpy(at, want.data(), want.size(), cudaMemcpyHostToDevice));
        ASSERT_EQ(MPI_Send(at, n, MPI_BYTE, other, 30, pair_comm()), MPI_SUCCESS);
      } else {
        CUDA_OK(cudaMemset(dev, 0xEE, 8192));
        unsigned char* at = n % 2 ? dev + 1 : dev;
        MPI_Status st;
        ASSERT_EQ(MPI_Recv(at, 8000, MPI_BYTE, other, 30, pair_comm(), &st), MPI_SUCCESS);
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        EXPECT_EQ(count, n);
        std::vector<unsigned char> got(static_cast<std::size_t>(n) + 1);
        CUDA_OK(cudaMemcpy(got.data(), at, got.size(), cudaMemcpyDeviceToHost));
        EXPECT_EQ(got[static_cast<std::size_t>(n)], 0xEE) << "wrote past the message, n=" << n;
        got.pop_back();
        EXPECT_EQ(got, want) << "n=" << n;
      }
    }
  }

  // Rank 0 queues a long copy and then a memset of the message on the default stream, and sends
  // at once, without synchronizing.
  const std::size_t big = std::size_t{256} << 20;
  void *a = nullptr, *b = nullptr;
  CUDA_OK(cudaMalloc(&a, big));
  CUDA_OK(cudaMalloc(&b, big));
  CUDA_OK(cudaMemset(dev, 0, 64));
  CUDA_OK(cudaDeviceSynchronize());
  if (me == 0) {
    for (int i = 0; i < 4; ++i) CUDA_OK(cudaMemcpyAsync(b, a, big, cudaMemcpyDeviceToDevice, 0));
    CUDA_OK(cudaMemsetAsync(dev, 0x5A, 64, 0));
    ASSERT_EQ(MPI_Send(dev, 64, MPI_BYTE, 1, 31, pair_comm()), MPI_SUCCESS);
  } else {
    std::vector<unsigned char> got(64, 0);
    ASSERT_EQ(MPI_Recv(dev, 64, MPI_BYTE, 0, 31, pair_comm(), MPI_STATUS_IGNORE), MPI_SUCCESS);
    CUDA_OK(cudaMemcpy(got.data(), dev, 64, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, std::vector<unsigned char>(64, 0x5A)) << "sent before the default stream wrote it";
  }
  CUDA_OK(cudaDeviceSynchronize());
  cudaFree(a);
  cudaFree(b);
  cudaFree(dev);
}

// After an IPC message each way, each rank knows on which GPU the other works: the model's
// locality is same_gpu when both use one GPU (by UUID), other_gpu when they use two.
TEST_F(MpiGpu, LocalityLearnedFromIpc) {
  const int me = pair_rank(), other = 1 - me;
  int device = 0;
  CUDA_OK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, device));
  char uuids[2][16];
  MPI_Allgather(prop.uuid.bytes, 16, MPI_BYTE, uuids, 16, MPI_BYTE, pair_comm());
  const bool one_gpu = std::memcmp(uuids[0], uuids[1], 16) == 0;
  int peer_world = -1;
  {
    MPI_Group g, wg;
    MPI_Comm_group(pair_comm(), &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, 1, &other, wg, &peer_world);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
  }
  // One message, rank 0 to rank 1: the receiver learns from the stub, the sender from the
  // acknowledgement. (Earlier tests of this process may have taught them already; on two GPUs
  // "other_gpu" is also what an unknown peer gets, so only the one-GPU run tells learning apart.)
  const std::size_t n = 1 << 18;  // 2 MiB: IPC by default between processes of a node
  Device a(n), b(n);
  const long sent0 = ferry_mpi_ipc_sent();
  if (me == 0) {
    ASSERT_EQ(MPI_Send(a.p, static_cast<int>(n), MPI_DOUBLE, other, 40, pair_comm()), MPI_SUCCESS);
    EXPECT_EQ(ferry_mpi_ipc_sent() - sent0, 1) << "the message went over IPC";
  } else {
    ASSERT_EQ(MPI_Recv(b.p, static_cast<int>(n), MPI_DOUBLE, other, 40, pair_comm(), MPI_STATUS_IGNORE),
              MPI_SUCCESS);
  }
  const char* loc = ferry_mpi_locality(peer_world, device);
  ASSERT_NE(loc, nullptr);
  EXPECT_STREQ(loc, one_gpu ? "same_gpu" : "other_gpu") << (me == 0 ? "sender" : "receiver");
  EXPECT_EQ(ferry_mpi_locality(1 << 30, device), nullptr);
  EXPECT_NE(ferry_mpi_locality(peer_world, 1 << 20), nullptr);  // a device no one has: no throw
}

// Windows of non-blocking device sends and receives, completed by Waitall, Waitany and Test.
TEST_F(MpiGpu, NonBlockingDeviceWindows) {
  const int me = pair_rank(), other = 1 - me;
  MPI_Datatype col;
  MPI_Type_vector(128, 3, 7, MPI_DOUBLE, &col);
  MPI_Type_commit(&col);
  const int window = 6;
  const std::size_t per = 128 * 7;
  std::vector<double> host = values(me, per * window);
  Device src(per * window), dst(per * window);
  CUDA_OK(cudaMemcpy(src.p, host.data(), host.size() * sizeof(double), cudaMemcpyHostToDevice));
  for (int mode = 0; mode < 3; ++mode) {
    CUDA_OK(cudaMemset(dst.p, 0, host.size() * sizeof(double)));
    std::vector<MPI_Request> reqs(2 * window);
    for (int w = 0; w < window; ++w) {
      ASSERT_EQ(MPI_Irecv(dst.p + per * w, 1, col, other, w, pair_comm(),
                          &reqs[static_cast<std::size_t>(w)]), MPI_SUCCESS);
      ASSERT_EQ(MPI_Isend(src.p + per * w, 1, col, other, w, pair_comm(),
                          &reqs[static_cast<std::size_t>(window + w)]), MPI_SUCCESS);
    }
    if (mode == 0) {
      ASSERT_EQ(MPI_Waitall(2 * window, reqs.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
    } else if (mode == 1) {
      for (int k = 0; k < 2 * window; ++k) {
        int index = 0;
        ASSERT_EQ(MPI_Waitany(2 * window, reqs.data(), &index, MPI_STATUS_IGNORE), MPI_SUCCESS);
      }
    } else {
      for (auto& r : reqs) {
        int flag = 0;
        while (!flag) ASSERT_EQ(MPI_Test(&r, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
      }
    }
    std::vector<double> back(host.size());
    CUDA_OK(cudaMemcpy(back.data(), dst.p, back.size() * sizeof(double), cudaMemcpyDeviceToHost));
    const std::vector<double> want = values(other, per * window);
    for (std::size_t w = 0; w < static_cast<std::size_t>(window); ++w)
      for (std::size_t b = 0; b < 128; ++b)
        for (std::size_t k = 0; k < 7; ++k) {
          const std::size_t i = w * per + b * 7 + k;
          ASSERT_EQ(back[i], k < 3 ? want[i] : 0.0) << "mode " << mode << " element " << i;
        }
  }
  MPI_Type_free(&col);
}

// Persistent requests on device buffers reused in a loop: each start packs the current data.
TEST_F(MpiGpu, PersistentDeviceRequests) {
  const int me = pair_rank(), other = 1 - me;
  MPI_Datatype col;
  MPI_Type_vector(64, 2, 5, MPI_DOUBLE, &col);
  MPI_Type_commit(&col);
  const std::size_t n = 64 * 5;
  Device src(n), dst(n);
  MPI_Request reqs[2];
  ASSERT_EQ(MPI_Recv_init(dst.p, 1, col, other, 21, pair_comm(), &reqs[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Send_init(src.p, 1, col, other, 21, pair_comm(), &reqs[1]), MPI_SUCCESS);
  for (int iter = 0; iter < 4; ++iter) {
    std::vector<double> host = values(me * 10 + iter, n);
    CUDA_OK(cudaMemcpy(src.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dst.p, 0, n * sizeof(double)));
    ASSERT_EQ(MPI_Startall(2, reqs), MPI_SUCCESS);
    if (iter % 2) {
      ASSERT_EQ(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    } else {
      ASSERT_EQ(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&reqs[1], MPI_STATUS_IGNORE), MPI_SUCCESS);
    }
    std::vector<double> back(n);
    CUDA_OK(cudaMemcpy(back.data(), dst.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    const std::vector<double> want = values(other * 10 + iter, n);
    for (std::size_t b = 0; b < 64; ++b)
      for (std::size_t k = 0; k < 5; ++k)
        ASSERT_EQ(back[b * 5 + k], k < 2 ? want[b * 5 + k] : 0.0) << "iteration " << iter;
  }
  ASSERT_EQ(MPI_Request_free(&reqs[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Request_free(&reqs[1]), MPI_SUCCESS);
  MPI_Type_free(&col);
}

// A matched probe and receive into device memory, and an in-place exchange of device data.
TEST_F(MpiGpu, MprobeMrecvAndSendrecvReplace) {
  const int me = pair_rank(), other = 1 - me;
  const std::size_t n = 600;
  std::vector<double> host = values(me, n);
  Device dev(n);
  CUDA_OK(cudaMemcpy(dev.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  if (me == 0) {
    ASSERT_EQ(MPI_Send(dev.p, 500, MPI_DOUBLE, 1, 31, pair_comm()), MPI_SUCCESS);
  } else {
    MPI_Message msg;
    MPI_Status st;
    ASSERT_EQ(MPI_Mprobe(0, 31, pair_comm(), &msg, &st), MPI_SUCCESS);
    int count = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, 500);
    Device got(n);
    ASSERT_EQ(MPI_Mrecv(got.p, count, MPI_DOUBLE, &msg, &st), MPI_SUCCESS);
    std::vector<double> back(500);
    CUDA_OK(cudaMemcpy(back.data(), got.p, 500 * sizeof(double), cudaMemcpyDeviceToHost));
    const std::vector<double> want = values(0, n);
    for (std::size_t i = 0; i < 500; ++i) ASSERT_EQ(back[i], want[i]);
  }
  MPI_Datatype col;
  MPI_Type_vector(200, 1, 3, MPI_DOUBLE, &col);
  MPI_Type_commit(&col);
  ASSERT_EQ(MPI_Sendrecv_replace(dev.p, 1, col, other, 32, other, 32, pair_comm(),
                                 MPI_STATUS_IGNORE),
            MPI_SUCCESS);
  std::vector<double> back(n);
  CUDA_OK(cudaMemcpy(back.data(), dev.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  const std::vector<double> theirs = values(other, n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], i % 3 == 0 ? theirs[i] : host[i]) << i;
  MPI_Type_free(&col);
}

// Collectives on device buffers, against the values the host computes.
TEST_F(MpiGpu, CollectivesOnDeviceBuffers) {
  const int me = pair_rank();
  const std::size_t n = 300;
  Device a(n * 2), b(n * 2);
  std::vector<double> mine = values(me, n * 2), back(n * 2);
  CUDA_OK(cudaMemcpy(a.p, mine.data(), mine.size() * sizeof(double), cudaMemcpyHostToDevice));
  // Allreduce, then in place.
  ASSERT_EQ(MPI_Allreduce(a.p, b.p, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, pair_comm()), MPI_SUCCESS);
  CUDA_OK(cudaMemcpy(back.data(), b.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 1e6 + 2.0 * static_cast<double>(i));
  ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, a.p, static_cast<int>(n), MPI_DOUBLE, MPI_MAX, pair_comm()), MPI_SUCCESS);
  CUDA_OK(cudaMemcpy(back.data(), a.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 1e6 + static_cast<double>(i));
  // Bcast of a strided column from rank 0: only its elements change on rank 1.
  CUDA_OK(cudaMemcpy(a.p, mine.data(), mine.size() * sizeof(double), cudaMemcpyHostToDevice));
  MPI_Datatype col;
  MPI_Type_vector(100, 1, 3, MPI_DOUBLE, &col);
  MPI_Type_commit(&col);
  ASSERT_EQ(MPI_Bcast(a.p, 1, col, 0, pair_comm()), MPI_SUCCESS);
  CUDA_OK(cudaMemcpy(back.data(), a.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  const std::vector<double> zero = values(0, n * 2);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], i % 3 == 0 ? zero[i] : mine[i]) << i;
  MPI_Type_free(&col);
  // Allgather and Alltoall of 150 doubles per rank; Reduce and Gather to rank 1; Scatter from 0.
  CUDA_OK(cudaMemcpy(a.p, mine.data(), mine.size() * sizeof(double), cudaMemcpyHostToDevice));
  ASSERT_EQ(MPI_Allgather(a.p, 150, MPI_DOUBLE, b.p, 150, MPI_DOUBLE, pair_comm()), MPI_SUCCESS);
  CUDA_OK(cudaMemcpy(back.data(), b.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < 150; ++i) {
    ASSERT_EQ(back[i], values(0, n)[i]);
    ASSERT_EQ(back[150 + i], values(1, n)[i]);
  }
  ASSERT_EQ(MPI_Alltoall(a.p, 150, MPI_DOUBLE, b.p, 150, MPI_DOUBLE, pair_comm()), MPI_SUCCESS);
  CUDA_OK(cudaMemcpy(back.data(), b.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < 150; ++i) {
    ASSERT_EQ(back[i], values(0, n)[150 * static_cast<std::size_t>(me) + i]);
    ASSERT_EQ(back[150 + i], values(1, n)[150 * static_cast<std::size_t>(me) + i]);
  }
  CUDA_OK(cudaMemset(b.p, 0, n * 2 * sizeof(double)));
  ASSERT_EQ(MPI_Reduce(a.p, b.p, static_cast<int>(n), MPI_DOUBLE, MPI_SUM, 1, pair_comm()), MPI_SUCCESS);
  if (me == 1) {
    CUDA_OK(cudaMemcpy(back.data(), b.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], 1e6 + 2.0 * static_cast<double>(i));
  }
  ASSERT_EQ(MPI_Gather(a.p, 100, MPI_DOUBLE, b.p, 100, MPI_DOUBLE, 1, pair_comm()), MPI_SUCCESS);
  if (me == 1) {
    CUDA_OK(cudaMemcpy(back.data(), b.p, 200 * sizeof(double), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < 100; ++i) {
      ASSERT_EQ(back[i], values(0, n)[i]);
      ASSERT_EQ(back[100 + i], values(1, n)[i]);
    }
  }
  CUDA_OK(cudaMemset(b.p, 0, n * 2 * sizeof(double)));
  ASSERT_EQ(MPI_Scatter(a.p, 50, MPI_DOUBLE, b.p, 50, MPI_DOUBLE, 0, pair_comm()), MPI_SUCCESS);
  CUDA_OK(cudaMemcpy(back.data(), b.p, 50 * sizeof(double), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < 50; ++i)
    ASSERT_EQ(back[i], values(0, n)[50 * static_cast<std::size_t>(me) + i]);
}

// MPI_Pack of a device buffer gives the bytes MPI_Pack gives for a host copy.
TEST_F(MpiGpu, PackDeviceBuffer) {
  const std::size_t n = 1000;
  std::vector<double> host = values(pair_rank(), n);
  Device dev(n);
  CUDA_OK(cudaMemcpy(dev.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  MPI_Datatype t;
  int lens[3] = {3, 1, 7}, disps[3] = {0, 10, 50};
  MPI_Type_indexed(3, lens, disps, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  std::vector<char> a(256), b(256);
  int pa = 0, pb = 0;
  ASSERT_EQ(MPI_Pack(dev.p, 2, t, a.data(), 256, &pa, pair_comm()), MPI_SUCCESS);
  ASSERT_EQ(PMPI_Pack(host.data(), 2, t, b.data(), 256, &pb, pair_comm()), MPI_SUCCESS);
  EXPECT_EQ(pa, pb);
  EXPECT_EQ(a, b);
  MPI_Type_free(&t);
}


// Same-node IPC: large device messages go GPU to GPU. Data inside a sub-allocated pool (the
// handle is of the enclosing allocation, with an offset), a non-contiguous type (packed into a
// device staging buffer), a host receive buffer, the real count in the status, truncation, and a
// buffer freed and allocated again between messages (the mapping cache must notice).
TEST_F(MpiGpu, IpcSameNode) {
  const int me = pair_rank(), other = 1 - me;
  const std::size_t n = 1 << 18;  // 2 MiB of doubles: above the IPC threshold
  const long sent0 = ferry_mpi_ipc_sent(), recv0 = ferry_mpi_ipc_received();
  std::vector<double> host = values(world_rank(), 3 * n);
  Device pool(4 * n);
  CUDA_OK(cudaMemcpy(pool.p, host.data(), 3 * n * sizeof(double), cudaMemcpyHostToDevice));
  MPI_Datatype every2nd;
  MPI_Type_vector(static_cast<int>(n / 2), 1, 2, MPI_DOUBLE, &every2nd);
  MPI_Type_commit(&every2nd);
  const int peer_world = world_rank() ^ 1;
  if (me == 0) {
    ASSERT_EQ(MPI_Send(pool.p + n + 7, static_cast<int>(n), MPI_DOUBLE, other, 1, pair_comm()),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Send(pool.p + 1, 1, every2nd, other, 2, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Ssend(pool.p, static_cast<int>(n), MPI_DOUBLE, other, 3, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send(pool.p, static_cast<int>(n), MPI_DOUBLE, other, 4, pair_comm()), MPI_SUCCESS);
    // A new allocation (often at the same address) with other data.
    for (int round = 0; round < 3; ++round) {
      Device fresh(n);
      std::vector<double> v(n, 1000.0 * round + 0.5);
      CUDA_OK(cudaMemcpy(fresh.p, v.data(), n * sizeof(double), cudaMemcpyHostToDevice));
      ASSERT_EQ(MPI_Send(fresh.p, static_cast<int>(n), MPI_DOUBLE, other, 10 + round, pair_comm()),
                MPI_SUCCESS);
    }
    EXPECT_GE(ferry_mpi_ipc_sent() - sent0, 7);
  } else {
    Device got(2 * n);
    std::vector<double> back(2 * n);
    MPI_Status st;
    ASSERT_EQ(MPI_Recv(got.p, static_cast<int>(2 * n), MPI_DOUBLE, other, 1, pair_comm(), &st),
              MPI_SUCCESS);
    int count = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, static_cast<int>(n));
    EXPECT_EQ(st.MPI_SOURCE, other);
    EXPECT_EQ(st.MPI_TAG, 1);
    CUDA_OK(cudaMemcpy(back.data(), got.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(back[i], peer_world * 1e6 + static_cast<double>(n + 7 + i)) << i;
    // Strided on both sides: every second double into every second slot from 5 on.
    CUDA_OK(cudaMemset(got.p, 0, 2 * n * sizeof(double)));
    ASSERT_EQ(MPI_Recv(got.p + 5, 1, every2nd, other, 2, pair_comm(), &st), MPI_SUCCESS);
    MPI_Get_count(&st, every2nd, &count);
    EXPECT_EQ(count, 1);
    CUDA_OK(cudaMemcpy(back.data(), got.p, 2 * n * sizeof(double), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n / 2; ++i) {
      ASSERT_EQ(back[5 + 2 * i], peer_world * 1e6 + static_cast<double>(1 + 2 * i)) << i;
      ASSERT_EQ(back[6 + 2 * i], 0.0) << i;  // the gaps stay untouched
    }
    // Into host memory.
    std::vector<double> hostgot(n);
    ASSERT_EQ(MPI_Recv(hostgot.data(), static_cast<int>(n), MPI_DOUBLE, MPI_ANY_SOURCE, 3,
                       pair_comm(), &st),
              MPI_SUCCESS);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hostgot[i], peer_world * 1e6 + static_cast<double>(i));
    // Truncation: a smaller (but still large) buffer.
    EXPECT_EQ(MPI_Recv(got.p, static_cast<int>(n / 2), MPI_DOUBLE, other, 4, pair_comm(), &st),
              MPI_ERR_TRUNCATE);
    for (int round = 0; round < 3; ++round) {
      ASSERT_EQ(MPI_Recv(got.p, static_cast<int>(n), MPI_DOUBLE, other, 10 + round, pair_comm(),
                         MPI_STATUS_IGNORE),
                MPI_SUCCESS);
      CUDA_OK(cudaMemcpy(back.data(), got.p, n * sizeof(double), cudaMemcpyDeviceToHost));
      ASSERT_EQ(back[0], 1000.0 * round + 0.5);
      ASSERT_EQ(back[n - 1], 1000.0 * round + 0.5);
    }
    EXPECT_GE(ferry_mpi_ipc_received() - recv0, 7);
  }
  MPI_Type_free(&every2nd);
  MPI_Barrier(pair_comm());
}

// Persistent requests on large device buffers, as halo codes use them: each start of a send goes
// over IPC (the request's own MPI handle stays inactive, a stand-in does the work), completed by
// every kind of wait, the handles unchanged; a request freed while its start is under way still
// delivers.
TEST_F(MpiGpu, PersistentIpcSends) {
  const int me = pair_rank(), other = 1 - me;
  const std::size_t n = 1 << 18;  // 2 MiB of doubles
  MPI_Datatype halves;  // a derived type, freed right after the inits
  MPI_Type_vector(static_cast<int>(n / 2), 1, 2, MPI_DOUBLE, &halves);
  MPI_Type_commit(&halves);
  Device src(n), dst(n), dst2(n);
  const long sent0 = ferry_mpi_ipc_sent();
  MPI_Request r[3];
  ASSERT_EQ(MPI_Recv_init(dst.p, static_cast<int>(n), MPI_DOUBLE, other, 31, pair_comm(), &r[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Send_init(src.p, static_cast<int>(n), MPI_DOUBLE, other, 31, pair_comm(), &r[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Send_init(src.p, 1, halves, other, 32, pair_comm(), &r[2]), MPI_SUCCESS);
  MPI_Type_free(&halves);
  for (int iter = 0; iter < 5; ++iter) {
    std::vector<double> host = values(me * 10 + iter, n);
    CUDA_OK(cudaMemcpy(src.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dst.p, 0, n * sizeof(double)));
    CUDA_OK(cudaMemset(dst2.p, 0, n * sizeof(double)));
    const MPI_Request keep[3] = {r[0], r[1], r[2]};
    MPI_Request second;  // the strided message, received contiguous
    ASSERT_EQ(MPI_Irecv(dst2.p, static_cast<int>(n / 2), MPI_DOUBLE, other, 32, pair_comm(), &second),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Startall(3, r), MPI_SUCCESS);
    if (iter == 0) {
      ASSERT_EQ(MPI_Waitall(3, r, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    } else if (iter == 1) {
      for (int left = 3; left > 0; --left) {
        int index = -1;
        ASSERT_EQ(MPI_Waitany(3, r, &index, MPI_STATUS_IGNORE), MPI_SUCCESS);
        ASSERT_NE(index, MPI_UNDEFINED) << "a started request must count as active";
      }
    } else if (iter == 2) {
      int flag = 0;
      while (!flag) ASSERT_EQ(MPI_Testall(3, r, &flag, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    } else {
      for (int i = 0; i < 3; ++i) ASSERT_EQ(MPI_Wait(&r[i], MPI_STATUS_IGNORE), MPI_SUCCESS);
    }
    for (int i = 0; i < 3; ++i) EXPECT_EQ(r[i], keep[i]) << "a persistent request keeps its handle";
    ASSERT_EQ(MPI_Wait(&second, MPI_STATUS_IGNORE), MPI_SUCCESS);
    std::vector<double> back(n), back2(n / 2);
    CUDA_OK(cudaMemcpy(back.data(), dst.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(back2.data(), dst2.p, n / 2 * sizeof(double), cudaMemcpyDeviceToHost));
    const std::vector<double> want = values(other * 10 + iter, n);
    ASSERT_EQ(back, want) << "iteration " << iter;
    for (std::size_t i = 0; i < n / 2; ++i) ASSERT_EQ(back2[i], want[2 * i]) << "iteration " << iter;
  }
  EXPECT_GE(ferry_mpi_ipc_sent() - sent0, 10) << "the persistent sends went over IPC";
  // Started, then freed before completion: the receiver still gets the data.
  std::vector<double> host = values(me * 10 + 9, n);
  CUDA_OK(cudaMemcpy(src.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  ASSERT_EQ(MPI_Start(&r[1]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Request_free(&r[1]), MPI_SUCCESS);
  EXPECT_EQ(r[1], MPI_REQUEST_NULL);
  ASSERT_EQ(MPI_Start(&r[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Wait(&r[0], MPI_STATUS_IGNORE), MPI_SUCCESS);
  std::vector<double> back(n);
  CUDA_OK(cudaMemcpy(back.data(), dst.p, n * sizeof(double), cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, values(other * 10 + 9, n));
  ASSERT_EQ(MPI_Request_free(&r[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Request_free(&r[2]), MPI_SUCCESS);
  MPI_Barrier(pair_comm());
  // The freed send's acknowledgement arrives on its own communicator: calls serve it.
  EXPECT_EQ(pending_after_progress(), 0) << "every stand-in and acknowledgement finished";
}

// MPI_Bsend_init with a device buffer: staged (the buffered send completes locally).
TEST_F(MpiGpu, BufferedPersistentSend) {
  const int me = pair_rank(), other = 1 - me;
  const std::size_t n = 4096;
  Device src(n);
  std::vector<char> attach(n * sizeof(double) + 4 * MPI_BSEND_OVERHEAD);
  ASSERT_EQ(MPI_Buffer_attach(attach.data(), static_cast<int>(attach.size())), MPI_SUCCESS);
  if (me == 0) {
    MPI_Request r;
    ASSERT_EQ(MPI_Bsend_init(src.p, static_cast<int>(n), MPI_DOUBLE, other, 51, pair_comm(), &r), MPI_SUCCESS);
    for (int iter = 0; iter < 3; ++iter) {
      std::vector<double> host = values(10 * iter, n);
      CUDA_OK(cudaMemcpy(src.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
      ASSERT_EQ(MPI_Start(&r), MPI_SUCCESS);
      ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
      MPI_Barrier(pair_comm());
    }
    ASSERT_EQ(MPI_Request_free(&r), MPI_SUCCESS);
  } else {
    for (int iter = 0; iter < 3; ++iter) {
      std::vector<double> got(n, -1.0);
      ASSERT_EQ(MPI_Recv(got.data(), static_cast<int>(n), MPI_DOUBLE, other, 51, pair_comm(), MPI_STATUS_IGNORE),
                MPI_SUCCESS);
      EXPECT_EQ(got, values(10 * iter, n));
      MPI_Barrier(pair_comm());
    }
  }
  void* detached = nullptr;
  int size = 0;
  ASSERT_EQ(MPI_Buffer_detach(&detached, &size), MPI_SUCCESS);
  MPI_Barrier(pair_comm());
}

// A receive of device data posted before a blocking collective, whose sender's IPC send waits
// for it: served from a helper thread while the receiver is inside MPI_Allreduce.
TEST_F(MpiGpu, IpcServedDuringBlockingCollective) {
  int level = 0;
  MPI_Query_thread(&level);
  if (level != MPI_THREAD_MULTIPLE) GTEST_SKIP() << "the MPI gives no MPI_THREAD_MULTIPLE";
  const int me = pair_rank(), other = 1 - me;
  const std::size_t n = 1 << 18;
  Device buf(n);
  int one = 1, sum = 0;
  if (me == 0) {
    std::vector<double> host = values(world_rank(), n);
    CUDA_OK(cudaMemcpy(buf.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    ASSERT_EQ(MPI_Send(buf.p, static_cast<int>(n), MPI_DOUBLE, other, 41, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, pair_comm()), MPI_SUCCESS);
  } else {
    CUDA_OK(cudaMemset(buf.p, 0, n * sizeof(double)));
    MPI_Request r;
    ASSERT_EQ(MPI_Irecv(buf.p, static_cast<int>(n), MPI_DOUBLE, other, 41, pair_comm(), &r), MPI_SUCCESS);
    ASSERT_EQ(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    std::vector<double> back(n);
    CUDA_OK(cudaMemcpy(back.data(), buf.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    EXPECT_EQ(back, values(world_rank() ^ 1, n));
  }
  EXPECT_EQ(sum, 2);
  MPI_Barrier(pair_comm());
}

// Windows of Isend/Irecv both ways completed by Waitall, and a blocking send whose receiver
// posted an Irecv and then blocks in a send of its own before waiting: the sender's IPC send must
// still complete (the receiver serves its pending receive while it blocks).
TEST_F(MpiGpu, IpcWindowsAndProgress) {
  const int me = pair_rank(), other = 1 - me;
  const std::size_t n = 1 << 16;  // 512 KiB each
  const int window = 6;
  Device src(n * window), dst(n * window);
  std::vector<double> host = values(world_rank(), n * window);
  CUDA_OK(cudaMemcpy(src.p, host.data(), host.size() * sizeof(double), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dst.p, 0, host.size() * sizeof(double)));
  std::vector<MPI_Request> reqs;
  for (int w = 0; w < window; ++w) {
    MPI_Request r;
    ASSERT_EQ(MPI_Irecv(dst.p + n * w, static_cast<int>(n), MPI_DOUBLE, other, w, pair_comm(), &r),
              MPI_SUCCESS);
    reqs.push_back(r);
  }
  for (int w = window - 1; w >= 0; --w) {
    MPI_Request r;
    ASSERT_EQ(MPI_Isend(src.p + n * w, static_cast<int>(n), MPI_DOUBLE, other, w, pair_comm(), &r),
              MPI_SUCCESS);
    reqs.push_back(r);
  }
  std::vector<MPI_Status> st(reqs.size());
  ASSERT_EQ(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), st.data()), MPI_SUCCESS);
  for (int w = 0; w < window; ++w) {
    int count = 0;
    MPI_Get_count(&st[static_cast<std::size_t>(w)], MPI_DOUBLE, &count);
    EXPECT_EQ(count, static_cast<int>(n));
  }
  std::vector<double> back(n * window);
  CUDA_OK(cudaMemcpy(back.data(), dst.p, back.size() * sizeof(double), cudaMemcpyDeviceToHost));
  const int peer_world = world_rank() ^ 1;
  for (std::size_t i = 0; i < back.size(); i += 997)
    ASSERT_EQ(back[i], peer_world * 1e6 + static_cast<double>(i)) << i;

  double token = 0;
  if (me == 0) {
    ASSERT_EQ(MPI_Send(src.p, static_cast<int>(n), MPI_DOUBLE, other, 50, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Recv(&token, 1, MPI_DOUBLE, other, 51, pair_comm(), MPI_STATUS_IGNORE),
              MPI_SUCCESS);
    EXPECT_EQ(token, 42.0);
  } else {
    MPI_Request r;
    ASSERT_EQ(MPI_Irecv(dst.p, static_cast<int>(n), MPI_DOUBLE, other, 50, pair_comm(), &r),
              MPI_SUCCESS);
    token = 42.0;
    ASSERT_EQ(MPI_Ssend(&token, 1, MPI_DOUBLE, other, 51, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Wait(&r, MPI_STATUS_IGNORE), MPI_SUCCESS);
    CUDA_OK(cudaMemcpy(back.data(), dst.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    ASSERT_EQ(back[n - 1], peer_world * 1e6 + static_cast<double>(n - 1));
  }
  MPI_Barrier(pair_comm());
}

// Probes of IPC messages report the real size, and the receive that follows gets the data:
// Probe + Recv, Iprobe + Irecv, Mprobe + Mrecv, Improbe + Imrecv, into device and host memory.
TEST_F(MpiGpu, IpcProbes) {
  const int me = pair_rank(), other = 1 - me;
  const std::size_t n = 1 << 17;
  Device src(n);
  std::vector<double> host = values(world_rank(), n);
  CUDA_OK(cudaMemcpy(src.p, host.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  const int peer_world = world_rank() ^ 1;
  if (me == 0) {
    for (int k = 0; k < 4; ++k)
      ASSERT_EQ(MPI_Send(src.p, static_cast<int>(n - k), MPI_DOUBLE, other, 60 + k, pair_comm()),
                MPI_SUCCESS);
  } else {
    Device got(n);
    std::vector<double> back(n);
    for (int k = 0; k < 4; ++k) {
      MPI_Status st;
      MPI_Message msg = MPI_MESSAGE_NULL;
      int flag = 0;
      if (k == 0) {
        ASSERT_EQ(MPI_Probe(other, 60, pair_comm(), &st), MPI_SUCCESS);
      } else if (k == 1) {
        while (!flag) ASSERT_EQ(MPI_Iprobe(MPI_ANY_SOURCE, 61, pair_comm(), &flag, &st), MPI_SUCCESS);
      } else if (k == 2) {
        ASSERT_EQ(MPI_Mprobe(other, 62, pair_comm(), &msg, &st), MPI_SUCCESS);
      } else {
        while (!flag)
          ASSERT_EQ(MPI_Improbe(other, MPI_ANY_TAG, pair_comm(), &flag, &msg, &st), MPI_SUCCESS);
      }
      int count = 0;
      MPI_Get_count(&st, MPI_DOUBLE, &count);
      ASSERT_EQ(count, static_cast<int>(n) - k) << "probe " << k;
      EXPECT_EQ(st.MPI_TAG, 60 + k);
      MPI_Status rst;
      if (k == 0) {
        ASSERT_EQ(MPI_Recv(got.p, count, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, pair_comm(), &rst),
                  MPI_SUCCESS);
      } else if (k == 1) {
        MPI_Request r;
        ASSERT_EQ(MPI_Irecv(got.p, count, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, pair_comm(), &r),
                  MPI_SUCCESS);
        ASSERT_EQ(MPI_Wait(&r, &rst), MPI_SUCCESS);
      } else if (k == 2) {
        ASSERT_EQ(MPI_Mrecv(got.p, count, MPI_DOUBLE, &msg, &rst), MPI_SUCCESS);
        EXPECT_EQ(msg, MPI_MESSAGE_NULL);
      } else {
        std::vector<double> hostgot(n);
        MPI_Request r;
        ASSERT_EQ(MPI_Imrecv(hostgot.data(), count, MPI_DOUBLE, &msg, &r), MPI_SUCCESS);
        ASSERT_EQ(MPI_Wait(&r, &rst), MPI_SUCCESS);
        CUDA_OK(cudaMemcpy(got.p, hostgot.data(), n * sizeof(double), cudaMemcpyHostToDevice));
      }
      int rcount = 0;
      MPI_Get_count(&rst, MPI_DOUBLE, &rcount);
      EXPECT_EQ(rcount, count) << "receive " << k;
      CUDA_OK(cudaMemcpy(back.data(), got.p, n * sizeof(double), cudaMemcpyDeviceToHost));
      ASSERT_EQ(back[0], peer_world * 1e6);
      ASSERT_EQ(back[static_cast<std::size_t>(count) - 1], peer_world * 1e6 + count - 1) << k;
    }
  }
  MPI_Barrier(pair_comm());
}

// Under MPI_THREAD_MULTIPLE: threads exchange device messages (staged and IPC sizes) at once,
// each on its own tags, with request handles that MPI reuses as they complete; and a cancelled
// staged receive leaves the device buffer alone.
TEST_F(MpiGpu, ThreadsAndCancel) {
  int level = 0;
  MPI_Query_thread(&level);
  const int me = pair_rank(), other = 1 - me;
  Device untouched(8);
  CUDA_OK(cudaMemset(untouched.p, 0, 8 * sizeof(double)));
  MPI_Request r;
  ASSERT_EQ(MPI_Irecv(untouched.p, 8, MPI_DOUBLE, other, 7777, pair_comm(), &r), MPI_SUCCESS);
  ASSERT_EQ(MPI_Cancel(&r), MPI_SUCCESS);
  MPI_Status cst;
  ASSERT_EQ(MPI_Wait(&r, &cst), MPI_SUCCESS);
  int cancelled = 0;
  MPI_Test_cancelled(&cst, &cancelled);
  EXPECT_EQ(cancelled, 1);
  double first = -1;
  CUDA_OK(cudaMemcpy(&first, untouched.p, sizeof first, cudaMemcpyDeviceToHost));
  EXPECT_EQ(first, 0.0);
  if (level != MPI_THREAD_MULTIPLE) GTEST_SKIP() << "the MPI gives no MPI_THREAD_MULTIPLE";

  const int threads = 4, rounds = 20;
  std::vector<int> bad(threads, 0);
  int device = 0;
  cudaGetDevice(&device);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      cudaSetDevice(device);
      const std::size_t n = t % 2 ? 1 << 15 : 100;  // 256 KiB (IPC) or 800 B (staged)
      double *src = nullptr, *dst = nullptr;
      cudaMalloc(&src, n * sizeof(double));
      cudaMalloc(&dst, n * sizeof(double));
      std::vector<double> v(n), back(n);
      for (int k = 0; k < rounds; ++k) {
        for (std::size_t i = 0; i < n; ++i) v[i] = world_rank() * 1e6 + t * 1e4 + k + static_cast<double>(i);
        cudaMemcpy(src, v.data(), n * sizeof(double), cudaMemcpyHostToDevice);
        MPI_Request rq[2];
        MPI_Irecv(dst, static_cast<int>(n), MPI_DOUBLE, other, 100 + t, pair_comm(), &rq[0]);
        MPI_Isend(src, static_cast<int>(n), MPI_DOUBLE, other, 100 + t, pair_comm(), &rq[1]);
        if (MPI_Waitall(2, rq, MPI_STATUSES_IGNORE) != MPI_SUCCESS) ++bad[static_cast<std::size_t>(t)];
        cudaMemcpy(back.data(), dst, n * sizeof(double), cudaMemcpyDeviceToHost);
        const double want = (world_rank() ^ 1) * 1e6 + t * 1e4 + k;
        if (back[0] != want || back[n - 1] != want + static_cast<double>(n - 1))
          ++bad[static_cast<std::size_t>(t)];
      }
      cudaFree(src);
      cudaFree(dst);
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(bad[static_cast<std::size_t>(t)], 0) << "thread " << t;
  MPI_Barrier(pair_comm());
}


// Large messages, contiguous and strided, received with another type into device and host
// memory. Under FERRY_IPC_MIN=<huge> (the test_mpi_gpu_pipelined registration) IPC is never
// chosen, so they go pipelined: chunks of whole sender elements, unpacked as whole receiver
// elements complete.
TEST_F(MpiGpu, LargeMessagesPipelined) {
  const int me = pair_rank(), other = 1 - me;
  const char* ipc_min = std::getenv("FERRY_IPC_MIN");
  const bool expect_pipelined = ipc_min && std::atoll(ipc_min) > (1LL << 40);
  const std::size_t n = 1 << 20;  // 8 MiB of doubles
  Device src(2 * n), dst(2 * n);
  std::vector<double> host = values(world_rank(), 2 * n);
  CUDA_OK(cudaMemcpy(src.p, host.data(), 2 * n * sizeof(double), cudaMemcpyHostToDevice));
  MPI_Datatype col;  // 1024 doubles at stride 2: 8 KiB packed; 512 of them are 4 MiB
  MPI_Type_vector(1024, 1, 2, MPI_DOUBLE, &col);
  MPI_Datatype colr;
  MPI_Type_create_resized(col, 0, 2048 * sizeof(double), &colr);
  MPI_Type_commit(&colr);
  const int peer_world = world_rank() ^ 1;
  const long before = ferry_mpi_pipelined_sent();
  if (me == 0) {
    ASSERT_EQ(MPI_Send(src.p + 3, static_cast<int>(n), MPI_DOUBLE, other, 70, pair_comm()), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send(src.p + 1, 512, colr, other, 71, pair_comm()), MPI_SUCCESS);
    if (expect_pipelined) EXPECT_EQ(ferry_mpi_pipelined_sent() - before, 2);
  } else {
    std::vector<double> back(2 * n);
    MPI_Status st;
    ASSERT_EQ(MPI_Recv(dst.p, static_cast<int>(2 * n), MPI_DOUBLE, other, 70, pair_comm(), &st),
              MPI_SUCCESS);
    int count = 0;
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, static_cast<int>(n));
    CUDA_OK(cudaMemcpy(back.data(), dst.p, n * sizeof(double), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < n; i += 999) ASSERT_EQ(back[i], peer_world * 1e6 + 3.0 + i) << i;
    ASSERT_EQ(back[n - 1], peer_world * 1e6 + 3.0 + (n - 1));
    // The strided message into host memory as plain doubles.
    std::vector<double> flat(512 * 1024);
    ASSERT_EQ(MPI_Recv(flat.data(), static_cast<int>(flat.size()), MPI_DOUBLE, other, 71,
                       pair_comm(), &st),
              MPI_SUCCESS);
    MPI_Get_count(&st, MPI_DOUBLE, &count);
    EXPECT_EQ(count, 512 * 1024);
    for (std::size_t e = 0; e < 512; e += 7)
      for (std::size_t j = 0; j < 1024; j += 101)
        ASSERT_EQ(flat[e * 1024 + j], peer_world * 1e6 + 1.0 + e * 2048 + 2 * j) << e << " " << j;
  }
  MPI_Type_free(&colr);
  MPI_Type_free(&col);
  MPI_Barrier(pair_comm());
}

}  // namespace
