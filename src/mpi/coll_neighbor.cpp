// Neighbourhood collectives on GPU buffers (coll.hpp): the allgather, alltoall (v, w) templates of
// coll_all.hpp over the neighbours of a process topology.
#include "mpi/coll_all.hpp"

using namespace ferry::mpi_detail;
using namespace ferry::mpi_detail::coll;

extern "C" {

int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_allgather)) return PMPI_Neighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return fan(PMPI_Neighbor_allgather, neighbors(comm), false, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm);
}

int MPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_allgather)) return PMPI_Ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  return fan(PMPI_Ineighbor_allgather, neighbors(comm), false, sendbuf, sendcount, sendtype,
             recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, const int recvcounts[], const int displs[],
                            MPI_Datatype recvtype, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_allgatherv)) return PMPI_Neighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
  return allgatherv(PMPI_Neighbor_allgatherv, neighbors(comm), sendbuf, sendcount, sendtype,
                    recvbuf, recvcounts, displs, recvtype, comm);
}

int MPI_Ineighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_allgatherv)) return PMPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
  return allgatherv(PMPI_Ineighbor_allgatherv, neighbors(comm), sendbuf, sendcount, sendtype,
                    recvbuf, recvcounts, displs, recvtype, comm, request);
}

int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_alltoall)) return PMPI_Neighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return fan(PMPI_Neighbor_alltoall, neighbors(comm), true, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm);
}

int MPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_alltoall)) return PMPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  return fan(PMPI_Ineighbor_alltoall, neighbors(comm), true, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm, request);
}

int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                           MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                           const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_alltoallv)) return PMPI_Neighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  return alltoallv(PMPI_Neighbor_alltoallv, neighbors(comm), sendbuf, sendcounts, sdispls, sendtype,
                   recvbuf, recvcounts, rdispls, recvtype, comm);
}

int MPI_Ineighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                            MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Request* request) {
  if (hot::plain_collective(sendbuf, sendtype, recvbuf, recvtype) && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_alltoallv)) return PMPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request);
  return alltoallv(PMPI_Ineighbor_alltoallv, neighbors(comm), sendbuf, sendcounts, sdispls,
                   sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request);
}

int MPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                           const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                           const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                           MPI_Comm comm) {
  if (hot::plain_collective() && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_alltoallw)) return PMPI_Neighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
  return alltoallw(PMPI_Neighbor_alltoallw, neighbors(comm), sendbuf, sendcounts, sdispls,
                   sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
}

int MPI_Ineighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                            const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                            MPI_Request* request) {
  if (hot::plain_collective() && pairs::mpi_takes(comm, sendbuf, pairs::Call::neighbor_alltoallw)) return PMPI_Ineighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request);
  return alltoallw(PMPI_Ineighbor_alltoallw, neighbors(comm), sendbuf, sendcounts, sdispls,
                   sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request);
}

}  // extern "C"
