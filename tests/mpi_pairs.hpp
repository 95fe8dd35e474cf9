// Ranks in pairs (0-1, 2-3, ...) for the point-to-point suites, so each runs on 2 ranks or 4
// (2 per GPU on 2 GPUs). Errors come back as return codes.
#pragma once

#include <mpi.h>

inline MPI_Comm pair_comm() {
  static MPI_Comm pair = [] {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, r / 2, r, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    return c;
  }();
  return pair;
}

// This rank's place in its pair: 0 or 1.
inline int pair_rank() {
  int r = 0;
  MPI_Comm_rank(pair_comm(), &r);
  return r;
}
