// ferry-bench: the measurement families of the dissertation's Comm|Scope chapter (§3.1-3.2) in one
// program, on GPU 0 (and GPU 1 for `peer`).
//
//   ferry-bench [--family copy,peer,copy2d3d,pack,calls] [--quick] [--max-size 256M] [--json FILE]
//               [--flush] [--cpu N] [--min-time S] [--no-gate] [--progress]
//
// Families:
//   copy      H2D / D2H / D2D by memory: pageable (cudaMemcpy), pinned (cudaHostAlloc,
//             cudaMemcpyAsync), device (D2D), mapped zero-copy (a copy kernel reading or writing
//             mapped host memory), managed (demand paging: first touch on the other side after a
//             write; prefetch: cudaMemPrefetchAsync first). Pinned and mapped also bidirectional:
//             H2D and D2H at once on two streams.
//   peer      GPU 0 -> GPU 1, GPU 1 -> GPU 0 and both at once (cudaMemcpyPeerAsync, issued on
//             streams of GPU 0), with peer access when the pair has it. Needs 2 GPUs.
//   copy2d3d  cudaMemcpy2DAsync (rows of 8 B .. 4 KiB at twice their width) and cudaMemcpy3DAsync
//             (the faces of a 262^3 grid of doubles, and a 128^3 box), D2D and D2H into pinned
//             memory, against the contiguous copy of the same bytes.
//   pack      ferry::gpu::pack_async of MPI vectors (block B, stride 2B) into device memory, into
//             device memory then one D2H copy, and one-shot into mapped host memory, over the grid
//             of ferry-measure's pack surfaces (4 KiB .. 8 MiB x 1 .. 4096 B blocks).
//   calls     host cost of runtime calls: kernel launch with 0 / 64 / 1024 / 4096 B of arguments,
//             launch + synchronize, 1 B cudaMemcpyAsync, cudaEventRecord, cudaEventQuery,
//             cudaStreamSynchronize of an idle stream, a CUDA graph of 1 / 8 / 64 empty
//             kernels against as many separate launches, and one 8-byte word moved D2H / H2D /
//             D2D and waited for: cudaMemcpy, cudaMemcpyAsync + synchronize, + an event polled,
//             a kernel + synchronize, a kernel that sets a flag in mapped memory the host polls.
//
// Timing ("timing" in each record):
//   gated   CUDA events, the work held behind a spin kernel (§3.1.2): start event after the spin on
//           stream A, stream B waits on it, the copies are enqueued, end events on both streams,
//           then the host releases the spin (a flag in mapped memory). Time = max(end) - start: the
//           GPU's time for the work, none of the host's enqueueing. The spin gives up after 1 s
//           (a call that blocked the host would otherwise deadlock); such timeouts are counted
//           ("gate_timeouts" in the JSON; those samples include enqueueing). --no-gate: the same
//           events without the spin.
//   events  CUDA events around the calls (the host's cost of issuing them included), as
//           ferry-measure does for its pack surfaces; also managed prefetch (the prefetch may
//           block the host) and peer copies without peer access.
//   host    std::chrono::steady_clock around synchronous work: pageable cudaMemcpy (followed by a
//           synchronize: an H2D cudaMemcpy from pageable memory may return before the DMA is
//           done), the host's first touch of managed memory, and the `calls` family (cheap calls
//           timed in batches, the per-call mean of a batch being one sample).
// Each point: warm-up (2 runs, 1 with --quick or when a run is long), then repetitions until
// --min-time (0.2 s; 0.02 s with --quick) has passed and at least 5 (3) were taken, or 1000 (100)
// were taken; median and minimum. --flush writes a buffer of twice the GPU's L2 before every
// repetition (untimed; GPU 0's L2 only, host caches are not flushed).
//
// Records (JSON "results"): {family, case, method, direction, bytes, us_median, us_min, gbps, reps,
// timing}. `case` names the line a record belongs to (one line per case across sizes); `bytes` is
// the size of one copy (packed bytes for `pack`, argument bytes for launches); gbps = bytes moved /
// median time, both directions counted for "bidir". Sizes: powers of two from 1 B to --max-size
// (x4 steps with --quick).
//
// MPI: MPI_Init/MPI_Finalize for the datatypes of `pack` (runs as a single process; with more
// ranks only rank 0 measures). Without a GPU it prints "no GPU: skipped" and exits 0.
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

