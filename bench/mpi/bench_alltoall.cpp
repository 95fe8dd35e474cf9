// bench_alltoall: MPI_Alltoallv and MPI_Neighbor_alltoallv on device buffers through the
// interposer (issue 16's goals), every way in the same run:
//
//   native    Ferry's own: on one node every block read in place (FERRY_PULL: one kernel per
//             rank; column `pulled`: such calls per call), else Ferry's messages
//   messages  Ferry's messages: each block a message with its own method (IPC on the node)
//   mirrors   the MPI's own collective on host copies of the buffers (ferry_mpi_force_collectives):
//             what Ferry did before
//   p2p       the same blocks as MPI_Irecv/MPI_Isend through Ferry, then MPI_Waitall: the bound
//             the goal names (native within 1.25x of it)
//   staged    by hand, without Ferry's help: cudaMemcpy of the whole buffer to pinned host memory,
//             PMPI_Alltoallv there, cudaMemcpy back
//
// Sizes are bytes each rank sends in all (split evenly over its peers; the neighbourhood form: a
// periodic ring, two neighbours). A time is the slowest rank's for one call (MPI_Wtime around
// `reps` calls between barriers), the median of 7 trials with the spread; every (form, mode,
// size) is checked once first: each rank compares what arrived with what was sent.
//
//   mpiexec -n 4 bench_alltoall [--sizes 64K,1M,16M] [--reps N] [--quick] [--json FILE]
// On one GPU the ranks share it: start CUDA MPS first (tools/mps.sh). Exit 77 without a GPU.
#include <cuda_runtime.h>
#include <ferry/ferry_mpi.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../local_rank.hpp"
#include "device_bench.hpp"

