// Persistent collectives on GPU buffers: MPI-4's MPI_Alltoall(v/w)_init and the neighbourhood
// alltoall(v/w) and allgather(v) _init (where the MPI's header is MPI-4), and Open MPI 4.1's
// MPIX_ forms of the same (its mpi-ext.h, pcollreq). The init call plans the messages once
// (peers, blocks, the private communicator); each MPI_Start runs them (coll_pairs.hpp, through
// persistent.hpp's stand-ins), and any wait or test completes the start. Host buffers, in place,
// and arguments the MPI would refuse go to the MPI's own init, as every process agrees.
#include <tuple>
#include <utility>

#include "mpi/coll_all.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace ferry::mpi_detail::coll {
namespace {

// The MPI's own init `Init`, called with a template's arguments, the last of them a Persist;
// `Start`, Ferry's non-blocking entry that a stand-in on host mirrors runs (coll_standin.hpp).
template <auto Init, auto Start>
struct WithInfo {
  static constexpr auto start = Start;
  template <class... A>
  int operator()(A... a) const {
    return call(std::make_tuple(a...), std::make_index_sequence<sizeof...(A) - 1>{});
  }
  template <class Tuple, std::size_t... I>
  static int call(const Tuple& t, std::index_sequence<I...>) {
    const pairs::Persist& p = std::get<sizeof...(I)>(t);
    return Init(std::get<I>(t)..., p.info, p.request);
  }
};

// Where nothing can be Ferry's (no GPU, no protocol test), the MPI's own init at once. The test
// must give the same answer at every process: the init's path is agreed (by_pairs).
bool mpi_own() { return !hot::gpu && !hot::host_sends; }

}  // namespace
}  // namespace ferry::mpi_detail::coll

using namespace ferry::mpi_detail;
using namespace ferry::mpi_detail::coll;
using pairs::Persist;

