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

// ---- Initialization, communicators, datatypes, pack

FERRY_FORTRAN(mpi_init, MPI_INIT, (F* ierror)) {
  entry(ierror, [&] { return MPI_Init(nullptr, nullptr); });
}
FERRY_FORTRAN(mpi_init_thread, MPI_INIT_THREAD, (F* required, F* provided, F* ierror)) {
  entry(ierror, [&] {
    int p = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, *required, &p);
    *provided = p;
    return rc;
  });
}
FERRY_FORTRAN(mpi_finalize, MPI_FINALIZE, (F* ierror)) {
  entry(ierror, [&] { return MPI_Finalize(); });
}
FERRY_FORTRAN(mpi_comm_free, MPI_COMM_FREE, (F* c, F* ierror)) {
  entry(ierror, [&] {
    MPI_Comm h = comm(c);
    const int rc = MPI_Comm_free(&h);
    *c = MPI_Comm_c2f(h);
    return rc;
  });
}
FERRY_FORTRAN(mpi_comm_disconnect, MPI_COMM_DISCONNECT, (F* c, F* ierror)) {
  entry(ierror, [&] {
    MPI_Comm h = comm(c);
    const int rc = MPI_Comm_disconnect(&h);
    *c = MPI_Comm_c2f(h);
    return rc;
  });
}
FERRY_FORTRAN(mpi_type_commit, MPI_TYPE_COMMIT, (F* t, F* ierror)) {
  entry(ierror, [&] {
    MPI_Datatype h = type(t);
    const int rc = MPI_Type_commit(&h);
    *t = MPI_Type_c2f(h);
    return rc;
  });
}
FERRY_FORTRAN(mpi_type_free, MPI_TYPE_FREE, (F* t, F* ierror)) {
  entry(ierror, [&] {
    MPI_Datatype h = type(t);
    const int rc = MPI_Type_free(&h);
    *t = MPI_Type_c2f(h);
    return rc;
  });
}
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

// ---- Probes

