// bench/mpi/device_bench.hpp — what the MPI benchmarks on device buffers (bench_alltoall,
// bench_coll) share: failing the whole job, checked CUDA calls, and size lists ("8,4K,16M").
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace device_bench {

using i64 = std::int64_t;

inline std::string program = "bench";  // set by main: the prefix of every failure message

// Prints the message and aborts the MPI job (a benchmark that cannot run has no result).
[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", program.c_str(), what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

inline void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}

// "64K" -> 65536; suffixes K, M, G (either case), none for bytes.
inline i64 parse_size(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  const char u = end && *end ? *end : 'B';
  const i64 mult = u == 'K' || u == 'k' ? 1 << 10 : u == 'M' || u == 'm' ? 1 << 20 : u == 'G' || u == 'g' ? 1 << 30 : 1;
  return static_cast<i64>(v * static_cast<double>(mult));
}

// A comma list of sizes; each at least `least`.
inline std::vector<i64> parse_sizes(const std::string& list, i64 least = 0) {
  std::vector<i64> out;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    if (comma > at) {
      const i64 v = parse_size(list.substr(at, comma - at));
      out.push_back(v < least ? least : v);
    }
    at = comma + 1;
  }
  return out;
}

}  // namespace device_bench
