// Persistent requests that Ferry starts itself.
//
// MPI_Start normally starts MPI's own persistent request (a staged GPU send first packs into the
// request's staging buffer). Two kinds of start cannot go that way:
//  - a persistent GPU send that goes by a stub method (IPC, or local to this process): a fixed MPI
//    request cannot carry a stub in place of the data, so the stub goes out with a non-blocking
//    send (transport::send), whose request does the work;
//  - a persistent receive whose message a probe has already taken (early.hpp): MPI would never
//    match it again, so the message is delivered at once and a completed generalized request
//    stands for the receive;
//  - a persistent collective on GPU buffers (MPI-4's MPI_*_init, Open MPI's MPIX_*_init), made of
//    Ferry's own messages (coll_pairs.hpp) at each start.
// The application's handle then stays inactive in MPI, and the inner request stands in for it
// until it completes. MPI treats an inactive persistent request as complete (or, in the "any" and
// "some" forms, as null), so every wait and test swaps the inner handles into the array for the
// call and the application's handles back afterwards (Swap); Request_get_status, Cancel and
// Request_free go to the inner request too.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <vector>

#include <ferry/transport.hpp>

#include "mpi/hot.hpp"

namespace ferry::mpi_detail::persistent {

namespace transport = ferry::transport;

// What the init call was given. The translated type is kept: the application may free its
// datatype while the request lives.
struct Args {
  bool recv = false;
  // The buffer, decided once at init (sends: with the method, for every start).
  transport::Route route;
  int peer = 0;  // destination or source
  int tag = 0;
  MPI_Comm comm = MPI_COMM_NULL;
  transport::Mode mode = transport::Mode::standard;
  // MPI_Bsend_init of GPU data: every start packs into `staging` (`bytes` long) and sends it with
  // MPI_Ibsend. (Open MPI 4.1.6 restarts a persistent buffered send with the wrong data: from
  // the second MPI_Start on, the receiver gets zeros.)
  bool buffered = false;
  void* staging = nullptr;
  int bytes = 0;
  // A persistent collective made of Ferry's messages (coll_pairs.hpp): each start runs it, and the
  // generalized request it returns stands in. The handle is an inactive request of MPI's own.
  std::function<int(MPI_Request*)> collective;
};

// MPI_Send_init & co. (GPU buffers) and MPI_Recv_init (while the stub protocol is on).
void remember(MPI_Request r, Args a);
// MPI_Request_free of `r`: forgets it. An active stand-in is handed to Ferry's progress (a send
// over IPC) or freed (a delivered receive). Returns false if `r` was not remembered.
bool forget(MPI_Request r);
// MPI_Comm_free: persistent sends on `comm` go back to MPI's own request (which keeps the
// communicator alive); Ferry no longer uses the handle.
void comm_freed(MPI_Comm comm);

// MPI_Start of `r`: true if Ferry started it itself (*rc: the MPI result); false: start it in MPI.
bool start(MPI_Request r, int* rc);
// The inner request standing for `r` while it is active; MPI_REQUEST_NULL if none.
MPI_Request inner(MPI_Request r);

// Swaps the inner requests into a wait or test call's array for the call, and back: a slot whose
// inner request completed (MPI set it to MPI_REQUEST_NULL) gets the application's handle back,
// now inactive; a slot still active gets it back too. A no-op when no stand-in is active.
class Swap {
 public:
  Swap(int n, MPI_Request* array);
  ~Swap();
  Swap(const Swap&) = delete;
  Swap& operator=(const Swap&) = delete;

 private:
  MPI_Request* array_;
  std::vector<std::pair<int, MPI_Request>> swapped_;  // (slot, the application's handle)
};

}  // namespace ferry::mpi_detail::persistent
