// The interposer's collectives on GPU buffers: each GPU buffer is mirrored in host memory with its
// own layout, so the system MPI runs the collective (reductions included, on any datatype)
// unchanged.
#include "mpi/common.hpp"

using namespace ferry::mpi_detail;

extern "C" {

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (!any_device({{buf, count, type}})) return PMPI_Bcast(buf, count, type, root, comm);
  try {
    const bool is_root = comm_rank(comm) == root;
    Mirror m(buf, count, type, is_root);
    int rc = PMPI_Bcast(m.ptr(), count, type, root, comm);
    if (rc == MPI_SUCCESS && !is_root) m.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

namespace {
using ReduceLike = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
int mirrored_reduce(ReduceLike fn, const void* sendbuf, void* recvbuf, int count,
                    MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  try {
    Mirror s(sendbuf, count, type, true);
    Mirror r(recvbuf, count, type, sendbuf == MPI_IN_PLACE);
    int rc = fn(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), r.ptr(), count, type, op, comm);
    if (rc == MPI_SUCCESS) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}
}  // namespace

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  if (!any_device({{sendbuf, count, type}, {recvbuf, count, type}}))
    return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
  return mirrored_reduce(PMPI_Allreduce, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
  if (!any_device({{sendbuf, count, type}, {recvbuf, count, type}}))
    return PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
  return mirrored_reduce(PMPI_Scan, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
  if (!any_device({{sendbuf, count, type}, {recvbuf, count, type}}))
    return PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
  return mirrored_reduce(PMPI_Exscan, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm) {
  const bool is_root = comm_rank(comm) == root;
  if (!any_device({{sendbuf, count, type}, {is_root ? recvbuf : nullptr, count, type}}))
    return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
  try {
    Mirror s(sendbuf, count, type, true);
    Mirror r(is_root ? recvbuf : nullptr, is_root ? count : 0, type, sendbuf == MPI_IN_PLACE);
    int rc = PMPI_Reduce(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), is_root ? r.ptr() : recvbuf,
                         count, type, op, root, comm);
    if (rc == MPI_SUCCESS && is_root) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const int n = comm_size(comm);
  if (!any_device({{sendbuf, sendcount, sendtype}, {recvbuf, recvcount * n, recvtype}}))
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  try {
    Mirror s(sendbuf, sendcount, sendtype, true);
    Mirror r(recvbuf, recvcount * n, recvtype, sendbuf == MPI_IN_PLACE);
    int rc = PMPI_Allgather(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), sendcount, sendtype,
                            r.ptr(), recvcount, recvtype, comm);
    if (rc == MPI_SUCCESS) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const int n = comm_size(comm);
  if (!any_device({{sendbuf, sendcount * n, sendtype}, {recvbuf, recvcount * n, recvtype}}))
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  try {
    Mirror s(sendbuf, sendcount * n, sendtype, true);
    Mirror r(recvbuf, recvcount * n, recvtype, sendbuf == MPI_IN_PLACE);
    int rc = PMPI_Alltoall(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), sendcount, sendtype,
                           r.ptr(), recvcount, recvtype, comm);
    if (rc == MPI_SUCCESS) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const bool is_root = comm_rank(comm) == root;
  const int rn = is_root ? recvcount * comm_size(comm) : 0;
  if (!any_device({{sendbuf, sendcount, sendtype}, {is_root ? recvbuf : nullptr, rn, recvtype}}))
    return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  try {
    Mirror s(sendbuf, sendcount, sendtype, true);
    Mirror r(is_root ? recvbuf : nullptr, rn, recvtype, sendbuf == MPI_IN_PLACE);
    int rc = PMPI_Gather(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), sendcount, sendtype,
                         is_root ? r.ptr() : recvbuf, recvcount, recvtype, root, comm);
    if (rc == MPI_SUCCESS && is_root) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const bool is_root = comm_rank(comm) == root;
  const int sn = is_root ? sendcount * comm_size(comm) : 0;
  if (!any_device({{is_root ? sendbuf : nullptr, sn, sendtype}, {recvbuf, recvcount, recvtype}}))
    return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  try {
    Mirror s(is_root ? sendbuf : nullptr, sn, sendtype, true);
    Mirror r(recvbuf, recvcount, recvtype, false);
    int rc = PMPI_Scatter(is_root ? s.ptr() : sendbuf, sendcount, sendtype, r.ptr(), recvcount,
                          recvtype, root, comm);
    if (rc == MPI_SUCCESS && recvbuf != MPI_IN_PLACE) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

}  // extern "C"
