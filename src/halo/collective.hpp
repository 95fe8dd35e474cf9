// halo/collective.hpp — checks that every rank passes together: one rank's mistake becomes the
// same ferry::Error on all ranks, so none is left waiting in a later collective.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::halo::detail {

// Collective. If any rank's `error` is not empty, every rank throws ferry::Error(cls) with the
// message of the lowest such rank ("rank R: ..."); otherwise returns.
void agree(MPI_Comm comm, const std::string& error, int cls);
// Collective: true when every rank passes the same value.
bool same_everywhere(MPI_Comm comm, std::uint64_t value);

// A 64-bit hash to compare descriptions across ranks.
struct Hasher {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  Hasher& add(std::uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h *= 0x100000001B3ULL;
    return *this;
  }
};

// MPI_Allgather of one value of a trivially copyable type per rank.
template <class T>
std::vector<T> allgather(MPI_Comm comm, const T& mine) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  std::vector<T> all(static_cast<std::size_t>(n));
  MPI_Allgather(&mine, static_cast<int>(sizeof(T)), MPI_BYTE, all.data(), static_cast<int>(sizeof(T)),
                MPI_BYTE, comm);
  return all;
}

}  // namespace ferry::halo::detail
