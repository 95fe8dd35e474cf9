// Ranks in pairs (0-1, 2-3, ...) for the point-to-point suites, so each runs on 2 ranks or 4
// (2 per GPU on 2 GPUs). Errors come back as return codes.
#pragma once

#include <ferry/ferry_mpi.h>
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

// Lets the interposer finish what it still holds (requests the application freed while active
// complete in the calls that follow): calls into it until nothing is pending, at most a million
// times; returns what is left.
inline long pending_after_progress() {
  for (int i = 0; i < 1000000 && ferry_mpi_pending() > 0; ++i) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, 9999, pair_comm(), &flag, MPI_STATUS_IGNORE);
  }
  return ferry_mpi_pending();
}
