// Fortran entries of the topology constructors that Ferry reorders (reorder*.cpp; fortran.hpp says
// why Fortran needs entries of its own under Open MPI): without them a Fortran program's
// MPI_Cart_create(..., reorder = .true., ...) would reach PMPI_Cart_create and never be reordered.
//
// LOGICAL arguments arrive as default integers (non-zero is true; Open MPI's own bindings read
// them the same way), and the weight arrays may be Open MPI's MPI_UNWEIGHTED / MPI_WEIGHTS_EMPTY
// common blocks, which become the C sentinels.
#include "mpi/fortran.hpp"

#if defined(OPEN_MPI) && OPEN_MPI

extern "C" {
extern char mpi_fortran_unweighted_ __attribute__((weak));
extern char mpi_fortran_unweighted __attribute__((weak));
extern char mpi_fortran_unweighted__ __attribute__((weak));
extern char MPI_FORTRAN_UNWEIGHTED __attribute__((weak));
extern char mpi_fortran_weights_empty_ __attribute__((weak));
extern char mpi_fortran_weights_empty __attribute__((weak));
extern char mpi_fortran_weights_empty__ __attribute__((weak));
extern char MPI_FORTRAN_WEIGHTS_EMPTY __attribute__((weak));
}

using namespace ferry::mpi_detail::fortran;
using ferry::mpi_detail::fortran::F;

namespace {

// A Fortran weight array as C sees it: MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY for their sentinels.
const int* weights(const F* w) {
  if (is_sentinel(w, &mpi_fortran_unweighted_, &mpi_fortran_unweighted, &mpi_fortran_unweighted__,
             &MPI_FORTRAN_UNWEIGHTED))
    return MPI_UNWEIGHTED;
  if (is_sentinel(w, &mpi_fortran_weights_empty_, &mpi_fortran_weights_empty,
             &mpi_fortran_weights_empty__, &MPI_FORTRAN_WEIGHTS_EMPTY))
    return MPI_WEIGHTS_EMPTY;
  return w;
}

// n LOGICALs as C ints of 0 or 1.
std::vector<int> logicals(const F* f, int n) {
  std::vector<int> c(static_cast<std::size_t>(n > 0 ? n : 0));
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = f[i] != 0 ? 1 : 0;
  return c;
}

// Runs a constructor with a C output communicator and stores it back as a Fortran handle.
template <class Make>
int make_comm(F* out, Make make) {
  MPI_Comm c = MPI_COMM_NULL;
  const int rc = make(&c);
  *out = MPI_Comm_c2f(c);
  return rc;
}

}  // namespace

FERRY_FORTRAN(mpi_cart_create, MPI_CART_CREATE,
              (F* comm_old, F* ndims, F* dims, F* periods, F* reorder, F* comm_cart, F* ierror)) {
  entry(ierror, [&] {
    const std::vector<int> per = logicals(periods, *ndims);
    return make_comm(comm_cart, [&](MPI_Comm* c) {
      return MPI_Cart_create(comm(comm_old), *ndims, dims, per.data(), *reorder != 0 ? 1 : 0, c);
    });
  });
}

FERRY_FORTRAN(mpi_graph_create, MPI_GRAPH_CREATE,
              (F* comm_old, F* nnodes, F* index, F* edges, F* reorder, F* comm_graph, F* ierror)) {
  entry(ierror, [&] {
    return make_comm(comm_graph, [&](MPI_Comm* c) {
      return MPI_Graph_create(comm(comm_old), *nnodes, index, edges, *reorder != 0 ? 1 : 0, c);
    });
  });
}

FERRY_FORTRAN(mpi_dist_graph_create_adjacent, MPI_DIST_GRAPH_CREATE_ADJACENT,
              (F* comm_old, F* indegree, F* sources, F* sourceweights, F* outdegree,
               F* destinations, F* destweights, F* info, F* reorder, F* comm_dist_graph,
               F* ierror)) {
  entry(ierror, [&] {
    return make_comm(comm_dist_graph, [&](MPI_Comm* c) {
      return MPI_Dist_graph_create_adjacent(comm(comm_old), *indegree, sources,
                                            weights(sourceweights), *outdegree, destinations,
                                            weights(destweights), MPI_Info_f2c(*info),
                                            *reorder != 0 ? 1 : 0, c);
    });
  });
}

FERRY_FORTRAN(mpi_dist_graph_create, MPI_DIST_GRAPH_CREATE,
              (F* comm_old, F* n, F* sources, F* degrees, F* destinations, F* w, F* info,
               F* reorder, F* comm_dist_graph, F* ierror)) {
  entry(ierror, [&] {
    return make_comm(comm_dist_graph, [&](MPI_Comm* c) {
      return MPI_Dist_graph_create(comm(comm_old), *n, sources, degrees, destinations, weights(w),
                                   MPI_Info_f2c(*info), *reorder != 0 ? 1 : 0, c);
    });
  });
}

#endif
