// bench_pingpong: MPI ping-pong between two ranks, the same binary with and without the interposer
// (LD_PRELOAD=libferry-mpi.so). Not linked with Ferry: it sees the interposer only through the MPI
// calls it makes, as an application does.
//
//   host         host buffers (pageable), contiguous MPI_BYTE, through MPI_Send/MPI_Recv
//   host_pmpi    the same through PMPI_Send/PMPI_Recv, which no interposer wraps, interleaved with
//                `host` in chunks: the interposer's host cost measured within one run
//   device       cudaMalloc buffers handed straight to MPI_Send/MPI_Recv (interposer only)
//   staged       what a user writes without Ferry: cudaMemcpy D2H into pinned host memory, MPI on
//                the host buffer, cudaMemcpy H2D on the receiver
//   ipc          raw CUDA IPC, what a user writes without Ferry on one node: the peer's buffer
//                mapped once (cudaIpcGetMemHandle/cudaIpcOpenMemHandle, untimed); a message is a
//                cudaMemcpyAsync into it, a stream synchronize and a 0-byte MPI message to say so.
//                The baseline of the device mode between GPUs of one node
//   face         the 1.5 MiB -X halo face of a 262^3 double grid in device memory as an MPI
//                subarray datatype, MPI_Send(grid, 1, face, ...) (interposer only)
//   face_host    the same face and datatype on a host grid: what the MPI's own datatype engine does
//   face_staged  the device face by hand: pack kernel, D2H, MPI, H2D, unpack kernel
//
// Rank 0 sends, rank 1 returns; one-way time = round trip / 2, timed on rank 0's host clock around
// the round trip (blocking MPI calls are synchronous for the host; the staged modes end with a
// device synchronization). Every (mode, size) is checked once before it is timed: both receivers
// compare what arrived with what was sent, and the program aborts on a mismatch.
//
//   mpiexec -n 2 bench_pingpong [--modes host,device,...] [--min-size 1] [--max-size 256M]
//                               [--reps N] [--quick] [--json FILE]
#include "bench_pingpong.hpp"

