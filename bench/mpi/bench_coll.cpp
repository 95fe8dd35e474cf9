// bench_coll: small and large collectives on device buffers through the interposer (issue 13's
// goal: 8 B on 2 ranks within 20 us, whatever the buffer's allocation size), an OSU-style sweep:
// MPI_Allreduce (MPI_INT, MPI_SUM), MPI_Alltoall (MPI_BYTE, `size` bytes to each peer, as OSU
// counts it) and MPI_Bcast (MPI_BYTE, root 0), every way in the same run:
//
//   big      device buffers allocated once at the sweep's largest size (times the ranks for
//            Alltoall), the message at their start, through Ferry: osu_* -d cuda -m 8:4194304
//   exact    device buffers allocated at just this message's size, through Ferry: -m 8:8
//   staged   by hand, without Ferry's help (the big buffers): cudaMemcpy of the whole buffer to
//            pinned host memory, the PMPI_ collective there, cudaMemcpy back (Bcast: the root
//            copies out, the others copy in)
//   host     the collective on pinned host buffers: what the MPI itself costs
//
// A time is the slowest rank's for one call (MPI_Wtime around `reps` calls between barriers,
// after 5 untimed calls), the median of 7 trials with the spread; every (collective, size, mode)
// is checked once first: each rank compares every element of its result with what it must be.
//
//   mpiexec -n 2 bench_coll [--sizes 8,4K,4M] [--reps N] [--quick] [--json FILE]
// On one GPU the ranks share it: start CUDA MPS first (tools/mps.sh). Exit 77 without a GPU.
#include <cuda_runtime.h>
#include <ferry/ferry_mpi.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../local_rank.hpp"
#include "device_bench.hpp"
#include "../mps.hpp"

namespace {

using i64 = std::int64_t;

using device_bench::cuda;
using device_bench::die;

struct Options {
  std::vector<i64> sizes{8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20};
  int reps = 0;  // 0: by size
  std::string json;
};

enum class Coll { Allreduce, Alltoall, Bcast };
const char* name(Coll c) { return c == Coll::Allreduce ? "Allreduce" : c == Coll::Alltoall ? "Alltoall" : "Bcast"; }

// What rank `src` sends: int k of its Allreduce contribution; byte k of its block for `dst`.
int ival(int src, i64 k) { return (src + 1) * 1000 + static_cast<int>(k % 65536); }
unsigned char bval(int src, int dst, i64 k) { return static_cast<unsigned char>((src * 131 + dst * 31 + k * 7 + 1) % 251); }

struct Row {
  std::string coll, mode;
  i64 bytes;
  double median_us, min_us, max_us;
};

class Bench {
 public:
  Bench(int me, int n, i64 max_bytes) : me_(me), n_(n) {
    const std::size_t b = static_cast<std::size_t>(max_bytes) * static_cast<std::size_t>(n);
    cuda(cudaMallocHost(&pinned_s_, b), "cudaMallocHost");
    cuda(cudaMallocHost(&pinned_r_, b), "cudaMallocHost");
  }
  ~Bench() {
    free_dev(big_s_, big_r_);
    free_dev(exact_s_, exact_r_);
    cudaFreeHost(pinned_s_);
    cudaFreeHost(pinned_r_);
  }
  // Device buffers of `b` bytes each way (0: none): the big ones, the exact ones.
  void big(std::size_t b) { alloc_dev(big_s_, big_r_, b); }
  void exact(std::size_t b) { alloc_dev(exact_s_, exact_r_, b); }

