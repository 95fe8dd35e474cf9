// bench/mpi/bench_pingpong_env.cpp — bench_pingpong's options and environment (interposer, GPU).
#include "bench_pingpong.hpp"

namespace pingpong_bench {

i64 parse_size(const char* s) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  i64 mult = 1;
  if (end && *end) {
    switch (*end) {
      case 'k': case 'K': mult = i64{1} << 10; break;
      case 'm': case 'M': mult = i64{1} << 20; break;
      case 'g': case 'G': mult = i64{1} << 30; break;
      case 'b': case 'B': break;
      default: mult = 0;
    }
  }
  if (!(v >= 0) || mult == 0) {
    std::fprintf(stderr, "bench_pingpong: bad size '%s' (use e.g. 8, 64K, 256M)\n", s);
    std::exit(2);
  }
  return static_cast<i64>(v * static_cast<double>(mult));
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    std::size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

void usage() {
  std::printf(
      "usage: mpiexec -n 2 bench_pingpong [options]\n"
      "  --modes LIST      comma-separated, of host,host_pmpi,staged,ipc,device,face_host,face_staged,face\n"
      "                    (default: all; device and face need the interposer, all but host and\n"
      "                    host_pmpi a GPU; the others are skipped with a message)\n"
      "  --min-size SIZE   smallest message (default 1; sizes are powers of two)\n"
      "  --max-size SIZE   largest message (default 256M; 1M with --quick)\n"
      "  --reps N          timed round trips per size (default: scaled by size)\n"
      "  --quick           fewer sizes and repetitions, for a smoke test\n"
      "  --host-peer       rank 1 echoes the byte modes from host memory (only rank 0 on the GPU)\n"
      "  --json FILE       write the results as JSON (rank 0)\n");
}

Options parse(int argc, char** argv) {
  Options o;
  bool max_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_pingpong: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--modes") o.modes = split(value());
    else if (a == "--min-size") o.min_size = std::max<i64>(1, parse_size(value()));
    else if (a == "--max-size") { o.max_size = parse_size(value()); max_given = true; }
    else if (a == "--reps") o.reps = std::atoi(value());
    else if (a == "--quick") o.quick = true;
    else if (a == "--host-peer") o.host_peer = true;
    else if (a == "--json") o.json = value();
    else if (a == "--help" || a == "-h") { if (rank == 0) usage(); MPI_Finalize(); std::exit(0); }
    else {
      if (rank == 0) {
        std::fprintf(stderr, "bench_pingpong: unknown option %s\n", a.c_str());
        usage();
      }
      MPI_Finalize();
      std::exit(2);
    }
  }
  if (o.quick && !max_given) o.max_size = i64{1} << 20;
  if (o.max_size > (i64{1} << 30)) o.max_size = i64{1} << 30;  // counts stay ints
  for (const std::string& m : o.modes)
    if (m != "host" && m != "host_pmpi" && m != "staged" && m != "ipc" && m != "device" && m != "face_host" &&
        m != "face_staged" && m != "face") {
      if (rank == 0) std::fprintf(stderr, "bench_pingpong: unknown mode %s\n", m.c_str());
      MPI_Finalize();
      std::exit(2);
    }
  return o;
}

// Timed round trips for one size: many for small messages, fewer for large ones, so that each
// size moves about the same number of bytes.
int reps_for(const Options& o, i64 bytes) {
  if (o.reps > 0) return o.reps;
  const i64 budget = o.quick ? i64{16} << 20 : i64{1} << 30;
  const i64 lo = o.quick ? 3 : 20, hi = o.quick ? 100 : 2000;
  return static_cast<int>(std::clamp<i64>(budget / std::max<i64>(bytes, 1), lo, hi));
}

