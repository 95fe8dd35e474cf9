// bench/gpu/ferry_bench.hpp — ferry-bench's shared state (options, records, context), interfaces.
#pragma once

#include <cuda_runtime.h>
#include <ferry/gpu.hpp>
#include <ferry/type.hpp>
#include <mpi.h>

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda_check.hpp"

namespace ferry_bench_gpu {

using ferry::i64;
using Clock = std::chrono::steady_clock;


inline constexpr i64 KiB = 1024, MiB = 1024 * 1024;
inline const char* const kFamilies[] = {"copy", "peer", "copy2d3d", "pack", "calls"};

struct Options {
  std::vector<std::string> families;
  bool quick = false;
  i64 max_size = 256 * MiB;
  std::string json;
  bool flush = false;
  int cpu = -1;
  double min_time = -1;  // seconds; -1: 0.2 (0.02 with --quick)
  int max_reps = 0, min_reps = 0, warm = 0;
  bool gate = true;
  bool progress = false;
};
inline Options opt;

struct Record {
  std::string family, kase, method, direction;
  i64 bytes;
  double us_median, us_min, gbps;
  int reps;
  std::string timing;
};
inline std::vector<Record> records;
inline std::vector<std::pair<std::string, std::string>> skipped;  // family, reason
inline std::vector<std::string> notes;

// ---------------------------------------------------------------------------------------------
// Statistics and the repetition policy.

struct Stats {
  double median = 0, min = 0;
  int reps = 0;
};

inline Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.reps = static_cast<int>(n);
  return s;
}

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// sample() runs the operation once and returns its time in microseconds (untimed set-up inside it
// is allowed). Warm-up, then repetitions until min_time has passed (wall clock, set-up included)
// and min_reps were taken, or max_reps were taken.
inline Stats repeat(const std::function<double()>& sample) {
  const double first = sample();
  for (int w = 1; w < opt.warm && first * 1e-6 < 0.1 * opt.min_time; ++w) sample();
  std::vector<double> v;
  const auto t0 = Clock::now();
  for (;;) {
    v.push_back(sample());
    const int n = static_cast<int>(v.size());
    if (n >= opt.max_reps) break;
    if (n >= opt.min_reps && seconds_since(t0) >= opt.min_time) break;
  }
  return summarize(v);
}

inline void record(const std::string& family, const std::string& kase, const std::string& method,
                   const std::string& direction, i64 bytes, const Stats& s,
                   const std::string& timing, double moved_factor = 1.0) {
  const double gbps = s.median > 0 && bytes > 0 ? moved_factor * static_cast<double>(bytes) / (s.median * 1e3) : 0.0;
  records.push_back({family, kase, method, direction, bytes, s.median, s.min, gbps, s.reps, timing});
}

// ---------------------------------------------------------------------------------------------
// Progress bar on stderr (a terminal, or --progress).

struct Progress {
  std::string name;
  std::size_t total = 0, done = 0;
  bool on = false;
  Progress(std::string n, std::size_t t) : name(std::move(n)), total(t) {
    on = opt.progress || isatty(STDERR_FILENO);
    draw();
  }
  void step() {
    ++done;
    draw();
  }
  void draw() const {
    if (!on || total == 0) return;
    const int width = 30;
    const int filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r%-9s [%s%s] %zu/%zu", name.c_str(), std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(width - filled), '.').c_str(), done, total);
    if (done == total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
};

// A family is a list of jobs (each measures one or a few points), run under one progress bar.
struct Job {
  std::function<void()> run;
};

inline void run_jobs(const std::string& family, const std::vector<Job>& jobs) {
  Progress bar(family, jobs.size());
  for (const Job& j : jobs) {
    j.run();
    bar.step();
  }
}

inline std::vector<i64> sweep(i64 lo, i64 hi) {
  std::vector<i64> v;
  const i64 step = opt.quick ? 4 : 2;
  for (i64 s = lo; s <= hi; s *= step) v.push_back(s);
  return v;
}

inline std::string size_name(i64 b) {
  if (b >= MiB && b % MiB == 0) return std::to_string(b / MiB) + " MiB";
  if (b >= KiB && b % KiB == 0) return std::to_string(b / KiB) + " KiB";
  return std::to_string(b) + " B";
}


// ---------------------------------------------------------------------------------------------
// The device context: streams, events, the gate, the flush buffer.

struct Ctx {
  int devices = 0, sms = 0, l2 = 0;
  std::string name;
  cudaStream_t a = nullptr, b = nullptr;
  cudaEvent_t start = nullptr, end_a = nullptr, end_b = nullptr;
  volatile int* flag_h = nullptr;  // mapped host memory: [0] release flag, [1] timed-out flag
  int* flag_d = nullptr;
  char* flush = nullptr;
  std::size_t flush_bytes = 0;
  int flush_value = 0;
  unsigned* sink = nullptr;
  int gate_timeouts = 0;
  long gated_samples = 0;
};
inline Ctx ctx;

using Work = std::function<void(cudaStream_t, cudaStream_t)>;

// Defined in ferry_bench.cu.
unsigned blocks_for(i64 bytes);
void flush_l2(cudaStream_t s);
double gated(const Work& work, bool two);
double evented(const std::function<void(cudaStream_t)>& work);
double host_timed(const std::function<void()>& fn);
void host_read(const char* p, i64 bytes);

// Defined in ferry_bench_families.cu.
void family_peer();
void family_copy2d3d();
void family_pack();
void family_calls();

// Defined in ferry_bench_report.cu.
std::string cpu_numa(int cpu);
std::string gpu_numa(int dev);
bool write_json(const std::string& path, const std::string& device, int driver, int runtime);
void print_table();
void usage(FILE* f);
int parse(int argc, char** argv);
bool wants(const char* family);

}  // namespace ferry_bench_gpu
