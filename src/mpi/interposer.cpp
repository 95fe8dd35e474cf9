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
#include <ferry/gpu.hpp>
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <tuple>
#include <vector>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace {

using ferry::i64;

bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("FERRY_MPI_VERBOSE");
    return e && *e && *e != '0';
  }();
  return v;
}

// Pinned host buffers for staging, kept in power-of-two size classes and reused.
class StagingPool {
 public:
  void* get(i64 bytes) {
    const i64 size = round_up(bytes);
    {
      std::lock_guard lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        return p;
      }
    }
    void* p = ferry::gpu::alloc_pinned(size);
    std::lock_guard lock(mutex_);
    sizes_[p] = size;
    return p;
  }
  void put(void* p) {
    std::lock_guard lock(mutex_);
    free_.emplace(sizes_.at(p), p);
  }
  void release_all() {
    std::lock_guard lock(mutex_);
    for (auto& [p, size] : sizes_) ferry::gpu::free_pinned(p);
    sizes_.clear();
    free_.clear();
  }

 private:
  static i64 round_up(i64 bytes) {
    i64 size = 4096;
    while (size < bytes) size *= 2;
    return size;
  }
  std::mutex mutex_;
  std::multimap<i64, void*> free_;
  std::map<void*, i64> sizes_;
};

StagingPool& pool() {
  static auto* p = new StagingPool();
  return *p;
}

// A staging buffer for the length of one call.
struct Staged {
  void* p;
  explicit Staged(i64 bytes) : p(pool().get(bytes)) {}
  ~Staged() {
    if (p) pool().put(p);
  }
  // Hands the buffer over to a request, which returns it when it completes.
  void* release() {
    void* q = p;
    p = nullptr;
    return q;
  }
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
};

// The buffer holds `count` elements of `type` in device (or managed) memory.
bool on_device(const void* buf, int count, MPI_Datatype type) {
  if (count <= 0 || !ferry::gpu::available()) return false;
  try {
    auto t = ferry::lookup(type);
    if (t->size() == 0) return false;
    auto m = ferry::gpu::memory_of(static_cast<const char*>(buf) + t->data_lb(count));
    return m == ferry::gpu::Memory::device || m == ferry::gpu::Memory::managed;
  } catch (const ferry::Error&) {
    return false;  // a type Ferry cannot read: the system MPI decides (and reports) as it would
  }
}

// A buffer argument of a collective: MPI_IN_PLACE, host memory, or GPU memory that the collective
// sees through a host mirror with the same layout. The mirror is filled by copying the span the
// elements cover (inputs); only the type map's bytes go back (outputs), so bytes between the
// elements, which the application may be changing meanwhile, are never overwritten.
class Mirror {
 public:
  Mirror(const void* buf, int count, MPI_Datatype type, bool copy_in)
      : user_(const_cast<void*>(buf)), count_(count) {
    if (buf == MPI_IN_PLACE || !on_device(buf, count, type)) return;
    type_ = ferry::lookup(type);
    const i64 reach = (count - 1) * type_->extent();
    lo_ = type_->true_lb() + (reach < 0 ? reach : 0);
    const i64 hi = type_->true_lb() + type_->true_extent() + (reach > 0 ? reach : 0);
    host_.resize(static_cast<std::size_t>(hi - lo_));
    if (copy_in) ferry::gpu::copy(host_.data(), static_cast<char*>(user_) + lo_, hi - lo_);
  }
  bool staged() const { return type_ != nullptr; }
  void* ptr() { return staged() ? host_.data() - lo_ : user_; }
  // Writes the elements back to GPU memory (a no-op for host buffers).
  void write_back() {
    if (!staged()) return;
    std::vector<char> packed(static_cast<std::size_t>(ferry::pack_size(count_, *type_)) + 1);
    i64 pos = 0;
    ferry::pack(ptr(), count_, *type_, packed.data(), static_cast<i64>(packed.size()), &pos);
    ferry::gpu::unpack(packed.data(), user_, count_, *type_);
  }

