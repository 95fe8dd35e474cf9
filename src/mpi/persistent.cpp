// Persistent requests that Ferry starts itself: see persistent.hpp.
#include "mpi/persistent.hpp"

#include <map>
#include <mutex>

#include "mpi/boundary.hpp"
#include "mpi/early.hpp"
#include "mpi/p2p.hpp"
#include "mpi/requests.hpp"
#include "mpi/typemap.hpp"
#include "mpi/stream.hpp"

namespace ferry::mpi_detail::persistent {
namespace {

struct Entry {
  Args args;
  MPI_Request inner = MPI_REQUEST_NULL;  // the stand-in while active
  bool comm_gone = false;
};

class Table {
 public:
  // An entry's arguments go after the lock: a persistent collective's plan frees its communicator
  // and types through Ferry's entries, which look at this table (comm_freed).
  void add(MPI_Request r, Args a) {
    Args gone;
    std::lock_guard lock(mutex_);
    // A handle MPI freed behind Ferry's back (a persistent request it freed on an error the
    // wait wrappers did not see) may come back: the old entry goes.
    if (auto old = entries_.find(r); old != entries_.end()) {
      if (old->second.inner != MPI_REQUEST_NULL) hot::stand_ins.fetch_sub(1);
      if (!old->second.args.recv) hot::remembered_sends.fetch_sub(1);
      gone = std::move(old->second.args);
      entries_.erase(old);
      hot::remembered.fetch_sub(1);
    }
    if (!a.recv) hot::remembered_sends.fetch_add(1);
    Entry e;
    e.args = std::move(a);
    entries_.emplace(r, std::move(e));
    hot::remembered.fetch_add(1);
  }
  // Removes `r`; its stand-in, if one is active, in *inner.
  bool remove(MPI_Request r, MPI_Request* inner) {
    Args gone;
    std::lock_guard lock(mutex_);
    auto it = entries_.find(r);
    if (it == entries_.end()) return false;
    *inner = it->second.inner;
    if (it->second.inner != MPI_REQUEST_NULL) hot::stand_ins.fetch_sub(1);
    if (!it->second.args.recv) hot::remembered_sends.fetch_sub(1);
    gone = std::move(it->second.args);
    entries_.erase(it);
    hot::remembered.fetch_sub(1);
    return true;
  }
  bool find(MPI_Request r, Entry* out) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(r);
    if (it == entries_.end()) return false;
    *out = it->second;
    return true;
  }
  void set_inner(MPI_Request r, MPI_Request inner) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(r);
    if (it == entries_.end()) return;
    if (it->second.inner == MPI_REQUEST_NULL && inner != MPI_REQUEST_NULL) hot::stand_ins.fetch_add(1);
    if (it->second.inner != MPI_REQUEST_NULL && inner == MPI_REQUEST_NULL) hot::stand_ins.fetch_sub(1);
    it->second.inner = inner;
  }
  MPI_Request inner_of(MPI_Request r) {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(r);
    return it == entries_.end() ? MPI_REQUEST_NULL : it->second.inner;
  }
  void comm_freed(MPI_Comm comm) {
    std::lock_guard lock(mutex_);
    for (auto& [r, e] : entries_)
      if (!e.args.recv && !e.args.collective && e.args.comm == comm) e.comm_gone = true;
  }

 private:
  std::mutex mutex_;
  std::map<MPI_Request, Entry> entries_;
};

Table& table() {
  static auto* t = new Table();
  return *t;
}

}  // namespace

bool start(MPI_Request r, const Args& a, int* rc);

void remember(MPI_Request r, Args a) { table().add(r, std::move(a)); }

bool forget(MPI_Request r) {
  if (hot::remembered.load(std::memory_order_acquire) == 0) return false;
  MPI_Request in = MPI_REQUEST_NULL;
  if (!table().remove(r, &in)) return false;
  if (in != MPI_REQUEST_NULL && !requests().detach(in)) PMPI_Request_free(&in);
  return true;
}

void comm_freed(MPI_Comm comm) {
  if (hot::remembered_sends.load() > 0) table().comm_freed(comm);
}

bool start(MPI_Request r, int* rc) {
  if (hot::remembered_sends.load(std::memory_order_acquire) == 0 && !early::any()) return false;
  Entry e;
  if (!table().find(r, &e) || e.comm_gone) return false;
  bool started = true;
  *rc = guard(e.args.comm, [&] {
    int result = MPI_SUCCESS;
    started = start(r, e.args, &result);
    return result;
  });
  return started;
}

