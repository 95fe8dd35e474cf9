// Sends: MPI_Send, MPI_Ssend, MPI_Rsend, MPI_Bsend and their non-blocking forms. Host buffers go
// straight to PMPI after one cached pointer check (hot.hpp). GPU data takes the method its route
// says: a stub method of the transport (local, ipc, pipelined), or staged (packed into pinned
// memory, moved by the MPI as MPI_BYTE on the application's communicator and tag).
#include "mpi/p2p.hpp"
#include "mpi/typemap.hpp"
#include "mpi/stream.hpp"

#include <climits>

namespace ferry::mpi_detail::p2p {

const SendKind kSend{PMPI_Send, PMPI_Isend, Mode::standard, true};
const SendKind kSsend{PMPI_Ssend, PMPI_Issend, Mode::sync, true};
const SendKind kRsend{PMPI_Rsend, PMPI_Irsend, Mode::ready, true};
const SendKind kBsend{PMPI_Bsend, PMPI_Ibsend, Mode::standard, false};

transport::Allow allow(const SendKind& k, bool blocking) {
  transport::Allow a;
  a.rendezvous = k.rendezvous;
  a.pipelined = k.rendezvous;
  a.local = !(blocking && k.mode == Mode::standard);
  return a;
}

int staged_bytes(i64 bytes) {
  if (bytes > INT_MAX) throw ferry::Error(MPI_ERR_COUNT, "staged message over 2 GiB");
  return static_cast<int>(bytes);
}

int track(std::unique_ptr<transport::Outgoing> out, MPI_Request* request) {
  *request = out->request;
  if (out->done) return MPI_SUCCESS;
  Pending p;
  p.uncancellable = true;  // the stub is out: the receiver may be reading already
  std::shared_ptr<transport::Outgoing> o = std::move(out);
  p.finish = [o](const MPI_Status*) { return o->finish(); };
  p.serve = [o] { o->serve(); };
  return requests().add_or_finish(*request, std::move(p));
}

namespace {

int send_bytes(const SendKind& k, const void* buf, int count, MPI_Datatype type, int dest, int tag,
               MPI_Comm comm) {
  if (!requests().polling()) return k.blocking(buf, count, type, dest, tag, comm);
  MPI_Request r;
  const int rc = k.nonblocking(buf, count, type, dest, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_serving(&r, MPI_STATUS_IGNORE) : rc;
}

// Nothing for Ferry to move: host memory (outside the protocol test), a CUDA-aware MPI's GPU
// memory, no destination.
bool mpi_moves(const transport::Route& r, int dest) {
  return dest == MPI_PROC_NULL || r.method == transport::Method::passthrough ||
         (!r.device() && !hot::host_sends);
}

}  // namespace

int send(const SendKind& k, const void* buf, int count, MPI_Datatype type, int dest, int tag,
         MPI_Comm comm) noexcept {
  return guard(comm, [&] {
    transport::Route r = transport::route(buf, count, type);
    r.producer = producer::of(comm, type);  // issue 14
    if (!r.device() && typemap::marked(type))  // issue 14: the MPI packs this type against the standard
      return typemap::send(buf, count, type, [&](const void* b, int n) { return send(k, b, n, MPI_BYTE, dest, tag, comm); });
    if (mpi_moves(r, dest)) return send_bytes(k, buf, count, type, dest, tag, comm);
    transport::choose(r, transport::world_rank(comm, dest), allow(k, true));
    if (r.method != transport::Method::staged && r.method != transport::Method::host) {
      int rc = MPI_SUCCESS;
      auto out = transport::send(r, k.mode, dest, tag, comm, true, serve_now, &rc);
      if (rc != MPI_SUCCESS) return rc;
      if (out) {
        if (out->done) return MPI_SUCCESS;
        if (out->request != MPI_REQUEST_NULL) rc = wait_serving(&out->request, MPI_STATUS_IGNORE);
        return rc == MPI_SUCCESS ? out->finish() : rc;
      }
    }
    if (!r.device()) return send_bytes(k, buf, count, type, dest, tag, comm);
    const int bytes = staged_bytes(r.bytes);
    Staged host(r.bytes);
    transport::stage(r, host.p);
    return send_bytes(k, host.p, bytes, MPI_BYTE, dest, tag, comm);
  });
}

int isend(const SendKind& k, const void* buf, int count, MPI_Datatype type, int dest, int tag,
          MPI_Comm comm, MPI_Request* request) noexcept {
  return guard(comm, [&] {
    serve_open();
    transport::Route r = transport::route(buf, count, type);
    r.producer = producer::of(comm, type);  // issue 14
    if (!r.device() && typemap::marked(type))  // issue 14
      return typemap::isend(buf, count, type, request, [&](const void* b, int n) {
        return k.nonblocking(b, n, MPI_BYTE, dest, tag, comm, request);
      });
    if (mpi_moves(r, dest)) return k.nonblocking(buf, count, type, dest, tag, comm, request);
    transport::choose(r, transport::world_rank(comm, dest), allow(k, false));
    if (r.method != transport::Method::staged && r.method != transport::Method::host) {
      int rc = MPI_SUCCESS;
      auto out = transport::send(r, k.mode, dest, tag, comm, false, serve_now, &rc);
      if (rc != MPI_SUCCESS) return rc;
      if (out) return track(std::move(out), request);
    }
    if (!r.device()) return k.nonblocking(buf, count, type, dest, tag, comm, request);
    const int bytes = staged_bytes(r.bytes);
    Staged host(r.bytes);
    transport::stage(r, host.p);
    const int rc = k.nonblocking(host.p, bytes, MPI_BYTE, dest, tag, comm, request);
    if (rc != MPI_SUCCESS) return rc;
    Pending p;
    p.staging = host.release();
    return requests().add_or_finish(*request, std::move(p));
  });
}

}  // namespace ferry::mpi_detail::p2p

using namespace ferry::mpi_detail;

extern "C" {

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (hot::plain_send(buf, count, type)) return PMPI_Send(buf, count, type, dest, tag, comm);
  return p2p::send(p2p::kSend, buf, count, type, dest, tag, comm);
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (hot::plain_send(buf, count, type)) return PMPI_Ssend(buf, count, type, dest, tag, comm);
  return p2p::send(p2p::kSsend, buf, count, type, dest, tag, comm);
}

int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (hot::plain_send(buf, count, type)) return PMPI_Rsend(buf, count, type, dest, tag, comm);
  return p2p::send(p2p::kRsend, buf, count, type, dest, tag, comm);
}

int MPI_Bsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (hot::plain_send(buf, count, type)) return PMPI_Bsend(buf, count, type, dest, tag, comm);
  return p2p::send(p2p::kBsend, buf, count, type, dest, tag, comm);
}

int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  if (hot::plain_send(buf, count, type)) return PMPI_Isend(buf, count, type, dest, tag, comm, request);
  return p2p::isend(p2p::kSend, buf, count, type, dest, tag, comm, request);
}

int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  if (hot::plain_send(buf, count, type)) return PMPI_Issend(buf, count, type, dest, tag, comm, request);
  return p2p::isend(p2p::kSsend, buf, count, type, dest, tag, comm, request);
}

int MPI_Irsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  if (hot::plain_send(buf, count, type)) return PMPI_Irsend(buf, count, type, dest, tag, comm, request);
  return p2p::isend(p2p::kRsend, buf, count, type, dest, tag, comm, request);
}

int MPI_Ibsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  if (hot::plain_send(buf, count, type)) return PMPI_Ibsend(buf, count, type, dest, tag, comm, request);
  return p2p::isend(p2p::kBsend, buf, count, type, dest, tag, comm, request);
}

}  // extern "C"
