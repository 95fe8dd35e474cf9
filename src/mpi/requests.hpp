// Ferry's non-blocking requests: what their completion needs (staging, the receive's target, a
// finish step), kept by MPI handle, and the progress that serves receives which may hold a stub
// (dissertation §5.6) while blocking calls wait.
#pragma once

#include <ferry/transport.hpp>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mpi/hot.hpp"

namespace ferry::mpi_detail {

namespace transport = ferry::transport;

// A thread's flag, set for a scope (a nested scope leaves it set; the outermost clears it).
class ScopedFlag {
 public:
  explicit ScopedFlag(bool& flag) : flag_(flag), was_(flag) { flag = true; }
  ~ScopedFlag() { flag_ = was_; }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;
  bool outermost() const { return !was_; }

 private:
  bool& flag_;
  bool was_;
};

// The staging pool: pinned, mapped host memory (copies still queued there return first).
inline transport::Pool& pool() {
  transport::reclaim();
  return transport::pinned_pool();
}

// A staging buffer for the length of one call, or until release() hands it to a request.
class Staged {
 public:
  explicit Staged(i64 bytes) : p(pool().get(bytes)) {}
  ~Staged() { transport::pinned_pool().put(p); }
  void* release() {
    void* q = p;
    p = nullptr;
    return q;
  }
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
  void* p;
};

// A non-blocking call that Ferry finishes when MPI completes its request: staged point-to-point
// (the staging buffer; for receives what to unpack where), or anything with a `finish` step (a
// rendezvous send's acknowledgement, a non-blocking collective writing its host mirrors back).
struct Pending {
  void* staging = nullptr;   // pinned pool buffer
  bool recv = false;
  transport::Target to;      // receives: where the data goes
  transport::Route route;    // persistent staged sends: what each MPI_Start packs
  bool persistent = false;   // MPI_*_init: stays in the table until MPI_Request_free
  bool active = false;       // a persistent request between MPI_Start and its completion
  // Run once the request completed successfully (and was not cancelled), after any unpack; its
  // MPI result becomes the completion's (a failed write-back, say).
  std::function<int(const MPI_Status*)> finish;
  // A send with more to do once its MPI request completes (Outgoing::serve): run by progress as
  // soon as it has, before the application completes the request. While it has not run, blocking
  // calls poll, as for a receive that may get a stub.
  std::function<void()> serve;
  bool served = false;
  // A generalized request of Ferry's (a non-blocking collective made of point-to-point messages):
  // progress runs `drive` until it says all is done, then completes the request (MPI_Grequest_complete).
  // While it has not, blocking calls poll.
  std::function<bool()> drive;
  bool driven = false;
  bool detached = false;     // freed by MPI_Request_free while active: progress completes it
  bool delivered = false;    // MPI_Request_get_status saw it complete and the data is in place
  std::thread::id owner = std::this_thread::get_id();  // the thread that posted it
  std::thread::id claimed{};  // the thread inside a wait or test of it (Requests::claim)
  std::uint64_t id = 0;                                 // unique, given by Requests::add
  bool uncancellable = false;  // a stub is out: MPI_Cancel leaves it alone
  // A receive that may get a stub: where it came from, and what became of it.
  bool may_be_stub = false;
  transport::Ranks ranks;    // of the receive's communicator
  int stub_state = 0;        // 0: not looked at; 1: a stub, data fetched early (stub_rc); 2: not a stub
  bool in_flight = false;    // stub_state 1 with its copy still queued (Requests::settle_open)
  int stub_rc = MPI_SUCCESS;
  MPI_Count stub_bytes = 0;
};

// A staged receive of GPU data arrived in pinned `staging` (`st` says how much): unpacks it into
// the target. More bytes than the target holds (Ferry gives small receives room for a stub) is
// MPI_ERR_TRUNCATE with the fitting bytes delivered, as MPI's own truncation. `handoff`: the
// staging buffer may go to the transport, which returns it once the copy queued from it is done
// (FERRY_ASYNC_RECV); *handed says it did.
int unpack_arrived(const void* staging, MPI_Status* st, const transport::Target& to, bool handoff = false,
                   bool* handed = nullptr);

// Ferry's requests by MPI handle. Under MPI_THREAD_MULTIPLE a handle that completed in one thread
// may be handed out again by MPI to another before the first thread has finished it here, so a
// handle can have two entries for a moment: a completion finishes its own thread's entry, else
// the oldest (see locate).
class Requests {
 public:
  static constexpr std::uint64_t kAnyEntry = ~std::uint64_t{0};  // no bound on an entry's id
  void add(MPI_Request r, Pending p);
  // A send or collective of Ferry's under `r`: recorded, or, when MPI completed it at once, finished
  // now and not recorded. (A request MPI completes at once may share its handle with other
  // completed ones, MPICH's pre-completed requests: entries under it would be finished in the
  // wrong order.) Returns the finish step's result.
  int add_or_finish(MPI_Request r, Pending p);
  bool empty() const { return hot::no_requests(); }
  // Keeps `what` alive until `r` completes (arrays a non-blocking call's MPI may still read):
  // under the request's entry, or a new one.
  void keep(MPI_Request r, std::shared_ptr<void> what);
  // MPI_Cancel may go to MPI (false for stub sends, whose receiver may be reading already).
  bool cancellable(MPI_Request r);
  // Finishes a completed request that was ours (unpacks a receive, fetches a stub's data and fixes
  // the status, runs the finish step); returns -1 if it was not ours, else the request's result.
  // `errors_in_status`: the call returned MPI_ERR_IN_STATUS, so each status's MPI_ERROR says how
  // its request ended (otherwise MPI leaves that field unset and success is implied).
  // `before` (an epoch() taken before the MPI call that completed `r`): only an entry made by then
  // can be r's. Under MPI_THREAD_MULTIPLE, MPI may hand a handle it freed in this thread's call
  // (a request Ferry did not track) to another thread's new request at once, whose entry must
  // not be taken for it (its staging buffer went back to the pool while the peer still read it).
  int complete(MPI_Request r, MPI_Status* st, bool errors_in_status = false, std::uint64_t before = kAnyEntry);
  // The id of the newest entry so far.
  std::uint64_t epoch() const { return next_id_.load(std::memory_order_acquire); }
  // Around a wait or test of `n` handles: the entries they name, claimed by no other thread, are
  // this thread's to complete until the same call with `take` false. So when MPI frees one of them
  // in that call and another thread's plain request gets its handle and completes, that thread
  // does not take the entry for its own (the other way round from complete()'s `before`).
  void claim(const MPI_Request* reqs, int n, bool take);
  // Receives that may hold a stub and are not finished yet (or requests freed while active): while
  // there are any, blocking calls poll (progress) instead of blocking inside the MPI.
  // (Also sends whose serve step has not run: hot::stubs counts both.)
  bool polling() const {
    return hot::stubs.load(std::memory_order_acquire) > 0 || hot::detached.load(std::memory_order_acquire) > 0;
  }
  // MPI_Request_free of an active request of ours: MPI must return at once, so Ferry keeps the
  // handle and completes the request in progress. False if not ours.
  bool detach(MPI_Request r);
  // Completes every detached request (MPI_Finalize).
  void drain();
  // MPI_Request_get_status found one of ours complete: put the data in place now (the buffer is
  // the application's to read) and fix the status; the later wait or test then only frees it.
  void deliver_early(MPI_Request r, MPI_Status* st);
  // Fetches the data of every receive of this thread whose stub has arrived and answers it, so its
  // sender can go on before the receiver reaches MPI_Wait (§5.6). Under MPI_THREAD_MULTIPLE another
  // thread may be completing, and MPI freeing, its own requests at the same moment: only the
  // calling thread's (or `owner`'s, for ServeWhileBlocked); `all_threads` at MPI_Finalize.
  // `leave_open`: what this pass fetches stays open after it (settle_open), as inside KeepOpen.
  void progress(bool all_threads = false, bool leave_open = false) {
    progress_of(all_threads, std::this_thread::get_id(), leave_open);
  }
  // Requests that MPI completed together (statuses from their wait or test): fetches the data of
  // those that are stub receives not fetched yet, queueing every copy before one wait for the GPU
  // (transport::ReceiveBatch), and keeps the outcome for their completion (stub_state 1).
  // `keep_open` (progress): the batch is not waited for here but stays open, its senders
  // unanswered, until a later pass finds its copies done or a completion needs its data
  // (settle_open): receives that arrive one after another then overlap their copies and no
  // host wait blocks on each. Without it the batch settles before this returns. Progress keeps
  // batches open only inside a KeepOpen scope.
  struct Arrived {
    MPI_Request r;
    std::uint64_t id;  // 0: the entry locate() finds, among those up to `before` (see complete)
    MPI_Status st;
    std::uint64_t before = kAnyEntry;
  };
  void fetch_stubs(std::vector<Arrived>& arrived, bool keep_open = false);
  // Settles the open batches whose copies are done (`wait`: all, waiting for them): their senders
  // are answered and their requests' data is in place. Before any call that may block without
  // serving, the open batches settle with `wait` (a sender may be waiting for its answer).
  void settle_open(bool wait);
  // Around a loop that runs progress until its requests complete (MPI_Waitall): the batches its
  // passes fetch stay open between passes, and every one still open settles when the scope ends,
  // so no sender waits for an answer after the call returns (the application's next call may block
  // without serving). Elsewhere progress settles what it fetched before it returns.
  class KeepOpen : ScopedFlag {
   public:
    KeepOpen() : ScopedFlag(on()) {}
    ~KeepOpen();
    static bool& on() {
      static thread_local bool open = false;
      return open;
    }
  };
  void progress_for(std::thread::id owner) { progress_of(false, owner); }
  // MPI_Start of one of our persistent requests: a send packs the user's buffer now (before
  // PMPI_Start); activate() marks it started (after). False if the request is not ours.
  bool start(MPI_Request r);
  void activate(MPI_Request r);
  // The staging buffer of a request of ours (null if none).
  void* staging_of(MPI_Request r);
  // A request that completed with an error: forget it (its staging goes back to the pool).
  void drop(MPI_Request r, std::uint64_t before = kAnyEntry);
  // Forgets a persistent request (MPI_Request_free); its staging goes back to the pool.
  // Returns 0 if not ours, 1 if freed, 2 if it is active (the caller must complete it first).
  int forget_persistent(MPI_Request r);

