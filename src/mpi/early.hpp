// Probes of IPC messages. A probe that meets a stub-sized message from a same-node process cannot
// tell its size without reading it, so it receives it ("takes it early"): the probe's status gets
// the real size, and the message waits here, per communicator, for the receive that matches it
// (or for MPI_Mrecv with the message handle that MPI_Mprobe returned, which is then Ferry's own).
// Receives look here first while anything waits. Limit: a receive from the same sender whose tag
// criteria also match an older message with another tag may get the early one first.
#pragma once

#include <mpi.h>

#include <ferry/transport.hpp>

#include "mpi/hot.hpp"

namespace ferry::mpi_detail::early {

namespace transport = ferry::transport;

bool any();

// After a probe matched (`st`): takes a stub-sized same-node message early; fixes `st`.
// `message`: for MPI_Mprobe/MPI_Improbe, the handle MPI returned, replaced by Ferry's own.
// Returns the MPI result; *taken says whether the message is now Ferry's.
int after_probe(MPI_Comm comm, MPI_Status* st, MPI_Message* message, bool* taken);

// A probe's answer from the messages taken early: true if one matches (its status in `st`; with
// `message`, the message is handed over as a Ferry handle).
bool probe(int source, int tag, MPI_Comm comm, MPI_Status* st, MPI_Message* message);

// Delivers a matching early message into the buffer: true if there was one (*rc, *st set).
bool recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
          MPI_Status* st, int* rc);
// The same into a target (a persistent receive keeps its translated type).
bool recv(const transport::Target& to, int source, int tag, MPI_Comm comm, MPI_Status* st, int* rc);
// The same for a Ferry message handle (from after_probe / probe); false if `message` is MPI's.
// `comm`: where the message came (for errors).
bool mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* st, int* rc,
           MPI_Comm* comm = nullptr);
// A request that is already complete with `st` and `rc` (an early message received by MPI_Irecv):
// its wait returns `rc`, raised on `comm`'s error handler.
int completed_request(const MPI_Status& st, int rc, MPI_Comm comm, MPI_Request* request);

// The communicator of each message MPI_Mprobe / MPI_Improbe matched (MPI's own handle), for its
// MPI_Mrecv: remembered by the probe, taken by the receive (MPI_COMM_NULL if not known).
void remember_message(MPI_Message m, MPI_Comm c);
MPI_Comm take_message(MPI_Message m);

}  // namespace ferry::mpi_detail::early
