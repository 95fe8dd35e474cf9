// Rooted collectives on GPU buffers (coll.hpp): bcast, reduce, gather(v), scatter(v), blocking
// and non-blocking.
#include "mpi/coll.hpp"

using namespace ferry::mpi_detail;
using namespace ferry::mpi_detail::coll;

namespace {

template <class Fn, class... Req>
[[gnu::noinline]] int bcast(Fn fn, void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{buf, count, type, r.root ? Use::in : Use::none},
      Elems{buf, count, type, r.member && !r.root ? Use::out : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(r.root ? s : b, count, type, root, comm, q...);
      },
      request...);
}

template <class Fn, class... Req>
[[gnu::noinline]] int reduce(Fn fn, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
           int root, MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{sendbuf, count, type, r.member ? Use::in : Use::none},
      Elems{recvbuf, count, type, r.root ? received(sendbuf) : Use::none},
      [&](void* s, void* b, auto... q) { return fn(s, b, count, type, op, root, comm, q...); },
      request...);
}

template <class Fn, class... Req>
[[gnu::noinline]] int gather(Fn fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
           int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{sendbuf, sendcount, sendtype, r.member ? Use::in : Use::none},
      Elems{recvbuf, i64{recvcount} * r.peers, recvtype, r.root ? received(sendbuf) : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcount, recvtype, root, comm, q...);
      },
      request...);
}

template <class Fn, class... Req>
[[gnu::noinline]] int gatherv(Fn fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
            const int* recvcounts, const int* displs, MPI_Datatype recvtype, int root,
            MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{sendbuf, sendcount, sendtype, r.member ? Use::in : Use::none},
      Blocks{recvbuf, r.peers, recvcounts, displs, recvtype,
             r.root ? received(sendbuf) : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcounts, displs, recvtype, root, comm, q...);
      },
      request...);
}

// At the root of an intracommunicator recvbuf may be MPI_IN_PLACE: its part stays in sendbuf.
template <class Fn, class... Req>
[[gnu::noinline]] int scatter(Fn fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
            int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{sendbuf, i64{sendcount} * r.peers, sendtype, r.root ? Use::in : Use::none},
      Elems{recvbuf, recvcount, recvtype, r.member ? Use::out : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcount, recvtype, root, comm, q...);
      },
      request...);
}

template <class Fn, class... Req>
[[gnu::noinline]] int scatterv(Fn fn, const void* sendbuf, const int* sendcounts, const int* displs,
             MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
             MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Blocks{sendbuf, r.peers, sendcounts, displs, sendtype, r.root ? Use::in : Use::none},
      Elems{recvbuf, recvcount, recvtype, r.member ? Use::out : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcounts, displs, sendtype, b, recvcount, recvtype, root, comm, q...);
      },
      request...);
}

}  // namespace

extern "C" {

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (hot::plain_collective(buf, type)) return PMPI_Bcast(buf, count, type, root, comm);
  return bcast(PMPI_Bcast, buf, count, type, root, comm);
}

int MPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request* request) {
  if (hot::plain_collective(buf, type)) return PMPI_Ibcast(buf, count, type, root, comm, request);
  return bcast(PMPI_Ibcast, buf, count, type, root, comm, request);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
  return reduce(PMPI_Reduce, sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request);
  return reduce(PMPI_Ireduce, sendbuf, recvbuf, count, type, op, root, comm, request);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  return gather(PMPI_Gather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                comm);
}

int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
  return gather(PMPI_Igather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                comm, request);
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
  return gatherv(PMPI_Gatherv, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                 root, comm);
}

int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request);
  return gatherv(PMPI_Igatherv, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                 root, comm, request);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  return scatter(PMPI_Scatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                 comm);
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
  return scatter(PMPI_Iscatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                 comm, request);
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
  return scatterv(PMPI_Scatterv, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                  recvtype, root, comm);
}

int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
  return scatterv(PMPI_Iscatterv, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                  recvtype, root, comm, request);
}

}  // extern "C"
