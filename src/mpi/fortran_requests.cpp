// Fortran entries of initialization, request completion (start, wait, test in every form, cancel,
// free, status), the probes, communicator and datatype release, type commit and the barrier.
// With Open MPI they are part of the full set (fortran.hpp). With MPICH they are the only ones:
// its Fortran bindings (libmpichfort: mpif.h, `use mpi`, `use mpi_f08`) call MPI_* for everything
// else, which Ferry interposes, but its `use mpi_f08` entries call PMPI_Init, PMPI_Wait, PMPI_Test,
// PMPI_Start, PMPI_Probe, ... for these, so Ferry would neither start nor finish a request of its
// own (a staged or pipelined GPU message) that such a program completes, nor give a probe the real
// size behind a stub. MPICH's f08 type(MPI_Status) is its C MPI_Status; its f08 entries
// (mpi_wait_f08_, ...) take the same arguments by reference as the mpif.h ones.
#include "mpi/fortran.hpp"

#if (defined(OPEN_MPI) && OPEN_MPI) || defined(MPICH)

using namespace ferry::mpi_detail::fortran;
using ferry::mpi_detail::fortran::F;

#if defined(OPEN_MPI) && OPEN_MPI
#define FERRY_FORTRAN_REQUEST(lower, UPPER, params) FERRY_FORTRAN(lower, UPPER, params)
#else
// MPICH: the f08 entries only (mpi_wait_f08_, ...); its mpif.h ones call MPI_* (and initialize
// its Fortran sentinels on the first call), so they stay.
#define FERRY_FORTRAN_REQUEST(lower, UPPER, params)                          \
  extern "C" __attribute__((visibility("default"))) void lower##_f08_ params; \
  extern "C" void lower##_f08_ params
#endif

// ---- Initialization (MPICH's f08 entries call PMPI_Init: Ferry would never start)

