// bench/local_rank.hpp — a rank's place on its node, for the benchmarks that give each rank a GPU
// (node-local rank % GPUs): from the launcher's environment before MPI_Init (so that what MPI and
// Ferry do there runs on that GPU), and from MPI afterwards (where the launcher did not say).
#pragma once

#include <mpi.h>

#include <cstdlib>

namespace bench {

// The node-local rank the launcher exported, or -1.
inline int env_local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "PMI_LOCAL_RANK",
                        "MV2_COMM_WORLD_LOCAL_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return -1;
}

// The rank within `comm`'s shared-memory node (collective).
inline int node_rank(MPI_Comm comm) {
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int r = 0;
  MPI_Comm_rank(node, &r);
  MPI_Comm_free(&node);
  return r;
}

}  // namespace bench