namespace {

using ferry::i64;
using Clock = std::chrono::steady_clock;


constexpr i64 KiB = 1024, MiB = 1024 * 1024;
const char* const kFamilies[] = {"copy", "peer", "copy2d3d", "pack", "calls"};

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
Options opt;

struct Record {
  std::string family, kase, method, direction;
  i64 bytes;
  double us_median, us_min, gbps;
  int reps;
  std::string timing;
};
std::vector<Record> records;
std::vector<std::pair<std::string, std::string>> skipped;  // family, reason
std::vector<std::string> notes;

// ---------------------------------------------------------------------------------------------
// Statistics and the repetition policy.

struct Stats {
  double median = 0, min = 0;
  int reps = 0;
};

Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.reps = static_cast<int>(n);
  return s;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// sample() runs the operation once and returns its time in microseconds (untimed set-up inside it
// is allowed). Warm-up, then repetitions until min_time has passed (wall clock, set-up included)
// and min_reps were taken, or max_reps were taken.
Stats repeat(const std::function<double()>& sample) {
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

void record(const std::string& family, const std::string& kase, const std::string& method,
            const std::string& direction, i64 bytes, const Stats& s, const std::string& timing,
            double moved_factor = 1.0) {
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

void run_jobs(const std::string& family, const std::vector<Job>& jobs) {
  Progress bar(family, jobs.size());
  for (const Job& j : jobs) {
    j.run();
    bar.step();
  }
}

std::vector<i64> sweep(i64 lo, i64 hi) {
  std::vector<i64> v;
  const i64 step = opt.quick ? 4 : 2;
  for (i64 s = lo; s <= hi; s *= step) v.push_back(s);
  return v;
}

std::string size_name(i64 b) {
  if (b >= MiB && b % MiB == 0) return std::to_string(b / MiB) + " MiB";
  if (b >= KiB && b % KiB == 0) return std::to_string(b / KiB) + " KiB";
  return std::to_string(b) + " B";
}

// ---------------------------------------------------------------------------------------------
// Kernels.

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until the host sets *flag (mapped host memory), or gives up after limit_ns.
__global__ void spin_kernel(const volatile int* flag, unsigned long long limit_ns, int* timed_out) {
  const unsigned long long t0 = global_ns();
  while (*flag == 0) {
    if (global_ns() - t0 > limit_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(256);
  }
}

// Grid-stride copy, 16 B words then the tail (both buffers 16-byte aligned).
__global__ void copy_kernel(char* __restrict__ dst, const char* __restrict__ src, i64 bytes) {
  const i64 n16 = bytes / 16;
  const i64 stride = i64{gridDim.x} * blockDim.x;
  const i64 tid = i64{blockIdx.x} * blockDim.x + threadIdx.x;
  for (i64 i = tid; i < n16; i += stride)
    reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  for (i64 i = n16 * 16 + tid; i < bytes; i += stride) dst[i] = src[i];
}

// Reads every byte (managed memory: the device's first touch).
__global__ void read_kernel(const char* __restrict__ src, i64 bytes, unsigned* sink) {
  const i64 n16 = bytes / 16;
  const i64 stride = i64{gridDim.x} * blockDim.x;
  const i64 tid = i64{blockIdx.x} * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (i64 i = tid; i < n16; i += stride) {
    const uint4 v = reinterpret_cast<const uint4*>(src)[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  for (i64 i = n16 * 16 + tid; i < bytes; i += stride) acc ^= static_cast<unsigned char>(src[i]);
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; true (and harmless) at most by chance
}

__global__ void fill_kernel(char* __restrict__ dst, i64 bytes, int value) {
  const i64 stride = i64{gridDim.x} * blockDim.x;
  for (i64 i = i64{blockIdx.x} * blockDim.x + threadIdx.x; i < bytes; i += stride)
    dst[i] = static_cast<char>(value);
}

__global__ void empty_kernel() {}

// One 8-byte word from src to dst, then (after a system-wide fence, so the host that sees the
// flag also sees the word) the flag set to seq: the host waits on the flag instead of the stream.
__global__ void word_kernel(const unsigned long long* src, unsigned long long* dst,
                            volatile unsigned* flag, unsigned seq) {
  *dst = *src;
  if (flag) {
    __threadfence_system();
    *flag = seq;
  }
}

template <int N>
struct Blob {
  unsigned char b[N];
};
template <int N>
__global__ void args_kernel(Blob<N>) {}

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
Ctx ctx;

unsigned blocks_for(i64 bytes) {
  const i64 words = std::max<i64>(bytes / 16, 1);
  return static_cast<unsigned>(std::min<i64>((words + 255) / 256, 2 * i64{ctx.sms}));
}

void flush_l2(cudaStream_t s) {
  if (!opt.flush) return;
  ctx.flush_value = (ctx.flush_value + 1) & 0xff;
  CK(cudaMemsetAsync(ctx.flush, ctx.flush_value, ctx.flush_bytes, s));
}

using Work = std::function<void(cudaStream_t, cudaStream_t)>;

// The GPU's time for work(a, b) in microseconds, enqueued behind the spin kernel (see the top).
// two: work uses stream b as well (b starts with a, at the start event).
double gated(const Work& work, bool two) {
  flush_l2(ctx.a);
  const bool gate = opt.gate;
  if (gate) {
    ctx.flag_h[0] = 0;
    ctx.flag_h[1] = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    spin_kernel<<<1, 1, 0, ctx.a>>>(ctx.flag_d, 1000000000ull, ctx.flag_d + 1);
    CK(cudaGetLastError());
  }
  CK(cudaEventRecord(ctx.start, ctx.a));
  if (two) CK(cudaStreamWaitEvent(ctx.b, ctx.start, 0));
  work(ctx.a, ctx.b);
  CK(cudaEventRecord(ctx.end_a, ctx.a));
  if (two) CK(cudaEventRecord(ctx.end_b, ctx.b));
  if (gate) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    ctx.flag_h[0] = 1;  // release the spin
  }
  CK(cudaEventSynchronize(ctx.end_a));
  float ms = 0, ms_b = 0;
  CK(cudaEventElapsedTime(&ms, ctx.start, ctx.end_a));
  if (two) {
    CK(cudaEventSynchronize(ctx.end_b));
    CK(cudaEventElapsedTime(&ms_b, ctx.start, ctx.end_b));
    ms = std::max(ms, ms_b);
  }
  if (gate) {
    ++ctx.gated_samples;
    if (ctx.flag_h[1]) ++ctx.gate_timeouts;
  }
  return 1e3 * ms;
}

// CUDA events around work(a): the host's cost of issuing it included.
double evented(const std::function<void(cudaStream_t)>& work) {
  flush_l2(ctx.a);
  CK(cudaEventRecord(ctx.start, ctx.a));
  work(ctx.a);
  CK(cudaEventRecord(ctx.end_a, ctx.a));
  CK(cudaEventSynchronize(ctx.end_a));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, ctx.start, ctx.end_a));
  return 1e3 * ms;
}

// Host clock around synchronous work, in microseconds.
double host_timed(const std::function<void()>& fn) {
  if (opt.flush) {
    flush_l2(ctx.a);
    CK(cudaStreamSynchronize(ctx.a));
  }
  const auto t0 = Clock::now();
  fn();
  return 1e6 * seconds_since(t0);
}

volatile std::uint64_t host_sink = 0;

// The host reads every byte (managed memory: the host's first touch).
void host_read(const char* p, i64 bytes) {
  std::uint64_t acc = 0;
  i64 i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    acc += w;
  }
  for (; i < bytes; ++i) acc += static_cast<unsigned char>(p[i]);
  host_sink = host_sink + acc;
}

// ---------------------------------------------------------------------------------------------
// copy

void family_copy() {
  const i64 max = opt.max_size;
  const std::size_t n = static_cast<std::size_t>(max);
  std::vector<char> pageable(n, 1);  // touched: resident before the first copy
  char* pg = pageable.data();
  char *h_a, *h_b, *d_a, *d_b;
  CK(cudaHostAlloc(&h_a, n, cudaHostAllocMapped | cudaHostAllocPortable));
  CK(cudaHostAlloc(&h_b, n, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(h_a, 2, n);
  std::memset(h_b, 3, n);
  char *hd_a, *hd_b;  // the device's view of the mapped buffers
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&hd_a), h_a, 0));
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&hd_b), h_b, 0));
  CK(cudaMalloc(&d_a, n));
  CK(cudaMalloc(&d_b, n));
  CK(cudaMemset(d_a, 4, n));
  CK(cudaMemset(d_b, 5, n));
  int managed = 0, concurrent = 0;
  CK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0));
  CK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, 0));
  char* m = nullptr;
  if (managed) CK(cudaMallocManaged(&m, n, cudaMemAttachGlobal));
  else skipped.push_back({"copy", "managed: the device has no managed memory"});
  if (managed && !concurrent)
    skipped.push_back({"copy", "managed prefetch: no concurrent managed access (cudaMemPrefetchAsync unsupported)"});
  cudaMemLocation on_device{}, on_host{};
  on_device.type = cudaMemLocationTypeDevice;
  on_device.id = 0;
  on_host.type = cudaMemLocationTypeHost;
  on_host.id = 0;
  int fill = 0;

  std::vector<Job> jobs;
  for (i64 s : sweep(1, max)) {
    const std::size_t z = static_cast<std::size_t>(s);
    // Pageable: synchronous cudaMemcpy, host clock; the synchronize makes an H2D complete.
    jobs.push_back({[=] {
      record("copy", "pageable H2D", "pageable", "H2D", s, repeat([&] {
               return host_timed([&] {
                 CK(cudaMemcpy(d_a, pg, z, cudaMemcpyHostToDevice));
                 CK(cudaDeviceSynchronize());
               });
             }), "host");
    }});
    jobs.push_back({[=] {
      record("copy", "pageable D2H", "pageable", "D2H", s, repeat([&] {
               return host_timed([&] { CK(cudaMemcpy(pg, d_a, z, cudaMemcpyDeviceToHost)); });
             }), "host");
    }});
    const std::string g = opt.gate ? "gated" : "events";
    jobs.push_back({[=] {
      record("copy", "pinned H2D", "pinned", "H2D", s, repeat([&] {
               return gated([&](cudaStream_t a, cudaStream_t) {
                 CK(cudaMemcpyAsync(d_a, h_a, z, cudaMemcpyHostToDevice, a));
               }, false);
             }), g);
    }});
    jobs.push_back({[=] {
      record("copy", "pinned D2H", "pinned", "D2H", s, repeat([&] {
               return gated([&](cudaStream_t a, cudaStream_t) {
                 CK(cudaMemcpyAsync(h_b, d_b, z, cudaMemcpyDeviceToHost, a));
               }, false);
             }), g);
    }});
    jobs.push_back({[=] {
      record("copy", "pinned bidir", "pinned", "bidir", s, repeat([&] {
               return gated([&](cudaStream_t a, cudaStream_t b) {
                 CK(cudaMemcpyAsync(d_a, h_a, z, cudaMemcpyHostToDevice, a));
                 CK(cudaMemcpyAsync(h_b, d_b, z, cudaMemcpyDeviceToHost, b));
               }, true);
             }), g, 2.0);
    }});
    jobs.push_back({[=] {
      record("copy", "device D2D", "device", "D2D", s, repeat([&] {
               return gated([&](cudaStream_t a, cudaStream_t) {
                 CK(cudaMemcpyAsync(d_b, d_a, z, cudaMemcpyDeviceToDevice, a));
               }, false);
             }), g);
    }});
    const unsigned grid = blocks_for(s);
    jobs.push_back({[=] {
      record("copy", "mapped H2D", "mapped", "H2D", s, repeat([&] {
               return gated([&](cudaStream_t a, cudaStream_t) {
                 copy_kernel<<<grid, 256, 0, a>>>(d_a, hd_a, s);
                 CK(cudaGetLastError());
               }, false);
             }), g);
    }});
    jobs.push_back({[=] {
      record("copy", "mapped D2H", "mapped", "D2H", s, repeat([&] {
               return gated([&](cudaStream_t a, cudaStream_t) {
                 copy_kernel<<<grid, 256, 0, a>>>(hd_b, d_b, s);
                 CK(cudaGetLastError());
               }, false);
             }), g);
    }});
    jobs.push_back({[=] {
      record("copy", "mapped bidir", "mapped", "bidir", s, repeat([&] {
               return gated([&](cudaStream_t a, cudaStream_t b) {
                 copy_kernel<<<grid, 256, 0, a>>>(d_a, hd_a, s);
                 CK(cudaGetLastError());
                 copy_kernel<<<grid, 256, 0, b>>>(hd_b, d_b, s);
                 CK(cudaGetLastError());
               }, true);
             }), g, 2.0);
    }});
    if (!managed) continue;
    // Demand paging, each repetition on a fresh allocation (untimed): pages that moved back and
    // forth in earlier repetitions would be pinned on one side by the driver's thrashing
    // mitigation and then read remotely, which is not what a first touch costs.
    // H2D: the host writes (pages are placed on the host), then a kernel reads them.
    jobs.push_back({[=, &fill] {
      record("copy", "managed demand H2D", "managed-demand", "H2D", s, repeat([&] {
               char* f = nullptr;
               CK(cudaMallocManaged(&f, z, cudaMemAttachGlobal));
               std::memset(f, ++fill & 0xff, z);
               const double us = gated([&](cudaStream_t a, cudaStream_t) {
                 read_kernel<<<grid, 256, 0, a>>>(f, s, ctx.sink);
                 CK(cudaGetLastError());
               }, false);
               CK(cudaFree(f));
               return us;
             }), g);
    }});
    // D2H: a kernel writes (pages are placed on the device), then the host reads them.
    jobs.push_back({[=, &fill] {
      record("copy", "managed demand D2H", "managed-demand", "D2H", s, repeat([&] {
               char* f = nullptr;
               CK(cudaMallocManaged(&f, z, cudaMemAttachGlobal));
               fill_kernel<<<grid, 256, 0, ctx.a>>>(f, s, ++fill & 0xff);
               CK(cudaGetLastError());
               CK(cudaStreamSynchronize(ctx.a));
               const double us = host_timed([&] { host_read(f, s); });
               CK(cudaFree(f));
               return us;
             }), "host");
    }});
    if (!concurrent) continue;
    // Prefetch first, then the same first touch.
    jobs.push_back({[=, &fill] {
      record("copy", "managed prefetch H2D", "managed-prefetch", "H2D", s, repeat([&] {
               std::memset(m, ++fill & 0xff, z);
               return evented([&](cudaStream_t a) {
                 CK(cudaMemPrefetchAsync(m, z, on_device, 0, a));
                 read_kernel<<<grid, 256, 0, a>>>(m, s, ctx.sink);
                 CK(cudaGetLastError());
               });
             }), "events");
    }});
    jobs.push_back({[=, &fill] {
      record("copy", "managed prefetch D2H", "managed-prefetch", "D2H", s, repeat([&] {
               fill_kernel<<<grid, 256, 0, ctx.a>>>(m, s, ++fill & 0xff);
               CK(cudaGetLastError());
               CK(cudaStreamSynchronize(ctx.a));
               return host_timed([&] {
                 CK(cudaMemPrefetchAsync(m, z, on_host, 0, ctx.a));
                 CK(cudaStreamSynchronize(ctx.a));
                 host_read(m, s);
               });
             }), "host");
    }});
  }
  run_jobs("copy", jobs);
  CK(cudaDeviceSynchronize());
  if (m) CK(cudaFree(m));
  CK(cudaFree(d_a));
  CK(cudaFree(d_b));
  CK(cudaFreeHost(h_a));
  CK(cudaFreeHost(h_b));
}

