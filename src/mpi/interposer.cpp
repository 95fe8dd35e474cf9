// libferry-mpi: the MPI interposer, first layer. Built on the MPI profiling interface: each MPI_*
// function here does Ferry's part and calls the PMPI_* one. Load it with LD_PRELOAD, or link it
// before the MPI library.
//
// This layer covers: initialization, datatype commit/free (every committed type is translated and
// cached once, at commit, as DESIGN.md says), MPI_Pack/MPI_Unpack on GPU buffers, the blocking
// point-to-point calls (send, bsend, ssend, rsend, recv, mrecv, sendrecv, sendrecv_replace), the
// non-blocking ones (isend, issend, irsend, irecv, imrecv, completed by every wait and test) and
// persistent ones (send/ssend/rsend/recv_init, start, startall) with GPU buffers, staged through
// pinned host memory: the GPU engine packs into it, the system MPI moves it as bytes, the
// receiver's GPU engine unpacks from it (for a non-blocking receive, when the request completes).
// Host buffers go straight to PMPI after one pointer check. Matching, ordering, statuses (source,
// tag, count in bytes, so MPI_Get_count with the receive datatype is right) and truncation errors
// stay the system MPI's.
//
// Probes need nothing: staged messages travel as bytes, so a probe's status counts the bytes and
// MPI_Get_count with the receive datatype divides them.
//
// Collectives (bcast, reduce, allreduce, scan, exscan, allgather, alltoall, gather, scatter) see
// each GPU buffer through a host mirror with the same layout.
//
// Not yet here (see issue 4): the v/w and reduce_scatter collectives, non-blocking and neighbor
// collectives, CUDA IPC, one-shot and pipelined methods, the pointer-kind cache, progress of
// staged requests outside wait/test (MPI_Request_free of an active staged request waits for it).
#include "mpi/common.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace {

using namespace ferry::mpi_detail;

using SendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm);

// A blocking send of GPU data: pack into staging, send the bytes.
int staged_send(SendFn send, const void* buf, int count, MPI_Datatype type, int dest, int tag,
                MPI_Comm comm) {
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    Staged host(bytes);
    ferry::gpu::pack(buf, count, *t, host.p);
    return send(host.p, bytes, MPI_BYTE, dest, tag, comm);
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

// A blocking receive into GPU memory: receive the bytes into staging, unpack what arrived.
int staged_recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                MPI_Status* status) {
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    Staged host(bytes);
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Recv(host.p, bytes, MPI_BYTE, source, tag, comm, st);
    if (rc != MPI_SUCCESS) return rc;
    unpack_arrived(host.p, st, buf, *t);
    return MPI_SUCCESS;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

using IsendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);

int staged_isend(IsendFn isend, const void* buf, int count, MPI_Datatype type, int dest, int tag,
                 MPI_Comm comm, MPI_Request* request) {
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    return post_staged(bytes, staged_pending(false, buf, count, t), true, request,
                       [&](void* host) { return isend(host, bytes, MPI_BYTE, dest, tag, comm, request); });
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

// Completes our requests among those PMPI just finished: `done` indices into `orig`.
void complete_all(const std::vector<MPI_Request>& orig, const int* done, int ndone,
                  const MPI_Status* st, bool indexed_status, int rc) {
  for (int k = 0; k < ndone; ++k) {
    const int i = done ? done[k] : k;
    if (orig[static_cast<std::size_t>(i)] == MPI_REQUEST_NULL) continue;
    requests().complete(orig[static_cast<std::size_t>(i)], &st[indexed_status ? i : k],
                        rc == MPI_ERR_IN_STATUS);
  }
}

using InitFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);

int staged_send_init(InitFn init, const void* buf, int count, MPI_Datatype type, int dest, int tag,
                     MPI_Comm comm, MPI_Request* request) {
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    return post_staged(bytes, staged_pending(false, buf, count, t, true), false,
                       request,
                       [&](void* host) { return init(host, bytes, MPI_BYTE, dest, tag, comm, request); });
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

}  // namespace

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS && verbose()) {
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "ferry-mpi: rank %d initialized (GPU engine %s)\n", rank,
                 ferry::gpu::available() ? "available" : "not available");
  }
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS && verbose()) {
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "ferry-mpi: rank %d initialized (thread level %d)\n", rank, *provided);
  }
  return rc;
}