namespace {

using namespace pingpong_bench;

// ---------------------------------------------------------------------------------------------
// Buffers and their check values

// Byte i of the message with seed s: position-dependent, so a shifted or short message fails.
void make_pattern(unsigned char* p, i64 n, std::uint64_t seed) {
  for (i64 w = 0; w * 8 < n; ++w) {
    std::uint64_t x = (static_cast<std::uint64_t>(w) + 1) * 0x9E3779B97F4A7C15ULL + seed * 0xD1B54A32D192ED03ULL;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 32;
    std::memcpy(p + w * 8, &x, static_cast<std::size_t>(std::min<i64>(8, n - w * 8)));
  }
}

struct Buffers {
  unsigned char* host = nullptr;    // pageable (host modes)
  unsigned char* dev = nullptr;     // device (device, staged)
  unsigned char* pinned = nullptr;  // pinned host (staged)
  std::vector<unsigned char> expect, got;
} buf;

// The ipc mode's mapping of the peer's device buffer, and its stream.
struct Ipc {
  unsigned char* peer = nullptr;
  cudaStream_t stream = nullptr;
  bool tried = false;
} ipc;

// Maps the peer's buf.dev (collective over the two ranks; once). False on both ranks when either
// cannot (no IPC on this machine or between these GPUs).
bool ipc_open() {
  if (ipc.tried) return ipc.peer != nullptr;
  ipc.tried = true;
  cudaIpcMemHandle_t mine{}, theirs{};
  int ok = cudaIpcGetMemHandle(&mine, buf.dev) == cudaSuccess ? 1 : 0;
  MPI_Sendrecv(&mine, sizeof mine, MPI_BYTE, 1 - rank, kTag, &theirs, sizeof theirs, MPI_BYTE, 1 - rank, kTag, comm,
               MPI_STATUS_IGNORE);
  void* p = nullptr;
  if (ok && cudaIpcOpenMemHandle(&p, theirs, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) ok = 0;
  if (!ok) (void)cudaGetLastError();
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
  if (!ok) {
    if (p) (void)cudaIpcCloseMemHandle(p);
    return false;
  }
  ipc.peer = static_cast<unsigned char*>(p);
  CK(cudaStreamCreateWithFlags(&ipc.stream, cudaStreamNonBlocking));
  return true;
}

void fill(unsigned char* p, bool on_device, i64 n, std::uint64_t seed) {
  buf.expect.resize(static_cast<std::size_t>(n));
  make_pattern(buf.expect.data(), n, seed);
  if (on_device) {
    CK(cudaMemcpy(p, buf.expect.data(), static_cast<std::size_t>(n), cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());  // done before MPI (or the interposer, on its own stream) reads it
  } else {
    std::memcpy(p, buf.expect.data(), static_cast<std::size_t>(n));
  }
}

void junk(unsigned char* p, bool on_device, i64 n) {
  if (on_device) {
    CK(cudaMemset(p, 0xEE, static_cast<std::size_t>(n)));
    CK(cudaDeviceSynchronize());  // cannot land after the message
  } else {
    std::memset(p, 0xEE, static_cast<std::size_t>(n));
  }
}

void check(const char* mode, const unsigned char* p, bool on_device, i64 n, std::uint64_t seed) {
  buf.expect.resize(static_cast<std::size_t>(n));
  make_pattern(buf.expect.data(), n, seed);
  const unsigned char* have = p;
  if (on_device) {
    buf.got.resize(static_cast<std::size_t>(n));
    CK(cudaMemcpy(buf.got.data(), p, static_cast<std::size_t>(n), cudaMemcpyDeviceToHost));
    have = buf.got.data();
  }
  if (std::memcmp(have, buf.expect.data(), static_cast<std::size_t>(n)) == 0) return;
  i64 i = 0;
  while (have[i] == buf.expect[static_cast<std::size_t>(i)]) ++i;
  fail("mode %s, %lld B: received byte %lld is 0x%02x, sent 0x%02x", mode, static_cast<long long>(n),
       static_cast<long long>(i), have[i], buf.expect[static_cast<std::size_t>(i)]);
}

// ---------------------------------------------------------------------------------------------
// Modes: one direction of a message each (send to / receive from the peer), and what ends a
// round trip on rank 0.

struct Mode {
  std::string name;
  std::function<void(int peer)> send, recv;
  std::function<void()> finish;  // may be empty
};

Mode byte_mode(const std::string& name, const i64& n) {
  Mode m;
  m.name = name;
  auto count = [&n] { return static_cast<int>(n); };
  if (name == "host" || (opt.host_peer && rank == 1)) {
    m.send = [count](int peer) { MPI_Send(buf.host, count(), MPI_BYTE, peer, kTag, comm); };
    m.recv = [count](int peer) { MPI_Recv(buf.host, count(), MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE); };
  } else if (name == "host_pmpi") {
    m.send = [count](int peer) { PMPI_Send(buf.host, count(), MPI_BYTE, peer, kTag, comm); };
    m.recv = [count](int peer) { PMPI_Recv(buf.host, count(), MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE); };
  } else if (name == "device") {
    m.send = [count](int peer) { MPI_Send(buf.dev, count(), MPI_BYTE, peer, kTag, comm); };
    m.recv = [count](int peer) { MPI_Recv(buf.dev, count(), MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE); };
  } else if (name == "ipc") {
    m.send = [count](int peer) {
      CK(cudaMemcpyAsync(ipc.peer, buf.dev, static_cast<std::size_t>(count()), cudaMemcpyDeviceToDevice, ipc.stream));
      CK(cudaStreamSynchronize(ipc.stream));
      MPI_Send(nullptr, 0, MPI_BYTE, peer, kTag, comm);
    };
    m.recv = [](int peer) { MPI_Recv(nullptr, 0, MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE); };
  } else {  // staged
    m.send = [count](int peer) {
      CK(cudaMemcpy(buf.pinned, buf.dev, static_cast<std::size_t>(count()), cudaMemcpyDeviceToHost));
      MPI_Send(buf.pinned, count(), MPI_BYTE, peer, kTag, comm);
    };
    m.recv = [count](int peer) {
      MPI_Recv(buf.pinned, count(), MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE);
      CK(cudaMemcpy(buf.dev, buf.pinned, static_cast<std::size_t>(count()), cudaMemcpyHostToDevice));
    };
  }
  return m;
}

bool mode_on_device(const std::string& name) {
  return (name == "device" || name == "staged" || name == "ipc") && !(opt.host_peer && rank == 1);
}
unsigned char* mode_buffer(const std::string& name) { return mode_on_device(name) ? buf.dev : buf.host; }

// The face modes. Rank 0 sends its -X send face (interior x = 3..5) and receives into its -X
// ghost layer (x = 0..2); rank 1 receives into its +X ghost layer (x = 259..261) and sends its own
// -X send face back: a halo exchange's message and its reply, 1.5 MiB each way.
struct Faces {
  double* grid = nullptr;          // device grid (face, face_staged)
  double* host_grid = nullptr;     // host grid (face_host)
  double* packed = nullptr;        // face_staged: device pack buffer
  unsigned char* pinned = nullptr;  // face_staged: host staging
  MPI_Datatype send_face = MPI_DATATYPE_NULL, ghost_lo = MPI_DATATYPE_NULL, ghost_hi = MPI_DATATYPE_NULL;
} faces;

MPI_Datatype x_face_at(int x0) {
  const int sizes[3] = {Grid::a, Grid::a, Grid::a};
  const int sub[3] = {Grid::n, Grid::n, Grid::r};
  const int start[3] = {Grid::r, Grid::r, x0};
  MPI_Datatype t;
  MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_DOUBLE, &t);
  MPI_Type_commit(&t);  // through the interposer, when loaded: Ferry translates it here, once
  return t;
}

void faces_alloc(const std::string& mode) {
  if (mode == "face_host" && !faces.host_grid) {
    faces.host_grid = static_cast<double*>(std::aligned_alloc(4096, static_cast<std::size_t>(Grid::bytes)));
    if (!faces.host_grid) fail("out of host memory for the grid");
  }
  if (mode != "face_host" && !faces.grid) {
    CK(cudaMalloc(&faces.grid, static_cast<std::size_t>(Grid::bytes)));
    CK(cudaMalloc(&faces.packed, static_cast<std::size_t>(Grid::face_bytes)));
    CK(cudaMallocHost(&faces.pinned, static_cast<std::size_t>(Grid::face_bytes)));
  }
  if (mode != "face_staged" && faces.send_face == MPI_DATATYPE_NULL) {
    faces.send_face = x_face_at(Grid::r);  // subarray(3,{262,262,262},{256,256,3},{3,3,3},C,DOUBLE)
    faces.ghost_lo = x_face_at(0);
    faces.ghost_hi = x_face_at(Grid::r + Grid::n);
    int size = 0;
    MPI_Type_size(faces.send_face, &size);
    if (size != Grid::face_bytes) fail("face type size %d, expected %lld", size, static_cast<long long>(Grid::face_bytes));
  }
}

Mode face_mode(const std::string& name) {
  Mode m;
  m.name = name;
  const int recv_x0 = rank == 0 ? 0 : Grid::r + Grid::n;
  const int face_count = static_cast<int>(Grid::face_bytes);
  if (name == "face" || name == "face_host") {
    double* grid = name == "face" ? faces.grid : faces.host_grid;
    m.send = [grid](int peer) { MPI_Send(grid, 1, faces.send_face, peer, kTag, comm); };
    m.recv = [grid](int peer) {
      MPI_Recv(grid, 1, rank == 0 ? faces.ghost_lo : faces.ghost_hi, peer, kTag, comm, MPI_STATUS_IGNORE);
    };
  } else {  // face_staged
    m.send = [face_count](int peer) {
      pingpong::pack_x_face(faces.grid, faces.packed, Grid::r);
      CK(cudaMemcpy(faces.pinned, faces.packed, static_cast<std::size_t>(face_count), cudaMemcpyDeviceToHost));
      MPI_Send(faces.pinned, face_count, MPI_BYTE, peer, kTag, comm);
    };
    m.recv = [face_count, recv_x0](int peer) {
      MPI_Recv(faces.pinned, face_count, MPI_BYTE, peer, kTag, comm, MPI_STATUS_IGNORE);
      CK(cudaMemcpy(faces.packed, faces.pinned, static_cast<std::size_t>(face_count), cudaMemcpyHostToDevice));
      pingpong::unpack_x_face(faces.packed, faces.grid, recv_x0);
    };
    m.finish = [] { CK(cudaDeviceSynchronize()); };  // the unpack kernel is part of the message
  }
  return m;
}

// After one exchange: each rank's grid is its own values, except the ghost layer it received
// into, which holds the peer's send face.
void check_faces(const std::string& mode) {
  std::vector<double> copy;
  const double* h = faces.host_grid;
  if (mode != "face_host") {
    copy.resize(static_cast<std::size_t>(Grid::points));
    CK(cudaMemcpy(copy.data(), faces.grid, static_cast<std::size_t>(Grid::bytes), cudaMemcpyDeviceToHost));
    h = copy.data();
  }
  const int peer = 1 - rank;
  const int x_lo = rank == 0 ? 0 : Grid::r + Grid::n;  // ghost layer received into
  const i64 a = Grid::a;
  i64 changed = 0;
  for (i64 z = 0; z < a; ++z)
    for (i64 y = 0; y < a; ++y)
      for (i64 x = 0; x < a; ++x) {
        const i64 i = (z * a + y) * a + x;
        const bool ghost = z >= Grid::r && z < Grid::r + Grid::n && y >= Grid::r &&
                           y < Grid::r + Grid::n && x >= x_lo && x < x_lo + Grid::r;
        const double want = ghost ? pingpong::grid_value(peer, i - x + Grid::r + (x - x_lo))
                                  : pingpong::grid_value(rank, i);
        if (h[static_cast<std::size_t>(i)] != want)
          fail("mode %s: grid point (z %lld, y %lld, x %lld) is %.17g, expected %.17g (%s)", mode.c_str(),
               static_cast<long long>(z), static_cast<long long>(y), static_cast<long long>(x),
               h[static_cast<std::size_t>(i)], want, ghost ? "received ghost value" : "untouched value");
        changed += ghost;
      }
  if (changed != Grid::face_points) fail("mode %s: ghost layer has %lld points", mode.c_str(), static_cast<long long>(changed));
}

// ---------------------------------------------------------------------------------------------
// Timing

struct Record {
  std::string mode;
  i64 bytes;
  double median_s, min_s;  // one way
  int reps;
};
std::vector<Record> records;
std::vector<std::pair<std::string, std::string>> skipped;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// `reps` round trips of each mode, interleaved in `chunks` chunks in alternating order (several
// modes: they see the same machine state), after `warm` untimed ones each. Returns one-way times
// per mode (rank 0).
std::vector<std::vector<double>> time_modes(const std::vector<Mode*>& modes, int reps, int warm, int chunks) {
  std::vector<std::vector<double>> t(modes.size());
  auto round = [&](Mode& m) {
    if (rank == 0) {
      m.send(1);
      m.recv(1);
      if (m.finish) m.finish();
    } else if (rank == 1) {
      m.recv(0);
      m.send(0);
    }
  };
  for (Mode* m : modes)
    for (int i = 0; i < warm; ++i) round(*m);
  MPI_Barrier(comm);
  chunks = std::max(1, std::min(chunks, reps));
  for (int c = 0; c < chunks; ++c)
    for (std::size_t j = 0; j < modes.size(); ++j) {
      const std::size_t k = c % 2 ? modes.size() - 1 - j : j;  // A B, B A, ...: no mode always first
      const int n = reps / chunks + (c < reps % chunks ? 1 : 0);
      for (int i = 0; i < n; ++i) {
        const double t0 = now();
        round(*modes[k]);
        const double t1 = now();
        t[k].push_back((t1 - t0) / 2);
      }
    }
  return t;
}

void print_header() {
  std::printf("%-12s %12s %7s %14s %14s %10s\n", "mode", "bytes", "reps", "oneway_us_med", "oneway_us_min", "GB/s");
}

void add_record(const std::string& mode, i64 bytes, std::vector<double> t) {
  if (rank != 0) return;
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  const double med = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  records.push_back({mode, bytes, med, t.front(), static_cast<int>(n)});
  std::printf("%-12s %12lld %7zu %14.2f %14.2f %10.3f\n", mode.c_str(), static_cast<long long>(bytes), n,
              med * 1e6, t.front() * 1e6, static_cast<double>(bytes) / med / 1e9);
  std::fflush(stdout);
}

void skip(const std::string& mode, const std::string& why) {
  if (rank != 0) return;
  skipped.emplace_back(mode, why);
  std::printf("%-12s skipped: %s\n", mode.c_str(), why.c_str());
  std::fflush(stdout);
}

std::vector<i64> sizes_of(const Options& o) {
  std::vector<i64> s;
  for (i64 b = 1; b <= o.max_size; b *= 2)
    if (b >= o.min_size) s.push_back(b);
  return s;
}

// One verified exchange: rank 0 sends seed A, rank 1 checks it and answers with seed B, rank 0
// checks that. The receivers' buffers hold junk before, so stale data cannot pass.
void verify_bytes(Mode& m, i64 n, std::uint64_t seed) {
  const bool dev = mode_on_device(m.name);
  unsigned char* p = mode_buffer(m.name);
  MPI_Barrier(comm);
  if (rank == 0) {
    fill(p, dev, n, seed);
    m.send(1);
    junk(p, dev, n);
    m.recv(1);
    if (m.finish) m.finish();
    check(m.name.c_str(), p, dev, n, seed + 1);
  } else if (rank == 1) {
    junk(p, dev, n);
    m.recv(0);
    check(m.name.c_str(), p, dev, n, seed);
    fill(p, dev, n, seed + 1);
    m.send(0);
  }
  MPI_Barrier(comm);
}

void run_bytes(const Options& o, const std::vector<std::string>& names) {
  if (names.empty()) return;
  const std::vector<i64> sizes = sizes_of(o);
  if (sizes.empty()) return;
  const i64 cap = sizes.back();
  bool need_host = false, need_dev = false;
  for (const std::string& name : names) (mode_on_device(name) ? need_dev : need_host) = true;
  if (need_host && !buf.host) {
    buf.host = static_cast<unsigned char*>(std::aligned_alloc(4096, static_cast<std::size_t>((cap + 4095) / 4096 * 4096)));
    if (!buf.host) fail("out of host memory for %lld B", static_cast<long long>(cap));
    std::memset(buf.host, 0, static_cast<std::size_t>(cap));
  }
  if (need_dev && !buf.dev) {
    CK(cudaMalloc(&buf.dev, static_cast<std::size_t>(cap)));
    CK(cudaMallocHost(&buf.pinned, static_cast<std::size_t>(cap)));
    CK(cudaMemset(buf.dev, 0, static_cast<std::size_t>(cap)));
    std::memset(buf.pinned, 0, static_cast<std::size_t>(cap));
  }
  if (std::find(names.begin(), names.end(), "ipc") != names.end() && !ipc_open()) {
    skip("ipc", "cudaIpcOpenMemHandle failed (no CUDA IPC between these ranks' GPUs)");
    return;
  }
  i64 n = 0;  // the size the modes send, read by their lambdas
  std::vector<Mode> modes;
  for (const std::string& name : names) modes.push_back(byte_mode(name, n));
  std::vector<Mode*> ptrs;
  for (Mode& m : modes) ptrs.push_back(&m);
  std::uint64_t seed = 1;
  for (i64 size : sizes) {
    n = size;
    for (Mode& m : modes) verify_bytes(m, n, seed += 2);
    const int reps = reps_for(o, size);
    auto t = time_modes(ptrs, reps, std::max(2, reps / 10), modes.size() > 1 ? 40 : 1);
    for (std::size_t k = 0; k < modes.size(); ++k) add_record(modes[k].name, size, std::move(t[k]));
  }
}

void run_faces(const Options& o, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const bool dev = name != "face_host";
    faces_alloc(name);
    if (dev) pingpong::fill_grid(faces.grid, rank);
    else
      for (i64 i = 0; i < Grid::points; ++i) faces.host_grid[i] = pingpong::grid_value(rank, i);
    Mode m = face_mode(name);
    MPI_Barrier(comm);
    if (rank == 0) {
      m.send(1);
      m.recv(1);
      if (m.finish) m.finish();
    } else if (rank == 1) {
      m.recv(0);
      m.send(0);
    }
    if (dev) CK(cudaDeviceSynchronize());
    if (rank < 2) check_faces(name);
    MPI_Barrier(comm);
    const int reps = o.reps > 0 ? o.reps : o.quick ? 30 : 1000;
    auto t = time_modes({&m}, reps, std::max(3, reps / 10), 1);
    add_record(name, Grid::face_bytes, std::move(t[0]));
  }
}

// ---------------------------------------------------------------------------------------------
// Output

std::string esc(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    r += c;
  }
  return r;
}

