// halo/shm.hpp — host memory shared by the ranks of a node (MPI_Win_allocate_shared), where the
// host backend's IPC method puts data straight into the receiver's buffer, and the flags of its
// two-way handshake.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace ferry::halo::detail {

class SharedWindow {
 public:
  SharedWindow() = default;
  // Collective over `comm`; `node` is this rank's node (ranks with the same value share memory).
  // Each rank contributes a segment of `bytes`, zeroed and then given to `init` before any rank
  // returns.
  SharedWindow(MPI_Comm comm, int node, std::int64_t bytes, const std::function<void(char*)>& init);
  ~SharedWindow();
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;

  // The segment of rank `rank` of `comm` (which must share this rank's node), mapped here.
  char* segment(int rank) const;
  char* mine() const { return mine_; }

 private:
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  char* mine_ = nullptr;
  std::vector<int> node_rank_;  // rank of comm -> rank in node_comm_, -1 elsewhere
};

// A flag word of the handshake, one per 64-byte line so writer and reader of different flags do
// not share a cache line. Stores release the data written before them; loads acquire it.
inline void flag_store(std::uint64_t* f, std::uint64_t v) { __atomic_store_n(f, v, __ATOMIC_RELEASE); }
inline std::uint64_t flag_load(const std::uint64_t* f) { return __atomic_load_n(f, __ATOMIC_ACQUIRE); }
constexpr std::int64_t kLine = 64;

}  // namespace ferry::halo::detail
