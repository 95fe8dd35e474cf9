// libferry-mpi: the MPI interposer. Built on the MPI profiling interface: each MPI_* function
// here does Ferry's part and calls the PMPI_* one. Load it with LD_PRELOAD, or link it before the
// MPI library.
//
// This file: initialization, datatype commit/free (every committed type is translated and cached
// once, at commit, as DESIGN.md says), MPI_Pack/MPI_Unpack on GPU buffers, and point-to-point:
// blocking (send, bsend, ssend, rsend, recv, mrecv, sendrecv, sendrecv_replace), non-blocking
// (isend, issend, irsend, irecv, imrecv) and persistent (send/ssend/rsend/recv_init, start,
// startall) calls with GPU buffers, completed by every wait and test. Collectives:
// collectives.cpp; same-node IPC: ipc.cpp.
//
// Methods. A GPU message to another process on this node, at or above the IPC threshold, goes over
// CUDA IPC (ipc.hpp): the receiver copies from the sender's GPU memory. Otherwise it is staged
// through pinned, mapped host memory: the GPU engine packs straight into it (one-shot), the system
// MPI moves it as bytes, the receiver's GPU engine unpacks from it (for a non-blocking receive,
// when the request completes). Host buffers go straight to PMPI after one cached pointer check.
// Matching, ordering, statuses (source, tag, count in bytes, so MPI_Get_count with the receive
// datatype is right) and truncation errors stay the system MPI's.
//
// Probes of staged messages need nothing: they travel as bytes, so a probe's status counts the
// bytes and MPI_Get_count with the receive datatype divides them.
#include <ferry/ferry_mpi.h>

#include "mpi/common.hpp"
#include "mpi/early.hpp"
#include "mpi/ipc.hpp"
#include "mpi/persistent.hpp"
#include "mpi/typemap.hpp"
#include "sys/env.hpp"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace {

using namespace ferry::mpi_detail;

// A blocking call and its non-blocking form: while IPC receives are pending, blocking calls are
// made as the non-blocking one plus a wait that serves those receives.
using SendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm);
using IsendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);
struct SendKind {
  SendFn blocking;
  IsendFn nonblocking;
  ipc::Mode mode;
  bool ipc;  // may go over IPC (not bsend: it must complete locally)
};
const SendKind kSend{PMPI_Send, PMPI_Isend, ipc::Mode::standard, true};
const SendKind kSsend{PMPI_Ssend, PMPI_Issend, ipc::Mode::sync, true};
const SendKind kRsend{PMPI_Rsend, PMPI_Irsend, ipc::Mode::ready, true};
const SendKind kBsend{PMPI_Bsend, PMPI_Ibsend, ipc::Mode::standard, false};

