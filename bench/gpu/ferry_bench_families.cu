// bench/gpu/ferry_bench_families.cu — ferry-bench's peer, copy2d3d, pack and calls families.
#include "ferry_bench.hpp"

using namespace ferry_bench_gpu;

namespace {

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

// k calls of fn timed together (per-call mean, µs), then after() untimed (drains the queue).
double batch(int k, const std::function<void()>& fn, const std::function<void()>& after) {
  const auto t0 = Clock::now();
  for (int i = 0; i < k; ++i) fn();
  const double us = 1e6 * seconds_since(t0) / k;
  after();
  return us;
}


}  // namespace

namespace ferry_bench_gpu {

// ---------------------------------------------------------------------------------------------
// peer

// The halo faces of a 262^3 grid of doubles (256^3 interior, radius 3) on GPU 0 moved into the
// same grid on GPU 1, four ways: cudaMemcpy3DPeerAsync grid to grid; Ferry's pack into a buffer,
// a peer copy, Ferry's unpack on GPU 1 (pack -> peer -> unpack); Ferry's pack written straight
// into GPU 1's buffer over the link, then the unpack (one-shot, the halo library's peer method);
// and the contiguous peer copy of as many bytes. Timed with events on GPU 0's stream, which waits
// for GPU 1's unpack.
static struct PeerFaces {
  char *grid0 = nullptr, *grid1 = nullptr, *buf0 = nullptr, *buf1 = nullptr;
  cudaStream_t s1 = nullptr;
  cudaEvent_t copied = nullptr, unpacked = nullptr;
} pf;

static void peer_faces(std::vector<Job>& jobs) {
  constexpr int e = 262, r = 3, n = 256;
  constexpr std::size_t row = std::size_t{e} * 8, grid_bytes = row * e * e, face_bytes = std::size_t{n} * n * r * 8;
  CK(cudaSetDevice(1));
  CK(cudaMalloc(&pf.grid1, grid_bytes));
  CK(cudaMalloc(&pf.buf1, face_bytes));
  CK(cudaMemset(pf.grid1, 0, grid_bytes));
  CK(cudaStreamCreateWithFlags(&pf.s1, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&pf.unpacked, cudaEventDisableTiming));
  CK(cudaDeviceSynchronize());
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&pf.grid0, grid_bytes));
  CK(cudaMalloc(&pf.buf0, face_bytes));
  CK(cudaMemset(pf.grid0, 5, grid_bytes));
  CK(cudaEventCreateWithFlags(&pf.copied, cudaEventDisableTiming));
  CK(cudaDeviceSynchronize());
  struct Face {
    const char* name;
    int x0, ex, ey, ez;  // send box at (x0, 3, 3) or its transposes; received at the opposite side
    int axis;
  };
  const Face faces[] = {{"-X face 3x256x256", 3, r, n, n, 0}, {"-Y face 256x3x256", 3, n, r, n, 1},
                        {"-Z face 256x256x3", 3, n, n, r, 2}};
  for (const Face& f : faces) {
    // Sent from interior [3, 6) on the axis, received into the halo [259, 262) of GPU 1's grid.
    int from[3] = {r, r, r}, to[3] = {r, r, r};
    from[f.axis] = r, to[f.axis] = r + n;
    const int sizes[3] = {e, e, e}, sub[3] = {f.ez, f.ey, f.ex};
    auto subarray = [&](const int* at) {
      const int start[3] = {at[2], at[1], at[0]};
      MPI_Datatype t;
      MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_DOUBLE, &t);
      MPI_Type_commit(&t);
      ferry::Type ty = ferry::translate(t);
      MPI_Type_free(&t);
      return ty;
    };
    const ferry::Type send = subarray(from), recv = subarray(to);
    const i64 bytes = send.size();
    cudaMemcpy3DPeerParms p{};
    p.srcDevice = 0;
    p.dstDevice = 1;
    p.srcPtr = make_cudaPitchedPtr(pf.grid0, row, row, e);
    p.dstPtr = make_cudaPitchedPtr(pf.grid1, row, row, e);
    p.srcPos = make_cudaPos(std::size_t(from[0]) * 8, std::size_t(from[1]), std::size_t(from[2]));
    p.dstPos = make_cudaPos(std::size_t(to[0]) * 8, std::size_t(to[1]), std::size_t(to[2]));
    p.extent = make_cudaExtent(std::size_t(f.ex) * 8, std::size_t(f.ey), std::size_t(f.ez));
    // GPU 1's unpack after `a`'s work so far; `a` then waits for it.
    auto unpack_on_1 = [send, recv](cudaStream_t a) {
      CK(cudaEventRecord(pf.copied, a));
      CK(cudaSetDevice(1));
      CK(cudaStreamWaitEvent(pf.s1, pf.copied, 0));
      ferry::gpu::unpack_async(pf.buf1, pf.grid1, 1, recv, pf.s1);
      CK(cudaEventRecord(pf.unpacked, pf.s1));
      CK(cudaSetDevice(0));
      CK(cudaStreamWaitEvent(a, pf.unpacked, 0));
    };
    const std::string name = f.name;
    jobs.push_back({[=] {
      record("peer", "memcpy3d peer grid->grid " + name, "memcpy3d", "0->1", bytes,
             repeat([&] { return evented([&](cudaStream_t a) { CK(cudaMemcpy3DPeerAsync(&p, a)); }); }), "events");
      record("peer", "pack->peer->unpack " + name, "pack+copy+unpack", "0->1", bytes, repeat([&] {
               return evented([&](cudaStream_t a) {
                 ferry::gpu::pack_async(pf.grid0, 1, send, pf.buf0, a);
                 CK(cudaMemcpyPeerAsync(pf.buf1, 1, pf.buf0, 0, static_cast<std::size_t>(bytes), a));
                 unpack_on_1(a);
               });
             }), "events");
      try {
        record("peer", "pack into peer->unpack " + name, "pack-peer+unpack", "0->1", bytes, repeat([&] {
                 return evented([&](cudaStream_t a) {
                   ferry::gpu::pack_async(pf.grid0, 1, send, pf.buf1, a);
                   unpack_on_1(a);
                 });
               }), "events");
      } catch (const std::exception& ex) {
        CK(cudaSetDevice(0));
        notes.push_back("peer: pack into GPU 1's memory from GPU 0 refused: " + std::string(ex.what()));
      }
      record("peer", "contiguous peer " + name, "contiguous", "0->1", bytes, repeat([&] {
               return evented([&](cudaStream_t a) {
                 CK(cudaMemcpyPeerAsync(pf.buf1, 1, pf.buf0, 0, static_cast<std::size_t>(bytes), a));
               });
             }), "events");
    }});
  }
}

static void peer_faces_free() {
  if (!pf.grid0) return;
  CK(cudaSetDevice(1));
  CK(cudaDeviceSynchronize());
  CK(cudaFree(pf.grid1));
  CK(cudaFree(pf.buf1));
  CK(cudaStreamDestroy(pf.s1));
  CK(cudaEventDestroy(pf.unpacked));
  CK(cudaSetDevice(0));
  CK(cudaDeviceSynchronize());
  CK(cudaFree(pf.grid0));
  CK(cudaFree(pf.buf0));
  CK(cudaEventDestroy(pf.copied));
  pf = PeerFaces{};
}

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
  if (p2p) peer_faces(jobs);
  run_jobs("peer", jobs);
  peer_faces_free();
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

}  // namespace ferry_bench_gpu
