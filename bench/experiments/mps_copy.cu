// Experiment (not built): what small device-to-device copies cost when several MPI ranks share
// one GPU under CUDA MPS, by copy engine (cudaMemcpyAsync) and by kernel, from the rank's own
// memory and from a peer's over CUDA IPC (what Ferry's IPC receiver does). Each rank issues `k`
// copies of `bytes` on its stream and waits once; the time is the slowest rank's median per round.
// Question it answers (issue 16): do the small copies of several ranks overlap on the GPU, or
// does each pay a fixed cost in turn?
//   nvcc -O2 -arch=sm_90 -ccbin mpicxx mps_copy.cu -o mps_copy
//   (MPS on) mpirun -n 4 ./mps_copy [bytes=16384] [rounds=400]
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

__global__ void copy16(uint4* dst, const uint4* src, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) dst[i] = src[i];
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 16384;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 400;
  check(cudaSetDevice(0), "cudaSetDevice");
  constexpr int kMax = 8;
  char *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, bytes * kMax), "cudaMalloc");
  check(cudaMalloc(&dst, bytes * kMax), "cudaMalloc");
  check(cudaMemset(src, me, bytes * kMax), "cudaMemset");
  cudaIpcMemHandle_t mine, theirs;
  check(cudaIpcGetMemHandle(&mine, src), "cudaIpcGetMemHandle");
  const int peer = (me + 1) % n;
  MPI_Sendrecv(&mine, sizeof mine, MPI_BYTE, (me + n - 1) % n, 0, &theirs, sizeof theirs, MPI_BYTE, peer, 0,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  char* remote = src;
  if (n > 1) check(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&remote), theirs, cudaIpcMemLazyEnablePeerAccess), "open");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  if (me == 0)
    std::printf("mps_copy: %d ranks on one GPU, %zu B per copy, %d rounds; us per round (slowest rank's median)\n",
                n, bytes, rounds);
  for (int from_peer = 0; from_peer < 2; ++from_peer)
    for (int kernel = 0; kernel < 2; ++kernel)
      for (int k : {1, 4}) {
        const char* from = from_peer ? remote : src;
        std::vector<double> t;
        for (int r = 0; r < rounds + 20; ++r) {
          if (r % 50 == 0) MPI_Barrier(MPI_COMM_WORLD);
          const double t0 = now_us();
          for (int j = 0; j < k; ++j) {
            if (kernel)
              copy16<<<std::max<size_t>(1, bytes / 4096), 256, 0, s>>>(reinterpret_cast<uint4*>(dst + j * bytes),
                                                                     reinterpret_cast<const uint4*>(from + j * bytes),
                                                                     bytes / 16);
            else
              check(cudaMemcpyAsync(dst + j * bytes, from + j * bytes, bytes, cudaMemcpyDeviceToDevice, s), "copy");
          }
          check(cudaStreamSynchronize(s), "sync");
          if (r >= 20) t.push_back(now_us() - t0);
        }
        std::sort(t.begin(), t.end());
        double med = t[t.size() / 2], worst = 0;
        MPI_Reduce(&med, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (me == 0)
          std::printf("  %-16s %-7s k=%d  %8.2f\n", from_peer ? "from peer (IPC)" : "own memory", kernel ? "kernel" : "memcpy",
                      k, worst);
      }
  if (n > 1) cudaIpcCloseMemHandle(remote);
  cudaFree(src);
  cudaFree(dst);
  MPI_Finalize();
  return 0;
}
