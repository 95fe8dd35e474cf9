// Fortran entries of the collectives (fortran.hpp says why and how): blocking, non-blocking and
// neighbourhood forms, each converting its arguments and calling Ferry's C collective.
//
// The w-forms convert their datatype arrays into C arrays that live for the call only, as Open
// MPI's own Fortran bindings do: its non-blocking collectives and Ferry's GPU path read them when
// the call is made.
#include "mpi/fortran.hpp"

#if defined(OPEN_MPI) && OPEN_MPI

using namespace ferry::mpi_detail::fortran;
using ferry::mpi_detail::fortran::F;

namespace {

// The processes a w-collective's arrays have an entry for: the group, or an intercommunicator's
// remote group.
int peers(MPI_Comm c) {
  int inter = 0, n = 0;
  PMPI_Comm_test_inter(c, &inter);
  if (inter) {
    PMPI_Comm_remote_size(c, &n);
  } else {
    PMPI_Comm_size(c, &n);
  }
  return n;
}

// A process topology's in- and out-degree (the neighbourhood collectives' array lengths).
void degrees(MPI_Comm c, int* in, int* out) {
  int kind = MPI_UNDEFINED;
  *in = *out = 0;
  PMPI_Topo_test(c, &kind);
  if (kind == MPI_CART) {
    int dims = 0;
    PMPI_Cartdim_get(c, &dims);
    *in = *out = 2 * dims;
  } else if (kind == MPI_GRAPH) {
    int me = 0;
    PMPI_Comm_rank(c, &me);
    PMPI_Graph_neighbors_count(c, me, in);
    *out = *in;
  } else if (kind == MPI_DIST_GRAPH) {
    int weighted = 0;
    PMPI_Dist_graph_neighbors_count(c, in, out, &weighted);
  }
}

}  // namespace

// Each signature family once: its parameters and the C arguments they become (the communicator,
// the request and ierror follow).
#define BCAST_P() void *b, F *n, F *t, F *root
#define BCAST_A() buffer(b), *n, type(t), *root
#define REDUCE_P() void *s, void *r, F *n, F *t, F *o, F *root
#define REDUCE_A() buffer(s), buffer(r), *n, type(t), op(o), *root
#define ALLREDUCE_P() void *s, void *r, F *n, F *t, F *o
#define ALLREDUCE_A() buffer(s), buffer(r), *n, type(t), op(o)
#define RSCATTER_P() void *s, void *r, F *counts, F *t, F *o
#define RSCATTER_A() buffer(s), buffer(r), counts, type(t), op(o)
#define GATHER_P() void *s, F *sn, F *st, void *r, F *rn, F *rt, F *root
#define GATHER_A() buffer(s), *sn, type(st), buffer(r), *rn, type(rt), *root
#define GATHERV_P() void *s, F *sn, F *st, void *r, F *rcounts, F *displs, F *rt, F *root
#define GATHERV_A() buffer(s), *sn, type(st), buffer(r), rcounts, displs, type(rt), *root
#define SCATTERV_P() void *s, F *scounts, F *displs, F *st, void *r, F *rn, F *rt, F *root
#define SCATTERV_A() buffer(s), scounts, displs, type(st), buffer(r), *rn, type(rt), *root
#define ALLGATHER_P() void *s, F *sn, F *st, void *r, F *rn, F *rt
#define ALLGATHER_A() buffer(s), *sn, type(st), buffer(r), *rn, type(rt)
#define ALLGATHERV_P() void *s, F *sn, F *st, void *r, F *rcounts, F *displs, F *rt
#define ALLGATHERV_A() buffer(s), *sn, type(st), buffer(r), rcounts, displs, type(rt)
#define ALLTOALLV_P() void *s, F *scounts, F *sdispls, F *st, void *r, F *rcounts, F *rdispls, F *rt
#define ALLTOALLV_A() buffer(s), scounts, sdispls, type(st), buffer(r), rcounts, rdispls, type(rt)

#define FERRY_FORTRAN_COLL(lower, UPPER, C, P, A)                    \
  FERRY_FORTRAN(lower, UPPER, (P(), F * c, F * ierror)) {              \
    entry(ierror, [&] { return C(A(), comm(c)); });                    \
  }
#define FERRY_FORTRAN_ICOLL(lower, UPPER, C, P, A)                   \
  FERRY_FORTRAN(lower, UPPER, (P(), F * c, F * req, F * ierror)) {     \
    entry(ierror, [&] {                                              \
      MPI_Request q = MPI_REQUEST_NULL;                              \
      const int rc = C(A(), comm(c), &q);                              \
      if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(q);              \
      return rc;                                                     \
    });                                                              \
  }
