// bench_call_cost: what the interposer adds to an MPI call on host buffers, in nanoseconds.
//
// A ping-pong between two processes measures the added latency, but its run-to-run noise (a few
// percent of 0.3 us) is as large as the cost itself. Here one process talks to itself, so the MPI
// work is the same every time, and each case runs through MPI_* (the interposer, when it is
// loaded) and through PMPI_* (which nothing wraps) in alternating chunks: A B B A A B ... The cost
// is the median over chunk pairs of (MPI_* chunk - PMPI_* chunk) / iterations, with its quartiles.
// Without LD_PRELOAD both sides are the system MPI, and the difference is the noise.
//
//   mpiexec -n 1 [-x LD_PRELOAD=$PWD/build/cuda/src/libferry-mpi.so] bench_call_cost [--chunks N]
//        [--iters N] [--json FILE]
//
// Cases (8-byte messages, MPI_BYTE, the process's own rank as peer):
//   send_recv     MPI_Send then MPI_Recv (eager: the send completes locally)
//   isend_irecv   MPI_Irecv, MPI_Isend, MPI_Waitall of both
//   iprobe        MPI_Iprobe with nothing to find
//   allreduce, bcast, alltoall, alltoallv   one double (MPI_SUM), on the process's one-rank world
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Case {
  const char* name;
  std::function<void()> through_mpi;   // MPI_*: the interposer, if loaded
  std::function<void()> through_pmpi;  // PMPI_*: never wrapped
};

struct Result {
  std::string name;
  double mpi_ns, pmpi_ns, cost_ns, cost_q1, cost_q3;
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double x = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(x);
  const double f = x - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

Result measure(const Case& c, int chunks, int iters) {
  auto chunk = [&](const std::function<void()>& f) {
    const double t0 = now_ns();
    for (int i = 0; i < iters; ++i) f();
    return (now_ns() - t0) / iters;
  };
  for (int w = 0; w < 3; ++w) {  // warm up both paths (pools, caches, the MPI's free lists)
    chunk(c.through_mpi);
    chunk(c.through_pmpi);
  }
  std::vector<double> a, b, d;
  for (int k = 0; k < chunks; ++k) {
    double x, y;
    if (k % 2) {
      y = chunk(c.through_pmpi);
      x = chunk(c.through_mpi);
    } else {
      x = chunk(c.through_mpi);
      y = chunk(c.through_pmpi);
    }
    a.push_back(x);
    b.push_back(y);
    d.push_back(x - y);
  }
  return {c.name, quantile(a, 0.5), quantile(b, 0.5), quantile(d, 0.5), quantile(d, 0.25), quantile(d, 0.75)};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int chunks = 400, iters = 2000;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_call_cost: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (a == "--chunks") chunks = std::max(2, std::atoi(value().c_str()));
    else if (a == "--iters") iters = std::max(1, std::atoi(value().c_str()));
    else if (a == "--json") json = value();
    else {
      std::fprintf(stderr, "usage: bench_call_cost [--chunks N] [--iters N] [--json FILE]\n");
      MPI_Finalize();
      return a == "--help" ? 0 : 2;
    }
  }
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const MPI_Comm comm = MPI_COMM_WORLD;
  static char out[8], in[8];
  const bool preload = std::getenv("LD_PRELOAD") && std::strstr(std::getenv("LD_PRELOAD"), "ferry");

