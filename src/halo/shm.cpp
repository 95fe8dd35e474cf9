#include "halo/shm.hpp"

#include <cstring>
#include <string>

#include "sys/error.hpp"

namespace ferry::halo::detail {

SharedWindow::SharedWindow(MPI_Comm comm, int node, std::int64_t bytes,
                           const std::function<void(char*)>& init) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Comm_split(comm, node, rank, &node_comm_);
  void* base = nullptr;
  const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, MPI_INFO_NULL, node_comm_,
                                         &base, &win_);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&node_comm_);
    ferry::detail::fail(MPI_ERR_NO_MEM, "halo: MPI_Win_allocate_shared of " + std::to_string(bytes) +
                                            " bytes failed (are the ranks of a node really on one host?)");
  }
  mine_ = static_cast<char*>(base);
  if (bytes > 0) std::memset(mine_, 0, static_cast<std::size_t>(bytes));
  init(mine_);
  MPI_Group world, local;
  MPI_Comm_group(comm, &world);
  MPI_Comm_group(node_comm_, &local);
  std::vector<int> all(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) all[r] = r;
  node_rank_.assign(static_cast<std::size_t>(size), MPI_UNDEFINED);
  MPI_Group_translate_ranks(world, size, all.data(), local, node_rank_.data());
  MPI_Group_free(&world);
  MPI_Group_free(&local);
  // Everyone's segment is ready before anyone reads a flag in it.
  MPI_Barrier(node_comm_);
}

SharedWindow::~SharedWindow() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
  if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
}

char* SharedWindow::segment(int rank) const {
  const int nr = node_rank_.at(static_cast<std::size_t>(rank));
  if (nr == MPI_UNDEFINED)
    ferry::detail::fail(MPI_ERR_INTERN, "halo: rank " + std::to_string(rank) + " is not on this node");
  MPI_Aint size = 0;
  int disp = 0;
  void* base = nullptr;
  MPI_Win_shared_query(win_, nr, &size, &disp, &base);
  return static_cast<char*>(base);
}

}  // namespace ferry::halo::detail