bool start(MPI_Request r, const Args& a, int* rc) {
  MPI_Request in = MPI_REQUEST_NULL;
  if (a.collective) {
    *rc = a.collective(&in);
  } else if (a.recv) {
    if (!early::any()) return false;
    MPI_Status st;
    int result = MPI_SUCCESS;
    if (!early::recv(transport::target(a.route), a.peer, a.tag, a.comm, &st, &result)) return false;
    *rc = early::completed_request(st, result, a.comm, &in);
  } else if (a.buffered) {
    transport::stage(a.route, a.staging);
    *rc = PMPI_Ibsend(a.staging, a.bytes, MPI_BYTE, a.peer, a.tag, a.comm, &in);
  } else {
    const transport::Method m = a.route.method;
    if (m != transport::Method::ipc && m != transport::Method::local) return false;  // MPI's own start
    auto out = transport::send(a.route, a.mode, a.peer, a.tag, a.comm, false, serve_now, rc);
    if (*rc != MPI_SUCCESS) return true;
    if (!out) return false;  // no IPC handle for the memory after all: staged
    *rc = p2p::track(std::move(out), &in);
  }
  if (*rc == MPI_SUCCESS) table().set_inner(r, in);
  return true;
}

MPI_Request inner(MPI_Request r) {
  if (hot::stand_ins.load(std::memory_order_acquire) == 0) return MPI_REQUEST_NULL;
  return table().inner_of(r);
}

Swap::Swap(int n, MPI_Request* array) : array_(array) {
  if (hot::stand_ins.load(std::memory_order_acquire) == 0 || !array) return;
  for (int i = 0; i < n; ++i) {
    if (array[i] == MPI_REQUEST_NULL) continue;
    const MPI_Request in = table().inner_of(array[i]);
    if (in == MPI_REQUEST_NULL) continue;
    swapped_.emplace_back(i, array[i]);
    array[i] = in;
  }
}

Swap::~Swap() {
  for (auto [i, outer] : swapped_) {
    if (array_[i] == MPI_REQUEST_NULL) table().set_inner(outer, MPI_REQUEST_NULL);  // completed
    array_[i] = outer;
  }
}


}  // namespace ferry::mpi_detail::persistent

// ---------------------------------------------------------------------------- the entry points

using namespace ferry::mpi_detail;

namespace {

using InitFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);

// Persistent GPU sends: MPI's persistent request on a staging buffer, which each MPI_Start packs
// into, or, when the route says a stub method (IPC, local), started by Ferry itself
// (persistent.hpp). MPI_Bsend_init is staged only (a buffered send must complete locally), each
// start an MPI_Ibsend of the staging buffer. A new persistent handle first clears whatever Ferry
// remembered under that value (a request MPI freed on an error).
[[gnu::noinline]] int send_init(InitFn init, const p2p::SendKind& k, const void* buf, int count,
                                MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* request) noexcept {
  return guard(comm, [&] {
    transport::Route r = transport::route(buf, count, type);
    r.producer = producer::of(comm, type);  // issue 14: each start reads after this stream
    if (!r.device() || r.method == transport::Method::passthrough || dest == MPI_PROC_NULL) {
      const int rc = init(buf, count, type, dest, tag, comm, request);
      if (rc == MPI_SUCCESS) persistent::forget(*request);
      return rc;
    }
    transport::Allow allow = p2p::allow(k, false);
    allow.pipelined = false;  // persistent sends are not pipelined (staged whole)
    transport::choose(r, transport::world_rank(comm, dest), allow);
    const int bytes = p2p::staged_bytes(r.bytes);
    Staged host(r.bytes);
    const int rc = init(host.p, bytes, MPI_BYTE, dest, tag, comm, request);
    if (rc != MPI_SUCCESS) return rc;
    persistent::forget(*request);
    Pending p;
    p.persistent = true;
    p.route = r;
    p.staging = host.release();
    requests().add(*request, p);
    const bool buffered = !k.rendezvous;
    if (buffered || transport::protocol_on()) {
      persistent::Args a;
      a.route = r;
      a.peer = dest;
      a.tag = tag;
      a.comm = comm;
      a.mode = k.mode;
      if (buffered) {
        a.buffered = true;
        a.staging = p.staging;
        a.bytes = bytes;
      }
      persistent::remember(*request, std::move(a));
    }
    return MPI_SUCCESS;
  });
}

