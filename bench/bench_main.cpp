// bench/bench_main.cpp — main() of the Ferry benchmarks: MPI around Google Benchmark.
//
// Runs on one rank (mpiexec -n 1 or a singleton); with more ranks only rank 0 runs benchmarks, the
// others wait in MPI_Finalize. JSON output: --benchmark_out=FILE --benchmark_out_format=json.
#include "bench_common.hpp"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#ifndef FERRY_BENCH_VERSION
#define FERRY_BENCH_VERSION "unknown"
#endif
#ifndef FERRY_BENCH_BUILD_TYPE
#define FERRY_BENCH_BUILD_TYPE "unknown"
#endif

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Errors come back as codes, so a benchmark can report them instead of the job aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  benchmark::Initialize(&argc, argv);
  int rc = 0;
  if (rank == 0) {
    ferry_bench::register_benchmarks(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
      rc = 1;
    } else {
      char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
      int len = 0;
      MPI_Get_library_version(version, &len);
      std::string mpi(version, static_cast<std::size_t>(len));
      const auto nl = mpi.find('\n');
      if (nl != std::string::npos) mpi.resize(nl);
      while (!mpi.empty() && (mpi.back() == ',' || mpi.back() == ' ')) mpi.pop_back();
      benchmark::AddCustomContext("mpi_library", mpi);
      benchmark::AddCustomContext("ferry_version", FERRY_BENCH_VERSION);
      benchmark::AddCustomContext("ferry_build_type", FERRY_BENCH_BUILD_TYPE);
      benchmark::RunSpecifiedBenchmarks();
    }
  }
  benchmark::Shutdown();
  MPI_Finalize();
  return rc;
}