 private:
  using Table = std::multimap<MPI_Request, Pending>;
  Table::iterator locate(MPI_Request r, std::uint64_t id = 0, std::uint64_t before = kAnyEntry);
  void progress_of(bool all_threads, std::thread::id owner, bool leave_open = false);
  bool in_flight(MPI_Request r);
  void complete_detached(MPI_Request r);
  void count_stub(const Pending& p, int delta);
  std::atomic<std::uint64_t> next_id_{0};
  std::mutex mutex_;
  std::recursive_mutex stub_mutex_;  // one stub fetch at a time, by progress or by completion
  Table table_;
  // Batches of receives whose copies are queued and whose senders wait for an answer (stub_mutex_
  // held); each counts once in hot::stubs, so that blocking calls keep serving until it settles.
  struct Open {
    std::unique_ptr<transport::ReceiveBatch> batch;
    std::vector<std::pair<MPI_Request, std::uint64_t>> members;
  };
  std::vector<Open> open_;
};
Requests& requests();

// While a collective of Ferry's posts its messages (calls that never wait for a receiver), those
// calls do not serve: the blocks that arrive meanwhile are fetched together once every message is
// out, and the later sends are not held up behind the fetches of earlier arrivals (which delayed a
// 4-rank MPI_Alltoallv's last send by 40-90 us on the H200).
class Posting : ScopedFlag {
 public:
  Posting() : ScopedFlag(on()) {}
  static bool& on() {
    static thread_local bool posting = false;
    return posting;
  }
};

// Serve pending stub receives (cheap when there are none): on entry to calls that may block.
inline void serve() {
  if (requests().polling() && !Posting::on()) requests().progress();
}
// The same on entry to a call that never waits (MPI_Isend, MPI_Irecv): the copies of what it
// fetches are not waited for here; their batch stays open, counted in hot::stubs, until a later
// pass finds them done and answers the senders, or a call that may block without serving settles
// it first (ServeWhileBlocked, a completion that needs the data, MPI_Finalize). A loop of 208
// MPI_Isend each answering the stub of the one before waited for the GPU 208 times: 41 us a
// message for a halo's blocks sent to this process (one H200). And at most one pass per thread
// every kOpenPassGap: a pass scans every pending request, so a loop posting n of them paid n
// scans of up to 2n (one rank's 208 subarray Isend/Irecv to itself: 26 us an MPI_Isend, 5.4 of
// its 8.3 ms, one H200; with no pass at all 5.5 us). A sender waiting for an answer from a
// process that only posts is answered within the gap; one that waits is served as before.
inline constexpr std::chrono::microseconds kOpenPassGap{100};
inline void serve_open() {
  if (!requests().polling() || Posting::on()) return;
  thread_local std::chrono::steady_clock::time_point last{};
  const auto now = std::chrono::steady_clock::now();
  if (now - last < kOpenPassGap) return;
  last = now;
  requests().progress(false, true);
}
// The same as a plain function, for the transport's waits.
void serve_now();

// MPI_Wait that serves pending stub receives meanwhile (plain PMPI_Wait when none pend).
int wait_serving(MPI_Request* request, MPI_Status* status);

// Around a blocking call that Ferry cannot turn into a serving loop (a blocking collective: MPI
// does not match it with the non-blocking form, so one rank cannot switch alone): serves on entry,
// and while the call blocks, a helper thread serves this thread's pending stub receives. The helper
// needs MPI_THREAD_MULTIPLE; without it only the entry is served (docs/design.md, Limits).
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
