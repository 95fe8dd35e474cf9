// The interposer with GPU buffers, 2 ranks (each on GPU rank % devices): blocking point-to-point
// and MPI_Pack with device memory on either or both sides, strided and contiguous datatypes,
// against the values the host computes. Exits 77 (skipped) where there is no GPU.
#include "test_mpi_gpu.hpp"

namespace {

using namespace ferry_mpi_gpu_test;

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

}  // namespace