FERRY_FORTRAN_REQUEST(mpi_init, MPI_INIT, (F* ierror)) {
  entry(ierror, [&] { return MPI_Init(nullptr, nullptr); });
}
FERRY_FORTRAN_REQUEST(mpi_init_thread, MPI_INIT_THREAD, (F* required, F* provided, F* ierror)) {
  entry(ierror, [&] {
    int p = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, *required, &p);
    *provided = p;
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_finalize, MPI_FINALIZE, (F* ierror)) {
  entry(ierror, [&] { return MPI_Finalize(); });
}

// ---- Probes

FERRY_FORTRAN_REQUEST(mpi_probe, MPI_PROBE, (F* source, F* tag, F* c, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    const int rc = MPI_Probe(*source, *tag, comm(c), st.c());
    st.done();
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_iprobe, MPI_IPROBE, (F* source, F* tag, F* c, F* flag, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    int f = 0;
    const int rc = MPI_Iprobe(*source, *tag, comm(c), &f, st.c());
    *flag = logical(f);
    if (f) st.done();
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_mprobe, MPI_MPROBE, (F* source, F* tag, F* c, F* message, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    MPI_Message m = MPI_MESSAGE_NULL;
    const int rc = MPI_Mprobe(*source, *tag, comm(c), &m, st.c());
    if (rc == MPI_SUCCESS) *message = MPI_Message_c2f(m);
    st.done();
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_improbe, MPI_IMPROBE, (F* source, F* tag, F* c, F* flag, F* message, F* status, F* ierror)) {
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

FERRY_FORTRAN_REQUEST(mpi_start, MPI_START, (F* req, F* ierror)) {
  entry(ierror, [&] {
    MPI_Request r = MPI_Request_f2c(*req);
    const int rc = MPI_Start(&r);
    *req = MPI_Request_c2f(r);
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_startall, MPI_STARTALL, (F* n, F* reqs, F* ierror)) {
  entry(ierror, [&] {
    Requests r(reqs, *n);
    const int rc = MPI_Startall(*n, r.c());
    r.done();
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_wait, MPI_WAIT, (F* req, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    MPI_Request r = MPI_Request_f2c(*req);
    const int rc = MPI_Wait(&r, st.c());
    *req = MPI_Request_c2f(r);
    st.done();
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_test, MPI_TEST, (F* req, F* flag, F* status, F* ierror)) {
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
FERRY_FORTRAN_REQUEST(mpi_waitall, MPI_WAITALL, (F* n, F* reqs, F* statuses, F* ierror)) {
  entry(ierror, [&] {
    Requests r(reqs, *n);
    Statuses st(statuses, *n);
    const int rc = MPI_Waitall(*n, r.c(), st.c());
    r.done();
    st.done(*n);
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_testall, MPI_TESTALL, (F* n, F* reqs, F* flag, F* statuses, F* ierror)) {
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
FERRY_FORTRAN_REQUEST(mpi_waitany, MPI_WAITANY, (F* n, F* reqs, F* index, F* status, F* ierror)) {
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
FERRY_FORTRAN_REQUEST(mpi_testany, MPI_TESTANY, (F* n, F* reqs, F* index, F* flag, F* status, F* ierror)) {
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
FERRY_FORTRAN_REQUEST(mpi_waitsome, MPI_WAITSOME, (F* n, F* reqs, F* outcount, F* indices, F* statuses, F* ierror)) {
  entry(ierror, [&] { return some(n, reqs, outcount, indices, statuses, MPI_Waitsome); });
}
FERRY_FORTRAN_REQUEST(mpi_testsome, MPI_TESTSOME, (F* n, F* reqs, F* outcount, F* indices, F* statuses, F* ierror)) {
  entry(ierror, [&] { return some(n, reqs, outcount, indices, statuses, MPI_Testsome); });
}
FERRY_FORTRAN_REQUEST(mpi_cancel, MPI_CANCEL, (F* req, F* ierror)) {
  entry(ierror, [&] {
    MPI_Request r = MPI_Request_f2c(*req);
    return MPI_Cancel(&r);
  });
}
FERRY_FORTRAN_REQUEST(mpi_request_free, MPI_REQUEST_FREE, (F* req, F* ierror)) {
  entry(ierror, [&] {
    MPI_Request r = MPI_Request_f2c(*req);
    const int rc = MPI_Request_free(&r);
    *req = MPI_Request_c2f(r);
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_request_get_status, MPI_REQUEST_GET_STATUS, (F* req, F* flag, F* status, F* ierror)) {
  entry(ierror, [&] {
    Status st(status);
    int f = 0;
    const int rc = MPI_Request_get_status(MPI_Request_f2c(*req), &f, st.c());
    *flag = logical(f);
    if (f) st.done();
    return rc;
  });
}

// ---- Communicators, datatypes, the barrier

FERRY_FORTRAN_REQUEST(mpi_comm_free, MPI_COMM_FREE, (F* c, F* ierror)) {
  entry(ierror, [&] {
    MPI_Comm h = comm(c);
    const int rc = MPI_Comm_free(&h);
    *c = MPI_Comm_c2f(h);
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_comm_disconnect, MPI_COMM_DISCONNECT, (F* c, F* ierror)) {
  entry(ierror, [&] {
    MPI_Comm h = comm(c);
    const int rc = MPI_Comm_disconnect(&h);
    *c = MPI_Comm_c2f(h);
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_type_commit, MPI_TYPE_COMMIT, (F* t, F* ierror)) {
  entry(ierror, [&] {
    MPI_Datatype h = type(t);
    const int rc = MPI_Type_commit(&h);
    *t = MPI_Type_c2f(h);
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_type_free, MPI_TYPE_FREE, (F* t, F* ierror)) {
  entry(ierror, [&] {
    MPI_Datatype h = type(t);
    const int rc = MPI_Type_free(&h);
    *t = MPI_Type_c2f(h);
    return rc;
  });
}
FERRY_FORTRAN_REQUEST(mpi_barrier, MPI_BARRIER, (F* c, F* ierror)) {
  entry(ierror, [&] { return MPI_Barrier(comm(c)); });
}

#endif  // OPEN_MPI or MPICH