// ---------------------------------------------------------------------------------------------
// peer

void family_peer() {
  if (ctx.devices < 2) {
    skipped.push_back({"peer", "needs 2 GPUs, found " + std::to_string(ctx.devices)});
    std::printf("peer: skipped (%d GPU)\n", ctx.devices);
    return;
  }
  int c01 = 0, c10 = 0;
  CK(cudaDeviceCanAccessPeer(&c01, 0, 1));
  CK(cudaDeviceCanAccessPeer(&c10, 1, 0));
  const bool p2p = c01 && c10;
  auto enable = [](int dev, int peer) {
    CK(cudaSetDevice(dev));
    const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
    else CK(e);
  };
  if (p2p) {
    enable(0, 1);
    enable(1, 0);
  } else {
    notes.push_back("peer: GPUs 0 and 1 have no peer access; cudaMemcpyPeerAsync stages through the host (timed with events, not gated)");
  }
  const std::size_t n = static_cast<std::size_t>(opt.max_size);
  char *a0, *b0, *a1, *b1;
  CK(cudaSetDevice(1));
  CK(cudaMalloc(&a1, n));
  CK(cudaMalloc(&b1, n));
  CK(cudaMemset(a1, 1, n));
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&a0, n));
  CK(cudaMalloc(&b0, n));
  CK(cudaMemset(a0, 2, n));
  CK(cudaDeviceSynchronize());
  const std::string method = p2p ? "p2p" : "staged";
  const bool gate_ok = p2p && opt.gate;
  const std::string timing = gate_ok ? "gated" : "events";
  // Without peer access the copy may block the host: no spin in front of it.
  auto timed = [gate_ok](const Work& w, bool two) {
    const bool saved = opt.gate;
    opt.gate = gate_ok;
    const double us = gated(w, two);
    opt.gate = saved;
    return us;
  };
  std::vector<Job> jobs;
  for (i64 s : sweep(1, opt.max_size)) {
    const std::size_t z = static_cast<std::size_t>(s);
    jobs.push_back({[=] {
      record("peer", "GPU0->GPU1", method, "0->1", s, repeat([&] {
               return timed([&](cudaStream_t a, cudaStream_t) { CK(cudaMemcpyPeerAsync(b1, 1, a0, 0, z, a)); }, false);
             }), timing);
    }});
    jobs.push_back({[=] {
      record("peer", "GPU1->GPU0", method, "1->0", s, repeat([&] {
               return timed([&](cudaStream_t a, cudaStream_t) { CK(cudaMemcpyPeerAsync(b0, 0, a1, 1, z, a)); }, false);
             }), timing);
    }});
    jobs.push_back({[=] {
      record("peer", "GPU0<->GPU1 bidir", method, "bidir", s, repeat([&] {
               return timed([&](cudaStream_t a, cudaStream_t b) {
                 CK(cudaMemcpyPeerAsync(b1, 1, a0, 0, z, a));
                 CK(cudaMemcpyPeerAsync(b0, 0, a1, 1, z, b));
               }, true);
             }), timing, 2.0);
    }});
  }
  run_jobs("peer", jobs);
  CK(cudaDeviceSynchronize());
  CK(cudaFree(a0));
  CK(cudaFree(b0));
  CK(cudaSetDevice(1));
  CK(cudaDeviceSynchronize());
  CK(cudaFree(a1));
  CK(cudaFree(b1));
  CK(cudaSetDevice(0));
}