int send_bytes(const SendKind& k, const void* buf, int count, MPI_Datatype type, int dest, int tag,
               MPI_Comm comm) {
  if (!requests().polling()) return k.blocking(buf, count, type, dest, tag, comm);
  MPI_Request r;
  int rc = k.nonblocking(buf, count, type, dest, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_serving(&r, MPI_STATUS_IGNORE) : rc;
}

// The full paths below are kept out of line, so that the MPI_* functions' fast path (hot::) is a
// few loads and a tail call, without their stack frames.

// A blocking send: host buffers straight through; GPU data over IPC or packed into staging.
[[gnu::noinline]] int send(const SendKind& k, const void* buf, int count, MPI_Datatype type, int dest, int tag,
         MPI_Comm comm) {
  if (!on_device(buf, count, type)) {
    if (typemap::marked(type))  // issue 14 hook: the MPI packs this type against the standard
      return typemap::send(buf, count, type, comm,
                           [&](const void* b, int n) { return send(k, b, n, MPI_BYTE, dest, tag, comm); });
    int rc = MPI_SUCCESS;
    if (k.ipc && ipc::host_protocol_test() &&
        ipc::try_pipelined(k.mode, buf, count, type, dest, tag, comm, nullptr, &rc))
      return rc;
    return send_bytes(k, buf, count, type, dest, tag, comm);
  }
  try {
    int rc = MPI_SUCCESS;
    if (k.ipc && ipc::try_send(k.mode, buf, count, type, dest, tag, comm, nullptr, &rc)) return rc;
    if (k.ipc && ipc::try_pipelined(k.mode, buf, count, type, dest, tag, comm, nullptr, &rc)) return rc;
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    Staged host(bytes);
    ipc::stage_pack(buf, count, *t, host.p);
    return send_bytes(k, host.p, bytes, MPI_BYTE, dest, tag, comm);
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

[[gnu::noinline]] int isend(const SendKind& k, const void* buf, int count, MPI_Datatype type, int dest, int tag,
          MPI_Comm comm, MPI_Request* request) {
  serve();
  if (!on_device(buf, count, type)) {
    if (typemap::marked(type))  // issue 14 hook
      return typemap::isend(buf, count, type, comm, request, [&](const void* b, int n) {
        return k.nonblocking(b, n, MPI_BYTE, dest, tag, comm, request);
      });
    int rc = MPI_SUCCESS;
    if (k.ipc && ipc::host_protocol_test() &&
        ipc::try_pipelined(k.mode, buf, count, type, dest, tag, comm, request, &rc))
      return rc;
    return k.nonblocking(buf, count, type, dest, tag, comm, request);
  }
  try {
    int rc = MPI_SUCCESS;
    if (k.ipc && ipc::try_send(k.mode, buf, count, type, dest, tag, comm, request, &rc)) return rc;
    if (k.ipc && ipc::try_pipelined(k.mode, buf, count, type, dest, tag, comm, request, &rc)) return rc;
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    return post_staged(bytes, staged_pending(false, buf, count, t), true, request, [&](void* host) {
      return k.nonblocking(host, bytes, MPI_BYTE, dest, tag, comm, request);
    });
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

Target target(void* buf, int count, std::shared_ptr<const ferry::Type> t, bool device) {
  Target to;
  to.buf = buf;
  to.count = count;
  to.type = std::move(t);
  to.device = device;
  return to;
}

std::shared_ptr<const ferry::Type> type_or_null(MPI_Datatype type) {
  try {
    return ferry::lookup(type);
  } catch (const ferry::Error&) {
    return nullptr;  // a type Ferry cannot read: no stub can be told apart in it
  }
}

// A stub fetched with an error goes through the communicator's error handler, as MPI's own would.
int stub_result(int r, MPI_Comm comm) {
  if (r != MPI_SUCCESS && comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, r);
  return r;
}

// After a receive into the user's host buffer: the message may be an IPC stub.
int host_arrived(int rc, void* buf, int count, MPI_Datatype type, MPI_Comm comm, MPI_Status* st) {
  int got = 0;
  if (rc != MPI_SUCCESS || PMPI_Get_count(st, MPI_BYTE, &got) != MPI_SUCCESS || got != ipc::kStubBytes)
    return rc;  // only a message of exactly a stub's size can be one
  int r = MPI_SUCCESS;
  if (rc == MPI_SUCCESS &&
      ipc::finish_recv(target(buf, count, type_or_null(type), false), nullptr, ipc::ranks_of(comm), st, &r))
    return stub_result(r, comm);
  return rc;
}

// After a staged receive of GPU data: fetch an IPC message, or unpack the bytes that arrived.
int device_arrived(int rc, void* staging, void* buf, int count,
                   const std::shared_ptr<const ferry::Type>& t, bool may_be_stub, MPI_Comm comm,
                   MPI_Status* st) {
  if (rc != MPI_SUCCESS) return rc;
  int r = MPI_SUCCESS;
  if (may_be_stub && ipc::finish_recv(target(buf, count, t, true), staging, ipc::ranks_of(comm), st, &r))
    return stub_result(r, comm);
  unpack_arrived(staging, st, buf, *t);
  return MPI_SUCCESS;
}

int recv_bytes(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
               MPI_Status* st) {
  if (!requests().polling()) return PMPI_Recv(buf, count, type, source, tag, comm, st);
  MPI_Request r;
  int rc = PMPI_Irecv(buf, count, type, source, tag, comm, &r);
  return rc == MPI_SUCCESS ? wait_serving(&r, st) : rc;
}

[[gnu::noinline]] int recv(void* buf, int count, MPI_Datatype type, int source, int tag,
                           MPI_Comm comm, MPI_Status* status) {
  const bool may = ipc::enabled() && ipc::may_get_stub(count, type, source, comm, true);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  if (early::any()) {
    try {
      int rc = MPI_SUCCESS;
      if (early::recv(buf, count, type, source, tag, comm, st, &rc)) return stub_result(rc, comm);
    } catch (const ferry::Error& e) {
      return report(comm, e);
    }
  }
  if (!on_device(buf, count, type)) {
    if (typemap::marked(type))  // issue 14 hook
      return typemap::recv(buf, count, type, comm, st, [&](void* b, int n, MPI_Status* s) {
        return recv(b, n, MPI_BYTE, source, tag, comm, s);
      });
    if (!may && !requests().polling()) return PMPI_Recv(buf, count, type, source, tag, comm, status);
    try {
      return host_arrived(recv_bytes(buf, count, type, source, tag, comm, st), buf, count, type,
                          comm, st);
    } catch (const ferry::Error& e) {
      return report(comm, e);
    }
  }
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    Staged host(std::max(bytes, ipc::kStubBytes));
    int rc = recv_bytes(host.p, bytes, MPI_BYTE, source, tag, comm, st);
    return device_arrived(rc, host.p, buf, count, t, may, comm, st);
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

// A non-blocking receive, or a persistent one (`init`): GPU buffers receive into staging; host
// buffers that may get an IPC stub are recorded so their completion fetches the data.
template <class Post>
int irecv(void* buf, int count, MPI_Datatype type, int source, MPI_Comm comm, bool persistent,
          MPI_Request* request, Post post) {
  serve();
  const bool may = ipc::enabled() && ipc::may_get_stub(count, type, source, comm);
  try {
    if (!on_device(buf, count, type)) {
      if (typemap::marked(type))  // issue 14 hook
        return typemap::irecv(buf, count, type, comm, persistent, may, ipc::ranks_of(comm), request,
                              [&](void* b, int n) { return post(b, n, MPI_BYTE); });
      int rc = post(buf, count, type);
      auto t = may ? type_or_null(type) : nullptr;
      if (rc != MPI_SUCCESS || !t) return rc;
      Pending p = staged_pending(true, buf, count, t, persistent);
      p.device = false;
      p.may_be_stub = true;
      p.ranks = ipc::ranks_of(comm);
      requests().add(*request, std::move(p));
      return rc;
    }
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    Pending p = staged_pending(true, buf, count, t, persistent);
    p.may_be_stub = may;
    p.ranks = ipc::ranks_of(comm);
    return post_staged(std::max(bytes, may ? ipc::kStubBytes : 0), std::move(p), false, request,
                       [&](void* host) { return post(host, bytes, MPI_BYTE); });
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

// The communicator of each message that MPI_Mprobe / MPI_Improbe matched, for its MPI_Mrecv.
class Messages {
 public:
  void add(MPI_Message m, MPI_Comm c) {
    if (m == MPI_MESSAGE_NULL || m == MPI_MESSAGE_NO_PROC) return;
    std::lock_guard lock(mutex_);
    comms_[m] = c;
  }
  MPI_Comm take(MPI_Message m) {
    std::lock_guard lock(mutex_);
    auto it = comms_.find(m);
    if (it == comms_.end()) return MPI_COMM_NULL;
    MPI_Comm c = it->second;
    comms_.erase(it);
    return c;
  }

 private:
  std::mutex mutex_;
  std::map<MPI_Message, MPI_Comm> comms_;
};
Messages& messages() {
  static auto* m = new Messages();
  return *m;
}

// Completes our requests among those PMPI just finished: `done` indices into `orig`. Returns the
// call's result, MPI_ERR_IN_STATUS when fetching an IPC message failed for one (its status says).
int complete_all(const std::vector<MPI_Request>& orig, const int* done, int ndone, MPI_Status* st,
                 bool indexed_status, int rc) {
  for (int k = 0; k < ndone; ++k) {
    const int i = done ? done[k] : k;
    if (orig[static_cast<std::size_t>(i)] == MPI_REQUEST_NULL) continue;
    MPI_Status* s = &st[indexed_status ? i : k];
    const int e = requests().complete(orig[static_cast<std::size_t>(i)], s, rc == MPI_ERR_IN_STATUS);
    if (e > 0) {
      s->MPI_ERROR = e;
      rc = MPI_ERR_IN_STATUS;
    }
  }
  return rc;
}

using InitFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);

// A persistent GPU send: MPI's persistent request on a staging buffer, which each MPI_Start packs
// into; remembered too, so that a start the model sends over IPC goes that way (persistent.hpp).
int staged_send_init(InitFn init, ipc::Mode mode, bool buffered, const void* buf, int count,
                     MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* request) {
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    const int rc = post_staged(bytes, staged_pending(false, buf, count, t, true), false, request,
                               [&](void* host) { return init(host, bytes, MPI_BYTE, dest, tag, comm, request); });
    if (rc == MPI_SUCCESS) persistent::forget(*request);
    if (rc == MPI_SUCCESS && (buffered || ipc::enabled())) {
      persistent::Args a;
      a.buf = const_cast<void*>(buf);
      a.count = count;
      a.type = t;
      a.peer = dest;
      a.tag = tag;
      a.comm = comm;
      a.mode = mode;
      a.device = true;
      if (buffered) {
        a.buffered = true;
        a.staging = requests().staging_of(*request);
        a.bytes = bytes;
      }
      persistent::remember(*request, std::move(a));
    }
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

// Barriers where IPC is on: pending IPC receives must be served while a rank waits in a barrier
// (their senders may be waiting for them before they reach it), and a rank cannot switch alone
// to MPI_Ibarrier (MPI does not match blocking with non-blocking collectives). So every rank runs
// Ferry's own barrier, a dissemination barrier of zero-byte messages on a private duplicate of
// the communicator (made at its first barrier, which all its ranks enter), serving meanwhile.
class BarrierComms {
 public:
  MPI_Comm get(MPI_Comm comm) {
    {
      std::lock_guard lock(mutex_);
      auto it = dups_.find(comm);
      if (it != dups_.end()) return it->second;
    }
    MPI_Comm dup = MPI_COMM_NULL;
    if (PMPI_Comm_dup(comm, &dup) != MPI_SUCCESS) return MPI_COMM_NULL;
    std::lock_guard lock(mutex_);
    dups_[comm] = dup;
    return dup;
  }
  void forget(MPI_Comm comm) {
    MPI_Comm dup = MPI_COMM_NULL;
    {
      std::lock_guard lock(mutex_);
      auto it = dups_.find(comm);
      if (it == dups_.end()) return;
      dup = it->second;
      dups_.erase(it);
    }
    PMPI_Comm_free(&dup);
  }

 private:
  std::mutex mutex_;
  std::map<MPI_Comm, MPI_Comm> dups_;
};
BarrierComms& barrier_comms() {
  static auto* b = new BarrierComms();
  return *b;
}

// MPI_Comm_free / MPI_Comm_disconnect: what Ferry keeps per communicator goes with it.
void forget_comm(MPI_Comm comm) {
  persistent::comm_freed(comm);
  ipc::forget(comm);
  barrier_comms().forget(comm);
}

// A receive and a send posted together and completed together (what MPI_Sendrecv means), through
// Ferry's own non-blocking calls and MPI_Waitall; the status is the receive's.
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

// The transport's collective setup (topology); a failure leaves the interposer without IPC, never
// an exception out of MPI_Init.
void start_transport() {
  try {
    ferry::transport::init();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-mpi: the transport could not start (%s); Ferry's IPC is off\n", e.what());
  }
}

void say_initialized(const char* how) {
  if (!verbose()) return;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "ferry-mpi: rank %d initialized (%s; GPU engine %s; IPC %s)\n", rank, how,
               ferry::gpu::available() ? "available" : "not available",
               ipc::enabled() ? "on" : "off");
  if (rank == 0) std::fputs(ferry::detail::env::settings_text("ferry-mpi: setting ").c_str(), stderr);
}

}  // namespace

#define FERRY_EXPORT __attribute__((visibility("default")))

extern "C" {

// What each does: ferry/ferry_mpi.h.
FERRY_EXPORT int ferry_mpi_loaded(void) { return 1; }
FERRY_EXPORT long ferry_mpi_ipc_sent(void) { return ipc::sent(); }
FERRY_EXPORT long ferry_mpi_ipc_received(void) { return ipc::received(); }
FERRY_EXPORT long ferry_mpi_pipelined_sent(void) { return ipc::pipelined(); }
FERRY_EXPORT const char* ferry_mpi_locality(int peer, int device) { return ipc::locality_name(peer, device); }
FERRY_EXPORT long ferry_mpi_pending(void) {
  return static_cast<long>(hot::pending.load()) + hot::stand_ins.load();
}
FERRY_EXPORT int ferry_mpi_force_method(const char* name) {
  if (!name) return ipc::force_method(std::nullopt), 0;
  auto m = ferry::model::method_named(name);
  if (!m) return -1;
  ipc::force_method(m);
  return 0;
}
FERRY_EXPORT int ferry_mpi_force_pack(const char* name) {
  if (!name) return ipc::force_pack(std::nullopt), 0;
  auto p = ferry::model::pack_named(name);
  if (!p) return -1;
  ipc::force_pack(p);
  return 0;
}

int MPI_Init(int* argc, char*** argv) {
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) {
    start_transport();
    ipc::init();
    hot::init();
    typemap::probe();  // issue 14 hook
    say_initialized("MPI_Init");
  }
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) {
    start_transport();
    ipc::init();
    hot::init();
    typemap::probe();  // issue 14 hook
    say_initialized(*provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE" : "MPI_Init_thread");
  }
  return rc;
}

int MPI_Finalize(void) {
  requests().drain();  // requests the application freed while active
  ipc::finalize();
  ferry::transport::finalize();
  return PMPI_Finalize();
}

int MPI_Comm_free(MPI_Comm* comm) {
  if (comm) forget_comm(*comm);
  return PMPI_Comm_free(comm);
}

int MPI_Comm_disconnect(MPI_Comm* comm) {
  if (comm) forget_comm(*comm);
  return PMPI_Comm_disconnect(comm);
}

int MPI_Type_commit(MPI_Datatype* type) {
  int rc = PMPI_Type_commit(type);
  if (rc != MPI_SUCCESS) return rc;
  try {
    ferry::commit(*type);
    typemap::classify(*type);  // issue 14 hook
  } catch (const ferry::Error& e) {
    // The system MPI still handles the type on host buffers; GPU buffers with it will be refused.
    if (verbose()) std::fprintf(stderr, "ferry-mpi: type not translated: %s\n", e.what());
  }
  return rc;
}

int MPI_Type_free(MPI_Datatype* type) {
  if (type && *type != MPI_DATATYPE_NULL) {
    typemap::forget(*type);  // issue 14 hook
    try {
      ferry::release(*type);
    } catch (const ferry::Error&) {  // never committed through Ferry: nothing cached
    }
  }
  return PMPI_Type_free(type);
}

int MPI_Pack(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize,
             int* position, MPI_Comm comm) {
  if (!on_device(inbuf, incount, type) && !on_device(outbuf, 1, MPI_BYTE) && !typemap::marked(type))  // issue 14
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
  if (!on_device(outbuf, outcount, type) && !on_device(inbuf, 1, MPI_BYTE) && !typemap::marked(type))  // issue 14
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
  if (hot::plain_send(buf, count, type)) return PMPI_Send(buf, count, type, dest, tag, comm);
  return send(kSend, buf, count, type, dest, tag, comm);
}

int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (hot::plain_send(buf, count, type)) return PMPI_Ssend(buf, count, type, dest, tag, comm);
  return send(kSsend, buf, count, type, dest, tag, comm);
}

int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (hot::plain_send(buf, count, type)) return PMPI_Rsend(buf, count, type, dest, tag, comm);
  return send(kRsend, buf, count, type, dest, tag, comm);
}

int MPI_Bsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (hot::plain_send(buf, count, type)) return PMPI_Bsend(buf, count, type, dest, tag, comm);
  return send(kBsend, buf, count, type, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  if (hot::plain_recv(buf, count, type, ipc::kStubBytes))
    return PMPI_Recv(buf, count, type, source, tag, comm, status);
  return recv(buf, count, type, source, tag, comm, status);
}

// Probes: a stub-sized message from a same-node process is taken early so the status can say
// its real size (early.hpp); messages taken early answer probes first.
[[gnu::noinline]] static int probe(int source, int tag, MPI_Comm comm, int* flag,
                                   MPI_Message* message, MPI_Status* status, bool blocking) {
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  try {
    for (;;) {
      if (early::probe(source, tag, comm, st, message)) {
        *flag = 1;
        return MPI_SUCCESS;
      }
      int rc = message ? PMPI_Improbe(source, tag, comm, flag, message, st)
                       : PMPI_Iprobe(source, tag, comm, flag, st);
      if (rc != MPI_SUCCESS) return rc;
      if (*flag) {
        if (ipc::enabled()) {
          bool taken = false;
          rc = early::after_probe(comm, st, message, &taken);
          if (message && !taken) messages().add(*message, comm);  // MPI's handle: its Mrecv needs comm
        }
        return rc;
      }
      if (!blocking) return MPI_SUCCESS;
      requests().progress();
    }
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

// MPI_Iprobe found a message (`st`) and nothing was pending: a stub-sized one from a same-node
// process is taken early.
[[gnu::noinline]] static int found(MPI_Comm comm, MPI_Status* st) {
  try {
    bool taken = false;
    return early::after_probe(comm, st, nullptr, &taken);
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  int flag = 0;
  if (!ipc::enabled() && !requests().polling())
    return PMPI_Mprobe(source, tag, comm, message, status);
  return probe(source, tag, comm, &flag, message, status, true);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                MPI_Status* status) {
  serve();
  if (!ipc::enabled()) return PMPI_Improbe(source, tag, comm, flag, message, status);
  return probe(source, tag, comm, flag, message, status, false);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  int flag = 0;
  if (!ipc::enabled() && !requests().polling()) return PMPI_Probe(source, tag, comm, status);
  return probe(source, tag, comm, &flag, nullptr, status, true);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  // Polling with nothing to serve or take: MPI answers; only a message it finds may be a stub.
  if (hot::quiet()) {
    if (!hot::stubs_on) return PMPI_Iprobe(source, tag, comm, flag, status);
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    const int rc = PMPI_Iprobe(source, tag, comm, flag, st);
    return rc == MPI_SUCCESS && *flag ? found(comm, st) : rc;
  }
  serve();
  if (!ipc::enabled()) return PMPI_Iprobe(source, tag, comm, flag, status);
  return probe(source, tag, comm, flag, nullptr, status, false);
}

// A matched receive (after MPI_Mprobe/MPI_Improbe).
int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  if (early::any()) {
    MPI_Status local;
    int rc = MPI_SUCCESS;
    MPI_Comm from = MPI_COMM_WORLD;
    try {
      if (early::mrecv(buf, count, type, message, status == MPI_STATUS_IGNORE ? &local : status, &rc,
                       &from))
        return stub_result(rc, from);
    } catch (const ferry::Error& e) {
      return report(from, e);
    }
  }
  const MPI_Comm comm = message ? messages().take(*message) : MPI_COMM_NULL;
  const bool may = comm != MPI_COMM_NULL && ipc::may_get_stub(count, type, MPI_ANY_SOURCE, comm, true);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  try {
    if (!on_device(buf, count, type)) {
      if (typemap::marked(type))  // issue 14 hook
        return typemap::recv(buf, count, type, comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, st,
                             [&](void* b, int n, MPI_Status* s) {
                               const int rc = PMPI_Mrecv(b, n, MPI_BYTE, message, s);
                               return may ? host_arrived(rc, b, n, MPI_BYTE, comm, s) : rc;
                             });
      int rc = PMPI_Mrecv(buf, count, type, message, st);
      return may ? host_arrived(rc, buf, count, type, comm, st) : rc;
    }
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    Staged host(std::max(bytes, ipc::kStubBytes));
    int rc = PMPI_Mrecv(host.p, bytes, MPI_BYTE, message, st);
    return device_arrived(rc, host.p, buf, count, t, may, comm, st);
  } catch (const ferry::Error& e) {
    return report(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, e);
  }
}

int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message,
               MPI_Request* request) {
  if (early::any()) {
    MPI_Status st;
    int rc = MPI_SUCCESS;
    MPI_Comm from = MPI_COMM_WORLD;
    try {
      if (early::mrecv(buf, count, type, message, &st, &rc, &from))
        return early::completed_request(st, rc, from, request);
    } catch (const ferry::Error& e) {
      return report(from, e);
    }
  }
  const MPI_Comm comm = message ? messages().take(*message) : MPI_COMM_NULL;
  if (comm == MPI_COMM_NULL && !on_device(buf, count, type) && !typemap::marked(type))  // issue 14 hook
    return PMPI_Imrecv(buf, count, type, message, request);
  return irecv(buf, count, type, MPI_ANY_SOURCE, comm == MPI_COMM_NULL ? MPI_COMM_SELF : comm,
               false, request, [&](void* b, int n, MPI_Datatype ty) {
                 return PMPI_Imrecv(b, n, ty, message, request);
               });
}

// In-place exchange: the outgoing data is copied out first (packed into staging for GPU data,
// MPI_Pack for host data), then it is a receive into the buffer and a send of the copy, completed
// together, through the calls above (stubs, probes taken early and progress included).
int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  const bool dev = on_device(buf, count, type);
  const bool may = ipc::enabled() && ipc::may_get_stub(count, type, source, comm, true);
  if (!dev && !may && !requests().polling() && !early::any() && !typemap::marked(type))  // issue 14 hook
    return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  try {
    std::unique_ptr<Staged> staged;
    std::vector<char> packed;
    const void* sbuf = nullptr;
    int scount = 0;
    MPI_Datatype stype = MPI_BYTE;
    if (dev) {
      auto t = staged_type(type, count, &scount);
      staged = std::make_unique<Staged>(scount);
      ipc::stage_pack(buf, count, *t, staged->p);
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
        [&](MPI_Request* r) { return MPI_Irecv(buf, count, type, source, recvtag, comm, r); },
        [&](MPI_Request* r) { return PMPI_Isend(sbuf, scount, stype, dest, sendtag, comm, r); },
        status);
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  if (hot::plain_send(buf, count, type)) return PMPI_Isend(buf, count, type, dest, tag, comm, request);
  return isend(kSend, buf, count, type, dest, tag, comm, request);
}

int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  if (hot::plain_send(buf, count, type)) return PMPI_Issend(buf, count, type, dest, tag, comm, request);
  return isend(kSsend, buf, count, type, dest, tag, comm, request);
}

int MPI_Irsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  if (hot::plain_send(buf, count, type)) return PMPI_Irsend(buf, count, type, dest, tag, comm, request);
  return isend(kRsend, buf, count, type, dest, tag, comm, request);
}

int MPI_Ibsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  if (hot::plain_send(buf, count, type)) return PMPI_Ibsend(buf, count, type, dest, tag, comm, request);
  return isend(kBsend, buf, count, type, dest, tag, comm, request);
}

// MPI_Irecv's full path: messages taken early, GPU buffers, receives that may get a stub.
[[gnu::noinline]] static int irecv_full(void* buf, int count, MPI_Datatype type, int source, int tag,
                                        MPI_Comm comm, MPI_Request* request) {
  if (early::any()) {  // a message a probe took early completes the receive at once
    MPI_Status st;
    int rc = MPI_SUCCESS;
    try {
      if (early::recv(buf, count, type, source, tag, comm, &st, &rc))
        return early::completed_request(st, rc, comm, request);
    } catch (const ferry::Error& e) {
      return report(comm, e);
    }
  }
  if (!ipc::enabled() && !on_device(buf, count, type) && !typemap::marked(type))  // issue 14 hook
    return PMPI_Irecv(buf, count, type, source, tag, comm, request);
  return irecv(buf, count, type, source, comm, false, request,
               [&](void* b, int n, MPI_Datatype ty) {
                 return PMPI_Irecv(b, n, ty, source, tag, comm, request);
               });
}

int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request* request) {
  if (hot::plain_recv(buf, count, type, ipc::kMinBytes))
    return PMPI_Irecv(buf, count, type, source, tag, comm, request);
  return irecv_full(buf, count, type, source, tag, comm, request);
}

// Persistent GPU sends: staged (each MPI_Start packs into the request's own staging buffer), or
// over IPC when the model picks it for the message (persistent.hpp). MPI_Bsend_init is staged
// only (a buffered send must complete locally), each start an MPI_Ibsend of the staging buffer
// (persistent.hpp says why). A new persistent handle first clears whatever Ferry remembered under
// that value (a request MPI freed on an error).
int send_init(InitFn init, ipc::Mode mode, bool buffered, const void* buf, int count,
              MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request* request) {
  int rc;
  if (!on_device(buf, count, type)) {
    rc = init(buf, count, type, dest, tag, comm, request);
    if (rc == MPI_SUCCESS) persistent::forget(*request);
    return rc;
  }
  return staged_send_init(init, mode, buffered, buf, count, type, dest, tag, comm, request);
}

int MPI_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return send_init(PMPI_Send_init, ipc::Mode::standard, false, buf, count, type, dest, tag, comm, request);
}

