// MPI_Sendrecv and MPI_Sendrecv_replace. A GPU side, or a receive that may get a stub, makes the
// exchange a non-blocking pair completed together (what MPI_Sendrecv means), through Ferry's own
// calls (so a send to this process takes the local method, and stubs and progress work as for any
// receive); everything else goes straight to the MPI.
#include <memory>
#include <vector>

#include "mpi/early.hpp"
#include "mpi/p2p.hpp"
#include "mpi/typemap.hpp"
#include "mpi/stream.hpp"

namespace ferry::mpi_detail {
namespace {

// A receive and a send posted together and completed together; the status is the receive's.
template <class PostRecv, class PostSend>
int exchange(PostRecv post_recv, PostSend post_send, MPI_Status* status) {
  MPI_Request r[2];
  int rc = post_recv(&r[0]);
  if (rc != MPI_SUCCESS) return rc;
  rc = post_send(&r[1]);
  if (rc != MPI_SUCCESS) {
    MPI_Cancel(&r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    return rc;
  }
  MPI_Status st[2];
  rc = MPI_Waitall(2, r, st);
  if (status != MPI_STATUS_IGNORE) *status = st[0];
  if (rc == MPI_ERR_IN_STATUS) rc = st[0].MPI_ERROR != MPI_SUCCESS ? st[0].MPI_ERROR : st[1].MPI_ERROR;
  return rc;
}

bool plain_route(const void* buf, int count, MPI_Datatype type) {
  const transport::Route r = transport::route(buf, count, type);
  return !r.device() || r.method == transport::Method::passthrough;
}

[[gnu::noinline]] int sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                               int sendtag, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                               int source, int recvtag, MPI_Comm comm, MPI_Status* status) noexcept {
  return guard(comm, [&] {
    // A message a probe took early must reach the receive half (MPI no longer has it).
    const i64 capacity = static_cast<i64>(recvcount) * type_size(recvtype);
    const bool plain = !early::any() && !typemap::marked(sendtype) && !typemap::marked(recvtype) &&  // issue 14
                       plain_route(sendbuf, sendcount, sendtype) &&
                       plain_route(recvbuf, recvcount, recvtype) && !requests().polling() &&
                       !transport::may_get_stub(capacity, false, source, comm, false);
    if (plain)
      return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                           source, recvtag, comm, status);
    return exchange(
        [&](MPI_Request* r) { return MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, r); },
        [&](MPI_Request* r) { return MPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, r); },
        status);
  });
}

// In place: the outgoing data is copied out first (staged for GPU data, MPI_Pack for host data),
// then it is a receive into the buffer and a send of the copy, completed together.
[[gnu::noinline]] int sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag,
                                       int source, int recvtag, MPI_Comm comm, MPI_Status* status) noexcept {
  return guard(comm, [&] {
    transport::Route r = transport::route(buf, count, type);
    r.producer = producer::of(comm, type);  // issue 14
    const bool dev = r.device() && r.method != transport::Method::passthrough;
    const i64 capacity = r.type ? r.bytes : static_cast<i64>(count) * type_size(type);
    const bool may = transport::may_get_stub(capacity, dev, source, comm, true);
    if (!dev && !may && !requests().polling() && !early::any() && !typemap::marked(type))  // issue 14
      return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
    std::unique_ptr<Staged> staged;
    std::vector<char> packed;
    const void* sbuf = nullptr;
    int scount = 0;
    MPI_Datatype stype = MPI_BYTE;
    if (dev) {
      scount = p2p::staged_bytes(r.bytes);
      transport::choose(r, transport::world_rank(comm, dest), transport::Allow{false, false, false});
      staged = std::make_unique<Staged>(r.bytes);
      transport::stage(r, staged->p);
      sbuf = staged->p;
    } else {
      int size = 0;
      int rc = PMPI_Pack_size(count, type, comm, &size);
      if (rc != MPI_SUCCESS) return rc;
      packed.resize(static_cast<std::size_t>(std::max(size, 1)));
      rc = MPI_Pack(buf, count, type, packed.data(), size, &scount, comm);  // issue 14: Ferry's for marked types
      if (rc != MPI_SUCCESS) return rc;
      sbuf = packed.data();
      stype = MPI_PACKED;
    }
    return exchange(
        [&](MPI_Request* q) { return MPI_Irecv(buf, count, type, source, recvtag, comm, q); },
        [&](MPI_Request* q) { return PMPI_Isend(sbuf, scount, stype, dest, sendtag, comm, q); },
        status);
  });
}

}  // namespace
}  // namespace ferry::mpi_detail

using namespace ferry::mpi_detail;

extern "C" {

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
  if (hot::plain_send(sendbuf, sendcount, sendtype) &&
      hot::plain_recv(recvbuf, recvcount, recvtype, ferry::transport::kStubMinBytes))
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                         source, recvtag, comm, status);
  return sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                  recvtag, comm, status);
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                         int recvtag, MPI_Comm comm, MPI_Status* status) {
  return sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
}

}  // extern "C"