// The eight init calls under the names P_* (MPI, MPIX) over the MPI's own PP_* (PMPI, PMPIX).
#define FERRY_PERSISTENT_COLLECTIVES(P, PP)                                                            \
  int P##_Alltoall_init(const void* sb, int sc, MPI_Datatype st, void* rb, int rc, MPI_Datatype rt,    \
                        MPI_Comm comm, MPI_Info info, MPI_Request* req) {                              \
    if (mpi_own()) return PP##_Alltoall_init(sb, sc, st, rb, rc, rt, comm, info, req); \
    return fan(WithInfo<PP##_Alltoall_init, MPI_Ialltoall>{}, everyone(comm), true, sb, sc, st, rb, rc, rt, comm,    \
               Persist{info, req});                                                                    \
  }                                                                                                    \
  int P##_Neighbor_alltoall_init(const void* sb, int sc, MPI_Datatype st, void* rb, int rc,            \
                                 MPI_Datatype rt, MPI_Comm comm, MPI_Info info, MPI_Request* req) {    \
    if (mpi_own())                                                         \
      return PP##_Neighbor_alltoall_init(sb, sc, st, rb, rc, rt, comm, info, req);                     \
    return fan(WithInfo<PP##_Neighbor_alltoall_init, MPI_Ineighbor_alltoall>{}, neighbors(comm), true, sb, sc, st, rb, rc, rt, \
               comm, Persist{info, req});                                                              \
  }                                                                                                    \
  int P##_Neighbor_allgather_init(const void* sb, int sc, MPI_Datatype st, void* rb, int rc,           \
                                  MPI_Datatype rt, MPI_Comm comm, MPI_Info info, MPI_Request* req) {   \
    if (mpi_own())                                                         \
      return PP##_Neighbor_allgather_init(sb, sc, st, rb, rc, rt, comm, info, req);                    \
    return fan(WithInfo<PP##_Neighbor_allgather_init, MPI_Ineighbor_allgather>{}, neighbors(comm), false, sb, sc, st, rb, rc,   \
               rt, comm, Persist{info, req});                                                          \
  }                                                                                                    \
  int P##_Neighbor_allgatherv_init(const void* sb, int sc, MPI_Datatype st, void* rb, const int rcs[], \
                                   const int displs[], MPI_Datatype rt, MPI_Comm comm, MPI_Info info,  \
                                   MPI_Request* req) {                                                 \
    if (mpi_own())                                                         \
      return PP##_Neighbor_allgatherv_init(sb, sc, st, rb, rcs, displs, rt, comm, info, req);          \
    return allgatherv(WithInfo<PP##_Neighbor_allgatherv_init, MPI_Ineighbor_allgatherv>{}, neighbors(comm), sb, sc, st, rb, rcs, \
                      displs, rt, comm, Persist{info, req});                                           \
  }                                                                                                    \
  int P##_Alltoallv_init(const void* sb, const int scs[], const int sds[], MPI_Datatype st, void* rb,  \
                         const int rcs[], const int rds[], MPI_Datatype rt, MPI_Comm comm,             \
                         MPI_Info info, MPI_Request* req) {                                            \
    if (mpi_own())                                                         \
      return PP##_Alltoallv_init(sb, scs, sds, st, rb, rcs, rds, rt, comm, info, req);                 \
    return alltoallv(WithInfo<PP##_Alltoallv_init, MPI_Ialltoallv>{}, everyone(comm), sb, scs, sds, st, rb, rcs, rds,  \
                     rt, comm, Persist{info, req});                                                    \
  }                                                                                                    \
  int P##_Neighbor_alltoallv_init(const void* sb, const int scs[], const int sds[], MPI_Datatype st,   \
                                  void* rb, const int rcs[], const int rds[], MPI_Datatype rt,         \
                                  MPI_Comm comm, MPI_Info info, MPI_Request* req) {                    \
    if (mpi_own())                                                         \
      return PP##_Neighbor_alltoallv_init(sb, scs, sds, st, rb, rcs, rds, rt, comm, info, req);        \
    return alltoallv(WithInfo<PP##_Neighbor_alltoallv_init, MPI_Ineighbor_alltoallv>{}, neighbors(comm), sb, scs, sds, st, rb,  \
                     rcs, rds, rt, comm, Persist{info, req});                                          \
  }                                                                                                    \
  int P##_Alltoallw_init(const void* sb, const int scs[], const int sds[], const MPI_Datatype sts[],   \
                         void* rb, const int rcs[], const int rds[], const MPI_Datatype rts[],         \
                         MPI_Comm comm, MPI_Info info, MPI_Request* req) {                             \
    if (mpi_own()) return PP##_Alltoallw_init(sb, scs, sds, sts, rb, rcs, rds, rts, comm, info, req); \
    return alltoallw(WithInfo<PP##_Alltoallw_init, MPI_Ialltoallw>{}, everyone(comm), sb, scs, sds, sts, rb, rcs, rds, \
                     rts, comm, Persist{info, req});                                                   \
  }                                                                                                    \
  int P##_Neighbor_alltoallw_init(const void* sb, const int scs[], const MPI_Aint sds[],               \
                                  const MPI_Datatype sts[], void* rb, const int rcs[],                 \
                                  const MPI_Aint rds[], const MPI_Datatype rts[], MPI_Comm comm,       \
                                  MPI_Info info, MPI_Request* req) {                                   \
    if (mpi_own())                                                                       \
      return PP##_Neighbor_alltoallw_init(sb, scs, sds, sts, rb, rcs, rds, rts, comm, info, req);      \
    return alltoallw(WithInfo<PP##_Neighbor_alltoallw_init, MPI_Ineighbor_alltoallw>{}, neighbors(comm), sb, scs, sds, sts, rb, \
                     rcs, rds, rts, comm, Persist{info, req});                                         \
  }

extern "C" {

#if MPI_VERSION >= 4
FERRY_PERSISTENT_COLLECTIVES(MPI, PMPI)
#endif
#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
FERRY_PERSISTENT_COLLECTIVES(MPIX, PMPIX)
#endif

}  // extern "C"
