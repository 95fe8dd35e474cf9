// The senders of the stub protocol (transport.hpp, send()): IPC, local and pipelined.
//
// IPC: the stub carries the CUDA IPC handle of the allocation that holds the data (cached by
// allocation: no driver call after the first message from it) and where the data lies in it; for
// non-dense data also the key of the sender's type, whose description travels once to each
// receiver. The receiver moves the data from the sender's layout straight into its own (one copy or
// one kernel), then acknowledges; the send completes on the acknowledgement. The sender makes no
// GPU call (the allocation's first message waits once for the legacy stream: gpu::settle).
// Data the receiver cannot be told how to read (a type whose description is too large, or blocks
// in several allocations) is packed into a device buffer first, as the previous protocol did.
//
// Local: a send to this process. The stub names a record of this process (origin, count, type),
// and the receive moves the data from it on the legacy stream: ordered after the application's
// work there, like the cudaMemcpy a CUDA-aware MPI would make.
//
// Pipelined: chunks of whole elements packed asynchronously into pinned memory, each sent on the
// private communicator as soon as its event fires, while the GPU packs the next (MPI-ACC).
#include <ferry/pack.hpp>
#include <ferry/transport.hpp>

#include <algorithm>
#include <map>
#include <mutex>

#include "gpu/runtime.hpp"
#include "transport/methods.hpp"
#include "transport/wire.hpp"

namespace ferry::transport {

namespace {

using wire::Stub;

// ---------------------------------------------------------------------------- local records

struct LocalTable {
  std::mutex mutex;
  std::map<i64, std::shared_ptr<const methods::LocalSend>> sends;
};
LocalTable& local_table() {
  static auto* t = new LocalTable();
  return *t;
}

}  // namespace

void methods::local_put(i64 key, std::shared_ptr<const LocalSend> s) {
  std::lock_guard lock(local_table().mutex);
  local_table().sends[key] = std::move(s);
}
std::shared_ptr<const methods::LocalSend> methods::local_find(i64 key) {
  std::lock_guard lock(local_table().mutex);
  auto it = local_table().sends.find(key);
  return it == local_table().sends.end() ? nullptr : it->second;
}
void methods::local_drop(i64 key) {
  std::lock_guard lock(local_table().mutex);
  local_table().sends.erase(key);
}

namespace {

// ---------------------------------------------------------------------------- rendezvous (ipc, local)

// A send that completes on the receiver's acknowledgement.
class Rendezvous : public Outgoing {
 public:
  explicit Rendezvous(const Route& r) : route_(r) {}
  ~Rendezvous() override {
    if (stub_request_ != MPI_REQUEST_NULL) PMPI_Wait(&stub_request_, MPI_STATUS_IGNORE);
    if (desc_request_ != MPI_REQUEST_NULL) PMPI_Wait(&desc_request_, MPI_STATUS_IGNORE);
    if (data_request_ != MPI_REQUEST_NULL) PMPI_Wait(&data_request_, MPI_STATUS_IGNORE);
    if (local_) methods::local_drop(stub_.seq);
    if (ready_slot_ >= 0) {  // the pack may still run where no answer came (a failed post)
      try {
        wire::ready().sync(ready_slot_);
      } catch (...) {
      }
      wire::ready().give_back(ready_slot_);
    }
    if (staging_) device_pool(staging_device_).put(staging_);
  }
  // After the acknowledgement: the stub's (and description's) sends end; the data goes staged on
  // the private communicator if the receiver could not reach it.
  int finish() override {
    int rc = PMPI_Wait(&stub_request_, MPI_STATUS_IGNORE);
    if (desc_request_ != MPI_REQUEST_NULL) {
      const int r = PMPI_Wait(&desc_request_, MPI_STATUS_IGNORE);
      if (rc == MPI_SUCCESS) rc = r;
    }
    if (!local_) learn_gpu(route_.peer, ack_[1]);
    confirm_type();
    if (rc != MPI_SUCCESS || ack_[0] != wire::kAckNeedData) return rc;
    if (!data_started_) start_data();
    if (data_rc_ != MPI_SUCCESS) return data_rc_;
    return PMPI_Wait(&data_request_, MPI_STATUS_IGNORE);
  }
  // The acknowledgement arrived: if it asks for the data, the data goes now (see Outgoing).
  void serve() override {
    confirm_type();
    if (ack_[0] == wire::kAckNeedData && !data_started_) start_data();
  }
  // The receiver moved the data in the described layout: it knows the description now.
  void confirm_type() {
    if (stub_.type_key != 0 && ack_[0] == wire::kAckDone) wire::describe().confirm(route_.peer, stub_.type_key);
  }