// The interposer exports ferry_mpi_loaded(); without that symbol (older builds) MPI_Send resolving
// into a library called libferry-mpi means it is loaded all the same.
void detect_interposer() {
  using LoadedFn = int (*)();
  void* sym = dlsym(RTLD_DEFAULT, "ferry_mpi_loaded");
  Dl_info info{};
  if (sym) {
    env.preload = reinterpret_cast<LoadedFn>(sym)() != 0;
    env.preload_how = "ferry_mpi_loaded()";
    if (dladdr(sym, &info) && info.dli_fname) env.preload_path = info.dli_fname;
    return;
  }
  void* send = dlsym(RTLD_DEFAULT, "MPI_Send");
  if (send && dladdr(send, &info) && info.dli_fname) {
    const char* base = std::strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (std::strstr(base, "ferry-mpi")) {
      env.preload = true;
      env.preload_how = "MPI_Send in libferry-mpi";
      env.preload_path = info.dli_fname;
    }
  }
}

// Before MPI_Init, so that whatever the MPI library or the interposer does with CUDA happens on
// this rank's device: node-local rank r uses device r % count (of the devices it can see).
void choose_device_early() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
    cudaGetLastError();  // clear: a machine without a GPU or driver is fine for the host modes
    return;
  }
  env.devices = n;
  const int local = bench::env_local_rank();
  env.device = (local >= 0 ? local : 0) % n;
  if (cudaSetDevice(env.device) != cudaSuccess) {
    cudaGetLastError();
    env.devices = 0;
    env.device = -1;
  }
}

std::string utc_now() {
  char buf[64];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void setup_env() {
  detect_interposer();
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  env.hostname = name;
  char ver[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  MPI_Get_library_version(ver, &len);
  env.mpi_version = std::string(ver, std::strcspn(ver, "\n,"));
  env.date = utc_now();

  // Node-local rank, now from MPI; the device choice of choose_device_early() is corrected if the
  // launcher did not say.
  const int local = bench::node_rank(comm);
  if (env.devices > 0) {
    const int want = local % env.devices;
    if (want != env.device) {
      CK(cudaSetDevice(want));
      env.device = want;
    }
    cudaDeviceProp prop{};
    CK(cudaGetDeviceProperties(&prop, env.device));
    env.device_name = prop.name;
    char uuid[64];
    int at = 0;
    for (int i = 0; i < 16; ++i)
      at += std::snprintf(uuid + at, sizeof uuid - static_cast<std::size_t>(at), "%02x",
                          static_cast<unsigned char>(prop.uuid.bytes[i]));
    env.gpu_id = env.hostname + "/" + uuid;
    CK(cudaFree(nullptr));  // create the context now, not inside the first timed call
    env.mps = ferry_bench::mps_state(env.device);
    env.gpu = true;
  }

  // Both ranks must agree on what they can do.
  int mine[2] = {env.preload ? 1 : 0, env.gpu ? 1 : 0}, all[2] = {0, 0}, any[2] = {0, 0};
  MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, comm);
  MPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, comm);
  if (all[0] != any[0]) fail("the interposer is loaded on some ranks only");
  if (all[1] != any[1] && rank == 0)
    std::printf("note: only some ranks have a GPU; the GPU modes are skipped\n");
  env.gpu = all[1] != 0;
  if (env.gpu) {
    char mine_id[160] = {};
    std::snprintf(mine_id, sizeof mine_id, "%s", env.gpu_id.c_str());
    std::vector<char> gathered(160 * 2, 0);
    MPI_Allgather(mine_id, 160, MPI_CHAR, gathered.data(), 160, MPI_CHAR, comm);
    env.same_gpu = std::strncmp(gathered.data(), gathered.data() + 160, 160) == 0 ? 1 : 0;
    int mps[2] = {env.mps.on, -env.mps.on}, agreed[2] = {0, 0};  // on only if on for both
    MPI_Allreduce(mps, agreed, 2, MPI_INT, MPI_MIN, comm);
    if (agreed[0] != -agreed[1]) env.mps.on = -1;  // the ranks disagree: not known
  }
}

}  // namespace pingpong_bench
