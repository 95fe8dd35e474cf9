// libferry-mpi: the MPI interposer, first layer. Built on the MPI profiling interface: each MPI_*
// function here does Ferry's part and calls the PMPI_* one. Load it with LD_PRELOAD, or link it
// before the MPI library.
//
// This layer covers: initialization, datatype commit/free (every committed type is translated and
// cached once, at commit, as DESIGN.md says), MPI_Pack/MPI_Unpack/MPI_Pack_size on GPU buffers,
// and the blocking point-to-point calls (send, ssend, rsend, recv, sendrecv) with GPU buffers,
// staged through pinned host memory: the GPU engine packs into it, the system MPI moves it as
// bytes, the receiver's GPU engine unpacks from it. Host buffers go straight to PMPI after one
// pointer check. Matching, ordering, statuses (source, tag, count in bytes, so MPI_Get_count with
// the receive datatype is right) and truncation errors stay the system MPI's.
//
// Not yet here (see issue 4): non-blocking and persistent requests, probe, collectives, CUDA IPC,
// one-shot and pipelined methods, the pointer-kind cache.
#include <ferry/gpu.hpp>
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
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
  ~Staged() { pool().put(p); }
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

// Reports an error the way MPI would: through the communicator's error handler.
int report(MPI_Comm comm, const ferry::Error& e) {
  if (verbose()) std::fprintf(stderr, "ferry-mpi: %s\n", e.what());
  PMPI_Comm_call_errhandler(comm, e.mpi_error_class());
  return e.mpi_error_class();
}

using SendFn = int (*)(const void*, int, MPI_Datatype, int, int, MPI_Comm);

// A blocking send of GPU data: pack into staging, send the bytes.
int staged_send(SendFn send, const void* buf, int count, MPI_Datatype type, int dest, int tag,
                MPI_Comm comm) {
  try {
    auto t = ferry::lookup(type);
    const i64 bytes = ferry::pack_size(count, *t);
    if (bytes > INT32_MAX) throw ferry::Error(MPI_ERR_COUNT, "message over 2 GiB");
    Staged host(bytes);
    ferry::gpu::pack(buf, count, *t, host.p);
    return send(host.p, static_cast<int>(bytes), MPI_BYTE, dest, tag, comm);
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

// A blocking receive into GPU memory: receive the bytes into staging, unpack what arrived.
int staged_recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                MPI_Status* status) {
  try {
    auto t = ferry::lookup(type);
    const i64 bytes = ferry::pack_size(count, *t);
    if (bytes > INT32_MAX) throw ferry::Error(MPI_ERR_COUNT, "message over 2 GiB");
    Staged host(bytes);
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Recv(host.p, static_cast<int>(bytes), MPI_BYTE, source, tag, comm, st);
    if (rc != MPI_SUCCESS) return rc;
    int got = 0;
    PMPI_Get_count(st, MPI_BYTE, &got);
    // Whole elements that arrived (a shorter message is legal; MPI_Get_elements sees the rest).
    const i64 elements = t->size() ? got / t->size() : 0;
    ferry::gpu::unpack(host.p, buf, elements, *t);
    return MPI_SUCCESS;
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
      auto t = ferry::lookup(sendtype);
      const i64 bytes = ferry::pack_size(sendcount, *t);
      if (bytes > INT32_MAX) throw ferry::Error(MPI_ERR_COUNT, "message over 2 GiB");
      shost = std::make_unique<Staged>(bytes);
      ferry::gpu::pack(sendbuf, sendcount, *t, shost->p);
      sbuf = shost->p;
      scount = static_cast<int>(bytes);
      stype = MPI_BYTE;
    }
    if (!recv_dev)
      return PMPI_Sendrecv(sbuf, scount, stype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                           recvtag, comm, status);
    auto rt = ferry::lookup(recvtype);
    const i64 rbytes = ferry::pack_size(recvcount, *rt);
    if (rbytes > INT32_MAX) throw ferry::Error(MPI_ERR_COUNT, "message over 2 GiB");
    rhost = std::make_unique<Staged>(rbytes);
    MPI_Status local;
    MPI_Status* st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Sendrecv(sbuf, scount, stype, dest, sendtag, rhost->p, static_cast<int>(rbytes),
                           MPI_BYTE, source, recvtag, comm, st);
    if (rc != MPI_SUCCESS) return rc;
    int got = 0;
    PMPI_Get_count(st, MPI_BYTE, &got);
    ferry::gpu::unpack(rhost->p, recvbuf, rt->size() ? got / rt->size() : 0, *rt);
    return MPI_SUCCESS;
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

}  // extern "C"
