// Collectives without a root on GPU buffers (coll.hpp): allreduce, scan, exscan, reduce_scatter(_block),
// allgather(v), alltoall(v/w), blocking and non-blocking; the neighbourhood forms share these
// templates (coll_neighbor.cpp).
#include "mpi/coll_all.hpp"

using namespace ferry::mpi_detail;
using namespace ferry::mpi_detail::coll;

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
  return reduce_all(PMPI_Allreduce, false, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request);
  return reduce_all(PMPI_Iallreduce, false, sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
  return reduce_all(PMPI_Scan, false, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
              MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Iscan(sendbuf, recvbuf, count, type, op, comm, request);
  return reduce_all(PMPI_Iscan, false, sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
  return reduce_all(PMPI_Exscan, true, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Iexscan(sendbuf, recvbuf, count, type, op, comm, request);
  return reduce_all(PMPI_Iexscan, true, sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
  return reduce_scatter(PMPI_Reduce_scatter, sendbuf, recvbuf, recvcounts, type, op, comm);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, request);
  return reduce_scatter(PMPI_Ireduce_scatter, sendbuf, recvbuf, recvcounts, type, op, comm,
                        request);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
  return reduce_scatter(PMPI_Reduce_scatter_block, sendbuf, recvbuf, recvcount, type, op, comm);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                              MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, type, recvbuf, type)) return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm, request);
  return reduce_scatter(PMPI_Ireduce_scatter_block, sendbuf, recvbuf, recvcount, type, op, comm,
                        request);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return fan(PMPI_Allgather, everyone(comm), false, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  return fan(PMPI_Iallgather, everyone(comm), false, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm, request);
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
  return allgatherv(PMPI_Allgatherv, everyone(comm), sendbuf, sendcount, sendtype, recvbuf,
                    recvcounts, displs, recvtype, comm);
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype)) return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
  return allgatherv(PMPI_Iallgatherv, everyone(comm), sendbuf, sendcount, sendtype, recvbuf,
                    recvcounts, displs, recvtype, comm, request);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::alltoall)) return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return fan(PMPI_Alltoall, everyone(comm), true, sendbuf, sendcount, sendtype, recvbuf, recvcount,
             recvtype, comm);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::alltoall)) return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  return fan(PMPI_Ialltoall, everyone(comm), true, sendbuf, sendcount, sendtype, recvbuf, recvcount,
             recvtype, comm, request);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::alltoallv)) return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  return alltoallv(PMPI_Alltoallv, everyone(comm), sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                   recvcounts, rdispls, recvtype, comm);
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::alltoallv)) return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request);
  return alltoallv(PMPI_Ialltoallv, everyone(comm), sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                   recvcounts, rdispls, recvtype, comm, request);
}

int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  if (hot::plain_collective()) return PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
  return alltoallw(PMPI_Alltoallw, everyone(comm), sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                   recvcounts, rdispls, recvtypes, comm);
}

int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request* request) {
  if (hot::plain_collective()) return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request);
  return alltoallw(PMPI_Ialltoallw, everyone(comm), sendbuf, sendcounts, sdispls, sendtypes,
                   recvbuf, recvcounts, rdispls, recvtypes, comm, request);
}

}  // extern "C"