namespace {

using i64 = std::int64_t;

using device_bench::cuda;
using device_bench::die;

struct Options {
  std::vector<i64> sizes{64 << 10, 1 << 20, 16 << 20};
  int reps = 0;  // 0: by size
  std::string json;
};

// One collective call's layout at this rank: `peers` blocks of `ints` ints each way.
struct Layout {
  MPI_Comm comm;
  std::vector<int> to, from;  // peers in block order
  int ints = 0;
  std::vector<int> counts, displs;
};

// The value int k of the block from `src` to `dst` carries.
int value(int src, int dst, int k) { return src * 1000003 + dst * 7919 + k; }

struct Row {
  std::string form, mode;
  i64 bytes;
  double median_us, min_us, max_us;
  // Rank 0's stub receives per call, and how many of them shared one GPU wait (FERRY_BATCH_RECEIVE).
  double stubs_per_call = 0, per_wait = 0;
  double pulled = 0;  // calls read in place (FERRY_PULL) per call
};

class Bench {
 public:
  Bench(const Layout& l, int me) : l_(l), me_(me) {
    const std::size_t n = l.to.size() * static_cast<std::size_t>(l.ints);
    host_send_.resize(n);
    for (std::size_t b = 0; b < l.to.size(); ++b)
      for (int k = 0; k < l.ints; ++k) host_send_[b * static_cast<std::size_t>(l.ints) + static_cast<std::size_t>(k)] = value(me, l.to[b], k);
    bytes_ = static_cast<i64>(n * sizeof(int));
    cuda(cudaMalloc(&send_, static_cast<std::size_t>(bytes_)), "cudaMalloc");
    cuda(cudaMalloc(&recv_, static_cast<std::size_t>(bytes_)), "cudaMalloc");
    cuda(cudaMallocHost(&pinned_send_, static_cast<std::size_t>(bytes_)), "cudaMallocHost");
    cuda(cudaMallocHost(&pinned_recv_, static_cast<std::size_t>(bytes_)), "cudaMallocHost");
    cuda(cudaMemcpy(send_, host_send_.data(), static_cast<std::size_t>(bytes_), cudaMemcpyHostToDevice), "H2D");
  }
  ~Bench() {
    cudaFree(send_);
    cudaFree(recv_);
    cudaFreeHost(pinned_send_);
    cudaFreeHost(pinned_recv_);
  }
  // One call of `mode`; `neighbourhood`: MPI_Neighbor_alltoallv on the ring.
  void call(const std::string& mode, bool neighbourhood) {
    const int* c = l_.counts.data();
    const int* d = l_.displs.data();
    if (mode == "native" || mode == "messages" || mode == "mirrors") {
      ferry_mpi_force_collectives(mode.c_str());
      const int rc = neighbourhood ? MPI_Neighbor_alltoallv(send_, c, d, MPI_INT, recv_, c, d, MPI_INT, l_.comm)
                                   : MPI_Alltoallv(send_, c, d, MPI_INT, recv_, c, d, MPI_INT, l_.comm);
      ferry_mpi_force_collectives(nullptr);
      if (rc != MPI_SUCCESS) die(mode + ": the collective failed");
    } else if (mode == "p2p") {
      std::vector<MPI_Request> r(l_.to.size() + l_.from.size());
      for (std::size_t j = 0; j < l_.from.size(); ++j)
        MPI_Irecv(recv_ + d[j], c[j], MPI_INT, l_.from[j], neighbourhood ? static_cast<int>(j ^ 1) : 0, l_.comm, &r[j]);
      for (std::size_t i = 0; i < l_.to.size(); ++i)
        MPI_Isend(send_ + d[i], c[i], MPI_INT, l_.to[i], neighbourhood ? static_cast<int>(i) : 0, l_.comm,
                  &r[l_.from.size() + i]);
      if (MPI_Waitall(static_cast<int>(r.size()), r.data(), MPI_STATUSES_IGNORE) != MPI_SUCCESS) die("p2p failed");
    } else {  // staged
      cuda(cudaMemcpy(pinned_send_, send_, static_cast<std::size_t>(bytes_), cudaMemcpyDeviceToHost), "D2H");
      const int rc = neighbourhood
                         ? PMPI_Neighbor_alltoallv(pinned_send_, c, d, MPI_INT, pinned_recv_, c, d, MPI_INT, l_.comm)
                         : PMPI_Alltoallv(pinned_send_, c, d, MPI_INT, pinned_recv_, c, d, MPI_INT, l_.comm);
      if (rc != MPI_SUCCESS) die("staged: the collective failed");
      cuda(cudaMemcpy(recv_, pinned_recv_, static_cast<std::size_t>(bytes_), cudaMemcpyHostToDevice), "H2D");
    }
  }
  // What arrived is what was sent (every int).
  bool check(const std::string& mode, bool neighbourhood) {
    cuda(cudaMemset(recv_, 0xff, static_cast<std::size_t>(bytes_)), "memset");
    call(mode, neighbourhood);
    std::vector<int> got(host_send_.size());
    cuda(cudaMemcpy(got.data(), recv_, static_cast<std::size_t>(bytes_), cudaMemcpyDeviceToHost), "D2H");
    // Block b holds what its source sent to this rank (a block's values name both ends).
    for (std::size_t b = 0; b < l_.from.size(); ++b)
      for (int k = 0; k < l_.ints; ++k)
        if (got[b * static_cast<std::size_t>(l_.ints) + static_cast<std::size_t>(k)] != value(l_.from[b], me_, k))
          return false;
    return true;
  }
  i64 bytes() const { return bytes_; }

