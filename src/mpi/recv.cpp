// Receives: MPI_Recv, MPI_Irecv, MPI_Mrecv, MPI_Imrecv. A receive into GPU memory receives into
// pinned staging (with room for a stub, so any message of a stub method fits) and unpacks what
// arrived; one into host memory goes to the MPI as it is. Either may get a stub from a process that
// may send one: its data is then moved by the transport (transport::receive), the sender answered,
// and the status fixed to the real size. Messages a probe took early (early.hpp) come first.
#include <algorithm>

#include "mpi/early.hpp"
#include "mpi/p2p.hpp"
#include "mpi/typemap.hpp"

namespace ferry::mpi_detail::p2p {

namespace {

int recv_bytes(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
               MPI_Status* st) {
  if (!requests().polling()) return PMPI_Recv(buf, count, type, source, tag, comm, st);
  MPI_Request r;
  const int rc = PMPI_Irecv(buf, count, type, source, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_serving(&r, st) : rc;
}

// The capacity a receive's staging is posted with: room for a stub where one may come.
i64 room(const transport::Route& r, bool may_be_stub) {
  return may_be_stub ? std::max<i64>(r.bytes, transport::kStubBytes) : r.bytes;
}

i64 capacity(const transport::Route& r, int count, MPI_Datatype type) {
  return r.type ? r.bytes : static_cast<i64>(count) * type_size(type);
}

}  // namespace

int host_arrived(int rc, const transport::Target& to, MPI_Comm comm, MPI_Status* st) {
  int got = 0;
  if (rc != MPI_SUCCESS || !to.type || PMPI_Get_count(st, MPI_BYTE, &got) != MPI_SUCCESS ||
      got != transport::kStubBytes)
    return rc;  // only a message of exactly a stub's size can be one
  int r = MPI_SUCCESS;
  if (transport::receive(to, nullptr, transport::ranks_of(comm), st, &r)) return raise_on(comm, r);
  return rc;
}

int device_arrived(int rc, Staged& staging, const transport::Target& to, bool may_be_stub,
                   MPI_Comm comm, MPI_Status* st) {
  if (rc != MPI_SUCCESS && rc != MPI_ERR_TRUNCATE) return rc;
  int r = MPI_SUCCESS;
  if (rc == MPI_SUCCESS && may_be_stub &&
      transport::receive(to, staging.p, transport::ranks_of(comm), st, &r))
    return raise_on(comm, r);
  bool handed = false;
  transport::UnstageBatch own;  // the data is in place when this returns, whoever called it
  r = unpack_arrived(staging.p, st, to, true, &handed);
  if (handed) staging.release();
  const int waited = own.settle();
  if (r == MPI_SUCCESS) r = waited;
  return rc == MPI_SUCCESS ? raise_on(comm, r) : rc;
}

int recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
         MPI_Status* status) noexcept {
  return guard(comm, [&] {
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = MPI_SUCCESS;
    if (early::any() && early::recv(buf, count, type, source, tag, comm, st, &rc)) return raise_on(comm, rc);
    transport::Route r = transport::route(buf, count, type);
    if (r.method == transport::Method::passthrough || source == MPI_PROC_NULL)
      return PMPI_Recv(buf, count, type, source, tag, comm, status);
    if (!r.device() && typemap::marked(type))  // issue 14
      return typemap::recv(buf, count, type, st, [&](void* b, int n, MPI_Status* s) {
        return recv(b, n, MPI_BYTE, source, tag, comm, s);
      });
    const bool may = r.type && transport::may_get_stub(capacity(r, count, type), r.device(), source, comm, true);
    if (!r.device()) {
      if (!may && !requests().polling()) return PMPI_Recv(buf, count, type, source, tag, comm, status);
      return host_arrived(recv_bytes(buf, count, type, source, tag, comm, st), transport::target(r), comm, st);
    }
    transport::choose_unpack(r);
    const i64 n = room(r, may);
    Staged host(n);
    rc = recv_bytes(host.p, staged_bytes(n), MPI_BYTE, source, tag, comm, st);
    return device_arrived(rc, host, transport::target(r), may, comm, st);
  });
}

int post_receive(void* buf, int count, MPI_Datatype type, int source, MPI_Comm comm, bool persistent,
                 MPI_Request* request, Post post, void* ctx) {
  serve_open();
  transport::Route r = transport::route(buf, count, type);
  if (r.method == transport::Method::passthrough || source == MPI_PROC_NULL)
    return post(buf, count, type, ctx);  // nothing arrives from MPI_PROC_NULL
  const bool may = r.type && transport::may_get_stub(capacity(r, count, type), r.device(), source, comm, false);
  if (!r.device() && typemap::marked(type))  // issue 14
    return typemap::irecv(buf, count, type, persistent, may, may ? transport::ranks_of(comm) : transport::Ranks{},
                          request, [&](void* b, int n) { return post(b, n, MPI_BYTE, ctx); });
  Pending p;
  p.recv = true;
  p.to = transport::target(r);
  p.persistent = persistent;
  p.may_be_stub = may;
  if (may) p.ranks = transport::ranks_of(comm);
  if (!r.device()) {
    const int rc = post(buf, count, type, ctx);
    if (rc == MPI_SUCCESS && may) requests().add(*request, std::move(p));
    return rc;
  }
  transport::choose_unpack(r);
  p.to = transport::target(r);
  const i64 n = room(r, may);
  Staged host(n);
  const int rc = post(host.p, staged_bytes(n), MPI_BYTE, ctx);
  if (rc != MPI_SUCCESS) return rc;
  p.staging = host.release();
  requests().add(*request, std::move(p));
  return MPI_SUCCESS;
}

namespace {
struct IrecvArgs {
  int source, tag;
  MPI_Comm comm;
  MPI_Request* request;
};
}  // namespace

int irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
          MPI_Request* request) noexcept {
  return guard(comm, [&] {
    if (early::any()) {  // a message a probe took early completes the receive at once
      MPI_Status st;
      int rc = MPI_SUCCESS;
      if (early::recv(buf, count, type, source, tag, comm, &st, &rc))
        return early::completed_request(st, rc, comm, request);
    }
    IrecvArgs a{source, tag, comm, request};
    return post_receive(buf, count, type, source, comm, false, request,
                        [](void* b, int n, MPI_Datatype t, void* ctx) {
                          auto* x = static_cast<IrecvArgs*>(ctx);
                          return PMPI_Irecv(b, n, t, x->source, x->tag, x->comm, x->request);
                        },
                        &a);
  });
}