void write_json(const Options& o) {
  FILE* f = std::fopen(o.json.c_str(), "w");
  if (!f) fail("cannot write %s", o.json.c_str());
  const char* same = env.same_gpu < 0 ? "null" : env.same_gpu ? "true" : "false";
  const std::string pre = env.preload ? "true" : "false";
  std::fprintf(f, "{\n  \"benchmark\": \"bench_pingpong\",\n  \"mps\": %s,\n  \"mps_detected_by\": \"%s\",\n",
               env.mps.json(), env.mps.detected_by.c_str());
  std::fprintf(f, "  \"preload\": %s,\n  \"preload_detected_by\": \"%s\",\n"
                  "  \"preload_library\": \"%s\",\n  \"device_name\": \"%s\",\n  \"ranks_same_gpu\": %s,\n"
                  "  \"date\": \"%s\",\n  \"host\": \"%s\",\n  \"mpi\": \"%s\",\n  \"quick\": %s,\n  \"host_peer\": %s,\n"
                  "  \"records\": [\n",
               pre.c_str(), esc(env.preload_how).c_str(), esc(env.preload_path).c_str(),
               esc(env.device_name).c_str(), same, env.date.c_str(), esc(env.hostname).c_str(),
               esc(env.mpi_version).c_str(), o.quick ? "true" : "false", o.host_peer ? "true" : "false");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    std::fprintf(f, "    {\"mode\": \"%s\", \"bytes\": %lld, \"oneway_us_median\": %.4f, \"oneway_us_min\": %.4f, "
                    "\"gbps\": %.6g, \"reps\": %d, \"preload\": %s, \"device_name\": \"%s\", \"date\": \"%s\", "
                    "\"ranks_same_gpu\": %s, \"mps\": %s}%s\n",
                 r.mode.c_str(), static_cast<long long>(r.bytes), r.median_s * 1e6, r.min_s * 1e6,
                 static_cast<double>(r.bytes) / r.median_s / 1e9, r.reps, pre.c_str(),
                 esc(env.device_name).c_str(), env.date.c_str(), same, env.mps.json(),
                 i + 1 < records.size() ? "," : "");
  }
  std::fprintf(f, "  ],\n  \"skipped\": [\n");
  for (std::size_t i = 0; i < skipped.size(); ++i)
    std::fprintf(f, "    {\"mode\": \"%s\", \"reason\": \"%s\"}%s\n", skipped[i].first.c_str(),
                 esc(skipped[i].second).c_str(), i + 1 < skipped.size() ? "," : "");
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
  std::printf("json: %s\n", o.json.c_str());
}