 private:
  void* user_;
  int count_;
  std::shared_ptr<const ferry::Type> type_;
  i64 lo_ = 0;
  std::vector<char> host_;
};

int comm_size(MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_size(comm, &n);
  return n;
}
int comm_rank(MPI_Comm comm) {
  int r = 0;
  PMPI_Comm_rank(comm, &r);
  return r;
}

// True when some buffer of a collective is GPU memory (the rest go through unchanged).
bool any_device(std::initializer_list<std::tuple<const void*, int, MPI_Datatype>> bufs) {
  for (const auto& [buf, count, type] : bufs)
    if (buf != MPI_IN_PLACE && buf != nullptr && on_device(buf, count, type)) return true;
  return false;
}

// Reports an error the way MPI would: through the communicator's error handler.
int report(MPI_Comm comm, const ferry::Error& e) {
  if (verbose()) std::fprintf(stderr, "ferry-mpi: %s\n", e.what());
  PMPI_Comm_call_errhandler(comm, e.mpi_error_class());
  return e.mpi_error_class();
}

// The committed type and the packed size of `count` of it, which travels as an int count of bytes.
std::shared_ptr<const ferry::Type> staged_type(MPI_Datatype type, int count, int* bytes) {
  auto t = ferry::lookup(type);
  const i64 n = ferry::pack_size(count, *t);
  if (n > INT32_MAX) throw ferry::Error(MPI_ERR_COUNT, "staged message over 2 GiB");
  *bytes = static_cast<int>(n);
  return t;
}

// Unpacks into GPU memory the whole elements of a staged receive that arrived (a shorter message
// is legal; MPI_Get_elements on the status still sees every byte).
void unpack_arrived(const void* staging, const MPI_Status* st, void* buf, const ferry::Type& type) {
  int got = 0;
  PMPI_Get_count(st, MPI_BYTE, &got);
  ferry::gpu::unpack(staging, buf, type.size() ? got / type.size() : 0, type);
}

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

// Non-blocking calls on GPU buffers: their staging buffers, and for receives what to unpack where,
// until a wait or test completes the request.
struct Pending {
  void* staging;
  bool recv;
  void* buf;  // the user's GPU buffer: unpacked into (receives), packed from (persistent sends)
  int count;
  std::shared_ptr<const ferry::Type> type;
  bool persistent = false;  // MPI_*_init: stays in the table until MPI_Request_free
  bool active = false;      // a persistent request between MPI_Start and its completion
};

class Requests {
 public:
  void add(MPI_Request r, Pending p) {
    std::lock_guard lock(mutex_);
    table_.emplace(r, std::move(p));
    size_.store(table_.size(), std::memory_order_release);
  }
  bool empty() const { return size_.load(std::memory_order_acquire) == 0; }
  bool contains(MPI_Request r) {
    std::lock_guard lock(mutex_);
    return table_.count(r) != 0;
  }
  // Finishes a completed request that was ours (unpacks a receive); false if it was not ours.
  // `errors_in_status`: the call returned MPI_ERR_IN_STATUS, so each status's MPI_ERROR says how
  // its request ended (otherwise MPI leaves that field unset and success is implied).
  bool complete(MPI_Request r, const MPI_Status* st, bool errors_in_status = false) {
    if (errors_in_status && st->MPI_ERROR == MPI_ERR_PENDING) return false;  // still active
    const bool ok = !errors_in_status || st->MPI_ERROR == MPI_SUCCESS;
    Pending p;
    {
      std::lock_guard lock(mutex_);
      auto it = table_.find(r);
      if (it == table_.end()) return false;
      if (it->second.persistent) {
        // Completing an inactive persistent request (MPI returns at once) does nothing.
        if (!it->second.active) return true;
        it->second.active = false;
        p = it->second;
      } else {
        p = std::move(it->second);
        table_.erase(it);
        size_.store(table_.size(), std::memory_order_release);
      }
    }
    int cancelled = 0;
    if (p.recv && ok) PMPI_Test_cancelled(st, &cancelled);
    if (p.recv && !cancelled && ok) unpack_arrived(p.staging, st, p.buf, *p.type);
    if (!p.persistent) pool().put(p.staging);
    return true;
  }

