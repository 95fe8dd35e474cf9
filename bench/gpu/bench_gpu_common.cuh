// bench/gpu/bench_gpu_common.cuh — what the parts of bench_gpu_pack share: the event timer, the
// result list, the measured device-to-device copy rate and the sector roofline.
#pragma once

#include <cuda_runtime.h>
#include <ferry/type.hpp>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cuda_check.hpp"

namespace bench {

using ferry::i64;

// Keeps the legacy stream's GPU busy for `ns` nanoseconds, so work queued behind it is timed
// without the host's cost of queuing it (bench_gpu_pack.cu).
void spin(long long ns);

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  // Median time in seconds of `reps` runs of f (each timed alone), after `warm` untimed runs.
  // The host's cost of issuing f is inside: the GPU records the first event, then waits for f.
  double median(const std::function<void()>& f, int reps = 30, int warm = 3) {
    return timed(f, reps, warm, false);
  }
  // The same with the host's cost taken out: a kernel that spins for 30 us runs first, so f is
  // already queued when the first event is recorded; what remains is the GPU's time for f, from
  // the start of its first launch to the end of its last.
  double device_median(const std::function<void()>& f, int reps = 30, int warm = 3) {
    return timed(f, reps, warm, true);
  }

 private:
  double timed(const std::function<void()>& f, int reps, int warm, bool hide_host) {
    for (int i = 0; i < warm; ++i) f();
    CK(cudaDeviceSynchronize());
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      if (hide_host) spin(30000);
      CK(cudaEventRecord(a));
      f();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1e-3);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

// Host time per call of f: bursts of `burst` calls, each after a synchronize, so that the launch
// queue never fills and the host never waits for the GPU (a loop of thousands of launches
// measures the GPU's rate of retiring them once the queue is full); the median over the bursts.
inline double host_cost(const std::function<void()>& f, int burst = 50, int bursts = 21) {
  for (int i = 0; i < 5; ++i) f();
  std::vector<double> t;
  for (int k = 0; k < bursts; ++k) {
    CK(cudaDeviceSynchronize());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < burst; ++i) f();
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(t1 - t0).count() / burst);
  }
  CK(cudaDeviceSynchronize());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Result {
  std::string group, name, method;
  i64 bytes;      // packed bytes
  i64 block;      // contiguous block bytes (0: mixed)
  double seconds;
  std::string note;
};
inline std::vector<Result> results;

inline void record(const std::string& group, const std::string& name, const std::string& method,
                   i64 bytes, i64 block, double s, const std::string& note = "") {
  results.push_back({group, name, method, bytes, block, s, note});
}

// The seconds of a recorded result, NaN when there is none.
inline double get_result(const std::string& group, const std::string& name, const std::string& method) {
  for (const Result& r : results)
    if (r.group == group && r.name == name && r.method == method) return r.seconds;
  return __builtin_nan("");
}

inline ferry::Type commit(MPI_Datatype t) {
  MPI_Type_commit(&t);
  ferry::Type r = ferry::translate(t);
  MPI_Type_free(&t);
  return r;
}

// Sectors of 32 B read by a list of (offset, length) blocks.
struct SectorCount {
  i64 sectors = 0;
  void add(i64 off, i64 len) {
    if (len <= 0) return;
    sectors += (off + len - 1) / 32 - off / 32 + 1;
  }
};

inline double copy_rate = 0;  // bytes read + written per second, device to device

inline double roofline(i64 sectors, i64 bytes) { return (32.0 * sectors + bytes) / copy_rate; }

inline void measure_copy_rate(Timer& tm) {
  const std::size_t n = std::size_t{1} << 30;
  char *a, *b;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  CK(cudaMemset(a, 1, n));
  double s = tm.median([&] { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); }, 20);
  copy_rate = 2.0 * n / s;
  CK(cudaFree(a));
  CK(cudaFree(b));
  std::printf("device-to-device copy: %.0f GB/s (read + write, 1 GiB)\n", copy_rate / 1e9);
}

// bench_gpu_halo.cu: the Astaroth self-exchange with its baselines, and the summary table.
void run_halo_copy(Timer& tm);
void print_summary(const char* device);

}  // namespace bench
