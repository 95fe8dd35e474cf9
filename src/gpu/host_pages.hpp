// The pointer cache of pointers.cpp: a direct-mapped table of host pages that the CUDA driver called
// pageable host memory. memory_of() fills it; the interposer's host fast path (mpi/common.hpp)
// reads it inline, so a host buffer costs one load and a compare (and, from libferry-mpi, the load
// of the table's address from the GOT: the table lives in libferry). Builds without CUDA define
// the table (host_pages.cpp) and never fill it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ferry::gpu::host_pages {

constexpr int kPageBits = 12;
constexpr std::size_t kSlots = 4096;
extern std::atomic<std::uintptr_t> table[kSlots];

inline bool known(const void* p) {
  const std::uintptr_t page = reinterpret_cast<std::uintptr_t>(p) >> kPageBits;
  return table[page % kSlots].load(std::memory_order_relaxed) == page + 1;
}
inline void add(const void* p) {
  const std::uintptr_t page = reinterpret_cast<std::uintptr_t>(p) >> kPageBits;
  table[page % kSlots].store(page + 1, std::memory_order_relaxed);
}

}  // namespace ferry::gpu::host_pages