  // Posts the acknowledgement's receive, the stub, and the description if it must travel.
  int post(Mode mode, int dest, int tag, MPI_Comm comm) {
    const wire::State& w = wire::state();
    int rc = PMPI_Irecv(ack_, 2, MPI_UINT64_T, route_.peer, wire::ack_tag(stub_.seq), w.ctl, &request);
    if (rc != MPI_SUCCESS) return rc;
    rc = wire::post(mode, stub_, dest, tag, comm, &stub_request_);
    if (rc != MPI_SUCCESS) {
      PMPI_Cancel(&request);
      PMPI_Request_free(&request);
      return rc;
    }
    if (description_)
      rc = PMPI_Isend(description_->data(), static_cast<int>(description_->size()), MPI_BYTE, route_.peer,
                      wire::desc_tag(stub_.seq), w.ctl, &desc_request_);
    return rc;
  }

  // The data staged through pinned memory, sent without blocking (any number of these may be
  // outstanding while their receivers take them in any order).
  void start_data() {
    data_started_ = true;
    host_ = std::make_unique<Buffer>(pinned_pool(), stub_.bytes);
    try {
      if (staging_) {
        if (ready_slot_ >= 0) wire::ready().sync(ready_slot_);  // the pack was not waited for
        gpu::copy(host_->get(), staging_, stub_.bytes);
      } else {
        stage(route_, host_->get());
      }
    } catch (const Error& e) {
      data_rc_ = e.mpi_error_class();  // finish() reports it
      throw;
    }
    data_rc_ = PMPI_Isend(host_->get(), static_cast<int>(stub_.bytes), MPI_BYTE, route_.peer,
                          wire::data_tag(stub_.seq), wire::state().ctl, &data_request_);
  }