// The interposer's host cost, from host and host_pmpi measured in the same run.
void print_host_cost() {
  for (const Record& h : records) {
    if (h.mode != "host" || (h.bytes != 8 && h.bytes != 4096)) continue;
    for (const Record& p : records)
      if (p.mode == "host_pmpi" && p.bytes == h.bytes)
        std::printf("host %lld B: MPI_Send/Recv %.3f us, PMPI_Send/Recv %.3f us one-way (median): %+.3f us, %+.1f %%%s\n",
                    static_cast<long long>(h.bytes), h.median_s * 1e6, p.median_s * 1e6,
                    (h.median_s - p.median_s) * 1e6, 100 * (h.median_s / p.median_s - 1),
                    env.preload ? " (the interposer's cost)" : " (no interposer: noise)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  choose_device_early();
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(comm, &rank);
  int nranks = 0;
  MPI_Comm_size(comm, &nranks);
  const Options o = parse(argc, argv);
  opt = o;
  if (nranks != 2) {
    if (rank == 0) std::fprintf(stderr, "bench_pingpong: run with exactly 2 ranks (mpiexec -n 2), not %d\n", nranks);
    MPI_Finalize();
    return 2;
  }
  setup_env();
  if (rank == 0) {
    std::printf("bench_pingpong: %s, interposer %s%s%s, GPU %s%s, CUDA MPS %s (%s)\n", env.mpi_version.c_str(),
                env.preload ? "loaded (" : "not loaded", env.preload ? env.preload_how.c_str() : "",
                env.preload ? ")" : "", env.device_name.c_str(),
                env.same_gpu == 1 ? " (both ranks on the same GPU)" : env.same_gpu == 0 ? " (one GPU per rank)" : "",
                env.mps.word(), env.mps.detected_by.c_str());
    if (o.host_peer) std::printf("rank 1 echoes the byte modes from host memory (--host-peer)\n");
    print_header();
    std::fflush(stdout);
  }
  auto wanted = [&](const char* m) { return std::find(o.modes.begin(), o.modes.end(), m) != o.modes.end(); };
  const std::string no_gpu = "no GPU";
  const std::string no_preload = "the interposer is not loaded (a stock MPI cannot take GPU buffers)";

  std::vector<std::string> host_modes;
  for (const char* m : {"host", "host_pmpi"})
    if (wanted(m)) host_modes.push_back(m);
  run_bytes(o, host_modes);
  for (const char* m : {"staged", "ipc", "device"}) {
    if (!wanted(m)) continue;
    if (!env.gpu) skip(m, no_gpu);
    else if (o.host_peer && std::strcmp(m, "ipc") == 0) skip(m, "--host-peer: rank 1 has no device buffer");
    else if (!env.preload && std::strcmp(m, "device") == 0) skip(m, no_preload);
    else run_bytes(o, {m});
  }
  if (wanted("face_host")) run_faces(o, {"face_host"});
  for (const char* m : {"face_staged", "face"}) {
    if (!wanted(m)) continue;
    if (!env.gpu) skip(m, no_gpu);
    else if (!env.preload && std::strcmp(m, "face") == 0) skip(m, no_preload);
    else run_faces(o, {m});
  }
  if (rank == 0) {
    print_host_cost();
    if (!o.json.empty()) write_json(o);
  }
  for (MPI_Datatype* t : {&faces.send_face, &faces.ghost_lo, &faces.ghost_hi})
    if (*t != MPI_DATATYPE_NULL) MPI_Type_free(t);
  std::free(faces.host_grid);
  if (faces.grid) {
    CK(cudaFree(faces.grid));
    CK(cudaFree(faces.packed));
    CK(cudaFreeHost(faces.pinned));
  }
  if (ipc.peer) {
    CK(cudaIpcCloseMemHandle(ipc.peer));
    CK(cudaStreamDestroy(ipc.stream));
  }
  if (buf.dev) {
    CK(cudaFree(buf.dev));
    CK(cudaFreeHost(buf.pinned));
  }
  std::free(buf.host);
  MPI_Finalize();
  return 0;
}
