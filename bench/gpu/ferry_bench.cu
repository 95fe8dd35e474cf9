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
//             streams of GPU 0), with peer access when the pair has it. With peer access also
//             the three halo faces of a 262^3 grid, GPU 0's grid into GPU 1's: cudaMemcpy3DPeer,
//             pack -> peer copy -> unpack, pack straight into GPU 1 -> unpack, against the
//             contiguous peer copy of the same bytes. Needs 2 GPUs.
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
#include "ferry_bench.hpp"

using namespace ferry_bench_gpu;

namespace {

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

volatile std::uint64_t host_sink = 0;

}  // namespace

namespace ferry_bench_gpu {

unsigned blocks_for(i64 bytes) {
  const i64 words = std::max<i64>(bytes / 16, 1);
  return static_cast<unsigned>(std::min<i64>((words + 255) / 256, 2 * i64{ctx.sms}));
}

void flush_l2(cudaStream_t s) {
  if (!opt.flush) return;
  ctx.flush_value = (ctx.flush_value + 1) & 0xff;
  CK(cudaMemsetAsync(ctx.flush, ctx.flush_value, ctx.flush_bytes, s));
}

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

}  // namespace ferry_bench_gpu

namespace {

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