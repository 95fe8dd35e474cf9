// What the interposer's parts share: the staging pool, pointer checks, host mirrors of GPU buffers
// for collectives, error reporting, and the table of Ferry's non-blocking requests.
#pragma once

#include <ferry/gpu.hpp>
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>
#include <ferry/transport.hpp>
#include <mpi.h>

#include "gpu/host_pages.hpp"

#include <atomic>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace ferry::mpi_detail {

using ferry::i64;

// FERRY_MPI_VERBOSE=1: say what the interposer does (initialization, refused types, errors).
bool verbose();

// Staging buffers: the transport's pool of pinned, mapped host memory.
inline ferry::transport::Pool& pool() { return ferry::transport::pinned_pool(); }

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

// MPI_Type_size, without a call into MPI for the named types.
int type_size(MPI_Datatype type);

// The host fast path. Every host-buffer call pays for deciding that Ferry has nothing to do; the
// ping-pong of 8-byte host messages must stay within 3 % of plain MPI (about 10 ns). So the
// decision reads a few globals of this library (hidden: direct loads, no call) and the pointer
// cache, and the MPI_* function then tail-calls PMPI_*. Anything else takes the full path.
namespace hot {
// Set once by init() (MPI_Init*). Before it, `gpu` is true and the table of named types empty,
// which sends every call down the full path.
extern bool gpu;          // the GPU engine is available: buffers need a pointer check
extern bool stubs_on;     // the stub protocol is on: receives may get stubs
extern bool host_sends;   // FERRY_PROTOCOL_TEST: host sends take the protocol path
extern bool threads;      // the MPI provides MPI_THREAD_MULTIPLE
// The MPI packs some constructs against the standard (typemap.hpp, issue 14): derived types may
// need Ferry's engine on host buffers too, so they take the full path even without a GPU.
extern bool typemaps;
// Receives that may hold a stub and are not finished, requests freed while active, messages taken
// early by probes: while any exist, calls serve them and look for them.
extern std::atomic<int> stubs, detached, early;
extern std::atomic<std::size_t> pending;  // entries in the request table (Requests)
inline bool no_requests() { return pending.load(std::memory_order_acquire) == 0; }
// Persistent requests Ferry may start itself (persistent.hpp): remembered ones, the sends among
// them, and those whose stand-in request is active now.
extern std::atomic<int> remembered, remembered_sends, stand_ins;
// No request of Ferry's and no stand-in: waits and tests go straight to MPI.
inline bool idle() { return no_requests() && stand_ins.load(std::memory_order_acquire) == 0; }
struct NamedSize {
  MPI_Datatype type;
  int size;
};
constexpr int kMaxNamed = 32;
extern NamedSize named[kMaxNamed];  // the named types, most used first (init())
extern int named_count;

void init();

inline bool quiet() {
  return stubs.load(std::memory_order_acquire) == 0 && detached.load(std::memory_order_acquire) == 0 &&
         early.load(std::memory_order_acquire) == 0;
}
// The size of a named type (whose data starts at the buffer); -1 for any other.
inline int named_size(MPI_Datatype type) {
  for (int i = 0; i < named_count; ++i)
    if (named[i].type == type) return named[i].size;
  return -1;
}
// True when `count` elements of the named type `type` at `buf` are known to be host memory (for a
// derived type or an unknown page: false, and the full path decides).
inline bool host_buffer(const void* buf, int count, int size) {
  return !gpu || count <= 0 || size == 0 || ferry::gpu::host_pages::known(buf);
}
// A send needs nothing of Ferry.
inline bool plain_send(const void* buf, int count, MPI_Datatype type) {
  if (!quiet() || host_sends) return false;
  if (!gpu && !typemaps) return true;
  const int size = named_size(type);
  return size >= 0 && host_buffer(buf, count, size);
}
// A receive needs nothing of Ferry: besides the above, no stub can arrive in it, because the
// protocol is off or the buffer is smaller than `min_stub_capacity` (ipc::may_get_stub).
inline bool plain_recv(const void* buf, int count, MPI_Datatype type, i64 min_stub_capacity) {
  if (!quiet()) return false;
  if (!gpu && !stubs_on && !typemaps) return true;
  const int size = named_size(type);
  if (size < 0 || (stubs_on && count > 0 && static_cast<i64>(count) * size >= min_stub_capacity)) return false;
  return host_buffer(buf, count, size);
}
}  // namespace hot

// The buffer holds `count` elements of `type` in device (or managed) memory.
bool on_device(const void* buf, int count, MPI_Datatype type);
// True when some buffer of a collective is GPU memory (the rest go through unchanged).
bool any_device(std::initializer_list<std::tuple<const void*, int, MPI_Datatype>> bufs);

