// Point-to-point: what the send, receive, exchange and persistent entry points share. Each message
// gets its route once (transport::route: one type lookup, one memory decision; choose: the method),
// and the transport moves it; this layer keeps MPI's semantics: matching stays the MPI's (stubs and
// staged bytes travel on the application's communicator and tag), statuses are fixed to the real
// size, requests complete through any wait or test, errors go to the communicator's handler.
#pragma once

#include <ferry/transport.hpp>
#include <mpi.h>

#include <memory>

#include "mpi/boundary.hpp"
#include "mpi/requests.hpp"

namespace ferry::mpi_detail::p2p {

using Mode = transport::Mode;

// A blocking send call and its non-blocking form: while stub receives are pending, blocking calls
// are made as the non-blocking one plus a wait that serves them.
using SendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm);
using IsendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
struct SendKind {
  SendFn blocking;
  IsendFn nonblocking;
  Mode mode;
  bool rendezvous;  // may wait for its receiver (not bsend: it must complete locally)
};
extern const SendKind kSend, kSsend, kRsend, kBsend;

// The full paths of the MPI_* functions (their fast paths are in the entries): noexcept, errors
// through guard().
// Out of line, so that the entries' fast path is a few loads and a tail call, without their frames.
[[gnu::noinline]] int send(const SendKind& k, const void* buf, int count, MPI_Datatype type, int dest,
                           int tag, MPI_Comm comm) noexcept;
[[gnu::noinline]] int isend(const SendKind& k, const void* buf, int count, MPI_Datatype type, int dest,
                            int tag, MPI_Comm comm, MPI_Request* request) noexcept;
[[gnu::noinline]] int recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                           MPI_Status* status) noexcept;
[[gnu::noinline]] int irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                            MPI_Request* request) noexcept;

// What a send may do besides staging.
transport::Allow allow(const SendKind& k, bool blocking);

// A non-blocking receive, or a persistent one (`persistent`), or MPI_Imrecv: `post(buf, count,
// type)` issues the PMPI call. GPU buffers receive into staging (with room for a stub where one
// may come); host buffers that may get a stub are recorded so their completion fetches the data.
// Throws ferry::Error (the caller's guard reports it).
using Post = int (*)(void* buf, int count, MPI_Datatype type, void* ctx);
int post_receive(void* buf, int count, MPI_Datatype type, int source, MPI_Comm comm, bool persistent,
                 MPI_Request* request, Post post, void* ctx);

// After a receive into the application's host buffer (`to`): the message may be a stub.
int host_arrived(int rc, const transport::Target& to, MPI_Comm comm, MPI_Status* st);
// After a staged receive of GPU data (`to`) into `staging`: fetch a stub's data, or unpack.
int device_arrived(int rc, Staged& staging, const transport::Target& to, bool may_be_stub,
                   MPI_Comm comm, MPI_Status* st);

// A stub send of the transport, recorded under its request so that any completion finishes it.
int track(std::unique_ptr<transport::Outgoing> out, MPI_Request* request);

// The packed size as the int count of MPI_BYTE the staged message travels as.
int staged_bytes(i64 bytes);

}  // namespace ferry::mpi_detail::p2p