FERRY_FORTRAN(mpi_probe, MPI_PROBE, (F* source, F* tag, F* c, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    const int rc = MPI_Probe(*source, *tag, comm(c), st.c());
    st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_iprobe, MPI_IPROBE, (F* source, F* tag, F* c, F* flag, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    int f = 0;
    const int rc = MPI_Iprobe(*source, *tag, comm(c), &f, st.c());
    *flag = logical(f);
    if (f) st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_mprobe, MPI_MPROBE, (F* source, F* tag, F* c, F* message, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    MPI_Message m = MPI_MESSAGE_NULL;
    const int rc = MPI_Mprobe(*source, *tag, comm(c), &m, st.c());
    if (rc == MPI_SUCCESS) *message = MPI_Message_c2f(m);
    st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_improbe, MPI_IMPROBE, (F* source, F* tag, F* c, F* flag, F* message, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    MPI_Message m = MPI_MESSAGE_NULL;
    int f = 0;
    const int rc = MPI_Improbe(*source, *tag, comm(c), &f, &m, st.c());
    *flag = logical(f);
    if (rc == MPI_SUCCESS && f) {
      *message = MPI_Message_c2f(m);
      st.done();
    }
    return rc;
  });
}

// ---- Requests: start, complete, cancel, free

FERRY_FORTRAN(mpi_start, MPI_START, (F* req, F* ierror)) {
  entry(ierror, [&] {
    MPI_Request r = MPI_Request_f2c(*req);
    const int rc = MPI_Start(&r);
    *req = MPI_Request_c2f(r);
    return rc;
  });
}
FERRY_FORTRAN(mpi_startall, MPI_STARTALL, (F* n, F* reqs, F* ierror)) {
  entry(ierror, [&] {
    Requests r(reqs, *n);
    const int rc = MPI_Startall(*n, r.c());
    r.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_wait, MPI_WAIT, (F* req, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    MPI_Request r = MPI_Request_f2c(*req);
    const int rc = MPI_Wait(&r, st.c());
    *req = MPI_Request_c2f(r);
    st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_test, MPI_TEST, (F* req, F* flag, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    MPI_Request r = MPI_Request_f2c(*req);
    int f = 0;
    const int rc = MPI_Test(&r, &f, st.c());
    *req = MPI_Request_c2f(r);
    *flag = logical(f);
    if (f) st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_waitall, MPI_WAITALL, (F* n, F* reqs, F* statuses, F* ierror)) {
  entry(ierror, [&] {
    Requests r(reqs, *n);
    Statuses st(statuses, *n);
    const int rc = MPI_Waitall(*n, r.c(), st.c());
    r.done();
    st.done(*n);
    return rc;
  });
}
FERRY_FORTRAN(mpi_testall, MPI_TESTALL, (F* n, F* reqs, F* flag, F* statuses, F* ierror)) {
  entry(ierror, [&] {
    Requests r(reqs, *n);
    Statuses st(statuses, *n);
    int f = 0;
    const int rc = MPI_Testall(*n, r.c(), &f, st.c());
    r.done();
    *flag = logical(f);
    if (f || rc == MPI_ERR_IN_STATUS) st.done(*n);
    return rc;
  });
}
// Fortran's indices count from 1.
FERRY_FORTRAN(mpi_waitany, MPI_WAITANY, (F* n, F* reqs, F* index, F* status, F* ierror)) {
  entry(ierror, [&] {
    Requests r(reqs, *n);
    Status st(status);
    int i = MPI_UNDEFINED;
    const int rc = MPI_Waitany(*n, r.c(), &i, st.c());
    r.done();
    *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
    st.done();
    return rc;
  });
}
FERRY_FORTRAN(mpi_testany, MPI_TESTANY, (F* n, F* reqs, F* index, F* flag, F* status, F* ierror)) {
  entry(ierror, [&] {
    Requests r(reqs, *n);
    Status st(status);
    int i = MPI_UNDEFINED, f = 0;
    const int rc = MPI_Testany(*n, r.c(), &i, &f, st.c());
    r.done();
    *index = i == MPI_UNDEFINED ? MPI_UNDEFINED : i + 1;
    *flag = logical(f);
    if (f) st.done();
    return rc;
  });
}

// The "some" forms: statuses[k] goes with indices[k].
template <class Call>
int some(F* n, F* reqs, F* outcount, F* indices, F* statuses, Call call) {
  Requests r(reqs, *n);
  Statuses st(statuses, *n);
  int out = 0;
  const int rc = call(*n, r.c(), &out, indices, st.c());
  r.done();
  *outcount = out;
  if (out != MPI_UNDEFINED) {
    st.done(out);
    for (int k = 0; k < out; ++k) ++indices[k];
  }
  return rc;
}
FERRY_FORTRAN(mpi_waitsome, MPI_WAITSOME, (F* n, F* reqs, F* outcount, F* indices, F* statuses, F* ierror)) {
  entry(ierror, [&] { return some(n, reqs, outcount, indices, statuses, MPI_Waitsome); });
}
FERRY_FORTRAN(mpi_testsome, MPI_TESTSOME, (F* n, F* reqs, F* outcount, F* indices, F* statuses, F* ierror)) {
  entry(ierror, [&] { return some(n, reqs, outcount, indices, statuses, MPI_Testsome); });
}
FERRY_FORTRAN(mpi_cancel, MPI_CANCEL, (F* req, F* ierror)) {
  entry(ierror, [&] {
    MPI_Request r = MPI_Request_f2c(*req);
    return MPI_Cancel(&r);
  });
}
FERRY_FORTRAN(mpi_request_free, MPI_REQUEST_FREE, (F* req, F* ierror)) {
  entry(ierror, [&] {
    MPI_Request r = MPI_Request_f2c(*req);
    const int rc = MPI_Request_free(&r);
    *req = MPI_Request_c2f(r);
    return rc;
  });
}
FERRY_FORTRAN(mpi_request_get_status, MPI_REQUEST_GET_STATUS, (F* req, F* flag, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    int f = 0;
    const int rc = MPI_Request_get_status(MPI_Request_f2c(*req), &f, st.c());
    *flag = logical(f);
    if (f) st.done();
    return rc;
  });
}

#endif  // OPEN_MPI
