// ferry_mpi_neighbor_alltoallv_init_ids (ferry/ferry_mpi.h): the persistent neighbourhood
// alltoallv with the values named by id, so that where its blocks between nodes are aggregated
// (coll_aggregate.hpp) a value crosses to a node once however many of its processes take it. Its
// result is MPI_Neighbor_alltoallv_init's; the ids only say which elements hold the same value.
// Every start runs as Ferry's messages, on host and GPU memory alike, whether or not the MPI has
// persistent collectives.
#include <ferry/ferry_mpi.h>
#include <ferry/registry.hpp>

#include "mpi/boundary.hpp"
#include "mpi/coll_pairs.hpp"

using namespace ferry::mpi_detail;

namespace {

// Whether `type` is one MPI may send: predefined, or derived and committed (through Ferry's entry,
// which the registry knows).
bool usable(MPI_Datatype type) {
  MPI_Aint lb = 0, extent = 0;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS) return false;
  try {
    return ferry::lookup(type) != nullptr;
  } catch (const ferry::Error&) {
    return false;
  }
}

// What MPI would answer to these arguments at this process (MPI_SUCCESS: nothing).
int refused(const void* sendbuf, const void* recvbuf, const int* sendcounts, const int* sdispls, const long long* sendids,
            MPI_Datatype sendtype, const int* recvcounts, const int* rdispls, MPI_Datatype recvtype,
            const coll::Degrees& d, MPI_Request* request) {
  if (!request) return MPI_ERR_REQUEST;
  if (sendbuf == MPI_IN_PLACE || recvbuf == MPI_IN_PLACE) return MPI_ERR_BUFFER;  // not for neighbourhood ones
  if ((d.out > 0 && (!sendcounts || !sdispls)) || (d.in > 0 && (!recvcounts || !rdispls))) return MPI_ERR_ARG;
  bool sends = false, receives = false;
  for (int i = 0; i < d.out; ++i) {
    if (sendcounts[i] < 0) return MPI_ERR_COUNT;
    sends = sends || sendcounts[i] > 0;
  }
  for (int j = 0; j < d.in; ++j) {
    if (recvcounts[j] < 0) return MPI_ERR_COUNT;
    receives = receives || recvcounts[j] > 0;
  }
  if ((sends && !usable(sendtype)) || (receives && !usable(recvtype))) return MPI_ERR_TYPE;
  if (sends && !sendids) return MPI_ERR_ARG;
  return MPI_SUCCESS;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int ferry_mpi_neighbor_alltoallv_init_ids(
    const void* sendbuf, const int sendcounts[], const int sdispls[], const long long sendids[],
    MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
    MPI_Comm comm, MPI_Info /*info*/, MPI_Request* request) {
  return guard(comm, [&]() -> int {
    if (comm == MPI_COMM_NULL) throw ferry::Error(MPI_ERR_COMM, "ferry_mpi_neighbor_alltoallv_init_ids: MPI_COMM_NULL");
    const coll::Degrees d = coll::neighbors(comm);
    if (!d.neighbourhood)
      throw ferry::Error(MPI_ERR_TOPOLOGY, "ferry_mpi_neighbor_alltoallv_init_ids: the communicator has no topology");
    // Every process learns whether any refused (each returns its own class, or MPI_ERR_OTHER), so
    // none waits for a plan the others do not make.
    const int mine = refused(sendbuf, recvbuf, sendcounts, sdispls, sendids, sendtype, recvcounts, rdispls, recvtype, d, request);
    int any = MPI_SUCCESS;
    {
      ServeWhileBlocked serving;
      const int rc = PMPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
      if (rc != MPI_SUCCESS) throw ferry::Error(rc, "ferry_mpi_neighbor_alltoallv_init_ids: agreement failed");
    }
    if (mine != MPI_SUCCESS) throw ferry::Error(mine, "ferry_mpi_neighbor_alltoallv_init_ids: arguments refused");
    if (any != MPI_SUCCESS)
      throw ferry::Error(MPI_ERR_OTHER, "ferry_mpi_neighbor_alltoallv_init_ids: another process's arguments were refused");
    const i64 se = coll::pairs::extent(sendtype), re = coll::pairs::extent(recvtype);
    coll::pairs::Plan plan;
    if (!coll::pairs::plan(
            comm, true, sendbuf, recvbuf,
            [&](std::size_t i) { return coll::pairs::block(sendbuf, sdispls[i] * se, sendcounts[i], sendtype); },
            [&](std::size_t j) { return coll::pairs::block(recvbuf, rdispls[j] * re, recvcounts[j], recvtype); },
            &plan))
      throw ferry::Error(MPI_ERR_ARG, "ferry_mpi_neighbor_alltoallv_init_ids: arguments refused");
    coll::pairs::Ids ids(static_cast<std::size_t>(d.out));
    for (int i = 0; i < d.out; ++i)
      if (sendcounts[i] > 0) ids[static_cast<std::size_t>(i)].assign(sendids + sdispls[i], sendids + sdispls[i] + sendcounts[i]);
    return coll::pairs::init(comm, std::move(plan), request, &ids);
  });
}
