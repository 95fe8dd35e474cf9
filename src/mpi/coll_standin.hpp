// Persistent collectives on host mirrors (coll_standin.cpp).
//
// A non-CUDA-aware MPI's own persistent init keeps the buffer pointers it is given and reads them
// at every start: GPU memory there crashes it. Where any process of the communicator has GPU
// memory in the call (agreed at init, as a persistent collective must be made alike everywhere),
// every process makes a stand-in instead (persistent.hpp): each MPI_Start runs the call's
// non-blocking form through Ferry (coll.hpp: GPU buffers mirrored, inputs copied in at the start,
// outputs back when the start completes) on a private duplicate of the communicator, with
// duplicates of the derived types (the application may free its own after the init). MPI defines
// a persistent collective's effect as its non-blocking form's, so the results are the same.
// Elsewhere the MPI's own init.
#pragma once

#include <mpi.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace ferry::mpi_detail::coll::standin {

// What a stand-in keeps for its starts: the private communicator and the types it uses.
class Kept {
 public:
  Kept() = default;
  ~Kept();
  Kept(const Kept&) = delete;
  Kept& operator=(const Kept&) = delete;
  MPI_Comm comm() const { return comm_; }
  // A duplicate of a derived type (one per type), a named type as it is.
  MPI_Datatype keep(MPI_Datatype type);
  // The same for `n` types; the array lives as long as this.
  const MPI_Datatype* keep(const MPI_Datatype* types, int n);
  // Makes comm() a private duplicate of `comm`, serving meanwhile. Collective over `comm` (while
  // every process makes the init call); throws ferry::Error.
  void duplicate(MPI_Comm comm);

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::map<MPI_Datatype, MPI_Datatype> types_;
  std::vector<std::unique_ptr<MPI_Datatype[]>> arrays_;
};

using Start = std::function<int(MPI_Request*)>;

// The init call of a persistent collective at this process: `gpu_here` says whether its buffers
// hold GPU memory here. Collective over `comm`: if no process has GPU memory in the call (and no
// test forces the stand-ins), `own()` makes the MPI's own request; else `plan(kept)` returns what
// each start runs (the non-blocking form on kept.comm() and kept types, into the request it is
// given), and `*request` becomes a stand-in that runs it. Throws ferry::Error.
int make(MPI_Comm comm, bool gpu_here, MPI_Request* request, const std::function<int()>& own,
         const std::function<Start(Kept&)>& plan);

// Makes `*request` a persistent request of `comm` whose every MPI_Start runs `start` (persistent.hpp).
int install(MPI_Comm comm, MPI_Request* request, Start start);

// Stand-ins made so far (ferry_mpi_persistent_standins).
long made();

}  // namespace ferry::mpi_detail::coll::standin
