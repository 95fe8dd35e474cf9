// Producer streams (issue 14, ferry_mpi.h: ferry_mpi_set_stream, ferry_mpi_stream_keyvals), 2 ranks.
// Host build: the calls, the keyvals and the attributes' copies. GPU build (FERRY_STREAM_DEVICE):
// a send issued right after device work that writes the buffer on a stream of the application's,
// with no synchronize, delivers that work's output once the stream is named (by the thread, by the
// datatype's attribute, by the communicator's), through MPI_Send, MPI_Isend, a persistent send and
// MPI_Pack. The stream is kept busy by a large copy queued first, so a send that did not wait for it
// would read the buffer before the memset that follows the copy.
#include <ferry/ferry_mpi.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <vector>

#ifdef FERRY_STREAM_DEVICE
#include <cuda_runtime.h>
#endif

namespace {

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

TEST(ProducerStream, ThreadStreamAndKeyvals) {
  EXPECT_EQ(ferry_mpi_get_stream(), nullptr);
  int dummy = 0;
  void* s = &dummy;  // only stored and handed back here
  EXPECT_EQ(ferry_mpi_set_stream(s), 0);
  EXPECT_EQ(ferry_mpi_get_stream(), s);
  EXPECT_EQ(ferry_mpi_set_stream(nullptr), 0);
  EXPECT_EQ(ferry_mpi_get_stream(), nullptr);
  int ck = MPI_KEYVAL_INVALID, tk = MPI_KEYVAL_INVALID;
  ASSERT_EQ(ferry_mpi_stream_keyvals(&ck, &tk), MPI_SUCCESS);
  EXPECT_NE(ck, MPI_KEYVAL_INVALID);
  EXPECT_NE(tk, MPI_KEYVAL_INVALID);
  int ck2 = 0, tk2 = 0;
  ASSERT_EQ(ferry_mpi_stream_keyvals(&ck2, &tk2), MPI_SUCCESS);
  EXPECT_EQ(ck2, ck);  // made once
  EXPECT_EQ(tk2, tk);
  EXPECT_EQ(ferry_mpi_stream_keyvals(nullptr, nullptr), MPI_SUCCESS);
  // The attribute goes with the copies of a communicator and of a datatype.
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  ASSERT_EQ(MPI_Comm_set_attr(dup, ck, s), MPI_SUCCESS);
  MPI_Comm dup2;
  MPI_Comm_dup(dup, &dup2);
  void* v = nullptr;
  int found = 0;
  MPI_Comm_get_attr(dup2, ck, &v, &found);
  EXPECT_TRUE(found);
  EXPECT_EQ(v, s);
  MPI_Datatype t, t2;
  MPI_Type_contiguous(4, MPI_INT, &t);
  ASSERT_EQ(MPI_Type_set_attr(t, tk, s), MPI_SUCCESS);
  MPI_Type_dup(t, &t2);
  found = 0;
  MPI_Type_get_attr(t2, tk, &v, &found);
  EXPECT_TRUE(found);
  EXPECT_EQ(v, s);
  // Host buffers are unaffected by a named stream (here not even a real one).
  MPI_Type_commit(&t);
  std::vector<int> a(4, rank() + 1), b(4, 0);
  const int peer = rank() ^ 1;
  ASSERT_EQ(MPI_Sendrecv(a.data(), 1, t, peer, 3, b.data(), 4, MPI_INT, peer, 3, dup, MPI_STATUS_IGNORE),
            MPI_SUCCESS);
  EXPECT_EQ(b, std::vector<int>(4, peer + 1));
  MPI_Type_free(&t);
  MPI_Type_free(&t2);
  MPI_Comm_free(&dup2);
  MPI_Comm_free(&dup);
}

#ifdef FERRY_STREAM_DEVICE

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

constexpr std::size_t kBytes = std::size_t{1} << 20;       // the message
constexpr std::size_t kBusy = std::size_t{512} << 20;      // the copy that keeps the stream busy

class ProducerStreamGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no GPU";
    cudaSetDevice(rank() % n);
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc(&buf_, kBytes));
    if (rank() == 0) {
      CUDA_OK(cudaMalloc(&busy_src_, kBusy));
      CUDA_OK(cudaMalloc(&busy_dst_, kBusy));
    }
  }
  void TearDown() override {
    cudaFree(buf_);
    cudaFree(busy_src_);
    cudaFree(busy_dst_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  // Rank 0: the buffer is zero, then the stream copies 512 MiB and then sets the buffer to
  // `value`; nothing waits for it.
  void produce(unsigned char value) {
    CUDA_OK(cudaMemset(buf_, 0, kBytes));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpyAsync(busy_dst_, busy_src_, kBusy, cudaMemcpyDeviceToDevice, stream_));
    CUDA_OK(cudaMemsetAsync(buf_, value, kBytes, stream_));
  }
  // Rank 1: the message holds `value` in every byte.
  void expect(int tag, unsigned char value, MPI_Comm comm = MPI_COMM_WORLD) {
    std::vector<unsigned char> got(kBytes, 0);
    ASSERT_EQ(MPI_Recv(got.data(), static_cast<int>(kBytes), MPI_BYTE, 0, tag, comm, MPI_STATUS_IGNORE),
              MPI_SUCCESS);
    std::size_t wrong = 0;
    for (unsigned char c : got) wrong += c != value;
    EXPECT_EQ(wrong, 0u) << "bytes of the message sent before the stream's memset";
  }
  cudaStream_t stream_ = nullptr;
  void* buf_ = nullptr;
  void* busy_src_ = nullptr;
  void* busy_dst_ = nullptr;
};