int MPI_Ssend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return send_init(PMPI_Ssend_init, ipc::Mode::sync, false, buf, count, type, dest, tag, comm, request);
}

int MPI_Rsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return send_init(PMPI_Rsend_init, ipc::Mode::ready, false, buf, count, type, dest, tag, comm, request);
}

int MPI_Bsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return send_init(PMPI_Bsend_init, ipc::Mode::standard, true, buf, count, type, dest, tag, comm, request);
}

int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  if (!ipc::enabled() && !on_device(buf, count, type) && !typemap::marked(type)) {  // issue 14 hook
    const int rc = PMPI_Recv_init(buf, count, type, source, tag, comm, request);
    if (rc == MPI_SUCCESS) persistent::forget(*request);
    return rc;
  }
  const int rc = irecv(buf, count, type, source, comm, true, request,
                       [&](void* b, int n, MPI_Datatype ty) {
                         return PMPI_Recv_init(b, n, ty, source, tag, comm, request);
                       });
  // Remembered while the stub protocol is on: a probe may take its message early (persistent.hpp).
  if (rc == MPI_SUCCESS) persistent::forget(*request);
  if (rc == MPI_SUCCESS && ipc::enabled() && source != MPI_PROC_NULL) {
    persistent::Args a;
    a.recv = true;
    a.buf = buf;
    a.count = count;
    a.type = type_or_null(type);
    a.peer = source;
    a.tag = tag;
    a.comm = comm;
    a.device = on_device(buf, count, type);
    if (a.type) persistent::remember(*request, std::move(a));
  }
  return rc;
}

