// An MPI + CUDA program as others write them, run under LD_PRELOAD=libferry-mpi.so: it links the
// CUDA runtime statically (its allocations are unknown to Ferry's own runtime; Ferry must classify
// them through the driver), chooses its device after MPI_Init and in reverse order of the local
// ranks, sub-allocates every buffer from one cudaMalloc pool, and sends device data as bytes,
// strided vectors, windows of non-blocking messages, an MPI_PACKED buffer it packed into device
// memory, and through MPI_Allreduce. Prints "mpi_static_cuda: correct" or WRONG; exits 77
// (skipped) without a GPU.
#include <cuda_runtime.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char* what, int rank) {
  if (!ok) {
    std::printf("mpi_static_cuda: rank %d: %s WRONG\n", rank, what);
    ++failures;
  }
}

void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("mpi_static_cuda: %s: %s WRONG\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double value(int rank, int salt, long i) { return rank * 1e7 + salt * 1e5 + static_cast<double>(i); }

std::vector<double> values(int rank, int salt, long n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value(rank, salt, i);
  return v;
}

// Buffers carved out of one allocation, as a caching allocator hands them out.
class Pool {
 public:
  explicit Pool(std::size_t bytes) { cuda(cudaMalloc(&base_, bytes), "cudaMalloc (pool)"); }
  ~Pool() { cudaFree(base_); }
  double* take(long doubles) {
    double* p = reinterpret_cast<double*>(static_cast<char*>(base_) + used_);
    used_ += (static_cast<std::size_t>(doubles) * sizeof(double) + 255) / 256 * 256 + 256;
    return p;
  }

 private:
  void* base_ = nullptr;
  std::size_t used_ = 256;  // nothing starts at the allocation's base
};

std::vector<double> to_host(const double* d, long n) {
  std::vector<double> h(static_cast<std::size_t>(n));
  cuda(cudaMemcpy(h.data(), d, h.size() * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  return h;
}

void to_device(double* d, const std::vector<double>& h) {
  cuda(cudaMemcpy(d, h.data(), h.size() * sizeof(double), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("mpi_static_cuda: no GPU: skipped\n");
    return 77;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, local = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  cuda(cudaSetDevice(devices - 1 - local % devices), "cudaSetDevice");  // after MPI_Init, reversed
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;

  const long big = 1 << 19;  // 4 MiB of doubles: IPC between processes of a node
  Pool pool(std::size_t{64} << 20);
  double* a = pool.take(2 * big);
  double* b = pool.take(2 * big);

  // Bytes: 8 B and 4 MiB.
  for (long n : {1L, big}) {
    to_device(a, values(rank, 1, n));
    cuda(cudaMemset(b, 0, static_cast<std::size_t>(n) * sizeof(double)), "cudaMemset");
    MPI_Sendrecv(a, static_cast<int>(n * 8), MPI_BYTE, next, 1, b, static_cast<int>(n * 8), MPI_BYTE, prev, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    check(to_host(b, n) == values(prev, 1, n), n == 1 ? "8 bytes" : "4 MiB", rank);
  }

  // A strided vector (every other double) into a contiguous receive.
  MPI_Datatype every_other;
  MPI_Type_vector(static_cast<int>(big), 1, 2, MPI_DOUBLE, &every_other);
  MPI_Type_commit(&every_other);
  to_device(a, values(rank, 2, 2 * big));
  MPI_Sendrecv(a, 1, every_other, next, 2, b, static_cast<int>(big), MPI_DOUBLE, prev, 2, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  {
    const std::vector<double> got = to_host(b, big);
    bool ok = true;
    for (long i = 0; i < big; ++i) ok = ok && got[static_cast<std::size_t>(i)] == value(prev, 2, 2 * i);
    check(ok, "strided vector", rank);
  }
  MPI_Type_free(&every_other);

  // A window of non-blocking messages, 64 KiB each, completed by Waitall.
  const int window = 8;
  const long piece = 8192;
  to_device(a, values(rank, 3, window * piece));
  std::vector<MPI_Request> r(2 * window);
  for (int k = 0; k < window; ++k) {
    MPI_Irecv(b + k * piece, static_cast<int>(piece), MPI_DOUBLE, prev, 10 + k, MPI_COMM_WORLD, &r[2 * k]);
    MPI_Isend(a + k * piece, static_cast<int>(piece), MPI_DOUBLE, next, 10 + k, MPI_COMM_WORLD, &r[2 * k + 1]);
  }
  MPI_Waitall(2 * window, r.data(), MPI_STATUSES_IGNORE);
  check(to_host(b, window * piece) == values(prev, 3, window * piece), "window of Isend/Irecv", rank);

  // MPI_Pack into device memory, sent as MPI_PACKED, unpacked on the host.
  {
    const int n = 1000;
    to_device(a, values(rank, 4, n));
    int packed_size = 0;
    MPI_Pack_size(n, MPI_DOUBLE, MPI_COMM_WORLD, &packed_size);
    char* packed = reinterpret_cast<char*>(b);
    int pos = 0;
    MPI_Pack(a, n, MPI_DOUBLE, packed, packed_size, &pos, MPI_COMM_WORLD);
    std::vector<char> in(static_cast<std::size_t>(packed_size));
    MPI_Sendrecv(packed, pos, MPI_PACKED, next, 5, in.data(), packed_size, MPI_PACKED, prev, 5,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    std::vector<double> got(n);
    pos = 0;
    MPI_Unpack(in.data(), packed_size, &pos, got.data(), n, MPI_DOUBLE, MPI_COMM_WORLD);
    check(got == values(prev, 4, n), "MPI_PACKED from device memory", rank);
  }

  // A reduction on device buffers.
  {
    const int n = 4096;
    to_device(a, std::vector<double>(n, rank + 1.0));
    MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    check(to_host(b, n) == std::vector<double>(n, size * (size + 1) / 2.0), "Allreduce", rank);
  }

  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf(all == 0 ? "mpi_static_cuda: correct\n" : "mpi_static_cuda: WRONG\n");
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