  std::vector<Case> cases;
  cases.push_back({"send_recv",
                   [&] {
                     MPI_Send(out, 8, MPI_BYTE, me, 1, comm);
                     MPI_Recv(in, 8, MPI_BYTE, me, 1, comm, MPI_STATUS_IGNORE);
                   },
                   [&] {
                     PMPI_Send(out, 8, MPI_BYTE, me, 1, comm);
                     PMPI_Recv(in, 8, MPI_BYTE, me, 1, comm, MPI_STATUS_IGNORE);
                   }});
  cases.push_back({"isend_irecv",
                   [&] {
                     MPI_Request r[2];
                     MPI_Irecv(in, 8, MPI_BYTE, me, 2, comm, &r[0]);
                     MPI_Isend(out, 8, MPI_BYTE, me, 2, comm, &r[1]);
                     MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
                   },
                   [&] {
                     MPI_Request r[2];
                     PMPI_Irecv(in, 8, MPI_BYTE, me, 2, comm, &r[0]);
                     PMPI_Isend(out, 8, MPI_BYTE, me, 2, comm, &r[1]);
                     PMPI_Waitall(2, r, MPI_STATUSES_IGNORE);
                   }});
  cases.push_back({"iprobe",
                   [&] {
                     int flag = 0;
                     MPI_Iprobe(me, 3, comm, &flag, MPI_STATUS_IGNORE);
                   },
                   [&] {
                     int flag = 0;
                     PMPI_Iprobe(me, 3, comm, &flag, MPI_STATUS_IGNORE);
                   }});
  // Collectives on 8-byte host buffers (issue 13: at most 40 ns added per call, as point-to-point).
  // On one process they are the MPI's local copies, so the call's own cost dominates.
  static double dsend[1] = {1.0}, drecv[1];
  static int ones[1] = {1}, zeros[1] = {0};
  cases.push_back({"allreduce",
                   [&] { MPI_Allreduce(dsend, drecv, 1, MPI_DOUBLE, MPI_SUM, comm); },
                   [&] { PMPI_Allreduce(dsend, drecv, 1, MPI_DOUBLE, MPI_SUM, comm); }});
  cases.push_back({"bcast",
                   [&] { MPI_Bcast(dsend, 1, MPI_DOUBLE, 0, comm); },
                   [&] { PMPI_Bcast(dsend, 1, MPI_DOUBLE, 0, comm); }});
  cases.push_back({"alltoall",
                   [&] { MPI_Alltoall(dsend, 1, MPI_DOUBLE, drecv, 1, MPI_DOUBLE, comm); },
                   [&] { PMPI_Alltoall(dsend, 1, MPI_DOUBLE, drecv, 1, MPI_DOUBLE, comm); }});
  cases.push_back({"alltoallv",
                   [&] { MPI_Alltoallv(dsend, ones, zeros, MPI_DOUBLE, drecv, ones, zeros, MPI_DOUBLE, comm); },
                   [&] { PMPI_Alltoallv(dsend, ones, zeros, MPI_DOUBLE, drecv, ones, zeros, MPI_DOUBLE, comm); }});

  std::vector<Result> results;
  for (const Case& c : cases) results.push_back(measure(c, chunks, iters));
  if (me == 0) {
    std::printf("bench_call_cost: interposer %s; %d chunks of %d calls, medians per call\n",
                preload ? "loaded" : "not loaded (differences are noise)", chunks, iters);
    std::printf("%-12s %10s %10s %10s %18s\n", "case", "MPI_ns", "PMPI_ns", "cost_ns", "cost_q1..q3_ns");
    for (const Result& r : results)
      std::printf("%-12s %10.1f %10.1f %+10.1f %8.1f..%-8.1f\n", r.name.c_str(), r.mpi_ns, r.pmpi_ns,
                  r.cost_ns, r.cost_q1, r.cost_q3);
    if (!json.empty()) {
      FILE* f = std::fopen(json.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "bench_call_cost: cannot write %s\n", json.c_str());
      } else {
        std::fprintf(f, "{\n  \"preload\": %s, \"chunks\": %d, \"iters\": %d,\n  \"results\": [\n",
                     preload ? "true" : "false", chunks, iters);
        for (std::size_t i = 0; i < results.size(); ++i) {
          const Result& r = results[i];
          std::fprintf(f,
                       "    {\"case\": \"%s\", \"mpi_ns\": %.2f, \"pmpi_ns\": %.2f, \"cost_ns\": %.2f, "
                       "\"cost_q1_ns\": %.2f, \"cost_q3_ns\": %.2f}%s\n",
                       r.name.c_str(), r.mpi_ns, r.pmpi_ns, r.cost_ns, r.cost_q1, r.cost_q3,
                       i + 1 < results.size() ? "," : "");
        }
        std::fprintf(f, "  ]\n}\n");
        std::fclose(f);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