int MPI_Finalize(void) {
  pool().release_all();
  return PMPI_Finalize();
}

int MPI_Type_commit(MPI_Datatype* type) {
  int rc = PMPI_Type_commit(type);
  if (rc != MPI_SUCCESS) return rc;
  try {
    ferry::commit(*type);
  } catch (const ferry::Error& e) {
    // The system MPI still handles the type on host buffers; GPU buffers with it will be refused.
    if (verbose()) std::fprintf(stderr, "ferry-mpi: type not translated: %s\n", e.what());
  }
  return rc;
}

int MPI_Type_free(MPI_Datatype* type) {
  if (type && *type != MPI_DATATYPE_NULL) {
    try {
      ferry::release(*type);
    } catch (const ferry::Error&) {  // never committed through Ferry: nothing cached
    }
  }
  return PMPI_Type_free(type);
}

int MPI_Pack(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize,
             int* position, MPI_Comm comm) {
  if (!on_device(inbuf, incount, type) && !on_device(outbuf, 1, MPI_BYTE))
    return PMPI_Pack(inbuf, incount, type, outbuf, outsize, position, comm);
  try {
    auto t = ferry::lookup(type);
    i64 pos = position ? *position : 0;
    if (!position) throw ferry::Error(MPI_ERR_ARG, "position is a null pointer");
    ferry::pack(inbuf, incount, *t, outbuf, outsize, &pos);
    *position = static_cast<int>(pos);
    return MPI_SUCCESS;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
               MPI_Datatype type, MPI_Comm comm) {
  if (!on_device(outbuf, outcount, type) && !on_device(inbuf, 1, MPI_BYTE))
    return PMPI_Unpack(inbuf, insize, position, outbuf, outcount, type, comm);
  try {
    auto t = ferry::lookup(type);
    if (!position) throw ferry::Error(MPI_ERR_ARG, "position is a null pointer");
    i64 pos = *position;
    ferry::unpack(inbuf, insize, &pos, outbuf, outcount, *t);
    *position = static_cast<int>(pos);
    return MPI_SUCCESS;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!on_device(buf, count, type)) return PMPI_Send(buf, count, type, dest, tag, comm);
  return staged_send(PMPI_Send, buf, count, type, dest, tag, comm);
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!on_device(buf, count, type)) return PMPI_Ssend(buf, count, type, dest, tag, comm);
  return staged_send(PMPI_Ssend, buf, count, type, dest, tag, comm);
}

int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!on_device(buf, count, type)) return PMPI_Rsend(buf, count, type, dest, tag, comm);
  return staged_send(PMPI_Rsend, buf, count, type, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  if (!on_device(buf, count, type))
    return PMPI_Recv(buf, count, type, source, tag, comm, status);
  return staged_recv(buf, count, type, source, tag, comm, status);
}

int MPI_Bsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!on_device(buf, count, type)) return PMPI_Bsend(buf, count, type, dest, tag, comm);
  return staged_send(PMPI_Bsend, buf, count, type, dest, tag, comm);
}

// A matched receive (after MPI_Mprobe/MPI_Improbe) into GPU memory.
int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  if (!on_device(buf, count, type)) return PMPI_Mrecv(buf, count, type, message, status);
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    Staged host(bytes);
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Mrecv(host.p, bytes, MPI_BYTE, message, st);
    if (rc != MPI_SUCCESS) return rc;
    unpack_arrived(host.p, st, buf, *t);
    return MPI_SUCCESS;
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
}

int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message,
               MPI_Request* request) {
  if (!on_device(buf, count, type)) return PMPI_Imrecv(buf, count, type, message, request);
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    return post_staged(bytes, staged_pending(true, buf, count, t), false, request, [&](void* host) {
      return PMPI_Imrecv(host, bytes, MPI_BYTE, message, request);
    });
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
}

// In-place exchange of GPU data: pack to staging, exchange there, unpack what arrived.
int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  if (!on_device(buf, count, type))
    return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    Staged host(bytes);
    ferry::gpu::pack(buf, count, *t, host.p);
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Sendrecv_replace(host.p, bytes, MPI_BYTE, dest, sendtag, source, recvtag, comm, st);
    if (rc != MPI_SUCCESS) return rc;
    unpack_arrived(host.p, st, buf, *t);
    return MPI_SUCCESS;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  if (!on_device(buf, count, type)) return PMPI_Isend(buf, count, type, dest, tag, comm, request);
  return staged_isend(PMPI_Isend, buf, count, type, dest, tag, comm, request);
}

