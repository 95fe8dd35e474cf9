// tests/test_mpi_collectives_persistent.hpp — collectives catalogue: the persistent form of each
// call (MPI-4's MPI_*_init, Open MPI 4.1's MPIX_*_init), found from its non-blocking form: its init
// takes the same arguments and an MPI_Info before the request. Included by
// test_mpi_collectives.hpp, inside its namespace, after Case.
#pragma once

template <class Args, class NonBlocking>
inline void persistent_form(Case& c, NonBlocking nonblocking, Args args) {
#define FERRY_PERSISTENT(I, init)                                  \
  if constexpr (std::is_same_v<NonBlocking, decltype(&I)>)         \
    if (nonblocking == &I)                                         \
      c.persist = [=](void* s, void* r, MPI_Request* q) { return args(init, s, r, MPI_INFO_NULL, q); };
#if MPI_VERSION >= 4
  FERRY_PERSISTENT(MPI_Ibcast, MPI_Bcast_init)
  FERRY_PERSISTENT(MPI_Ireduce, MPI_Reduce_init)
  FERRY_PERSISTENT(MPI_Iallreduce, MPI_Allreduce_init)
  FERRY_PERSISTENT(MPI_Iscan, MPI_Scan_init)
  FERRY_PERSISTENT(MPI_Iexscan, MPI_Exscan_init)
  FERRY_PERSISTENT(MPI_Ireduce_scatter, MPI_Reduce_scatter_init)
  FERRY_PERSISTENT(MPI_Ireduce_scatter_block, MPI_Reduce_scatter_block_init)
  FERRY_PERSISTENT(MPI_Igather, MPI_Gather_init)
  FERRY_PERSISTENT(MPI_Igatherv, MPI_Gatherv_init)
  FERRY_PERSISTENT(MPI_Iscatter, MPI_Scatter_init)
  FERRY_PERSISTENT(MPI_Iscatterv, MPI_Scatterv_init)
  FERRY_PERSISTENT(MPI_Iallgather, MPI_Allgather_init)
  FERRY_PERSISTENT(MPI_Iallgatherv, MPI_Allgatherv_init)
  FERRY_PERSISTENT(MPI_Ialltoall, MPI_Alltoall_init)
  FERRY_PERSISTENT(MPI_Ialltoallv, MPI_Alltoallv_init)
  FERRY_PERSISTENT(MPI_Ialltoallw, MPI_Alltoallw_init)
  FERRY_PERSISTENT(MPI_Ineighbor_allgather, MPI_Neighbor_allgather_init)
  FERRY_PERSISTENT(MPI_Ineighbor_allgatherv, MPI_Neighbor_allgatherv_init)
  FERRY_PERSISTENT(MPI_Ineighbor_alltoall, MPI_Neighbor_alltoall_init)
  FERRY_PERSISTENT(MPI_Ineighbor_alltoallv, MPI_Neighbor_alltoallv_init)
  FERRY_PERSISTENT(MPI_Ineighbor_alltoallw, MPI_Neighbor_alltoallw_init)
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
  FERRY_PERSISTENT(MPI_Ibcast, MPIX_Bcast_init)
  FERRY_PERSISTENT(MPI_Ireduce, MPIX_Reduce_init)
  FERRY_PERSISTENT(MPI_Iallreduce, MPIX_Allreduce_init)
  FERRY_PERSISTENT(MPI_Iscan, MPIX_Scan_init)
  FERRY_PERSISTENT(MPI_Iexscan, MPIX_Exscan_init)
  FERRY_PERSISTENT(MPI_Ireduce_scatter, MPIX_Reduce_scatter_init)
  FERRY_PERSISTENT(MPI_Ireduce_scatter_block, MPIX_Reduce_scatter_block_init)
  FERRY_PERSISTENT(MPI_Igather, MPIX_Gather_init)
  FERRY_PERSISTENT(MPI_Igatherv, MPIX_Gatherv_init)
  FERRY_PERSISTENT(MPI_Iscatter, MPIX_Scatter_init)
  FERRY_PERSISTENT(MPI_Iscatterv, MPIX_Scatterv_init)
  FERRY_PERSISTENT(MPI_Iallgather, MPIX_Allgather_init)
  FERRY_PERSISTENT(MPI_Iallgatherv, MPIX_Allgatherv_init)
  FERRY_PERSISTENT(MPI_Ialltoall, MPIX_Alltoall_init)
  FERRY_PERSISTENT(MPI_Ialltoallv, MPIX_Alltoallv_init)
  FERRY_PERSISTENT(MPI_Ialltoallw, MPIX_Alltoallw_init)
  FERRY_PERSISTENT(MPI_Ineighbor_allgather, MPIX_Neighbor_allgather_init)
  FERRY_PERSISTENT(MPI_Ineighbor_allgatherv, MPIX_Neighbor_allgatherv_init)
  FERRY_PERSISTENT(MPI_Ineighbor_alltoall, MPIX_Neighbor_alltoall_init)
  FERRY_PERSISTENT(MPI_Ineighbor_alltoallv, MPIX_Neighbor_alltoallv_init)
  FERRY_PERSISTENT(MPI_Ineighbor_alltoallw, MPIX_Neighbor_alltoallw_init)
#else
  (void)c, (void)nonblocking, (void)args;
#endif
#undef FERRY_PERSISTENT
}
