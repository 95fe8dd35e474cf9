// The standard's typemap where the system MPI packs a datatype against it.
//
// Open MPI 4.1 packs MPI_Type_create_hvector(2, 1, -1 B, MPI_CHAR) as the bytes at offsets 0, 1
// instead of 0, -1 (any (h)vector whose stride is -1 byte; other negative strides and
// displacements are right). Ferry's engines follow the standard, and host buffers go straight to
// the MPI, so without this a type would pack differently from host and from device memory, and a
// host sender and a device receiver would disagree.
//
// So at MPI_Init Ferry packs a few tiny types with PMPI_Pack and compares the bytes with the
// standard's typemap (microseconds), one or more types per construct: a (h)vector stride of -1
// byte, any negative (h)vector stride, negative (h)indexed / indexed_block / struct
// displacements, a negative lower bound or extent (resized). At MPI_Type_commit a type that
// contains a construct the probe found wrong is marked, and host-buffer sends, receives
// (blocking, non-blocking, matched, persistent receives), MPI_Sendrecv(_replace), MPI_Pack and
// MPI_Unpack of a marked type go through Ferry's CPU engine, staged as MPI_BYTE like a GPU
// message. With an MPI that packs every probe right (MPICH 4.0) nothing is ever marked, and
// marked() costs one relaxed atomic load. Other types never reach it: they are the host fast
// path's named types, or derived types whose full path asks marked() once.
//
// Not covered (docs/design.md): persistent sends and collectives of a marked type on host
// buffers keep the MPI's own typemap.
#pragma once

#include <ferry/registry.hpp>
#include <ferry/transport.hpp>
#include <ferry/type.hpp>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>

#include "mpi/boundary.hpp"
#include "mpi/hot.hpp"
#include "mpi/requests.hpp"

namespace ferry::mpi_detail::typemap {

// After PMPI_Init: packs the probe types and remembers which constructs the MPI gets wrong.
void probe() noexcept;
// The constructs the probe found wrong, comma-separated ("" when none; before MPI_Init too).
const char* wrong() noexcept;

// After MPI_Type_commit / before MPI_Type_free.
void classify(MPI_Datatype type) noexcept;
void forget(MPI_Datatype type) noexcept;

extern std::atomic<int> marked_count;
bool marked_slow(MPI_Datatype type);
// Host buffers of `type` take Ferry's engine.
inline bool marked(MPI_Datatype type) {
  return marked_count.load(std::memory_order_relaxed) > 0 && marked_slow(type);
}

// The committed type and the packed size of `count` of it, which travels as an int count of bytes
// (MPI_ERR_COUNT over 2 GiB).
std::shared_ptr<const ferry::Type> staged_type(MPI_Datatype type, int count, int* bytes);

// `count` elements of `type` at `buf` packed by Ferry's engine, in a pooled buffer.
struct Packed {
  int bytes;
  std::shared_ptr<const ferry::Type> type;
  Staged staging;
  Packed(const void* buf, int count, MPI_Datatype type);
};
// Unpacks the bytes a receive of `staging` got (status `st`) into `count` of `type` at `buf`.
void unpack(const void* staging, const MPI_Status* st, void* buf, int count,
            const std::shared_ptr<const ferry::Type>& type);

// The hooks below run inside the entries' guard() (boundary.hpp): errors are thrown.

// A send: `send(bytes, n)` sends n bytes (MPI_BYTE) the way the caller sends.
template <class Send>
int send(const void* buf, int count, MPI_Datatype type, Send send) {
  Packed p(buf, count, type);
  return send(static_cast<const void*>(p.staging.p), p.bytes);
}

// A non-blocking send: `post(bytes, n)` posts it on `*request`, which keeps the staging.
template <class Post>
int isend(const void* buf, int count, MPI_Datatype type, MPI_Request* request, Post post) {
  Packed p(buf, count, type);
  const int rc = post(static_cast<const void*>(p.staging.p), p.bytes);
  if (rc != MPI_SUCCESS) return rc;
  Pending pending;
  pending.staging = p.staging.release();
  return requests().add_or_finish(*request, std::move(pending));
}

// A blocking receive: `recv(bytes, n, st)` receives n bytes into `bytes` with status `st`.
template <class Recv>
int recv(void* buf, int count, MPI_Datatype type, MPI_Status* st, Recv recv) {
  int bytes = 0;
  auto t = staged_type(type, count, &bytes);
  Staged staging(std::max<i64>(bytes, transport::kStubBytes));  // room for a stub
  const int rc = recv(staging.p, bytes, st);
  if (rc == MPI_SUCCESS || rc == MPI_ERR_TRUNCATE) unpack(staging.p, st, buf, count, t);
  return rc;
}

// A non-blocking (or persistent) receive: `post(bytes, n)` posts it into staging; completion
// unpacks. `may_be_stub`: the receive may get a stub (its data then lands in the staging first).
template <class Post>
int irecv(void* buf, int count, MPI_Datatype type, bool persistent, bool may_be_stub,
          const transport::Ranks& ranks, MPI_Request* request, Post post) {
  int bytes = 0;
  auto t = staged_type(type, count, &bytes);
  Staged staging(std::max<i64>(bytes, transport::kStubBytes));
  const int rc = post(staging.p, bytes);
  if (rc != MPI_SUCCESS) return rc;
  Pending p;
  p.recv = true;
  p.persistent = persistent;
  p.to.buf = staging.p;  // a stub's data lands in the staging, as bytes
  p.to.count = bytes;
  p.to.type = ferry::lookup(MPI_BYTE);
  p.to.device = false;
  p.may_be_stub = may_be_stub;
  p.ranks = ranks;
  p.finish = [staging = staging.p, buf, count, t](const MPI_Status* st) {
    try {
      unpack(staging, st, buf, count, t);
    } catch (const ferry::Error& e) {
      return e.mpi_error_class();
    }
    return MPI_SUCCESS;
  };
  p.staging = staging.release();
  requests().add(*request, std::move(p));
  return rc;
}

}  // namespace ferry::mpi_detail::typemap