// ---------------------------------------------------------------------------------------------
// copy2d3d

void family_copy2d3d() {
  constexpr int e = 262;                      // 256^3 interior, radius 3, 8-byte values
  constexpr i64 row = i64{e} * 8, plane = row * e, grid_bytes = plane * e;
  const i64 cap2d = std::min<i64>(opt.max_size, 64 * MiB);  // the source spans twice that
  const i64 dst_bytes = std::max<i64>(cap2d, 16 * MiB);
  char *grid, *dst_d, *dst_h;
  CK(cudaMalloc(&grid, static_cast<std::size_t>(grid_bytes)));
  CK(cudaMemset(grid, 7, static_cast<std::size_t>(grid_bytes)));
  CK(cudaMalloc(&dst_d, static_cast<std::size_t>(dst_bytes)));
  CK(cudaHostAlloc(&dst_h, static_cast<std::size_t>(dst_bytes), cudaHostAllocDefault));
  const std::string g = opt.gate ? "gated" : "events";
  std::vector<Job> jobs;

  // 3-D boxes of the grid: cudaMemcpy3DAsync into a packed buffer vs one contiguous copy.
  struct Box {
    const char* name;
    int x0, y0, z0, ex, ey, ez;
  };
  const Box boxes[] = {{"-X face 3x256x256", 3, 3, 3, 3, 256, 256},
                       {"-Y face 256x3x256", 3, 3, 3, 256, 3, 256},
                       {"-Z face 256x256x3", 3, 3, 3, 256, 256, 3},
                       {"box 128^3", 67, 67, 67, 128, 128, 128}};
  for (const Box& bx : boxes) {
    const i64 bytes = i64{bx.ex} * bx.ey * bx.ez * 8;
    if (bytes > opt.max_size) continue;
    for (int d2h = 0; d2h < 2; ++d2h) {
      const std::string dir = d2h ? "D2H" : "D2D";
      char* dst = d2h ? dst_h : dst_d;
      cudaMemcpy3DParms p{};
      p.srcPtr = make_cudaPitchedPtr(grid, static_cast<std::size_t>(row), static_cast<std::size_t>(row), e);
      p.srcPos = make_cudaPos(static_cast<std::size_t>(bx.x0) * 8, static_cast<std::size_t>(bx.y0),
                              static_cast<std::size_t>(bx.z0));
      p.dstPtr = make_cudaPitchedPtr(dst, static_cast<std::size_t>(bx.ex) * 8, static_cast<std::size_t>(bx.ex) * 8,
                                     static_cast<std::size_t>(bx.ey));
      p.extent = make_cudaExtent(static_cast<std::size_t>(bx.ex) * 8, static_cast<std::size_t>(bx.ey),
                                 static_cast<std::size_t>(bx.ez));
      p.kind = d2h ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
      const std::string name = bx.name;
      jobs.push_back({[=] {
        record("copy2d3d", "memcpy3d " + dir + " " + name, "memcpy3d", dir, bytes, repeat([&] {
                 return gated([&](cudaStream_t a, cudaStream_t) { CK(cudaMemcpy3DAsync(&p, a)); }, false);
               }), g);
        record("copy2d3d", "contiguous " + dir + " " + name, "contiguous", dir, bytes, repeat([&] {
                 return gated([&](cudaStream_t a, cudaStream_t) {
                   CK(cudaMemcpyAsync(dst, grid, static_cast<std::size_t>(bytes),
                                      d2h ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice, a));
                 }, false);
               }), g);
      }});
    }
  }

  // 2-D: rows of w bytes at a pitch of 2w, packed into rows of w; and the contiguous copy.
  const i64 widths[] = {8, 64, 512, 4096};
  for (i64 s : sweep(4 * KiB, cap2d)) {
    for (int d2h = 0; d2h < 2; ++d2h) {
      const std::string dir = d2h ? "D2H" : "D2D";
      const cudaMemcpyKind kind = d2h ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
      char* dst = d2h ? dst_h : dst_d;
      for (i64 w : widths) {
        const std::size_t rows = static_cast<std::size_t>(s / w);
        const std::string name = "memcpy2d " + dir + " rows " + std::to_string(w) + " B, pitch " + std::to_string(2 * w) + " B";
        jobs.push_back({[=] {
          record("copy2d3d", name, "memcpy2d", dir, s, repeat([&] {
                   return gated([&](cudaStream_t a, cudaStream_t) {
                     CK(cudaMemcpy2DAsync(dst, static_cast<std::size_t>(w), grid, static_cast<std::size_t>(2 * w),
                                          static_cast<std::size_t>(w), rows, kind, a));
                   }, false);
                 }), g);
        }});
      }
      jobs.push_back({[=] {
        record("copy2d3d", "contiguous " + dir, "contiguous", dir, s, repeat([&] {
                 return gated([&](cudaStream_t a, cudaStream_t) {
                   CK(cudaMemcpyAsync(dst, grid, static_cast<std::size_t>(s), kind, a));
                 }, false);
               }), g);
      }});
    }
  }
  run_jobs("copy2d3d", jobs);
  CK(cudaDeviceSynchronize());
  CK(cudaFree(grid));
  CK(cudaFree(dst_d));
  CK(cudaFreeHost(dst_h));
}