struct RecvInitArgs {
  int source, tag;
  MPI_Comm comm;
  MPI_Request* request;
};

[[gnu::noinline]] int recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                MPI_Request* request) noexcept {
  return guard(comm, [&] {
    transport::Route r = transport::route(buf, count, type);
    if (!transport::protocol_on() && !r.device() && !typemap::marked(type)) {  // issue 14 hook
      const int rc = PMPI_Recv_init(buf, count, type, source, tag, comm, request);
      if (rc == MPI_SUCCESS) persistent::forget(*request);
      return rc;
    }
    RecvInitArgs x{source, tag, comm, request};
    const int rc = p2p::post_receive(buf, count, type, source, comm, true, request,
                                     [](void* b, int n, MPI_Datatype t, void* ctx) {
                                       auto* y = static_cast<RecvInitArgs*>(ctx);
                                       return PMPI_Recv_init(b, n, t, y->source, y->tag, y->comm, y->request);
                                     },
                                     &x);
    if (rc != MPI_SUCCESS) return rc;
    persistent::forget(*request);
    // Remembered while the stub protocol is on: a probe may take its message early.
    if (transport::protocol_on() && source != MPI_PROC_NULL && r.type) {
      persistent::Args a;
      a.recv = true;
      transport::choose_unpack(r);
      a.route = r;
      a.peer = source;
      a.tag = tag;
      a.comm = comm;
      persistent::remember(*request, std::move(a));
    }
    return MPI_SUCCESS;
  });
}

// A persistent send packs before MPI starts it; a request becomes active in Ferry's table only
// once MPI has started it (so progress never asks MPI about a request that is not started).
[[gnu::noinline]] int start(MPI_Request* request) noexcept {
  int rc = MPI_SUCCESS;
  if (persistent::start(*request, &rc)) return rc;
  if (hot::no_requests()) return PMPI_Start(request);
  const MPI_Request r = *request;
  rc = guard(MPI_COMM_WORLD, [&] { return requests().start(r), MPI_SUCCESS; });
  if (rc != MPI_SUCCESS) return rc;
  rc = PMPI_Start(request);
  if (rc == MPI_SUCCESS) requests().activate(r);
  return rc;
}

[[gnu::noinline]] int startall(int count, MPI_Request* reqs) noexcept {
  if (count < 0 || (count > 0 && !reqs)) return PMPI_Startall(count, reqs);
  // Those Ferry starts itself are left out of MPI's start (MPI starts the rest, in order).
  std::vector<MPI_Request> rest;
  for (int i = 0; i < count; ++i) {
    int rc = MPI_SUCCESS;
    if (reqs[i] != MPI_REQUEST_NULL && persistent::start(reqs[i], &rc)) {
      if (rc != MPI_SUCCESS) return rc;
      continue;
    }
    rest.push_back(reqs[i]);
  }
  int rc = guard(MPI_COMM_WORLD, [&] {
    for (MPI_Request r : rest) requests().start(r);
    return MPI_SUCCESS;
  });
  if (rc != MPI_SUCCESS || rest.empty()) return rc;
  rc = PMPI_Startall(static_cast<int>(rest.size()), rest.data());
  if (rc == MPI_SUCCESS)
    for (MPI_Request r : rest) requests().activate(r);
  return rc;
}

}  // namespace

extern "C" {

int MPI_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return send_init(PMPI_Send_init, p2p::kSend, buf, count, type, dest, tag, comm, request);
}

int MPI_Ssend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return send_init(PMPI_Ssend_init, p2p::kSsend, buf, count, type, dest, tag, comm, request);
}

int MPI_Rsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return send_init(PMPI_Rsend_init, p2p::kRsend, buf, count, type, dest, tag, comm, request);
}

int MPI_Bsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return send_init(PMPI_Bsend_init, p2p::kBsend, buf, count, type, dest, tag, comm, request);
}

int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return recv_init(buf, count, type, source, tag, comm, request);
}

int MPI_Start(MPI_Request* request) {
  if (!request) return PMPI_Start(request);
  return start(request);
}

int MPI_Startall(int count, MPI_Request requests_[]) {
  if (hot::no_requests() && hot::remembered_sends.load() == 0 && !early::any())
    return PMPI_Startall(count, requests_);
  return startall(count, requests_);
}

}  // extern "C"