int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  if (!on_device(buf, count, type)) return PMPI_Issend(buf, count, type, dest, tag, comm, request);
  return staged_isend(PMPI_Issend, buf, count, type, dest, tag, comm, request);
}

int MPI_Irsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  if (!on_device(buf, count, type)) return PMPI_Irsend(buf, count, type, dest, tag, comm, request);
  return staged_isend(PMPI_Irsend, buf, count, type, dest, tag, comm, request);
}

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  if (!on_device(buf, count, type))
    return PMPI_Irecv(buf, count, type, source, tag, comm, request);
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    return post_staged(bytes, staged_pending(true, buf, count, t), false, request, [&](void* host) {
      return PMPI_Irecv(host, bytes, MPI_BYTE, source, tag, comm, request);
    });
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  if (!on_device(buf, count, type)) return PMPI_Send_init(buf, count, type, dest, tag, comm, request);
  return staged_send_init(PMPI_Send_init, buf, count, type, dest, tag, comm, request);
}

int MPI_Ssend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  if (!on_device(buf, count, type))
    return PMPI_Ssend_init(buf, count, type, dest, tag, comm, request);
  return staged_send_init(PMPI_Ssend_init, buf, count, type, dest, tag, comm, request);
}

int MPI_Rsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  if (!on_device(buf, count, type))
    return PMPI_Rsend_init(buf, count, type, dest, tag, comm, request);
  return staged_send_init(PMPI_Rsend_init, buf, count, type, dest, tag, comm, request);
}

int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  if (!on_device(buf, count, type))
    return PMPI_Recv_init(buf, count, type, source, tag, comm, request);
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    return post_staged(bytes, staged_pending(true, buf, count, t, true), false, request,
                       [&](void* host) {
                         return PMPI_Recv_init(host, bytes, MPI_BYTE, source, tag, comm, request);
                       });
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Start(MPI_Request* request) {
  if (!requests().empty() && request) {
    try {
      requests().start(*request);
    } catch (const ferry::Error& e) {
      return report(MPI_COMM_WORLD, e);
    }
  }
  return PMPI_Start(request);
}

int MPI_Startall(int count, MPI_Request requests_[]) {
  if (!requests().empty()) {
    try {
      for (int i = 0; i < count; ++i) requests().start(requests_[i]);
    } catch (const ferry::Error& e) {
      return report(MPI_COMM_WORLD, e);
    }
  }
  return PMPI_Startall(count, requests_);
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (requests().empty()) return PMPI_Wait(request, status);
  const MPI_Request orig = *request;
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc = PMPI_Wait(request, st);
  if (rc == MPI_SUCCESS && orig != MPI_REQUEST_NULL) requests().complete(orig, st);
  return rc;
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (requests().empty()) return PMPI_Test(request, flag, status);
  const MPI_Request orig = *request;
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc = PMPI_Test(request, flag, st);
  if (rc == MPI_SUCCESS && *flag && orig != MPI_REQUEST_NULL) requests().complete(orig, st);
  return rc;
}

int MPI_Waitall(int count, MPI_Request requests_[], MPI_Status statuses[]) {
  if (requests().empty()) return PMPI_Waitall(count, requests_, statuses);
  std::vector<MPI_Request> orig(requests_, requests_ + count);
  Statuses st(count, statuses);
  int rc = PMPI_Waitall(count, requests_, st.use);
  if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) complete_all(orig, nullptr, count, st.use, true, rc);
  return rc;
}

int MPI_Testall(int count, MPI_Request requests_[], int* flag, MPI_Status statuses[]) {
  if (requests().empty()) return PMPI_Testall(count, requests_, flag, statuses);
  std::vector<MPI_Request> orig(requests_, requests_ + count);
  Statuses st(count, statuses);
  int rc = PMPI_Testall(count, requests_, flag, st.use);
  if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *flag)
    complete_all(orig, nullptr, count, st.use, true, rc);
  return rc;
}