// A buffer argument of a collective: MPI_IN_PLACE, host memory, or GPU memory that the collective
// sees through a host mirror with the same layout. The mirror covers the span the elements reach
// and is filled by copying that span (inputs); only the type map's bytes go back (outputs), so
// bytes between the elements, which the application may be changing meanwhile, are never
// overwritten. `blocks` are (first element, element count) runs, as the v/w collectives give them
// (displacements in elements of `type`); the one-run form covers elements [0, count).
class Mirror {
 public:
  Mirror(const void* buf, int count, MPI_Datatype type, bool copy_in);
  Mirror(const void* buf, MPI_Datatype type, std::vector<std::pair<i64, i64>> blocks, bool copy_in);
  bool staged() const { return type_ != nullptr; }
  void* ptr() { return staged() ? host_.data() - lo_ : user_; }
  // Writes the elements back to GPU memory (a no-op for host buffers).
  void write_back();

 private:
  void init(bool copy_in);
  void* user_;
  MPI_Datatype mpi_type_;
  std::vector<std::pair<i64, i64>> blocks_;
  std::shared_ptr<const ferry::Type> type_;
  i64 lo_ = 0;
  std::vector<char> host_;
};

int comm_size(MPI_Comm comm);
int comm_rank(MPI_Comm comm);

// Reports an error the way MPI would: through the communicator's error handler.
int report(MPI_Comm comm, const ferry::Error& e);

// The committed type and the packed size of `count` of it, which travels as an int count of bytes.
std::shared_ptr<const ferry::Type> staged_type(MPI_Datatype type, int count, int* bytes);

// Where a receive's data goes: `count` elements of `type` at `buf`, GPU or host memory. Holds the
// translated type, so a receive completes correctly after MPI_Type_free of its datatype.
struct Target {
  void* buf = nullptr;
  i64 count = 0;
  std::shared_ptr<const ferry::Type> type;
  bool device = false;
  char* element(i64 k) const { return static_cast<char*>(buf) + k * type->extent(); }
};

// Unpacks `nbytes` of packed data in host memory into the target's elements from `first` on. A
// message may end inside an element (MPI allows it): that element receives its leading bytes and
// keeps the rest, so the last element is packed, patched and unpacked again.
void unpack_into(const void* packed, i64 nbytes, const Target& to, i64 first = 0);

// Unpacks into GPU memory a staged receive that arrived (all its bytes; MPI_Get_elements on the
// status sees them).
void unpack_arrived(const void* staging, const MPI_Status* st, void* buf, const ferry::Type& type);

// A communicator's ranks as world ranks, kept by receives (the communicator may be freed before
// they complete). `world`: MPI_COMM_WORLD itself; an empty table: an intercommunicator.
struct Ranks {
  bool world = false;
  std::shared_ptr<const std::vector<int>> table;
  int to_world(int rank) const {
    if (rank < 0) return -1;
    if (world) return rank;
    return table && rank < static_cast<int>(table->size()) ? (*table)[static_cast<std::size_t>(rank)] : -1;
  }
};

// A non-blocking call that Ferry finishes when MPI completes its request: staged point-to-point
// (the staging buffer; for receives what to unpack where) or anything with a `finish` step (a
// non-blocking collective writing its host mirrors back).
struct Pending {
  void* staging = nullptr;
  bool recv = false;
  void* buf = nullptr;  // the user's GPU buffer: unpacked into (receives), packed from (persistent sends)
  int count = 0;
  std::shared_ptr<const ferry::Type> type;
  bool persistent = false;  // MPI_*_init: stays in the table until MPI_Request_free
  bool active = false;      // a persistent request between MPI_Start and its completion
  // Run once the request completed successfully (and was not cancelled), after any unpack; its
  // MPI result becomes the completion's (a failed write-back, say).
  std::function<int(const MPI_Status*)> finish;
  bool detached = false;       // freed by MPI_Request_free while active: progress completes it
  bool delivered = false;      // MPI_Request_get_status saw it complete and the data is in place
  std::thread::id owner = std::this_thread::get_id();  // the thread that posted it
  std::uint64_t id = 0;                                 // unique, given by Requests::add
  bool uncancellable = false;  // an IPC send: its stub is out; MPI_Cancel leaves it alone
  // A receive that may get an IPC stub (ipc.hpp): where and how to fetch the data then.
  bool may_be_stub = false;
  bool device = true;  // buf is GPU memory, received through `staging`; false: a host buffer
  Ranks ranks;         // of the receive's communicator
  int stub_state = 0;  // 0: not looked at; 1: a stub, data fetched early (stub_rc); 2: not a stub
  int stub_rc = MPI_SUCCESS;
  MPI_Count stub_bytes = 0;
};

inline Pending staged_pending(bool recv, const void* buf, int count,
                              std::shared_ptr<const ferry::Type> type, bool persistent = false) {
  Pending p;
  p.recv = recv;
  p.buf = const_cast<void*>(buf);
  p.count = count;
  p.type = std::move(type);
  p.persistent = persistent;
  return p;
}