namespace {

[[gnu::noinline]] int mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message,
                            MPI_Status* status) noexcept {
  MPI_Comm from = MPI_COMM_WORLD;
  return guard(from, [&] {
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = MPI_SUCCESS;
    if (early::any() && early::mrecv(buf, count, type, message, st, &rc, &from)) return raise_on(from, rc);
    const MPI_Comm comm = message ? early::take_message(*message) : MPI_COMM_NULL;
    if (comm != MPI_COMM_NULL) from = comm;
    transport::Route r = transport::route(buf, count, type);
    if (r.method == transport::Method::passthrough) return PMPI_Mrecv(buf, count, type, message, status);
    const bool may = comm != MPI_COMM_NULL && r.type &&
                     transport::may_get_stub(capacity(r, count, type), r.device(), MPI_ANY_SOURCE, comm, true);
    if (!r.device() && typemap::marked(type))  // issue 14
      return typemap::recv(buf, count, type, st, [&](void* b, int n, MPI_Status* s) {
        const int e = PMPI_Mrecv(b, n, MPI_BYTE, message, s);
        if (!may) return e;
        transport::Target bytes;
        bytes.buf = b;
        bytes.count = n;
        bytes.type = ferry::lookup(MPI_BYTE);
        return host_arrived(e, bytes, comm, s);
      });
    if (!r.device()) {
      rc = PMPI_Mrecv(buf, count, type, message, st);
      return may ? host_arrived(rc, transport::target(r), comm, st) : rc;
    }
    transport::choose_unpack(r);
    const i64 n = room(r, may);
    Staged host(n);
    rc = PMPI_Mrecv(host.p, staged_bytes(n), MPI_BYTE, message, st);
    return device_arrived(rc, host, transport::target(r), may, comm, st);
  });
}

struct ImrecvArgs {
  MPI_Message* message;
  MPI_Request* request;
};

[[gnu::noinline]] int imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message,
                             MPI_Request* request) noexcept {
  MPI_Comm from = MPI_COMM_WORLD;
  return guard(from, [&] {
    if (early::any()) {
      MPI_Status st;
      int rc = MPI_SUCCESS;
      if (early::mrecv(buf, count, type, message, &st, &rc, &from))
        return early::completed_request(st, rc, from, request);
    }
    const MPI_Comm comm = message ? early::take_message(*message) : MPI_COMM_NULL;
    if (comm != MPI_COMM_NULL) from = comm;
    if (comm == MPI_COMM_NULL && !transport::route(buf, count, type).device() && !typemap::marked(type))
      return PMPI_Imrecv(buf, count, type, message, request);  // a message Ferry's probes never saw
    ImrecvArgs a{message, request};
    return post_receive(buf, count, type, MPI_ANY_SOURCE, comm == MPI_COMM_NULL ? MPI_COMM_SELF : comm,
                        false, request,
                        [](void* b, int n, MPI_Datatype t, void* ctx) {
                          auto* x = static_cast<ImrecvArgs*>(ctx);
                          return PMPI_Imrecv(b, n, t, x->message, x->request);
                        },
                        &a);
  });
}

}  // namespace
}  // namespace ferry::mpi_detail::p2p

using namespace ferry::mpi_detail;

extern "C" {

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  if (hot::plain_recv(buf, count, type, ferry::transport::kStubBytes))
    return PMPI_Recv(buf, count, type, source, tag, comm, status);
  return p2p::recv(buf, count, type, source, tag, comm, status);
}

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  if (hot::plain_recv(buf, count, type, ferry::transport::kStubMinBytes))
    return PMPI_Irecv(buf, count, type, source, tag, comm, request);
  return p2p::irecv(buf, count, type, source, tag, comm, request);
}

// A matched receive (after MPI_Mprobe/MPI_Improbe).
int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  return p2p::mrecv(buf, count, type, message, status);
}

int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* request) {
  return p2p::imrecv(buf, count, type, message, request);
}

}  // extern "C"