// ---------------------------------------------------------------------------------------------
// pack

void family_pack() {
  // ferry-measure's pack surfaces: object size x block size, MPI_Type_vector(size/block, block,
  // 2*block, MPI_BYTE).
  const i64 all_sizes[] = {4 * KiB, 64 * KiB, 1 * MiB, 8 * MiB};
  const i64 blocks[] = {1, 8, 64, 512, 4096};
  std::vector<i64> sizes;
  for (i64 s : all_sizes)
    if (s <= opt.max_size) sizes.push_back(s);
  if (sizes.empty()) {
    skipped.push_back({"pack", "--max-size below 4 KiB"});
    return;
  }
  const i64 biggest = sizes.back();
  char *src, *dev, *host;
  CK(cudaMalloc(&src, static_cast<std::size_t>(2 * biggest)));
  CK(cudaMemset(src, 9, static_cast<std::size_t>(2 * biggest)));
  CK(cudaMalloc(&dev, static_cast<std::size_t>(biggest)));
  CK(cudaHostAlloc(&host, static_cast<std::size_t>(biggest), cudaHostAllocMapped | cudaHostAllocPortable));
  CK(cudaDeviceSynchronize());
  std::vector<Job> jobs;
  for (i64 s : sizes)
    for (i64 blk : blocks) {
      if (blk > s) continue;
      jobs.push_back({[=] {
        MPI_Datatype v;
        MPI_Type_vector(static_cast<int>(s / blk), static_cast<int>(blk), static_cast<int>(2 * blk), MPI_BYTE, &v);
        MPI_Type_commit(&v);
        const ferry::Type ty = ferry::translate(v);
        MPI_Type_free(&v);
        const i64 bytes = ty.size();
        const std::string b = " block " + std::to_string(blk) + " B";
        record("pack", "device" + b, "device", "pack", bytes, repeat([&] {
                 return evented([&](cudaStream_t a) { ferry::gpu::pack_async(src, 1, ty, dev, a); });
               }), "events");
        record("pack", "device+D2H" + b, "device+D2H", "pack", bytes, repeat([&] {
                 return evented([&](cudaStream_t a) {
                   ferry::gpu::pack_async(src, 1, ty, dev, a);
                   CK(cudaMemcpyAsync(host, dev, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost, a));
                 });
               }), "events");
        record("pack", "mapped (one-shot)" + b, "mapped", "pack", bytes, repeat([&] {
                 return evented([&](cudaStream_t a) { ferry::gpu::pack_async(src, 1, ty, host, a); });
               }), "events");
      }});
    }
  run_jobs("pack", jobs);
  CK(cudaDeviceSynchronize());
  CK(cudaFree(src));
  CK(cudaFree(dev));
  CK(cudaFreeHost(host));
}

// ---------------------------------------------------------------------------------------------
// calls

// k calls of fn timed together (per-call mean, µs), then after() untimed (drains the queue).
double batch(int k, const std::function<void()>& fn, const std::function<void()>& after) {
  const auto t0 = Clock::now();
  for (int i = 0; i < k; ++i) fn();
  const double us = 1e6 * seconds_since(t0) / k;
  after();
  return us;
}

