// The templates of the collectives without a root (coll_all.cpp, coll_neighbor.cpp).
#pragma once

#include "mpi/coll.hpp"

namespace ferry::mpi_detail::coll {

// MPI_Allreduce, MPI_Scan, MPI_Exscan.
template <class Fn, class... Req>
[[gnu::noinline]] int reduce_all(Fn fn, bool exscan, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
               MPI_Op op, MPI_Comm comm, Req... request) {
  Use use = received(sendbuf);
  // MPI_Exscan's recvbuf at rank 0 is not significant (only the input, in place).
  if (exscan && comm != MPI_COMM_NULL && comm_rank(comm) == 0)
    use = sendbuf == MPI_IN_PLACE ? Use::in : Use::scratch;
  return exchange(
      comm, Elems{sendbuf, count, type, Use::in}, Elems{recvbuf, count, type, use},
      [&](void* s, void* b, auto... q) { return fn(s, b, count, type, op, comm, q...); },
      request...);
}

// MPI_Allgather (one block to every peer) and MPI_Alltoall (`each`: a block per peer), to the
// whole group or to the neighbours.
template <class Fn, class... Req>
[[gnu::noinline]] int fan(Fn fn, Degrees d, bool each, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
        void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, Req... request) {
  const i64 sent = each ? i64{sendcount} * d.out : d.out > 0 ? sendcount : 0;
  return exchange(
      comm, Elems{sendbuf, sent, sendtype, Use::in},
      Slots{{recvbuf, i64{recvcount} * d.in, recvtype, received(sendbuf)}, d.in, recvcount, d.cart},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcount, recvtype, comm, q...);
      },
      request...);
}

template <class Fn, class... Req>
[[gnu::noinline]] int allgatherv(Fn fn, Degrees d, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
               void* recvbuf, const int* recvcounts, const int* displs, MPI_Datatype recvtype,
               MPI_Comm comm, Req... request) {
  return exchange(
      comm, Elems{sendbuf, d.out > 0 ? sendcount : 0, sendtype, Use::in},
      Blocks{recvbuf, d.in, recvcounts, displs, recvtype, received(sendbuf), d.cart},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcounts, displs, recvtype, comm, q...);
      },
      request...);
}

// In place (MPI_Alltoallv/w), the send counts, displacements and types are not looked at.
template <class Fn, class... Req>
[[gnu::noinline]] int alltoallv(Fn fn, Degrees d, const void* sendbuf, const int* sendcounts, const int* sdispls,
              MPI_Datatype sendtype, void* recvbuf, const int* recvcounts, const int* rdispls,
              MPI_Datatype recvtype, MPI_Comm comm, Req... request) {
  return exchange(
      comm, Blocks{sendbuf, d.out, sendcounts, sdispls, sendtype, Use::in},
      Blocks{recvbuf, d.in, recvcounts, rdispls, recvtype, received(sendbuf), d.cart},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcounts, sdispls, sendtype, b, recvcounts, rdispls, recvtype, comm, q...);
      },
      request...);
}

template <class Fn, class Disp, class... Req>
[[gnu::noinline]] int alltoallw(Fn fn, Degrees d, const void* sendbuf, const int* sendcounts, const Disp* sdispls,
              const MPI_Datatype* sendtypes, void* recvbuf, const int* recvcounts,
              const Disp* rdispls, const MPI_Datatype* recvtypes, MPI_Comm comm, Req... request) {
  return exchange(
      comm, Typed<Disp>{sendbuf, d.out, sendcounts, sdispls, sendtypes, Use::in},
      Typed<Disp>{recvbuf, d.in, recvcounts, rdispls, recvtypes, received(sendbuf), d.cart},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcounts, sdispls, sendtypes, b, recvcounts, rdispls, recvtypes, comm, q...);
      },
      request...);
}

// The vector a reduce_scatter reduces (over this process's group, also in an intercommunicator)
// and this process's share of the result: per-process counts, or one count for all (_block).
inline std::pair<i64, i64> shares(const int* recvcounts, int n, int me) {
  i64 total = 0;
  for (int i = 0; i < n; ++i) total += recvcounts[i];
  return {total, me >= 0 && me < n ? recvcounts[me] : 0};
}
inline std::pair<i64, i64> shares(int recvcount, int n, int) {
  return {i64{recvcount} * n, recvcount};
}

// In place, the input is the whole receive buffer and only this process's share is written.
template <class Fn, class Counts, class... Req>
[[gnu::noinline]] int reduce_scatter(Fn fn, const void* sendbuf, void* recvbuf, Counts recvcounts, MPI_Datatype type,
                   MPI_Op op, MPI_Comm comm, Req... request) {
  const bool null = comm == MPI_COMM_NULL;
  const auto [total, share] =
      shares(recvcounts, null ? 0 : comm_size(comm), null ? -1 : comm_rank(comm));
  const bool in_place = sendbuf == MPI_IN_PLACE;
  return exchange(
      comm, Elems{sendbuf, total, type, Use::in},
      Share{{recvbuf, in_place ? total : share, type, received(sendbuf)}, share},
      [&](void* s, void* b, auto... q) { return fn(s, b, recvcounts, type, op, comm, q...); },
      request...);
}

}  // namespace ferry::mpi_detail::coll