// Ferry's requests by MPI handle. Under MPI_THREAD_MULTIPLE a handle that completed in one thread
// may be handed out again by MPI to another before the first thread has finished it here, so a
// handle can have two entries for a moment: a completion finishes its own thread's entry, else
// the oldest (see locate).
class Requests {
 public:
  void add(MPI_Request r, Pending p);
  bool empty() const { return hot::no_requests(); }
  bool contains(MPI_Request r);
  // MPI_Cancel may go to MPI (false for IPC sends, whose receiver may already be reading).
  bool cancellable(MPI_Request r);
  // Finishes a completed request that was ours (unpacks a receive, fetches an IPC message and
  // fixes its status); returns -1 if it was not ours, else the request's MPI result.
  // `errors_in_status`: the call returned MPI_ERR_IN_STATUS, so each status's MPI_ERROR says how
  // its request ended (otherwise MPI leaves that field unset and success is implied).
  int complete(MPI_Request r, MPI_Status* st, bool errors_in_status = false);
  // Receives that may hold an IPC stub and are not finished yet: while there are any, blocking
  // calls poll (progress) instead of blocking inside the MPI.
  bool polling() const {
    return hot::stubs.load(std::memory_order_acquire) > 0 || hot::detached.load(std::memory_order_acquire) > 0;
  }
  // MPI_Request_free of an active request of ours: MPI must return at once, so Ferry keeps the
  // handle and completes the request (unpack, acknowledgement) in progress. False if not ours.
  bool detach(MPI_Request r);
  // Completes every detached request (MPI_Finalize).
  void drain();
  // MPI_Request_get_status found one of ours complete: put the data in place now (the buffer is
  // the application's to read) and fix the status; the later wait or test then only frees it.
  void deliver_early(MPI_Request r, MPI_Status* st);
  // Fetches the data of every such receive whose stub has arrived and acknowledges it, so its
  // sender can go on even though the receiver has not reached MPI_Wait yet (dissertation §5.6).
  // Only the requests the calling thread posted (or freed): under MPI_THREAD_MULTIPLE another
  // thread may be completing, and MPI freeing, its own requests at the same moment.
  // `all_threads`: every request (MPI_Finalize, when one thread is left).
  void progress(bool all_threads = false) { progress_of(all_threads, std::this_thread::get_id()); }
  // The same for the requests of thread `owner`, from another thread, while `owner` is blocked in
  // a call that cannot serve them (ServeWhileBlocked).
  void progress_for(std::thread::id owner) { progress_of(false, owner); }
  // MPI_Start of one of our persistent requests: a send packs the user's buffer now (before
  // PMPI_Start); activate() marks it started (after). False if the request is not ours.
  bool start(MPI_Request r);
  void activate(MPI_Request r);
  // The staging buffer of a request of ours (null if none).
  void* staging_of(MPI_Request r);
  // A request that completed with an error: forget it (its staging goes back to the pool).
  void drop(MPI_Request r);
  // Forgets a persistent request (MPI_Request_free); its staging goes back to the pool.
  // Returns 0 if not ours, 1 if freed, 2 if it is active (the caller must complete it first).
  int forget_persistent(MPI_Request r);

 private:
  using Table = std::multimap<MPI_Request, Pending>;
  // The entry a handle names (mutex_ held): with `id`, exactly that entry; else, when MPI has handed
  // the handle out again while an older entry still waits for its completion here, the calling
  // thread's own entry first, then the oldest.
  Table::iterator locate(MPI_Request r, std::uint64_t id = 0);
  void progress_of(bool all_threads, std::thread::id owner);
  void count_stub(const Pending& p, int delta);
  std::uint64_t next_id_ = 0;
  std::mutex mutex_;
  std::recursive_mutex stub_mutex_;  // one IPC fetch at a time, by progress or by completion
  Table table_;
};

// Blocking forms that serve pending IPC receives while they wait (plain PMPI when none pend).
int wait_serving(MPI_Request* request, MPI_Status* status);
Requests& requests();

// Packs a staged request's GPU data into its staging buffer (ipc::stage_pack).
void stage_pack_now(const Pending& p, void* host);

// Starts a staged request: packs the GPU data now (sends), `post` issues the PMPI call on the
// staging buffer, and the request is recorded; on any failure the buffer goes back to the pool.
template <class Post>
int post_staged(int bytes, Pending pending, bool pack_now, MPI_Request* request, Post post) {
  Staged host(bytes);
  if (pack_now) stage_pack_now(pending, host.p);
  int rc = post(host.p);
  if (rc != MPI_SUCCESS) return rc;
  pending.staging = host.release();
  requests().add(*request, std::move(pending));
  return MPI_SUCCESS;
}

// Serve pending IPC receives (cheap when there are none): on entry to calls that may block.
inline void serve() {
  if (requests().polling()) requests().progress();
}

// Around a blocking call that Ferry cannot turn into a serving loop (a blocking collective: MPI
// does not match it with the non-blocking form, so one rank cannot switch alone): serves on entry,
// and while the call blocks, a helper thread serves this thread's pending stub receives — their
// senders may be waiting for them before they reach the call (§5.6). The helper needs
// MPI_THREAD_MULTIPLE; without it only the entry is served (docs/design.md, Limits).
class ServeWhileBlocked {
 public:
  ServeWhileBlocked();
  ~ServeWhileBlocked();
  ServeWhileBlocked(const ServeWhileBlocked&) = delete;
  ServeWhileBlocked& operator=(const ServeWhileBlocked&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread helper_;
};

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

}  // namespace ferry::mpi_detail