TEST_F(ProducerStreamGpu, ThreadStreamOrdersSendIsendPersistentAndPack) {
  const int n = static_cast<int>(kBytes);
  if (rank() == 0) {
    ferry_mpi_set_stream(stream_);
    produce(0x11);
    ASSERT_EQ(MPI_Send(buf_, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD), MPI_SUCCESS);
    produce(0x22);
    MPI_Request r;
    ASSERT_EQ(MPI_Isend(buf_, n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &r), MPI_SUCCESS);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Request p;
    ASSERT_EQ(MPI_Send_init(buf_, n, MPI_BYTE, 1, 3, MPI_COMM_WORLD, &p), MPI_SUCCESS);
    produce(0x33);
    MPI_Start(&p);
    MPI_Wait(&p, MPI_STATUS_IGNORE);
    MPI_Request_free(&p);
    produce(0x44);
    std::vector<unsigned char> packed(kBytes);
    int pos = 0;
    ASSERT_EQ(MPI_Pack(buf_, n, MPI_BYTE, packed.data(), n, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(MPI_Send(packed.data(), n, MPI_BYTE, 1, 4, MPI_COMM_WORLD), MPI_SUCCESS);
    ferry_mpi_set_stream(nullptr);
  } else if (rank() == 1) {
    expect(1, 0x11);
    expect(2, 0x22);
    expect(3, 0x33);
    expect(4, 0x44);
  }
}

TEST_F(ProducerStreamGpu, DatatypeAndCommunicatorAttributes) {
  int ck = 0, tk = 0;
  ASSERT_EQ(ferry_mpi_stream_keyvals(&ck, &tk), MPI_SUCCESS);
  MPI_Datatype bytes;
  MPI_Type_contiguous(static_cast<int>(kBytes), MPI_BYTE, &bytes);
  MPI_Type_commit(&bytes);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rank() == 0) {
    ASSERT_EQ(MPI_Type_set_attr(bytes, tk, stream_), MPI_SUCCESS);
    produce(0x55);
    ASSERT_EQ(MPI_Send(buf_, 1, bytes, 1, 5, MPI_COMM_WORLD), MPI_SUCCESS);
    ASSERT_EQ(MPI_Comm_set_attr(comm, ck, stream_), MPI_SUCCESS);
    produce(0x66);
    ASSERT_EQ(MPI_Send(buf_, static_cast<int>(kBytes), MPI_BYTE, 1, 6, comm), MPI_SUCCESS);
  } else if (rank() == 1) {
    expect(5, 0x55);
    expect(6, 0x66, comm);
  }
  MPI_Comm_free(&comm);
  MPI_Type_free(&bytes);
}

#endif  // FERRY_STREAM_DEVICE

}  // namespace