void family_calls() {
  cudaStream_t a = ctx.a, idle = ctx.b;
  // Untimed after each sample: launch errors (not checked inside the timed loop), then the queue.
  auto drain = [a] {
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(a));
  };
  auto check = [] { CK(cudaGetLastError()); };
  char *d, *h;
  CK(cudaMalloc(&d, 64));
  CK(cudaHostAlloc(&h, 64, cudaHostAllocDefault));
  cudaEvent_t ev;
  CK(cudaEventCreate(&ev));
  CK(cudaEventRecord(ev, a));
  CK(cudaStreamSynchronize(a));
  const int k = 16;  // launches per sample: few enough that the queue never fills
  std::vector<Job> jobs;
  auto add = [&](const std::string& kase, const std::string& method, const std::string& dir, i64 bytes,
                 std::function<double()> sample) {
    jobs.push_back({[=] { record("calls", kase, method, dir, bytes, repeat(sample), "host", 0.0); }});
  };
  add("launch, 0 B args", "launch", "issue", 0,
      [=] { return batch(k, [=] { empty_kernel<<<1, 1, 0, a>>>(); }, drain); });
  add("launch, 64 B args", "launch", "issue", 64,
      [=] { return batch(k, [=] { args_kernel<64><<<1, 1, 0, a>>>(Blob<64>{}); }, drain); });
  add("launch, 1024 B args", "launch", "issue", 1024,
      [=] { return batch(k, [=] { args_kernel<1024><<<1, 1, 0, a>>>(Blob<1024>{}); }, drain); });
  add("launch, 4096 B args", "launch", "issue", 4096,
      [=] { return batch(k, [=] { args_kernel<4096><<<1, 1, 0, a>>>(Blob<4096>{}); }, drain); });
  add("launch + sync", "launch", "issue+sync", 0, [=] {
    return batch(1, [=] { empty_kernel<<<1, 1, 0, a>>>(); CK(cudaStreamSynchronize(a)); }, check);
  });
  add("cudaMemcpyAsync 1 B H2D", "memcpy", "issue", 1,
      [=] { return batch(k, [=] { CK(cudaMemcpyAsync(d, h, 1, cudaMemcpyHostToDevice, a)); }, drain); });
  add("cudaMemcpyAsync 1 B H2D + sync", "memcpy", "issue+sync", 1, [=] {
    return batch(1, [=] { CK(cudaMemcpyAsync(d, h, 1, cudaMemcpyHostToDevice, a)); CK(cudaStreamSynchronize(a)); }, [] {});
  });
  add("cudaMemcpyAsync 1 B D2H + sync", "memcpy", "issue+sync", 1, [=] {
    return batch(1, [=] { CK(cudaMemcpyAsync(h, d, 1, cudaMemcpyDeviceToHost, a)); CK(cudaStreamSynchronize(a)); }, [] {});
  });
  add("cudaEventRecord", "event", "issue", 0, [=] { return batch(100, [=] { CK(cudaEventRecord(ev, a)); }, drain); });
  add("cudaEventQuery (completed)", "event", "query", 0,
      [=] { return batch(100, [=] { CK(cudaEventQuery(ev)); }, [] {}); });
  add("cudaStreamSynchronize (idle)", "stream", "sync", 0,
      [=] { return batch(100, [=] { CK(cudaStreamSynchronize(idle)); }, [] {}); });

  // One 8-byte message moved D2H or H2D (or D2D) and waited for, as the interposer's staging of a
  // small message must: by a copy and a stream synchronize, a copy and an event polled, a kernel
  // and a stream synchronize, a kernel that sets a flag in mapped memory the host spins on.
  unsigned long long *dw, *hw, *dw2;
  unsigned* flag;
  CK(cudaMalloc(&dw, 8));
  CK(cudaMalloc(&dw2, 8));
  CK(cudaHostAlloc(&hw, 8, cudaHostAllocMapped));
  CK(cudaHostAlloc(&flag, sizeof(unsigned), cudaHostAllocMapped));
  *flag = 0;
  unsigned long long* hw_dev = nullptr;
  unsigned* flag_dev = nullptr;
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&hw_dev), hw, 0));
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flag_dev), flag, 0));
  cudaEvent_t poll;
  CK(cudaEventCreateWithFlags(&poll, cudaEventDisableTiming));
  auto seq = std::make_shared<unsigned>(0);
  auto wait_flag = [flag, seq] {
    const volatile unsigned* f = flag;
    while (*f != *seq) {
    }
  };
  auto wait_event = [poll] {
    cudaError_t e;
    while ((e = cudaEventQuery(poll)) == cudaErrorNotReady) {
    }
    CK(e);
  };
  struct Way {
    const char* dir;
    unsigned long long *src, *dst, *ksrc, *kdst;  // copies; kernel's view (mapped pointers)
    cudaMemcpyKind kind;
  };
  for (const Way& w : {Way{"D2H", dw, hw, dw, hw_dev, cudaMemcpyDeviceToHost},
                       Way{"H2D", hw, dw, hw_dev, dw, cudaMemcpyHostToDevice},
                       Way{"D2D", dw, dw2, dw, dw2, cudaMemcpyDeviceToDevice}}) {
    const std::string c = std::string("8 B ") + w.dir + ": ";
    add(c + "cudaMemcpy", "small", w.dir, 8,
        [=] { return batch(1, [=] { CK(cudaMemcpy(w.dst, w.src, 8, w.kind)); CK(cudaStreamSynchronize(nullptr)); }, [] {}); });
    add(c + "cudaMemcpyAsync + sync", "small", w.dir, 8, [=] {
      return batch(1, [=] { CK(cudaMemcpyAsync(w.dst, w.src, 8, w.kind, a)); CK(cudaStreamSynchronize(a)); }, [] {});
    });
    add(c + "cudaMemcpyAsync + event polled", "small", w.dir, 8, [=] {
      return batch(1, [=] {
        CK(cudaMemcpyAsync(w.dst, w.src, 8, w.kind, a));
        CK(cudaEventRecord(poll, a));
        wait_event();
      }, [] {});
    });
    add(c + "kernel + sync", "small", w.dir, 8, [=] {
      return batch(1, [=] { word_kernel<<<1, 1, 0, a>>>(w.ksrc, w.kdst, nullptr, 0); CK(cudaStreamSynchronize(a)); }, check);
    });
    add(c + "kernel + flag polled", "small", w.dir, 8, [=] {
      return batch(1, [=] {
        word_kernel<<<1, 1, 0, a>>>(w.ksrc, w.kdst, flag_dev, ++*seq);
        wait_flag();
      }, drain);
    });
  }

  // Graphs of N empty kernels against N launches.
  std::vector<cudaGraphExec_t> execs;
  for (int nk : {1, 8, 64}) {
    cudaGraph_t graph;
    CK(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < nk; ++i) empty_kernel<<<1, 1, 0, a>>>();
    CK(cudaGetLastError());
    CK(cudaStreamEndCapture(a, &graph));
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphDestroy(graph));
    CK(cudaGraphUpload(exec, a));
    CK(cudaStreamSynchronize(a));
    execs.push_back(exec);
    const std::string kern = std::to_string(nk) + (nk == 1 ? " kernel" : " kernels");
    add("graph of " + kern + ": launch", "graph", "issue", 0,
        [=] { return batch(4, [=] { CK(cudaGraphLaunch(exec, a)); }, drain); });
    add("graph of " + kern + ": launch + sync", "graph", "issue+sync", 0,
        [=] { return batch(1, [=] { CK(cudaGraphLaunch(exec, a)); CK(cudaStreamSynchronize(a)); }, [] {}); });
    add(kern + " launched: launch", "separate", "issue", 0, [=] {
      return batch(1, [=] { for (int i = 0; i < nk; ++i) empty_kernel<<<1, 1, 0, a>>>(); }, drain);
    });
    add(kern + " launched: launch + sync", "separate", "issue+sync", 0, [=] {
      return batch(1, [=] {
        for (int i = 0; i < nk; ++i) empty_kernel<<<1, 1, 0, a>>>();
        CK(cudaStreamSynchronize(a));
      }, check);
    });
  }
  run_jobs("calls", jobs);
  CK(cudaDeviceSynchronize());
  for (cudaGraphExec_t x : execs) CK(cudaGraphExecDestroy(x));
  CK(cudaEventDestroy(ev));
  CK(cudaEventDestroy(poll));
  CK(cudaFree(d));
  CK(cudaFree(dw));
  CK(cudaFree(dw2));
  CK(cudaFreeHost(h));
  CK(cudaFreeHost(hw));
  CK(cudaFreeHost(flag));
}

// ---------------------------------------------------------------------------------------------
// Machine description, JSON, table.