  Route route_;
  Stub stub_{};
  std::uint64_t ack_[2] = {~std::uint64_t{0}, 0};
  MPI_Request stub_request_ = MPI_REQUEST_NULL, desc_request_ = MPI_REQUEST_NULL;
  MPI_Request data_request_ = MPI_REQUEST_NULL;
  std::unique_ptr<Buffer> host_;  // declared before its request's wait in the destructor ends
  bool data_started_ = false;
  int data_rc_ = MPI_SUCCESS;
  std::shared_ptr<const std::vector<char>> description_;
  void* staging_ = nullptr;  // a device pool buffer the data was packed into
  int staging_device_ = -1;
  int ready_slot_ = -1;  // the event recorded after packing into staging_ (wire::Ready)
  bool local_ = false;
};

std::unique_ptr<Outgoing> send_ipc(const Route& r, Mode mode, int dest, int tag, MPI_Comm comm, int* rc) {
  if (r.memory.kind != gpu::Memory::device) return nullptr;
  gpu::settle(r.memory.alloc);  // the receiver reads from its own context: no stream orders it after ours
  auto f = std::make_unique<Rendezvous>(r);
  const Type& t = *r.type;
  const void* src = r.first();
  gpu::Allocation a = r.memory.alloc;
  std::optional<wire::Describe::Text> d;
  if (!t.dense() && r.memory.one_allocation) d = wire::describe().of(r.type);
  if (!t.dense() && !d) {  // packed into a device buffer, which the receiver reads instead
    f->staging_device_ = gpu::this_device();
    f->staging_ = device_pool(f->staging_device_).get(r.bytes);
    gpu::pack_async(r.origin, r.count, t, f->staging_, wire::stream());
    // Not waited for: the receiver's stream waits for this event (wire::kReady), so a process's
    // packs queue back to back while the stubs travel.
    try {
      f->ready_slot_ = wire::ready().record(wire::stream());
    } catch (const Error&) {  // waited for below instead
    }
    if (f->ready_slot_ < 0) gpu::sync_stream(wire::stream());
    src = f->staging_;
    a = gpu::allocation_of(f->staging_);
  }
  Export e;
  if (!exports().of(a, src, &e)) return nullptr;  // no IPC handle (VMM or pool memory): staged
  Stub& s = f->stub_;
  wire::fill(s, wire::kIpc, r.bytes, r.peer, r.memory.alloc.device);
  s.handle = e.handle;
  s.offset = e.offset;
  s.base = e.base;
  s.alloc_id = e.id;
  if (f->ready_slot_ >= 0) wire::ready().stamp(f->ready_slot_, &s);
  if (d) {
    s.type_key = d->key;
    s.count = r.count;
    if (wire::describe().unconfirmed(r.peer, d->key)) {
      s.flags |= wire::kDescribed;
      f->description_ = d->bytes;
    }
  }
  *rc = f->post(mode, dest, tag, comm);
  if (*rc != MPI_SUCCESS) return nullptr;
  wire::stats().ipc_sent.fetch_add(1);
  return f;
}

std::unique_ptr<Outgoing> send_local(const Route& r, Mode mode, int dest, int tag, MPI_Comm comm, int* rc) {
  auto f = std::make_unique<Rendezvous>(r);
  f->local_ = true;
  Stub& s = f->stub_;
  wire::fill(s, wire::kLocal, r.bytes, r.peer, r.memory.alloc.device);
  auto rec = std::make_shared<methods::LocalSend>();
  rec->origin = r.origin;
  rec->count = r.count;
  rec->type = r.type;
  rec->device = r.memory.alloc.device;
  s.base = static_cast<std::uint64_t>(s.seq);
  methods::local_put(s.seq, std::move(rec));
  *rc = f->post(mode, dest, tag, comm);
  if (*rc != MPI_SUCCESS) return nullptr;
  wire::stats().local.fetch_add(1);
  return f;
}

// ---------------------------------------------------------------------------- pipelined

class Pipelined : public Outgoing {
 public:
  ~Pipelined() override {
    if (!rest_.empty()) PMPI_Waitall(static_cast<int>(rest_.size()), rest_.data(), MPI_STATUSES_IGNORE);
    pinned_pool().put(staging_);
  }
  // Completing the request the caller waited for waits for the rest and gives the staging buffer
  // back. The rest may still need the receiver: a synchronous send's request is the stub's, which
  // completes once the receiver matched it, before it has posted the chunks' receives; if that
  // receiver is itself finishing such a send, only serving here lets either go on.
  int finish() override {
    int rc = MPI_SUCCESS;
    const int n = static_cast<int>(rest_.size());
    for (int flag = 0; n > 0 && !flag;) {
      rc = serve_ ? PMPI_Testall(n, rest_.data(), &flag, MPI_STATUSES_IGNORE)
                  : PMPI_Waitall(n, rest_.data(), MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS || !serve_) break;
      if (!flag) serve_();
    }
    rest_.clear();
    pinned_pool().put(staging_);
    staging_ = nullptr;
    return rc;
  }
  std::shared_ptr<Stub> stub_ = std::make_shared<Stub>();
  std::vector<MPI_Request> rest_;
  void* staging_ = nullptr;
  Serve serve_ = nullptr;
};

bool complete(MPI_Request r) {
  int flag = 0;
  return r == MPI_REQUEST_NULL || (PMPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag);
}

std::unique_ptr<Outgoing> send_pipelined(const Route& r, Mode mode, int dest, int tag, MPI_Comm comm,
                                         bool blocking, Serve serve, int* rc) {
  const wire::State& w = wire::state();
  const Type& t = *r.type;
  const i64 chunk = methods::chunk_of(r);
  const i64 chunk_elems = chunk / t.size();
  if (chunk_elems >= r.count) return nullptr;  // one chunk: nothing to overlap
  const i64 nchunks = (r.bytes + chunk - 1) / chunk;
  const bool on_gpu = r.device();  // host memory only in the protocol test
  if (on_gpu) gpu::settle(r.memory.alloc);  // packed on Ferry's own stream

  auto f = std::make_unique<Pipelined>();
  f->serve_ = serve;
  Stub& s = *f->stub_;
  wire::fill(s, wire::kPipelined, r.bytes, r.peer, r.memory.alloc.device);
  s.offset = chunk;
  s.count = chunk_elems;
  MPI_Request stub = MPI_REQUEST_NULL;
  *rc = wire::post(mode, s, dest, tag, comm, &stub);
  if (*rc != MPI_SUCCESS) return nullptr;

  f->staging_ = pinned_pool().get(r.bytes);
  char* base = static_cast<char*>(f->staging_);
  std::vector<gpu::Event> ev(on_gpu ? static_cast<std::size_t>(nchunks) : 0);
  for (auto& e : ev) e = gpu::create_event();
  const i64 extent = t.extent();
  auto origin = [&](i64 c) {
    return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(r.origin) +
                                         static_cast<std::uintptr_t>(c * chunk_elems * extent));
  };
  auto elems = [&](i64 c) { return std::min(chunk_elems, r.count - c * chunk_elems); };
  // If packing fails part way, the receiver still gets every chunk (it waits for all of them) and
  // the sender reports the error; nothing is released while the GPU or MPI may still use it.
  std::unique_ptr<Error> failed;
  try {
    for (i64 c = 0; c < nchunks && on_gpu; ++c)
      gpu::pack_async(origin(c), elems(c), t, base + c * chunk, wire::stream(), ev[static_cast<std::size_t>(c)]);
  } catch (const Error& e) {
    failed = std::make_unique<Error>(e);
    wire::quiesce(wire::stream());
  }
  std::vector<MPI_Request> q(static_cast<std::size_t>(nchunks) + 1, MPI_REQUEST_NULL);
  q.back() = stub;
  for (i64 c = 0; c < nchunks && *rc == MPI_SUCCESS; ++c) {
    try {
      if (failed) {
      } else if (on_gpu) {
        gpu::sync_event(ev[static_cast<std::size_t>(c)]);
      } else {
        i64 pos = 0;
        ferry::pack(origin(c), elems(c), t, base + c * chunk, chunk, &pos);
      }
    } catch (const Error& e) {
      failed = std::make_unique<Error>(e);
      if (on_gpu) wire::quiesce(wire::stream());
    }
    *rc = PMPI_Isend(base + c * chunk, static_cast<int>(std::min(chunk, r.bytes - c * chunk)), MPI_BYTE,
                     r.peer, wire::data_tag(s.seq), w.ctl, &q[static_cast<std::size_t>(c)]);
    // Progress on the chunks sent before, never the last one: a Testall that finds them all done
    // frees them, and the last chunk's request may become the caller's (with MPICH, whose
    // handles come back at once, the caller would get a freed or another request's handle).
    int flag = 0;
    if (c > 0 && c < nchunks - 1) PMPI_Testall(static_cast<int>(c), q.data(), &flag, MPI_STATUSES_IGNORE);
  }
  for (auto& e : ev) gpu::destroy_event(e);
  if (!blocking && !failed && *rc == MPI_SUCCESS) {
    wire::stats().pipelined.fetch_add(1);
    // Every chunk is packed and posted. The caller's request is one still under way, the last
    // chunk's (it went last to the same process) or, for a synchronous send, the stub's (chunks
    // may complete before the receiver matched anything; MPI_Issend must not). A request MPI
    // completed at once may share its handle with other completed requests (MPICH's pre-completed
    // requests), so another one under way is taken instead; when all are done, finish() runs now
    // and the caller keeps a completed request that nothing else refers to.
    std::size_t pick = mode == Mode::sync ? q.size() - 1 : q.size() - 2;
    if (mode != Mode::sync && complete(q[pick])) {
      for (std::size_t k = q.size(); k-- > 0;)
        if (!complete(q[k])) {
          pick = k;
          break;
        }
    }
    f->request = q[pick];
    q[pick] = MPI_REQUEST_NULL;
    f->rest_ = std::move(q);
    if (mode != Mode::sync && complete(f->request)) {
      *rc = f->finish();
      f->done = true;
    }
    return f;
  }
  for (;;) {
    int flag = 0;
    const int e = PMPI_Testall(static_cast<int>(q.size()), q.data(), &flag, MPI_STATUSES_IGNORE);
    if (e != MPI_SUCCESS) {
      *rc = e;
      break;
    }
    if (flag) break;
    if (serve) serve();
  }
  if (failed) throw *failed;
  if (*rc == MPI_SUCCESS) wire::stats().pipelined.fetch_add(1);
  return f;
}

}  // namespace

std::unique_ptr<Outgoing> send(const Route& r, Mode mode, int dest, int tag, MPI_Comm comm, bool blocking,
                               Serve serve, int* rc) {
  *rc = MPI_SUCCESS;
  if (!wire::state().on || !r.type || r.peer < 0) return nullptr;
  if (r.producer && r.device()) gpu::sync_stream(r.producer);
  switch (r.method) {
    case Method::ipc: return send_ipc(r, mode, dest, tag, comm, rc);
    case Method::local: return send_local(r, mode, dest, tag, comm, rc);
    case Method::pipelined: return send_pipelined(r, mode, dest, tag, comm, blocking, serve, rc);
    default: return nullptr;
  }
}

}  // namespace ferry::transport
