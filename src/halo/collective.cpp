#include "halo/collective.hpp"

#include "sys/error.hpp"

namespace ferry::halo::detail {

void agree(MPI_Comm comm, const std::string& error, int cls) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int mine = error.empty() ? size : rank, first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size) return;
  int len = static_cast<int>(error.size());
  MPI_Bcast(&len, 1, MPI_INT, first, comm);
  std::string msg(static_cast<std::size_t>(len), '\0');
  if (rank == first) msg = error;
  MPI_Bcast(msg.data(), len, MPI_CHAR, first, comm);
  ferry::detail::fail(cls, "rank " + std::to_string(first) + ": " + msg);
}

bool same_everywhere(MPI_Comm comm, std::uint64_t value) {
  unsigned long long v[2] = {value, ~value}, r[2] = {0, 0};
  MPI_Allreduce(v, r, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm);
  return r[0] == value && r[1] == ~value;
}

}  // namespace ferry::halo::detail