std::string read_first_line(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  char buf[256] = {0};
  const char* r = std::fgets(buf, sizeof buf, f);
  std::fclose(f);
  std::string s = r ? buf : "";
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// NUMA node of a CPU, from sysfs ("" when unknown).
std::string cpu_numa(int cpu) {
  if (cpu < 0) return "";
  DIR* d = opendir(("/sys/devices/system/cpu/cpu" + std::to_string(cpu)).c_str());
  if (!d) return "";
  std::string node;
  while (dirent* ent = readdir(d)) {
    const std::string nm = ent->d_name;
    if (nm.size() > 4 && nm.compare(0, 4, "node") == 0 && std::isdigit(static_cast<unsigned char>(nm[4]))) node = nm.substr(4);
  }
  closedir(d);
  return node;
}

// NUMA node of a GPU's PCI device, from sysfs ("" when unknown).
std::string gpu_numa(int dev) {
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess) return "";
  std::string id = bus;
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::size_t colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id = id.substr(colon - 4);  // 8-digit domain -> 4
  return read_first_line("/sys/bus/pci/devices/" + id + "/numa_node");
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string now_utc() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

std::string hostname() {
  char h[256] = {0};
  gethostname(h, sizeof h - 1);
  return h;
}

bool write_json(const std::string& path, const std::string& device, int driver, int runtime) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "ferry-bench: cannot write %s\n", path.c_str());
    return false;
  }
  const int cpu = sched_getcpu();
  std::fprintf(f, "{\n  \"tool\": \"ferry-bench\",\n  \"date\": %s,\n  \"host\": %s,\n  \"device\": %s,\n",
               json_str(now_utc()).c_str(), json_str(hostname()).c_str(), json_str(device).c_str());
  std::fprintf(f, "  \"devices\": %d,\n  \"sms\": %d,\n  \"l2_bytes\": %d,\n  \"driver\": %d,\n  \"runtime\": %d,\n",
               ctx.devices, ctx.sms, ctx.l2, driver, runtime);
  std::fprintf(f, "  \"cpu\": %d,\n  \"cpu_numa\": %s,\n  \"gpu_numa\": %s,\n", cpu,
               json_str(cpu_numa(cpu)).c_str(), json_str(ctx.devices ? gpu_numa(0) : "").c_str());
  std::string fams;
  for (const std::string& s : opt.families) fams += (fams.empty() ? "" : ",") + json_str(s);
  std::fprintf(f, "  \"options\": {\"families\": [%s], \"quick\": %s, \"max_size\": %lld, \"flush\": %s, "
                  "\"pinned_cpu\": %d, \"min_time_s\": %g, \"min_reps\": %d, \"max_reps\": %d, \"gate\": %s},\n",
               fams.c_str(), opt.quick ? "true" : "false", static_cast<long long>(opt.max_size),
               opt.flush ? "true" : "false", opt.cpu, opt.min_time, opt.min_reps, opt.max_reps,
               opt.gate ? "true" : "false");
  std::fprintf(f, "  \"gated_samples\": %ld,\n  \"gate_timeouts\": %d,\n", ctx.gated_samples, ctx.gate_timeouts);
  std::fprintf(f, "  \"skipped\": [");
  for (std::size_t i = 0; i < skipped.size(); ++i)
    std::fprintf(f, "%s{\"family\": %s, \"reason\": %s}", i ? ", " : "", json_str(skipped[i].first).c_str(),
                 json_str(skipped[i].second).c_str());
  std::fprintf(f, "],\n  \"notes\": [");
  for (std::size_t i = 0; i < notes.size(); ++i) std::fprintf(f, "%s%s", i ? ", " : "", json_str(notes[i]).c_str());
  std::fprintf(f, "],\n  \"results\": [\n");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    std::fprintf(f, "    {\"family\": %s, \"case\": %s, \"method\": %s, \"direction\": %s, \"bytes\": %lld, "
                    "\"us_median\": %.4f, \"us_min\": %.4f, \"gbps\": %.6g, \"reps\": %d, \"timing\": %s}%s\n",
                 json_str(r.family).c_str(), json_str(r.kase).c_str(), json_str(r.method).c_str(),
                 json_str(r.direction).c_str(), static_cast<long long>(r.bytes), r.us_median, r.us_min, r.gbps,
                 r.reps, json_str(r.timing).c_str(), i + 1 < records.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
  std::printf("ferry-bench: wrote %s (%zu records)\n", path.c_str(), records.size());
  return true;
}

void print_table() {
  std::printf("%-9s %-46s %10s %12s %12s %10s %6s\n", "family", "case", "size", "us_median", "us_min", "GB/s", "reps");
  for (const Record& r : records)
    std::printf("%-9s %-46s %10s %12.3f %12.3f %10.2f %6d\n", r.family.c_str(), r.kase.c_str(),
                size_name(r.bytes).c_str(), r.us_median, r.us_min, r.gbps, r.reps);
  for (const auto& s : skipped) std::printf("skipped: %s: %s\n", s.first.c_str(), s.second.c_str());
  for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
}

// ---------------------------------------------------------------------------------------------
// Options.

void usage(FILE* f) {
  std::fprintf(f,
               "usage: ferry-bench [options]   (MPI program: mpiexec -n 1 ferry-bench ..., or run directly)\n"
               "  --family LIST    comma-separated: copy,peer,copy2d3d,pack,calls (default: all)\n"
               "  --quick          short sweep: sizes x4 apart, 0.02 s / at most 100 repetitions a point\n"
               "  --max-size SIZE  largest transfer, e.g. 64M, 1G (default 256M; sizes are powers of two)\n"
               "  --json FILE      write the records as JSON\n"
               "  --flush          write a buffer of 2x the GPU's L2 before every repetition (untimed)\n"
               "  --cpu N          pin the host thread to CPU N (sched_setaffinity); prints its NUMA node\n"
               "  --min-time S     seconds of repetitions per point (default 0.2; 0.02 with --quick)\n"
               "  --no-gate        time async work with plain events, without the spin kernel in front\n"
               "  --progress       progress bar on stderr even when it is not a terminal\n"
               "  --help           this text\n"
               "Without a GPU: prints \"no GPU: skipped\" and exits 0.\n");
}

bool parse_size(const std::string& s, i64& out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || v <= 0) return false;
  const std::string unit = end;
  double mul = 1;
  if (unit == "K" || unit == "k" || unit == "KiB") mul = 1024.0;
  else if (unit == "M" || unit == "m" || unit == "MiB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "g" || unit == "GiB") mul = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") return false;
  out = static_cast<i64>(v * mul);
  return out >= 1;
}

