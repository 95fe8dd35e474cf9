// ferry-measure: measures what the interposer's performance model needs on this machine and writes
// the model file; with --validate, checks a model against a held-out sweep.
//
//   mpiexec -n 2 ferry-measure [--out FILE] [--update FILE] [--max-size 64M] [--quick]
//   mpiexec -n 2 ferry-measure --validate FILE [--json RESULT.json]
//
// Two ranks, each on GPU (rank % devices). For each method the interposer has (staged,
// pipelined, IPC where the ranks share a node) the one-way time of a device-to-device message by
// size (powers of two), from a ping-pong through the interposer with that method forced; each
// point repeats in batches until the median settles (two batches within 1 %) and reports its
// spread (p10-p90 over the median). Then, on rank 0, the pack and unpack surfaces: packing for
// staging into device memory then one copy, or one-shot into mapped host memory; unpacking after
// one copy into device memory, or one-shot from mapped host memory; over (object size x block
// size), each point repeated until stable too. The curves are those of the ranks' locality:
// same_gpu when both ranks run on one GPU (by UUID), other_gpu when on two GPUs of a node,
// other_node otherwise; the localities it cannot measure in this run keep the built-in curves, or,
// with --update FILE, those of FILE (an earlier run with the ranks placed otherwise): run it once
// with both ranks on one GPU and once on two GPUs to measure both localities of a node.
//
// --validate: messages of held-out sizes (3 and 5 times powers of two, and the -X halo face)
// are sent with every method; the model's pick must be the fastest within 5 % in at least 90 %
// of cases.
#include <ferry/ferry_mpi.h>
#include <ferry/gpu.hpp>
#include <ferry/model.hpp>
#include <ferry/registry.hpp>
#include <cuda_runtime.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <ctime>
#include <string>
#include <vector>

namespace {

using ferry::i64;
namespace fm = ferry::model;

struct Options {
  std::string out = "ferry-model.json";
  std::string update;  // a model file to start from
  std::string validate;
  std::string json;
  i64 max_size = i64{64} << 20;
  bool quick = false;
};

i64 parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit = end ? end : "";
  if (unit == "K" || unit == "k") v *= 1024;
  if (unit == "M" || unit == "m") v *= 1024 * 1024;
  if (unit == "G" || unit == "g") v *= 1024.0 * 1024 * 1024;
  return static_cast<i64>(v);
}

struct Stat {
  double median = 0, spread = 0;
  int reps = 0;
};

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const std::size_t i = static_cast<std::size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

class PingPong {
 public:
  PingPong(int rank, i64 max_bytes) : rank_(rank), peer_(1 - rank) {
    cudaMalloc(&a_, static_cast<std::size_t>(std::max<i64>(max_bytes, 1)));
    cudaMalloc(&b_, static_cast<std::size_t>(std::max<i64>(max_bytes, 1)));
    cudaMemset(a_, rank + 1, static_cast<std::size_t>(std::max<i64>(max_bytes, 1)));
  }
  ~PingPong() {
    cudaFree(a_);
    cudaFree(b_);
  }
  // One round trip of `count` elements of `type` (device buffers), in microseconds, one way.
  double once(int count, MPI_Datatype type) {
    const auto t0 = std::chrono::steady_clock::now();
    if (rank_ == 0) {
      MPI_Send(a_, count, type, peer_, 1, MPI_COMM_WORLD);
      MPI_Recv(b_, count, type, peer_, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(b_, count, type, peer_, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(a_, count, type, peer_, 1, MPI_COMM_WORLD);
    }
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / 2;
  }
  // Repeats in batches until the median of all samples moves by less than 1 % twice in a row
  // (rank 0 decides, both follow), within a time budget per point.
  Stat measure(int count, MPI_Datatype type, double budget_s) {
    std::vector<double> samples;
    for (int w = 0; w < 3; ++w) once(count, type);  // warm-up: pools, handles, plans
    double prev = 0;
    int settled = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int batch = 0;; ++batch) {
      const int n = samples.empty() ? 5 : std::max<int>(5, static_cast<int>(samples.size()) / 2);
      for (int i = 0; i < n; ++i) samples.push_back(once(count, type));
      const double med = percentile(samples, 0.5);
      settled = prev > 0 && std::fabs(med - prev) < 0.01 * prev ? settled + 1 : 0;
      prev = med;
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      int go = settled < 2 && elapsed < budget_s && batch < 40;
      MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
      if (!go) break;
    }
    Stat s;
    s.median = percentile(samples, 0.5);
    s.spread = (percentile(samples, 0.9) - percentile(samples, 0.1)) / s.median;
    s.reps = static_cast<int>(samples.size());
    return s;
  }
  char* a() { return static_cast<char*>(a_); }

 private:
  int rank_, peer_;
  void* a_ = nullptr;
  void* b_ = nullptr;
};

// Where the two ranks are: on one node (sharing its memory) or not, and then on one GPU or two.
fm::Locality pair_locality() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int n = 0;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  std::uint64_t key[2] = {0, 0};
  const std::uint64_t mine = ferry::gpu::device_key(ferry::gpu::current_device());
  MPI_Allgather(&mine, 1, MPI_UINT64_T, key, 1, MPI_UINT64_T, MPI_COMM_WORLD);
  if (n != 2) return fm::Locality::other_node;
  return key[0] == key[1] ? fm::Locality::same_gpu : fm::Locality::other_gpu;
}