  // Bytes in a rank's send buffer for `size`.
  std::size_t total(Coll c, i64 size) const {
    return static_cast<std::size_t>(size) * static_cast<std::size_t>(c == Coll::Alltoall ? n_ : 1);
  }
  // One call of `mode`.
  void call(Coll c, const std::string& mode, i64 size) {
    if (mode == "staged") {
      const std::size_t t = total(c, size);
      if (c != Coll::Bcast || me_ == 0) cuda(cudaMemcpy(pinned_s_, big_s_, t, cudaMemcpyDeviceToHost), "D2H");
      if (run(c, pinned_s_, pinned_r_, size, true) != MPI_SUCCESS) die("staged: the collective failed");
      if (c != Coll::Bcast) cuda(cudaMemcpy(big_r_, pinned_r_, t, cudaMemcpyHostToDevice), "H2D");
      else if (me_ != 0) cuda(cudaMemcpy(big_s_, pinned_s_, t, cudaMemcpyHostToDevice), "H2D");
    } else if (run(c, send(mode), recv(mode), size, false) != MPI_SUCCESS) {
      die(mode + ": the collective failed");
    }
  }
  // Every element of the result is what it must be, on this rank.
  bool check(Coll c, const std::string& mode, i64 size) {
    const std::size_t t = total(c, size);
    std::vector<int> fill((t + 3) / 4), got((t + 3) / 4);
    unsigned char* f = reinterpret_cast<unsigned char*>(fill.data());
    const unsigned char* g = reinterpret_cast<const unsigned char*>(got.data());
    if (c == Coll::Allreduce) {
      for (std::size_t k = 0; k < t / 4; ++k) fill[k] = ival(me_, static_cast<i64>(k));
    } else if (c == Coll::Alltoall) {
      for (int j = 0; j < n_; ++j)
        for (i64 k = 0; k < size; ++k) f[static_cast<std::size_t>(j * size + k)] = bval(me_, j, k);
    } else {
      for (std::size_t k = 0; k < t; ++k) f[k] = me_ == 0 ? bval(0, 0, static_cast<i64>(k)) : 0xff;
    }
    std::vector<unsigned char> junk(t, 0xff);
    cuda(cudaMemcpy(send(mode), f, t, cudaMemcpyDefault), "fill");
    if (c != Coll::Bcast) cuda(cudaMemcpy(recv(mode), junk.data(), t, cudaMemcpyDefault), "fill");
    call(c, mode, size);
    cuda(cudaDeviceSynchronize(), "sync");
    cuda(cudaMemcpy(got.data(), c == Coll::Bcast ? send(mode) : recv(mode), t, cudaMemcpyDefault), "read back");
    if (c == Coll::Allreduce) {
      for (std::size_t k = 0; k < t / 4; ++k) {
        int want = 0;
        for (int r = 0; r < n_; ++r) want += ival(r, static_cast<i64>(k));
        if (got[k] != want) return false;
      }
    } else if (c == Coll::Alltoall) {
      for (int j = 0; j < n_; ++j)
        for (i64 k = 0; k < size; ++k)
          if (g[static_cast<std::size_t>(j * size + k)] != bval(j, me_, k)) return false;
    } else {
      for (std::size_t k = 0; k < t; ++k)
        if (g[k] != bval(0, 0, static_cast<i64>(k))) return false;
    }
    return true;
  }