int MPI_Waitany(int count, MPI_Request requests_[], int* index, MPI_Status* status) {
  if (requests().empty()) return PMPI_Waitany(count, requests_, index, status);
  std::vector<MPI_Request> orig(requests_, requests_ + count);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc = PMPI_Waitany(count, requests_, index, st);
  if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED) complete_all(orig, index, 1, st, false, rc);
  return rc;
}

int MPI_Testany(int count, MPI_Request requests_[], int* index, int* flag, MPI_Status* status) {
  if (requests().empty()) return PMPI_Testany(count, requests_, index, flag, status);
  std::vector<MPI_Request> orig(requests_, requests_ + count);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc = PMPI_Testany(count, requests_, index, flag, st);
  if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED) complete_all(orig, index, 1, st, false, rc);
  return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests_[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  if (requests().empty()) return PMPI_Waitsome(incount, requests_, outcount, indices, statuses);
  std::vector<MPI_Request> orig(requests_, requests_ + incount);
  Statuses st(incount, statuses);
  int rc = PMPI_Waitsome(incount, requests_, outcount, indices, st.use);
  if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED)
    complete_all(orig, indices, *outcount, st.use, false, rc);
  return rc;
}

int MPI_Testsome(int incount, MPI_Request requests_[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  if (requests().empty()) return PMPI_Testsome(incount, requests_, outcount, indices, statuses);
  std::vector<MPI_Request> orig(requests_, requests_ + incount);
  Statuses st(incount, statuses);
  int rc = PMPI_Testsome(incount, requests_, outcount, indices, st.use);
  if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED)
    complete_all(orig, indices, *outcount, st.use, false, rc);
  return rc;
}

// Ferry cannot finish a staged request it no longer sees: freeing one waits for it first.
int MPI_Request_free(MPI_Request* request) {
  if (request && *request != MPI_REQUEST_NULL && !requests().empty()) {
    const MPI_Request r = *request;
    int state = requests().forget_persistent(r);
    if (state == 2) {  // active: finish it, then forget it
      MPI_Status st;
      MPI_Request copy = r;
      int rc = PMPI_Wait(&copy, &st);
      if (rc != MPI_SUCCESS) return rc;
      requests().complete(r, &st);
      state = requests().forget_persistent(r);
    }
    if (state == 1) return PMPI_Request_free(request);
  }
  if (request && *request != MPI_REQUEST_NULL && !requests().empty() &&
      requests().contains(*request)) {
    const MPI_Request orig = *request;
    MPI_Status st;
    int rc = PMPI_Wait(request, &st);
    if (rc == MPI_SUCCESS) requests().complete(orig, &st);
    return rc;
  }
  return PMPI_Request_free(request);
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
  const bool send_dev = on_device(sendbuf, sendcount, sendtype);
  const bool recv_dev = on_device(recvbuf, recvcount, recvtype);
  if (!send_dev && !recv_dev)
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                         source, recvtag, comm, status);
  try {
    // Each GPU side is staged; the exchange itself stays one PMPI_Sendrecv (no deadlock between
    // two ranks exchanging with each other).
    const void* sbuf = sendbuf;
    int scount = sendcount;
    MPI_Datatype stype = sendtype;
    std::unique_ptr<Staged> shost, rhost;
    if (send_dev) {
      int bytes = 0;
      auto t = staged_type(sendtype, sendcount, &bytes);
      shost = std::make_unique<Staged>(bytes);
      ferry::gpu::pack(sendbuf, sendcount, *t, shost->p);
      sbuf = shost->p;
      scount = bytes;
      stype = MPI_BYTE;
    }
    if (!recv_dev)
      return PMPI_Sendrecv(sbuf, scount, stype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                           recvtag, comm, status);
    int rbytes = 0;
    auto rt = staged_type(recvtype, recvcount, &rbytes);
    rhost = std::make_unique<Staged>(rbytes);
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Sendrecv(sbuf, scount, stype, dest, sendtag, rhost->p, rbytes,
                           MPI_BYTE, source, recvtag, comm, st);
    if (rc != MPI_SUCCESS) return rc;
    unpack_arrived(rhost->p, st, recvbuf, *rt);
    return MPI_SUCCESS;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

}  // extern "C"