// A persistent send packs before MPI starts it; a request becomes active in Ferry's table only
// once MPI has started it (so progress never asks MPI about a request that is not started).
int MPI_Start(MPI_Request* request) {
  if (!request) return PMPI_Start(request);
  try {
    int rc = MPI_SUCCESS;
    if (persistent::start(*request, &rc)) return rc;
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
  if (hot::no_requests()) return PMPI_Start(request);
  const MPI_Request r = *request;
  try {
    requests().start(r);
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
  int rc = PMPI_Start(request);
  if (rc == MPI_SUCCESS) requests().activate(r);
  return rc;
}

int MPI_Startall(int count, MPI_Request requests_[]) {
  if (hot::no_requests() && hot::remembered_sends.load() == 0 && !early::any())
    return PMPI_Startall(count, requests_);
  if (count < 0 || (count > 0 && !requests_)) return PMPI_Startall(count, requests_);
  // Those Ferry starts itself are left out of MPI's start (MPI starts the rest, in order).
  std::vector<MPI_Request> rest;
  try {
    for (int i = 0; i < count; ++i) {
      int rc = MPI_SUCCESS;
      if (requests_[i] != MPI_REQUEST_NULL && persistent::start(requests_[i], &rc)) {
        if (rc != MPI_SUCCESS) return rc;
        continue;
      }
      rest.push_back(requests_[i]);
    }
    for (MPI_Request r : rest) requests().start(r);
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
  if (rest.empty()) return MPI_SUCCESS;
  int rc = PMPI_Startall(static_cast<int>(rest.size()), rest.data());
  if (rc == MPI_SUCCESS)
    for (MPI_Request r : rest) requests().activate(r);
  return rc;
}

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (hot::idle()) return PMPI_Wait(request, status);
  persistent::Swap swap(1, request);
  const MPI_Request orig = *request;
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc = wait_serving(request, st);
  if (rc != MPI_SUCCESS && orig != MPI_REQUEST_NULL) requests().drop(orig);
  if (rc == MPI_SUCCESS && orig != MPI_REQUEST_NULL) {
    try {
      const int e = requests().complete(orig, st);
      if (e > 0) rc = e;
    } catch (const ferry::Error& e) {
      return report(MPI_COMM_WORLD, e);
    }
  }
  return rc;
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (hot::idle()) return PMPI_Test(request, flag, status);
  persistent::Swap swap(1, request);
  serve();
  const MPI_Request orig = *request;
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc = PMPI_Test(request, flag, st);
  if (rc != MPI_SUCCESS && orig != MPI_REQUEST_NULL) requests().drop(orig);
  if (rc == MPI_SUCCESS && *flag && orig != MPI_REQUEST_NULL) {
    try {
      const int e = requests().complete(orig, st);
      if (e > 0) rc = e;
    } catch (const ferry::Error& e) {
      return report(MPI_COMM_WORLD, e);
    }
  }
  return rc;
}

// The "all", "any" and "some" forms: when IPC receives are pending, the wait is a loop of the
// test form that serves them.
int MPI_Waitall(int count, MPI_Request requests_[], MPI_Status statuses[]) {
  if (hot::idle()) return PMPI_Waitall(count, requests_, statuses);
  persistent::Swap swap(count, requests_);
  std::vector<MPI_Request> orig(requests_, requests_ + count);
  Statuses st(count, statuses);
  int rc;
  if (!requests().polling()) {
    rc = PMPI_Waitall(count, requests_, st.use);
  } else {
    int flag = 0;
    for (;;) {
      rc = PMPI_Testall(count, requests_, &flag, st.use);
      if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || flag) break;
      requests().progress();
    }
  }
  try {
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)
      rc = complete_all(orig, nullptr, count, st.use, true, rc);
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
  return rc;
}

int MPI_Testall(int count, MPI_Request requests_[], int* flag, MPI_Status statuses[]) {
  if (hot::idle()) return PMPI_Testall(count, requests_, flag, statuses);
  persistent::Swap swap(count, requests_);
  serve();
  std::vector<MPI_Request> orig(requests_, requests_ + count);
  Statuses st(count, statuses);
  int rc = PMPI_Testall(count, requests_, flag, st.use);
  try {
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *flag)
      rc = complete_all(orig, nullptr, count, st.use, true, rc);
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
  return rc;
}

int MPI_Waitany(int count, MPI_Request requests_[], int* index, MPI_Status* status) {
  if (hot::idle()) return PMPI_Waitany(count, requests_, index, status);
  persistent::Swap swap(count, requests_);
  std::vector<MPI_Request> orig(requests_, requests_ + count);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc;
  if (!requests().polling()) {
    rc = PMPI_Waitany(count, requests_, index, st);
  } else {
    int flag = 0;
    for (;;) {
      rc = PMPI_Testany(count, requests_, index, &flag, st);
      if (rc != MPI_SUCCESS || flag) break;
      requests().progress();
    }
  }
  try {
    if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED) {
      rc = complete_all(orig, index, 1, st, false, rc);
      if (rc == MPI_ERR_IN_STATUS) rc = st->MPI_ERROR;
    }
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
  return rc;
}

int MPI_Testany(int count, MPI_Request requests_[], int* index, int* flag, MPI_Status* status) {
  if (hot::idle()) return PMPI_Testany(count, requests_, index, flag, status);
  persistent::Swap swap(count, requests_);
  serve();
  std::vector<MPI_Request> orig(requests_, requests_ + count);
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc = PMPI_Testany(count, requests_, index, flag, st);
  try {
    if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED) {
      rc = complete_all(orig, index, 1, st, false, rc);
      if (rc == MPI_ERR_IN_STATUS) rc = st->MPI_ERROR;
    }
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
  return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests_[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  if (hot::idle()) return PMPI_Waitsome(incount, requests_, outcount, indices, statuses);
  persistent::Swap swap(incount, requests_);
  std::vector<MPI_Request> orig(requests_, requests_ + incount);
  Statuses st(incount, statuses);
  int rc;
  if (!requests().polling()) {
    rc = PMPI_Waitsome(incount, requests_, outcount, indices, st.use);
  } else {
    for (;;) {
      rc = PMPI_Testsome(incount, requests_, outcount, indices, st.use);
      if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || *outcount != 0) break;
      requests().progress();
    }
  }
  try {
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED)
      rc = complete_all(orig, indices, *outcount, st.use, false, rc);
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
  return rc;
}

int MPI_Testsome(int incount, MPI_Request requests_[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  if (hot::idle()) return PMPI_Testsome(incount, requests_, outcount, indices, statuses);
  persistent::Swap swap(incount, requests_);
  serve();
  std::vector<MPI_Request> orig(requests_, requests_ + incount);
  Statuses st(incount, statuses);
  int rc = PMPI_Testsome(incount, requests_, outcount, indices, st.use);
  try {
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED)
      rc = complete_all(orig, indices, *outcount, st.use, false, rc);
  } catch (const ferry::Error& e) {
    return report(MPI_COMM_WORLD, e);
  }
  return rc;
}

// A send over IPC cannot be taken back once its stub is out (MPI lets a cancel fail: the request
// then completes normally and MPI_Test_cancelled says false). Everything else goes to MPI; a
// cancelled staged receive unpacks nothing.
int MPI_Cancel(MPI_Request* request) {
  if (request && !hot::idle()) {
    MPI_Request in = persistent::inner(*request);
    if (in != MPI_REQUEST_NULL) return MPI_Cancel(&in);  // the stand-in is what is under way
    if (!requests().cancellable(*request)) return MPI_SUCCESS;
  }
  return PMPI_Cancel(request);
}

// A completed receive's buffer is the application's once MPI says so here too: Ferry puts staged
// or IPC data in place before reporting completion.
int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  if (hot::idle() || request == MPI_REQUEST_NULL)
    return PMPI_Request_get_status(request, flag, status);
  if (MPI_Request in = persistent::inner(request); in != MPI_REQUEST_NULL) request = in;
  serve();
  MPI_Status local;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
  int rc = PMPI_Request_get_status(request, flag, st);
  if (rc == MPI_SUCCESS && *flag) {
    try {
      requests().deliver_early(request, st);
    } catch (const ferry::Error& e) {
      return report(MPI_COMM_WORLD, e);
    }
  }
  return rc;
}