// 0: run; 1: exit 0 (help); 2: usage error.
int parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& v) {
      if (i + 1 >= argc) return false;
      v = argv[++i];
      return true;
    };
    std::string v;
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 1;
    } else if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--flush") {
      opt.flush = true;
    } else if (a == "--no-gate") {
      opt.gate = false;
    } else if (a == "--progress") {
      opt.progress = true;
    } else if (a == "--json") {
      if (!value(opt.json)) return 2;
    } else if (a == "--max-size") {
      if (!value(v) || !parse_size(v, opt.max_size)) return 2;
    } else if (a == "--cpu") {
      if (!value(v)) return 2;
      char* end = nullptr;
      const long c = std::strtol(v.c_str(), &end, 10);
      if (*end || c < 0 || c >= CPU_SETSIZE) return 2;
      opt.cpu = static_cast<int>(c);
    } else if (a == "--min-time") {
      if (!value(v)) return 2;
      opt.min_time = std::strtod(v.c_str(), nullptr);
      if (opt.min_time <= 0) return 2;
    } else if (a == "--family") {
      if (!value(v)) return 2;
      std::size_t at = 0;
      while (at <= v.size()) {
        const std::size_t comma = std::min(v.find(',', at), v.size());
        const std::string f = v.substr(at, comma - at);
        at = comma + 1;
        if (f.empty()) continue;
        if (f == "all") {
          opt.families.assign(std::begin(kFamilies), std::end(kFamilies));
          continue;
        }
        if (std::find(std::begin(kFamilies), std::end(kFamilies), f) == std::end(kFamilies)) {
          std::fprintf(stderr, "ferry-bench: unknown family '%s'\n", f.c_str());
          return 2;
        }
        if (std::find(opt.families.begin(), opt.families.end(), f) == opt.families.end()) opt.families.push_back(f);
      }
    } else {
      std::fprintf(stderr, "ferry-bench: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (opt.families.empty()) opt.families.assign(std::begin(kFamilies), std::end(kFamilies));
  if (opt.min_time < 0) opt.min_time = opt.quick ? 0.02 : 0.2;
  opt.max_reps = opt.quick ? 100 : 1000;
  opt.min_reps = opt.quick ? 3 : 5;
  opt.warm = opt.quick ? 1 : 2;
  return 0;
}

bool wants(const char* family) {
  return std::find(opt.families.begin(), opt.families.end(), family) != opt.families.end();
}

int run() {
  CK(cudaSetDevice(0));
  CK(cudaDeviceGetAttribute(&ctx.sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&ctx.l2, cudaDevAttrL2CacheSize, 0));
  int can_map = 0;
  CK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, 0));
  if (!can_map && opt.gate) {
    opt.gate = false;
    notes.push_back("the device cannot map host memory: no spin gate, plain events");
  }
  const char* blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (blocking && std::strcmp(blocking, "0") != 0 && opt.gate) {
    opt.gate = false;  // every launch would wait for the spin: a 1 s timeout per sample
    notes.push_back("CUDA_LAUNCH_BLOCKING is set: no spin gate, plain events");
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  ctx.name = prop.name;
  int driver = 0, runtime = 0;
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  CK(cudaStreamCreateWithFlags(&ctx.a, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&ctx.b, cudaStreamNonBlocking));
  CK(cudaEventCreate(&ctx.start));
  CK(cudaEventCreate(&ctx.end_a));
  CK(cudaEventCreate(&ctx.end_b));
  if (can_map) {
    int* flags = nullptr;
    CK(cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    flags[0] = flags[1] = 0;
    ctx.flag_h = flags;
    CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&ctx.flag_d), flags, 0));
  }
  CK(cudaMalloc(&ctx.sink, sizeof(unsigned)));
  if (opt.flush) {
    ctx.flush_bytes = 2 * static_cast<std::size_t>(std::max(ctx.l2, 1 << 20));
    CK(cudaMalloc(&ctx.flush, ctx.flush_bytes));
  }
  const std::string cnode = opt.cpu >= 0 ? cpu_numa(opt.cpu) : cpu_numa(sched_getcpu());
  const std::string gnode = gpu_numa(0);
  std::printf("ferry-bench: %s (%d SMs, L2 %d MiB), %d GPU(s), driver %d, runtime %d; host thread on CPU %d "
              "(NUMA node %s), GPU 0 near NUMA node %s%s\n",
              ctx.name.c_str(), ctx.sms, ctx.l2 >> 20, ctx.devices, driver, runtime, sched_getcpu(),
              cnode.empty() ? "?" : cnode.c_str(), gnode.empty() || gnode == "-1" ? "?" : gnode.c_str(),
              opt.cpu >= 0 ? "" : " (not pinned: --cpu N)");
  if (!cnode.empty() && !gnode.empty() && gnode != "-1" && cnode != gnode)
    notes.push_back("host thread on NUMA node " + cnode + ", GPU 0 attached to node " + gnode +
                    ": host-memory figures cross the inter-socket link (pin with --cpu)");
  std::fflush(stdout);

  if (wants("copy")) family_copy();
  if (wants("peer")) family_peer();
  if (wants("copy2d3d")) family_copy2d3d();
  if (wants("pack")) family_pack();
  if (wants("calls")) family_calls();

  if (ctx.gate_timeouts)
    notes.push_back(std::to_string(ctx.gate_timeouts) + " of " + std::to_string(ctx.gated_samples) +
                    " gated samples timed out (the host took over 1 s to enqueue): those include enqueueing");
  print_table();
  bool ok = true;
  if (!opt.json.empty()) ok = write_json(opt.json, ctx.name, driver, runtime);
  if (opt.flush) CK(cudaFree(ctx.flush));
  CK(cudaFree(ctx.sink));
  if (ctx.flag_h) CK(cudaFreeHost(const_cast<int*>(ctx.flag_h)));
  CK(cudaEventDestroy(ctx.start));
  CK(cudaEventDestroy(ctx.end_a));
  CK(cudaEventDestroy(ctx.end_b));
  CK(cudaStreamDestroy(ctx.a));
  CK(cudaStreamDestroy(ctx.b));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int p = parse(argc, argv);
  if (p == 1) return 0;
  if (p == 2) {
    usage(stderr);
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  if (rank == 0) {
    if (opt.cpu >= 0) {  // after MPI_Init (which may bind the process), before CUDA starts its threads
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(opt.cpu, &set);
      if (sched_setaffinity(0, sizeof set, &set) != 0) {
        std::fprintf(stderr, "ferry-bench: cannot pin to CPU %d: %s\n", opt.cpu, std::strerror(errno));
        MPI_Finalize();
        return 2;
      }
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 || !ferry::gpu::available()) {
      (void)cudaGetLastError();
      std::printf("ferry-bench: no GPU: skipped\n");
      if (!opt.json.empty()) {
        skipped.push_back({"all", "no GPU"});
        write_json(opt.json, "none", 0, 0);
      }
    } else {
      ctx.devices = devices;
      try {
        rc = run();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ferry-bench: %s\n", e.what());
        rc = 1;
      }
    }
  }
  MPI_Finalize();
  return rc;
}