 private:
  static int run(Coll c, void* s, void* r, i64 size, bool pmpi) {
    const int count = static_cast<int>(c == Coll::Allreduce ? size / 4 : size);
    switch (c) {
      case Coll::Allreduce:
        return pmpi ? PMPI_Allreduce(s, r, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD)
                    : MPI_Allreduce(s, r, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      case Coll::Alltoall:
        return pmpi ? PMPI_Alltoall(s, count, MPI_BYTE, r, count, MPI_BYTE, MPI_COMM_WORLD)
                    : MPI_Alltoall(s, count, MPI_BYTE, r, count, MPI_BYTE, MPI_COMM_WORLD);
      case Coll::Bcast:
        return pmpi ? PMPI_Bcast(s, count, MPI_BYTE, 0, MPI_COMM_WORLD) : MPI_Bcast(s, count, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    return MPI_ERR_OTHER;
  }
  // Where `mode`'s message lives (staged: on the device, in the big buffers).
  void* send(const std::string& mode) const { return mode == "exact" ? exact_s_ : mode == "host" ? pinned_s_ : big_s_; }
  void* recv(const std::string& mode) const { return mode == "exact" ? exact_r_ : mode == "host" ? pinned_r_ : big_r_; }
  static void alloc_dev(void*& s, void*& r, std::size_t b) {
    free_dev(s, r);
    if (b == 0) return;
    cuda(cudaMalloc(&s, b), "cudaMalloc");
    cuda(cudaMalloc(&r, b), "cudaMalloc");
  }
  static void free_dev(void*& s, void*& r) {
    if (s) cudaFree(s);
    if (r) cudaFree(r);
    s = r = nullptr;
  }

  int me_, n_;
  void *pinned_s_ = nullptr, *pinned_r_ = nullptr, *big_s_ = nullptr, *big_r_ = nullptr;
  void *exact_s_ = nullptr, *exact_r_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  const int local = bench::env_local_rank();
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_coll: no GPU: skipped\n");
    return 77;
  }
  const int device = local < 0 ? 0 : local % devices;
  cudaSetDevice(device);
  MPI_Init(&argc, &argv);
  device_bench::program = "bench_coll";
  Options o;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
      o.sizes = {8, 4 << 10, 256 << 10, 4 << 20};
    } else if (a == "--reps" && i + 1 < argc) {
      o.reps = std::atoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      o.json = argv[++i];
    } else if (a == "--sizes" && i + 1 < argc) {
      o.sizes = device_bench::parse_sizes(argv[++i], 1);
    } else {
      std::printf("usage: mpiexec -n 2 bench_coll [--sizes 8,4K,4M] [--reps N] [--quick] [--json FILE]\n");
      MPI_Finalize();
      return a == "--help" ? 0 : 2;
    }
  }
  if (!ferry_mpi_loaded()) die("run it linked with the interposer");
  if (o.sizes.empty()) die("no sizes");
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  cudaDeviceProp prop{};
  cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  cuda(cudaFree(nullptr), "context");
  int mps[2] = {ferry_bench::mps_state(device).on, 0}, agreed[2] = {0, 0};
  mps[1] = -mps[0];
  MPI_Allreduce(mps, agreed, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  const char* mps_word = agreed[0] != -agreed[1] || agreed[0] < 0 ? "unknown" : agreed[0] ? "on" : "off";

  i64 max_bytes = 4;  // sizes round up to whole ints for Allreduce: room for that everywhere
  for (const i64 s : o.sizes) max_bytes = std::max(max_bytes, (s + 3) / 4 * 4);
  std::vector<Row> rows;
  bool all_ok = true;
  {  // the buffers go before MPI_Finalize
    Bench bench(me, n, max_bytes);
    for (const Coll c : {Coll::Allreduce, Coll::Alltoall, Coll::Bcast}) {
      bench.big(bench.total(c, max_bytes));  // once for the whole sweep, as OSU does
      for (const i64 asked : o.sizes) {
        const i64 size = c == Coll::Allreduce ? (asked + 3) / 4 * 4 : asked;
        bench.exact(bench.total(c, size));
        const int by_size = size <= (32 << 10) ? 200 : size <= (1 << 20) ? 50 : 20;
        const int reps = o.reps > 0 ? o.reps : quick ? std::max(5, by_size / 4) : by_size;
        for (const std::string mode : {"big", "exact", "staged", "host"}) {
          int ok = bench.check(c, mode, size) ? 1 : 0, all = 0;
          MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
          if (!all) {
            if (me == 0) std::printf("WRONG: %s %s %lld B\n", name(c), mode.c_str(), static_cast<long long>(size));
            all_ok = false;
            continue;
          }
          for (int w = 0; w < 5; ++w) bench.call(c, mode, size);
          cudaDeviceSynchronize();
          std::vector<double> trials;
          for (int t = 0; t < (quick ? 3 : 7); ++t) {
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            for (int r = 0; r < reps; ++r) bench.call(c, mode, size);
            cudaDeviceSynchronize();
            double mine = (MPI_Wtime() - t0) / reps * 1e6, slowest = 0;
            MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            trials.push_back(slowest);
          }
          std::sort(trials.begin(), trials.end());
          rows.push_back({name(c), mode, size, trials[trials.size() / 2], trials.front(), trials.back()});
        }
        bench.exact(0);
      }
    }
  }
  if (me == 0) {
    std::printf("bench_coll: %d ranks on %s (MPS %s); median of trials (min-max), us per call; bytes per rank "
                "(Alltoall: to each peer)\n", n, prop.name, mps_word);
    std::printf("%-10s %-7s %10s %12s %22s %9s\n", "collective", "mode", "bytes", "median_us", "spread", "vs_staged");
    for (const Row& r : rows) {
      double staged = 0;
      for (const Row& q : rows)
        if (q.coll == r.coll && q.bytes == r.bytes && q.mode == "staged") staged = q.median_us;
      std::printf("%-10s %-7s %10lld %12.1f %10.1f-%-10.1f %9.2f\n", r.coll.c_str(), r.mode.c_str(),
                  static_cast<long long>(r.bytes), r.median_us, r.min_us, r.max_us, staged > 0 ? r.median_us / staged : 0.0);
    }
    if (!o.json.empty()) {
      FILE* f = std::fopen(o.json.c_str(), "w");
      if (f) {
        std::fprintf(f, "{\"ranks\": %d, \"gpu\": \"%s\", \"mps\": \"%s\", \"rows\": [", n, prop.name, mps_word);
        for (std::size_t i = 0; i < rows.size(); ++i)
          std::fprintf(f, "%s{\"collective\": \"%s\", \"mode\": \"%s\", \"bytes\": %lld, \"median_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f}",
                       i ? ", " : "", rows[i].coll.c_str(), rows[i].mode.c_str(), static_cast<long long>(rows[i].bytes),
                       rows[i].median_us, rows[i].min_us, rows[i].max_us);
        std::fprintf(f, "]}\n");
        std::fclose(f);
      } else {
        std::fprintf(stderr, "bench_coll: cannot write %s\n", o.json.c_str());
      }
    }
  }
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