// MPI_Request_free returns at once: an active request of ours stays with Ferry, which completes
// it (unpacks a receive, finishes an IPC send) in progress; an inactive persistent one is forgotten.
int MPI_Request_free(MPI_Request* request) {
  if (request && *request != MPI_REQUEST_NULL) persistent::forget(*request);
  if (request && *request != MPI_REQUEST_NULL && !hot::no_requests()) {
    const MPI_Request r = *request;
    if (requests().forget_persistent(r) == 1) return PMPI_Request_free(request);
    if (requests().detach(r)) {
      *request = MPI_REQUEST_NULL;
      return MPI_SUCCESS;
    }
  }
  return PMPI_Request_free(request);
}

int MPI_Barrier(MPI_Comm comm) {
  int inter = 0;
  if (!ipc::enabled() || comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
      inter)
    return PMPI_Barrier(comm);
  const MPI_Comm dup = barrier_comms().get(comm);
  if (dup == MPI_COMM_NULL) return PMPI_Barrier(comm);
  const int n = comm_size(dup), me = comm_rank(dup);
  for (int k = 1, round = 0; k < n; k *= 2, ++round) {
    MPI_Request r[2];
    int rc = PMPI_Irecv(nullptr, 0, MPI_BYTE, (me - k + n) % n, round, dup, &r[0]);
    if (rc == MPI_SUCCESS) rc = PMPI_Isend(nullptr, 0, MPI_BYTE, (me + k) % n, round, dup, &r[1]);
    if (rc == MPI_SUCCESS) rc = wait_serving(&r[0], MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS) rc = wait_serving(&r[1], MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

// A GPU side, or a receive that may get an IPC stub, makes the exchange a non-blocking pair
// completed together (what MPI_Sendrecv means), through the calls above.
int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status* status) {
  if (hot::plain_send(sendbuf, sendcount, sendtype) &&
      hot::plain_recv(recvbuf, recvcount, recvtype, ipc::kMinBytes))
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                         source, recvtag, comm, status);
  // A message a probe took early must reach the receive half (MPI no longer has it).
  const bool plain = !early::any() && !typemap::marked(sendtype) && !typemap::marked(recvtype) &&  // issue 14
                     !on_device(sendbuf, sendcount, sendtype) &&
                     !on_device(recvbuf, recvcount, recvtype) && !requests().polling() &&
                     !(ipc::enabled() && ipc::may_get_stub(recvcount, recvtype, source, comm));
  if (plain)
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                         source, recvtag, comm, status);
  return exchange(
      [&](MPI_Request* r) { return MPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, r); },
      [&](MPI_Request* r) { return MPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, r); },
      status);
}

}  // extern "C"