 private:
  const Layout& l_;
  int me_;
  std::vector<int> host_send_;
  i64 bytes_ = 0;
  int *send_ = nullptr, *recv_ = nullptr, *pinned_send_ = nullptr, *pinned_recv_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  const int local = bench::env_local_rank();
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("bench_alltoall: no GPU: skipped\n");
    return 77;
  }
  cudaSetDevice(local < 0 ? 0 : local % devices);
  MPI_Init(&argc, &argv);
  device_bench::program = "bench_alltoall";
  Options o;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
      o.sizes = {64 << 10, 1 << 20};
    } else if (a == "--reps" && i + 1 < argc) {
      o.reps = std::atoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      o.json = argv[++i];
    } else if (a == "--sizes" && i + 1 < argc) {
      o.sizes = device_bench::parse_sizes(argv[++i]);
    } else {
      std::printf("usage: mpiexec -n N bench_alltoall [--sizes 64K,1M,16M] [--reps N] [--quick] [--json FILE]\n");
      MPI_Finalize();
      return a == "--help" ? 0 : 2;
    }
  }
  if (!ferry_mpi_loaded()) die("run it linked with the interposer");
  int me = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm ring;
  int dims[1] = {n}, periods[1] = {1};
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
  const int lower = (me + n - 1) % n, upper = (me + 1) % n;

  std::vector<Row> rows;
  bool all_ok = true;
  for (const bool neighbourhood : {false, true}) {
    const std::string form = neighbourhood ? "Neighbor_alltoallv (ring)" : "Alltoallv";
    for (const i64 size : o.sizes) {
      Layout l;
      l.comm = neighbourhood ? ring : MPI_COMM_WORLD;
      if (neighbourhood) {
        l.to = l.from = {lower, upper};
      } else {
        for (int p = 0; p < n; ++p) l.to.push_back(p);
        l.from = l.to;
      }
      l.ints = std::max<int>(1, static_cast<int>(size / static_cast<i64>(sizeof(int)) / static_cast<i64>(l.to.size())));
      for (std::size_t b = 0; b < l.to.size(); ++b) {
        l.counts.push_back(l.ints);
        l.displs.push_back(static_cast<int>(b) * l.ints);
      }
      Bench bench(l, me);
      const int reps = o.reps > 0 ? o.reps : std::max(2, static_cast<int>((quick ? 2 : 20) * (1 << 20) / std::max<i64>(size, 1 << 16)));
      for (const std::string mode : {"native", "messages", "mirrors", "p2p", "staged"}) {
        int ok = bench.check(mode, neighbourhood) ? 1 : 0, all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
          if (me == 0) std::printf("WRONG: %s %s %lld B\n", form.c_str(), mode.c_str(), static_cast<long long>(size));
          all_ok = false;
          continue;
        }
        std::vector<double> trials;
        const long stubs0 = ferry_mpi_ipc_received() + ferry_mpi_local_sent();
        const long batched0 = ferry_mpi_batched_received(), waits0 = ferry_mpi_batch_waits();
        const long pulls0 = ferry_mpi_collective_pulls();
        for (int t = 0; t < (quick ? 3 : 7); ++t) {
          MPI_Barrier(MPI_COMM_WORLD);
          const double t0 = MPI_Wtime();
          for (int r = 0; r < reps; ++r) bench.call(mode, neighbourhood);
          cudaDeviceSynchronize();
          double mine = (MPI_Wtime() - t0) / reps * 1e6, slowest = 0;
          MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          trials.push_back(slowest);
        }
        std::sort(trials.begin(), trials.end());
        const double calls = static_cast<double>(reps) * static_cast<double>(trials.size());
        const long waits = ferry_mpi_batch_waits() - waits0;
        rows.push_back({form, mode, size, trials[trials.size() / 2], trials.front(), trials.back(),
                        static_cast<double>(ferry_mpi_ipc_received() + ferry_mpi_local_sent() - stubs0) / calls,
                        waits > 0 ? static_cast<double>(ferry_mpi_batched_received() - batched0) / static_cast<double>(waits) : 0.0,
                        static_cast<double>(ferry_mpi_collective_pulls() - pulls0) / calls});
      }
    }
  }
  if (me == 0) {
    std::printf("bench_alltoall: %d ranks; median of trials (min-max), us per call; bytes sent per rank\n", n);
    std::printf("%-26s %-8s %10s %12s %22s %9s %8s %8s %7s\n", "form", "mode", "bytes", "median_us", "spread", "vs_native",
                "stubs", "per_wait", "pulled");
    for (const Row& r : rows) {
      double native = 0;
      for (const Row& q : rows)
        if (q.form == r.form && q.bytes == r.bytes && q.mode == "native") native = q.median_us;
      std::printf("%-26s %-8s %10lld %12.1f %10.1f-%-10.1f %9.2f %8.2f %8.2f %7.2f\n", r.form.c_str(), r.mode.c_str(),
                  static_cast<long long>(r.bytes), r.median_us, r.min_us, r.max_us, native > 0 ? r.median_us / native : 0.0,
                  r.stubs_per_call, r.per_wait, r.pulled);
    }
    if (!o.json.empty()) {
      FILE* f = std::fopen(o.json.c_str(), "w");
      if (f) {
        std::fprintf(f, "{\"ranks\": %d, \"rows\": [", n);
        for (std::size_t i = 0; i < rows.size(); ++i)
          std::fprintf(f, "%s{\"form\": \"%s\", \"mode\": \"%s\", \"bytes\": %lld, \"median_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, \"stubs_per_call\": %.3f, \"receives_per_wait\": %.3f, \"pulled\": %.3f}",
                       i ? ", " : "", rows[i].form.c_str(), rows[i].mode.c_str(), static_cast<long long>(rows[i].bytes),
                       rows[i].median_us, rows[i].min_us, rows[i].max_us, rows[i].stubs_per_call, rows[i].per_wait, rows[i].pulled);
        std::fprintf(f, "]}\n");
        std::fclose(f);
      }
    }
  }
  MPI_Comm_free(&ring);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