bool method_applies(fm::Method m, i64 bytes, bool local) {
  if (m == fm::Method::ipc) return local && bytes >= fm::kIpcMinBytes;
  if (m == fm::Method::pipelined) return bytes >= fm::kPipelinedMinBytes;
  return true;
}

// Pack (or unpack) surface for one pack method, on this rank's GPU: (object size x block size),
// CUDA events around the work. Each point repeats in batches of 10 until its median moves by less
// than 1 % twice in a row (at most 200 samples); `spread` gets the largest p10-p90 spread over the
// median of any point.
fm::Surface pack_surface(fm::Pack how, fm::Direction dir, const std::vector<i64>& sizes,
                         const std::vector<i64>& blocks, bool quick, double* spread) {
  fm::Surface s;
  s.bytes = sizes;
  s.block = blocks;
  const i64 biggest = sizes.back();
  char* mem = nullptr;  // the data, laid out by the type (stride twice the block)
  char* dev = nullptr;  // device staging
  cudaMalloc(&mem, static_cast<std::size_t>(2 * biggest));
  cudaMalloc(&dev, static_cast<std::size_t>(biggest));
  void* host = ferry::gpu::alloc_pinned(biggest);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  *spread = 0;
  for (i64 bytes : sizes) {
    std::vector<double> row;
    for (i64 block : blocks) {
      MPI_Datatype v;
      MPI_Type_vector(static_cast<int>(std::max<i64>(1, bytes / block)), static_cast<int>(block),
                      static_cast<int>(2 * block), MPI_BYTE, &v);
      MPI_Type_commit(&v);
      auto t = ferry::lookup(v);
      const auto size = static_cast<std::size_t>(t->size());
      auto once = [&] {
        cudaEventRecord(e0, st);
        if (dir == fm::Direction::pack) {
          if (how == fm::Pack::device) {
            ferry::gpu::pack_async(mem, 1, *t, dev, st);
            cudaMemcpyAsync(host, dev, size, cudaMemcpyDeviceToHost, st);
          } else {
            ferry::gpu::pack_async(mem, 1, *t, host, st);
          }
        } else {
          if (how == fm::Pack::device) {
            cudaMemcpyAsync(dev, host, size, cudaMemcpyHostToDevice, st);
            ferry::gpu::unpack_async(dev, mem, 1, *t, st);
          } else {
            ferry::gpu::unpack_async(host, mem, 1, *t, st);
          }
        }
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        float m = 0;
        cudaEventElapsedTime(&m, e0, e1);
        return static_cast<double>(m) * 1000.0;
      };
      for (int w = 0; w < 3; ++w) once();
      std::vector<double> us;
      double prev = 0;
      for (int settled = 0; settled < 2 && us.size() < (quick ? 60u : 200u);) {
        for (int i = 0; i < 10; ++i) us.push_back(once());
        const double med = percentile(us, 0.5);
        settled = prev > 0 && std::fabs(med - prev) < 0.01 * prev ? settled + 1 : 0;
        prev = med;
      }
      const double med = std::max(percentile(us, 0.5), 0.01);
      *spread = std::max(*spread, (percentile(us, 0.9) - percentile(us, 0.1)) / med);
      row.push_back(med);
      MPI_Type_free(&v);
    }
    s.us.push_back(row);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(st);
  ferry::gpu::free_pinned(host);
  cudaFree(mem);
  cudaFree(dev);
  return s;
}

std::string now() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

int measure(const Options& o, int rank) {
  const fm::Locality loc = pair_locality();
  const bool local = loc != fm::Locality::other_node;
  // --update: on top of an earlier run's model (another locality measured there), else the
  // built-in one; this run replaces the curves of its own locality and the surfaces.
  fm::Model model = fm::Model::builtin();
  std::string measured = "others built-in";
  if (!o.update.empty()) {
    int readable = std::ifstream(o.update).good() ? 1 : 0;  // every rank, or none goes on
    MPI_Allreduce(MPI_IN_PLACE, &readable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!readable) {
      if (rank == 0) std::fprintf(stderr, "ferry-measure: --update %s: cannot read it\n", o.update.c_str());
      return 2;
    }
    model = fm::Model::load(o.update);  // a malformed file fails on every rank alike
    measured = "before: " + (model.info.count("measured") ? model.info["measured"] : std::string("?"));
  }
  model.info["source"] = "ferry-measure";
  model.info["date"] = now();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  model.info["host"] = host;
  cudaDeviceProp prop{};
  int dev = 0;
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&prop, dev);
  model.info["gpu"] = prop.name;
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  model.info["mpi"] = std::string(mpi, mpi + std::min(len, 40));
  model.info["measured"] = std::string("curves for ") + fm::name(loc) + " (" + now() + "); " + measured;
  PingPong pp(rank, o.max_size);
  if (rank == 0)
    std::printf("%-10s %12s %12s %8s %6s\n", "method", "bytes", "one-way us", "spread", "reps");
  for (fm::Method m : {fm::Method::staged, fm::Method::pipelined, fm::Method::ipc}) {
    fm::Curve c;
    ferry_mpi_force_method(fm::name(m));
    for (i64 b = 1; b <= o.max_size; b *= (o.quick ? 4 : 2)) {
      if (!method_applies(m, b, local)) continue;
      Stat s = pp.measure(static_cast<int>(b), MPI_BYTE, o.quick ? 0.2 : 1.0);
      c.bytes.push_back(b);
      c.us.push_back(s.median);
      if (rank == 0)
        std::printf("%-10s %12lld %12.2f %7.1f%% %6d\n", fm::name(m), static_cast<long long>(b),
                    s.median, 100 * s.spread, s.reps);
    }
    if (!c.empty()) model.set_curve(m, loc, c);
  }
  ferry_mpi_force_method(nullptr);
  if (rank == 0) {
    std::vector<i64> sizes = {i64{4} << 10, i64{64} << 10, i64{1} << 20, i64{8} << 20};
    std::vector<i64> blocks = {1, 8, 64, 512, 4096};
    for (fm::Direction d : {fm::Direction::pack, fm::Direction::unpack})
      for (fm::Pack p : {fm::Pack::device, fm::Pack::one_shot}) {
        double spread = 0;
        fm::Surface s = pack_surface(p, d, sizes, blocks, o.quick, &spread);
        std::printf("%-6s %-8s us by size (rows) x block", d == fm::Direction::pack ? "pack" : "unpack",
                    fm::name(p));
        for (i64 b : blocks) std::printf(" %8lld", static_cast<long long>(b));
        std::printf("   (largest spread %.1f%%)\n", 100 * spread);
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          std::printf("%39lld", static_cast<long long>(sizes[i]));
          for (double t : s.us[i]) std::printf(" %8.2f", t);
          std::printf("\n");
        }
        model.set_surface(p, std::move(s), d);
      }
    model.save(o.out);
    std::printf("ferry-measure: wrote %s\n", o.out.c_str());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}