  // MPI_Start of one of our persistent requests: a send packs the user's buffer now. False if
  // the request is not ours.
  bool start(MPI_Request r) {
    Pending p;
    {
      std::lock_guard lock(mutex_);
      auto it = table_.find(r);
      if (it == table_.end() || !it->second.persistent) return false;
      it->second.active = true;
      p = it->second;
    }
    if (!p.recv) ferry::gpu::pack(p.buf, p.count, *p.type, p.staging);
    return true;
  }

  // Forgets a persistent request (MPI_Request_free); its staging goes back to the pool.
  // Returns 0 if not ours, 1 if freed, 2 if it is active (the caller must complete it first).
  int forget_persistent(MPI_Request r) {
    void* staging = nullptr;
    {
      std::lock_guard lock(mutex_);
      auto it = table_.find(r);
      if (it == table_.end() || !it->second.persistent) return 0;
      if (it->second.active) return 2;
      staging = it->second.staging;
      table_.erase(it);
      size_.store(table_.size(), std::memory_order_release);
    }
    pool().put(staging);
    return 1;
  }

 private:
  std::mutex mutex_;
  std::map<MPI_Request, Pending> table_;
  std::atomic<std::size_t> size_{0};
};

Requests& requests() {
  static auto* r = new Requests();
  return *r;
}

// Starts a staged request: packs the GPU data now (sends), `post` issues the PMPI call on the
// staging buffer, and the request is recorded; on any failure the buffer goes back to the pool.
template <class Post>
int post_staged(int bytes, Pending pending, bool pack_now, MPI_Request* request, Post post) {
  Staged host(bytes);
  if (pack_now) ferry::gpu::pack(pending.buf, pending.count, *pending.type, host.p);
  int rc = post(host.p);
  if (rc != MPI_SUCCESS) return rc;
  pending.staging = host.release();
  requests().add(*request, std::move(pending));
  return MPI_SUCCESS;
}

using IsendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);