// `Name`: the C name after MPI_ (MPI_Bcast); the non-blocking one is MPI_I + `lower`.
#define FERRY_FORTRAN_BOTH(lower, UPPER, Name, P, A)                    \
  FERRY_FORTRAN_COLL(mpi_##lower, MPI_##UPPER, MPI_##Name, P, A)        \
  FERRY_FORTRAN_ICOLL(mpi_i##lower, MPI_I##UPPER, MPI_I##lower, P, A)

FERRY_FORTRAN_BOTH(bcast, BCAST, Bcast, BCAST_P, BCAST_A)
FERRY_FORTRAN_BOTH(reduce, REDUCE, Reduce, REDUCE_P, REDUCE_A)
FERRY_FORTRAN_BOTH(allreduce, ALLREDUCE, Allreduce, ALLREDUCE_P, ALLREDUCE_A)
FERRY_FORTRAN_BOTH(scan, SCAN, Scan, ALLREDUCE_P, ALLREDUCE_A)
FERRY_FORTRAN_BOTH(exscan, EXSCAN, Exscan, ALLREDUCE_P, ALLREDUCE_A)
FERRY_FORTRAN_BOTH(reduce_scatter, REDUCE_SCATTER, Reduce_scatter, RSCATTER_P, RSCATTER_A)
FERRY_FORTRAN_BOTH(reduce_scatter_block, REDUCE_SCATTER_BLOCK, Reduce_scatter_block, ALLREDUCE_P, ALLREDUCE_A)
FERRY_FORTRAN_BOTH(gather, GATHER, Gather, GATHER_P, GATHER_A)
FERRY_FORTRAN_BOTH(scatter, SCATTER, Scatter, GATHER_P, GATHER_A)
FERRY_FORTRAN_BOTH(gatherv, GATHERV, Gatherv, GATHERV_P, GATHERV_A)
FERRY_FORTRAN_BOTH(scatterv, SCATTERV, Scatterv, SCATTERV_P, SCATTERV_A)
FERRY_FORTRAN_BOTH(allgather, ALLGATHER, Allgather, ALLGATHER_P, ALLGATHER_A)
FERRY_FORTRAN_BOTH(alltoall, ALLTOALL, Alltoall, ALLGATHER_P, ALLGATHER_A)
FERRY_FORTRAN_BOTH(allgatherv, ALLGATHERV, Allgatherv, ALLGATHERV_P, ALLGATHERV_A)
FERRY_FORTRAN_BOTH(alltoallv, ALLTOALLV, Alltoallv, ALLTOALLV_P, ALLTOALLV_A)
FERRY_FORTRAN_BOTH(neighbor_allgather, NEIGHBOR_ALLGATHER, Neighbor_allgather, ALLGATHER_P, ALLGATHER_A)
FERRY_FORTRAN_BOTH(neighbor_alltoall, NEIGHBOR_ALLTOALL, Neighbor_alltoall, ALLGATHER_P, ALLGATHER_A)
FERRY_FORTRAN_BOTH(neighbor_allgatherv, NEIGHBOR_ALLGATHERV, Neighbor_allgatherv, ALLGATHERV_P, ALLGATHERV_A)
FERRY_FORTRAN_BOTH(neighbor_alltoallv, NEIGHBOR_ALLTOALLV, Neighbor_alltoallv, ALLTOALLV_P, ALLTOALLV_A)

// The w-forms: one datatype per process (per neighbour), converted first.
#define ALLTOALLW_P() void *s, F *scounts, F *sdispls, F *stypes, void *r, F *rcounts, F *rdispls, F *rtypes
#define NALLTOALLW_P() \
  void *s, F *scounts, MPI_Aint *sdispls, F *stypes, void *r, F *rcounts, MPI_Aint *rdispls, F *rtypes
#define ALLTOALLW_A() buffer(s), scounts, sdispls, st.data(), buffer(r), rcounts, rdispls, rt.data()

template <class Call>
int alltoallw(MPI_Comm c, const F* stypes, const F* rtypes, Call call) {
  const int n = peers(c);
  const std::vector<MPI_Datatype> st = types(stypes, n), rt = types(rtypes, n);
  return call(st, rt);
}
template <class Call>
int neighbor_alltoallw(MPI_Comm c, const F* stypes, const F* rtypes, Call call) {
  int in = 0, out = 0;
  degrees(c, &in, &out);
  const std::vector<MPI_Datatype> st = types(stypes, out), rt = types(rtypes, in);
  return call(st, rt);
}
#define FERRY_FORTRAN_IW(lower, UPPER, C, P, HOW)                                              \
  FERRY_FORTRAN(lower, UPPER, (P(), F * c, F * req, F * ierror)) {                               \
    entry(ierror, [&] {                                                                        \
      return HOW(comm(c), stypes, rtypes, [&](const auto& st, const auto& rt) {                \
        MPI_Request q = MPI_REQUEST_NULL;                                                      \
        const int rc = C(ALLTOALLW_A(), comm(c), &q);                                            \
        if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(q);                                      \
        return rc;                                                                             \
      });                                                                                      \
    });                                                                                        \
  }

FERRY_FORTRAN(mpi_alltoallw, MPI_ALLTOALLW, (ALLTOALLW_P(), F* c, F* ierror)) {
  entry(ierror, [&] {
    return alltoallw(comm(c), stypes, rtypes, [&](const auto& st, const auto& rt) {
      return MPI_Alltoallw(ALLTOALLW_A(), comm(c));
    });
  });
}
FERRY_FORTRAN_IW(mpi_ialltoallw, MPI_IALLTOALLW, MPI_Ialltoallw, ALLTOALLW_P, alltoallw)
FERRY_FORTRAN(mpi_neighbor_alltoallw, MPI_NEIGHBOR_ALLTOALLW, (NALLTOALLW_P(), F* c, F* ierror)) {
  entry(ierror, [&] {
    return neighbor_alltoallw(comm(c), stypes, rtypes, [&](const auto& st, const auto& rt) {
      return MPI_Neighbor_alltoallw(ALLTOALLW_A(), comm(c));
    });
  });
}
FERRY_FORTRAN_IW(mpi_ineighbor_alltoallw, MPI_INEIGHBOR_ALLTOALLW, MPI_Ineighbor_alltoallw, NALLTOALLW_P,
                 neighbor_alltoallw)

#endif  // OPEN_MPI
