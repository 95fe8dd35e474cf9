// Fortran entries (fortran.hpp says why and how): initialization, datatypes, pack/unpack,
// point-to-point (blocking, non-blocking, persistent, matched probes) and every wait and test.
// The collectives: fortran_coll.cpp.
#include "mpi/fortran.hpp"

#include <ferry/ferry_mpi.h>

namespace ferry::mpi_detail::fortran {
std::atomic<long> calls{0};
}  // namespace ferry::mpi_detail::fortran

extern "C" __attribute__((visibility("default"))) long ferry_mpi_fortran_calls(void) {
  return ferry::mpi_detail::fortran::calls.load(std::memory_order_relaxed);
}

#if defined(OPEN_MPI) && OPEN_MPI

// Open MPI's Fortran sentinels are common blocks (mpif.h: common /mpi_fortran_bottom/ MPI_BOTTOM),
// one symbol in the mangling of the Fortran compiler Open MPI was built with; libmpi defines it
// and a Fortran program's common block is that same object. Weak: the other manglings are absent.
extern "C" {
extern char mpi_fortran_bottom_ __attribute__((weak));
extern char mpi_fortran_bottom __attribute__((weak));
extern char mpi_fortran_bottom__ __attribute__((weak));
extern char MPI_FORTRAN_BOTTOM __attribute__((weak));
extern char mpi_fortran_in_place_ __attribute__((weak));
extern char mpi_fortran_in_place __attribute__((weak));
extern char mpi_fortran_in_place__ __attribute__((weak));
extern char MPI_FORTRAN_IN_PLACE __attribute__((weak));
}

namespace ferry::mpi_detail::fortran {

void* buffer(const void* p) noexcept {
  if (is_sentinel(p, &mpi_fortran_bottom_, &mpi_fortran_bottom, &mpi_fortran_bottom__, &MPI_FORTRAN_BOTTOM))
    return MPI_BOTTOM;
  if (is_sentinel(p, &mpi_fortran_in_place_, &mpi_fortran_in_place, &mpi_fortran_in_place__, &MPI_FORTRAN_IN_PLACE))
    return MPI_IN_PLACE;
  return const_cast<void*>(p);
}
}  // namespace ferry::mpi_detail::fortran

using namespace ferry::mpi_detail::fortran;
using ferry::mpi_detail::fortran::F;

// ---- Pack

FERRY_FORTRAN(mpi_pack, MPI_PACK, (void* in, F* n, F* t, void* out, F* outsize, F* position, F* c, F* ierror)) {
  entry(ierror, [&] { return MPI_Pack(buffer(in), *n, type(t), out, *outsize, position, comm(c)); });
}
FERRY_FORTRAN(mpi_unpack, MPI_UNPACK, (void* in, F* insize, F* position, void* out, F* n, F* t, F* c, F* ierror)) {
  entry(ierror, [&] { return MPI_Unpack(in, *insize, position, buffer(out), *n, type(t), comm(c)); });
}

// ---- Point-to-point

#define FERRY_FORTRAN_SEND(lower, UPPER, C)                                                    \
  FERRY_FORTRAN(lower, UPPER, (void* buf, F* n, F* t, F* dest, F* tag, F* c, F* ierror)) {     \
    entry(ierror, [&] { return C(buffer(buf), *n, type(t), *dest, *tag, comm(c)); });           \
  }
FERRY_FORTRAN_SEND(mpi_send, MPI_SEND, MPI_Send)
FERRY_FORTRAN_SEND(mpi_ssend, MPI_SSEND, MPI_Ssend)
FERRY_FORTRAN_SEND(mpi_rsend, MPI_RSEND, MPI_Rsend)
FERRY_FORTRAN_SEND(mpi_bsend, MPI_BSEND, MPI_Bsend)

// Non-blocking and persistent sends: the same with a request.
#define FERRY_FORTRAN_ISEND(lower, UPPER, C)                                                          \
  FERRY_FORTRAN(lower, UPPER, (void* buf, F* n, F* t, F* dest, F* tag, F* c, F* req, F* ierror)) {    \
    entry(ierror, [&] {                                                                               \
      MPI_Request r = MPI_REQUEST_NULL;                                                               \
      const int rc = C(buffer(buf), *n, type(t), *dest, *tag, comm(c), &r);                           \
      if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(r);                                               \
      return rc;                                                                                      \
    });                                                                                               \
  }
FERRY_FORTRAN_ISEND(mpi_isend, MPI_ISEND, MPI_Isend)
FERRY_FORTRAN_ISEND(mpi_issend, MPI_ISSEND, MPI_Issend)
FERRY_FORTRAN_ISEND(mpi_irsend, MPI_IRSEND, MPI_Irsend)
FERRY_FORTRAN_ISEND(mpi_ibsend, MPI_IBSEND, MPI_Ibsend)
FERRY_FORTRAN_ISEND(mpi_send_init, MPI_SEND_INIT, MPI_Send_init)
FERRY_FORTRAN_ISEND(mpi_ssend_init, MPI_SSEND_INIT, MPI_Ssend_init)
FERRY_FORTRAN_ISEND(mpi_rsend_init, MPI_RSEND_INIT, MPI_Rsend_init)
FERRY_FORTRAN_ISEND(mpi_bsend_init, MPI_BSEND_INIT, MPI_Bsend_init)
// A receive's (source, tag) take the send's (dest, tag) places.
FERRY_FORTRAN_ISEND(mpi_irecv, MPI_IRECV, MPI_Irecv)
FERRY_FORTRAN_ISEND(mpi_recv_init, MPI_RECV_INIT, MPI_Recv_init)

FERRY_FORTRAN(mpi_recv, MPI_RECV, (void* buf, F* n, F* t, F* source, F* tag, F* c, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    const int rc = MPI_Recv(buffer(buf), *n, type(t), *source, *tag, comm(c), st.c());
    st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_sendrecv, MPI_SENDRECV,
              (void* sbuf, F* sn, F* st_, F* dest, F* stag, void* rbuf, F* rn, F* rt, F* source, F* rtag,
               F* c, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    const int rc = MPI_Sendrecv(buffer(sbuf), *sn, type(st_), *dest, *stag, buffer(rbuf), *rn, type(rt),
                                *source, *rtag, comm(c), st.c());
    st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_sendrecv_replace, MPI_SENDRECV_REPLACE,
              (void* buf, F* n, F* t, F* dest, F* stag, F* source, F* rtag, F* c, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    const int rc = MPI_Sendrecv_replace(buffer(buf), *n, type(t), *dest, *stag, *source, *rtag, comm(c), st.c());
    st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_mrecv, MPI_MRECV, (void* buf, F* n, F* t, F* message, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    MPI_Message m = MPI_Message_f2c(*message);
    const int rc = MPI_Mrecv(buffer(buf), *n, type(t), &m, st.c());
    *message = MPI_Message_c2f(m);
    st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_imrecv, MPI_IMRECV, (void* buf, F* n, F* t, F* message, F* req, F* ierror)) {
  entry(ierror, [&] {
    MPI_Message m = MPI_Message_f2c(*message);
    MPI_Request r = MPI_REQUEST_NULL;
    const int rc = MPI_Imrecv(buffer(buf), *n, type(t), &m, &r);
    *message = MPI_Message_c2f(m);
    if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(r);
    return rc;
  });
}

#endif  // OPEN_MPI