int staged_isend(IsendFn isend, const void* buf, int count, MPI_Datatype type, int dest, int tag,
                 MPI_Comm comm, MPI_Request* request) {
  try {
    int bytes = 0;
    auto t = staged_type(type, count, &bytes);
    return post_staged(bytes, {nullptr, false, const_cast<void*>(buf), count, t}, true, request,
                       [&](void* host) { return isend(host, bytes, MPI_BYTE, dest, tag, comm, request); });
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

// The statuses a completion needs, also when the caller ignores them.
struct Statuses {
  std::vector<MPI_Status> local;
  MPI_Status* use;
  Statuses(int n, MPI_Status* given) : use(given) {
    if (given == MPI_STATUSES_IGNORE) {
      local.resize(static_cast<std::size_t>(n > 0 ? n : 1));
      use = local.data();
    }
  }
};

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
    return post_staged(bytes, {nullptr, false, const_cast<void*>(buf), count, t, true, false}, false,
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
    return post_staged(bytes, {nullptr, true, buf, count, t}, false, request, [&](void* host) {
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
    return post_staged(bytes, {nullptr, true, buf, count, t}, false, request, [&](void* host) {
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
    return post_staged(bytes, {nullptr, true, buf, count, t, true, false}, false, request,
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

// Collectives on GPU buffers: each GPU buffer is mirrored in host memory with its own layout, so
// the system MPI runs the collective (reductions included, on any datatype) unchanged.
int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (!any_device({{buf, count, type}})) return PMPI_Bcast(buf, count, type, root, comm);
  try {
    const bool is_root = comm_rank(comm) == root;
    Mirror m(buf, count, type, is_root);
    int rc = PMPI_Bcast(m.ptr(), count, type, root, comm);
    if (rc == MPI_SUCCESS && !is_root) m.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

namespace {
using ReduceLike = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
int mirrored_reduce(ReduceLike fn, const void* sendbuf, void* recvbuf, int count,
                    MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  try {
    Mirror s(sendbuf, count, type, true);
    Mirror r(recvbuf, count, type, sendbuf == MPI_IN_PLACE);
    int rc = fn(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), r.ptr(), count, type, op, comm);
    if (rc == MPI_SUCCESS) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}
}  // namespace

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  if (!any_device({{sendbuf, count, type}, {recvbuf, count, type}}))
    return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
  return mirrored_reduce(PMPI_Allreduce, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
  if (!any_device({{sendbuf, count, type}, {recvbuf, count, type}}))
    return PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
  return mirrored_reduce(PMPI_Scan, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
  if (!any_device({{sendbuf, count, type}, {recvbuf, count, type}}))
    return PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
  return mirrored_reduce(PMPI_Exscan, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm) {
  const bool is_root = comm_rank(comm) == root;
  if (!any_device({{sendbuf, count, type}, {is_root ? recvbuf : nullptr, count, type}}))
    return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
  try {
    Mirror s(sendbuf, count, type, true);
    Mirror r(is_root ? recvbuf : nullptr, is_root ? count : 0, type, sendbuf == MPI_IN_PLACE);
    int rc = PMPI_Reduce(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), is_root ? r.ptr() : recvbuf,
                         count, type, op, root, comm);
    if (rc == MPI_SUCCESS && is_root) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const int n = comm_size(comm);
  if (!any_device({{sendbuf, sendcount, sendtype}, {recvbuf, recvcount * n, recvtype}}))
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  try {
    Mirror s(sendbuf, sendcount, sendtype, true);
    Mirror r(recvbuf, recvcount * n, recvtype, sendbuf == MPI_IN_PLACE);
    int rc = PMPI_Allgather(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), sendcount, sendtype,
                            r.ptr(), recvcount, recvtype, comm);
    if (rc == MPI_SUCCESS) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const int n = comm_size(comm);
  if (!any_device({{sendbuf, sendcount * n, sendtype}, {recvbuf, recvcount * n, recvtype}}))
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  try {
    Mirror s(sendbuf, sendcount * n, sendtype, true);
    Mirror r(recvbuf, recvcount * n, recvtype, sendbuf == MPI_IN_PLACE);
    int rc = PMPI_Alltoall(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), sendcount, sendtype,
                           r.ptr(), recvcount, recvtype, comm);
    if (rc == MPI_SUCCESS) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const bool is_root = comm_rank(comm) == root;
  const int rn = is_root ? recvcount * comm_size(comm) : 0;
  if (!any_device({{sendbuf, sendcount, sendtype}, {is_root ? recvbuf : nullptr, rn, recvtype}}))
    return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  try {
    Mirror s(sendbuf, sendcount, sendtype, true);
    Mirror r(is_root ? recvbuf : nullptr, rn, recvtype, sendbuf == MPI_IN_PLACE);
    int rc = PMPI_Gather(sendbuf == MPI_IN_PLACE ? MPI_IN_PLACE : s.ptr(), sendcount, sendtype,
                         is_root ? r.ptr() : recvbuf, recvcount, recvtype, root, comm);
    if (rc == MPI_SUCCESS && is_root) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const bool is_root = comm_rank(comm) == root;
  const int sn = is_root ? sendcount * comm_size(comm) : 0;
  if (!any_device({{is_root ? sendbuf : nullptr, sn, sendtype}, {recvbuf, recvcount, recvtype}}))
    return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  try {
    Mirror s(is_root ? sendbuf : nullptr, sn, sendtype, true);
    Mirror r(recvbuf, recvcount, recvtype, false);
    int rc = PMPI_Scatter(is_root ? s.ptr() : sendbuf, sendcount, sendtype, r.ptr(), recvcount,
                          recvtype, root, comm);
    if (rc == MPI_SUCCESS && recvbuf != MPI_IN_PLACE) r.write_back();
    return rc;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
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
