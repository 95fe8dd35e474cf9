// bench/mpi/bench_pingpong.hpp — bench_pingpong's shared state (rank, options, environment).
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "../local_rank.hpp"
#include "../mps.hpp"
#include "pingpong_kernels.hpp"

namespace pingpong_bench {

using i64 = std::int64_t;
using pingpong::Grid;

inline int rank = 0;
inline constexpr int kTag = 7;
inline const MPI_Comm comm = MPI_COMM_WORLD;

[[noreturn]] inline void fail(const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "bench_pingpong: rank %d: FAILED: %s\n", rank, msg);
  std::fflush(stderr);
  MPI_Abort(comm, 3);
  std::exit(3);
}

#define CK(call)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) fail("%s:%d %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
  std::vector<std::string> modes{"host", "host_pmpi", "staged", "ipc", "device", "face_host", "face_staged", "face"};
  i64 min_size = 1;
  i64 max_size = i64{256} << 20;
  int reps = 0;  // 0: scaled by size
  bool quick = false;
  // Rank 1 echoes the byte modes from host memory: only rank 0 uses the GPU, so two ranks on one
  // GPU are not time-sliced, and the round trip is rank 0's D2H and H2D paths plus two host
  // messages (on two GPUs, a device-to-device message is about the round trip less one host
  // message).
  bool host_peer = false;
  std::string json;
};
inline Options opt;

// ---------------------------------------------------------------------------------------------
// The environment: interposer, GPU

struct Env {
  bool preload = false;
  std::string preload_how = "none";  // how the interposer was detected
  std::string preload_path;
  bool gpu = false;
  int device = -1, devices = 0;
  std::string device_name = "none";
  std::string gpu_id;        // host name + GPU UUID
  int same_gpu = -1;         // -1: no GPU
  ferry_bench::Mps mps;      // CUDA MPS on (both ranks), off, or unknown
  std::string mpi_version;
  std::string hostname;
  std::string date;
};
inline Env env;

// Defined in bench_pingpong_env.cpp.
Options parse(int argc, char** argv);
int reps_for(const Options& o, i64 bytes);
void choose_device_early();
void setup_env();

}  // namespace pingpong_bench