int validate(const Options& o, int rank) {
  const fm::Model model = fm::Model::load(o.validate);
  const fm::Locality loc = pair_locality();
  const bool local = loc != fm::Locality::other_node;
  PingPong pp(rank, o.max_size);
  std::vector<i64> sizes;
  for (i64 b = 1024; 5 * b <= o.max_size; b *= 2) {
    sizes.push_back(3 * b);
    sizes.push_back(5 * b);
  }
  int hits = 0, cases = 0;
  FILE* js = (rank == 0 && !o.json.empty()) ? std::fopen(o.json.c_str(), "w") : nullptr;
  if (js) std::fprintf(js, "{\n \"model\": \"%s\",\n \"records\": [\n", o.validate.c_str());
  if (rank == 0)
    std::printf("%12s %10s %10s %10s %10s  %-10s %s\n", "bytes", "staged", "pipelined", "ipc",
                "best", "pick", "within 5%");
  for (i64 b : sizes) {
    double t[3] = {NAN, NAN, NAN};
    int k = 0;
    for (fm::Method m : {fm::Method::staged, fm::Method::pipelined, fm::Method::ipc}) {
      if (method_applies(m, b, local)) {
        ferry_mpi_force_method(fm::name(m));
        t[k] = pp.measure(static_cast<int>(b), MPI_BYTE, o.quick ? 0.2 : 0.6).median;
      }
      ++k;
    }
    ferry_mpi_force_method(nullptr);
    const fm::Method pick = model.choose(b, b, loc, local).method;
    double best = INFINITY;
    for (double x : t)
      if (!std::isnan(x)) best = std::min(best, x);
    const double picked = t[static_cast<int>(pick)];
    const bool ok = !std::isnan(picked) && picked <= 1.05 * best;
    ++cases;
    hits += ok;
    if (rank == 0) {
      std::printf("%12lld %10.2f %10.2f %10.2f %10.2f  %-10s %s\n", static_cast<long long>(b), t[0],
                  t[1], t[2], best, fm::name(pick), ok ? "yes" : "NO");
      if (js)
        std::fprintf(js, "%s  {\"bytes\": %lld, \"staged\": %.3f, \"pipelined\": %.3f, \"ipc\": %.3f, \"pick\": \"%s\", \"ok\": %s}",
                     cases > 1 ? ",\n" : "", static_cast<long long>(b), std::isnan(t[0]) ? -1 : t[0],
                     std::isnan(t[1]) ? -1 : t[1], std::isnan(t[2]) ? -1 : t[2], fm::name(pick),
                     ok ? "true" : "false");
    }
  }
  if (js) {
    std::fprintf(js, "\n ],\n \"hits\": %d,\n \"cases\": %d\n}\n", hits, cases);
    std::fclose(js);
  }
  if (rank == 0)
    std::printf("ferry-measure: the model's pick is the fastest within 5%% in %d of %d cases (%.0f%%; goal 90%%)\n",
                hits, cases, 100.0 * hits / std::max(cases, 1));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--out") o.out = value();
    else if (a == "--update") o.update = value();
    else if (a == "--validate") o.validate = value();
    else if (a == "--json") o.json = value();
    else if (a == "--max-size") o.max_size = parse_size(value());
    else if (a == "--quick") o.quick = true;
    else {
      if (rank == 0) std::fprintf(stderr, "usage: mpiexec -n 2 ferry-measure [--out FILE] [--update FILE] [--max-size 64M] [--quick] | --validate FILE [--json OUT]\n");
      MPI_Finalize();
      return 2;
    }
  }
  int devices = 0;
  if (size != 2 || cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
      ferry_mpi_force_method("staged") != 0) {
    if (rank == 0) std::fprintf(stderr, "ferry-measure: needs 2 ranks, a GPU and the interposer\n");
    MPI_Finalize();
    return 2;
  }
  cudaSetDevice(rank % devices);
  int rc = 0;
  try {
    rc = o.validate.empty() ? measure(o, rank) : validate(o, rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-measure: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
