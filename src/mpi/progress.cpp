// Progress (dissertation §5.6): a sender may wait for its acknowledgement while the receiver sits
// in another blocking call, so blocking calls serve the receives that may hold a stub while any
// are pending, and complete the requests the application freed while active.
#include <chrono>

#include "mpi/requests.hpp"

namespace ferry::mpi_detail {

// A request the application gave up (MPI_Request_free while active): Ferry completes and frees it.
void Requests::complete_detached(MPI_Request r) {
  MPI_Request h = r;
  int flag = 0;
  MPI_Status st;
  if (PMPI_Test(&h, &flag, &st) != MPI_SUCCESS) {  // it ended in an error nobody can be told
    drop(r);
    hot::detached.fetch_sub(1);
    return;
  }
  if (!flag) return;
  bool persistent = false;
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r);
    if (it != table_.end()) persistent = it->second.persistent;
  }
  try {
    complete(r, &st);
  } catch (...) {  // nobody is left to tell
  }
  if (persistent) {
    {
      std::lock_guard lock(mutex_);
      auto it = locate(r);
      if (it != table_.end()) it->second.detached = false;
    }
    forget_persistent(r);
    PMPI_Request_free(&h);
  }
  hot::detached.fetch_sub(1);
}

void Requests::fetch_stubs(std::vector<Arrived>& arrived, bool keep_open) {
  std::unique_lock stub_lock(stub_mutex_);
  struct Outcome {
    bool taken = false, stub = false, deferred = false;
    int rc = MPI_SUCCESS;
  };
  std::vector<Outcome> out(arrived.size());
  auto batch = std::make_unique<transport::ReceiveBatch>();
  for (std::size_t k = 0; k < arrived.size(); ++k) {
    Arrived& a = arrived[k];
    Pending p;
    {
      std::lock_guard lock(mutex_);
      auto it = locate(a.r, a.id, a.before);
      if (it == table_.end()) continue;
      const Pending& q = it->second;
      if (!q.recv || !q.may_be_stub || q.stub_state != 0 || q.delivered || (q.persistent && !q.active)) continue;
      a.id = q.id;
      p = q;
    }
    Outcome& o = out[k];
    o.taken = true;
    int cancelled = 0;
    PMPI_Test_cancelled(&a.st, &cancelled);
    const std::size_t before = batch->size();
    try {  // runs inside any MPI call: an error is kept for the request's completion
      o.stub = !cancelled && transport::receive(p.to, p.staging, p.ranks, &a.st, &o.rc, batch.get());
    } catch (const ferry::Error& e) {
      o.stub = true;
      o.rc = e.mpi_error_class();
    } catch (...) {
      o.stub = true;
      o.rc = MPI_ERR_INTERN;
    }
    o.deferred = batch->size() > before;
  }
  bool open = false;
  int waited = MPI_SUCCESS;
  if (keep_open && batch->size() > 0) {
    try {
      batch->close();
      open = true;
    } catch (...) {  // no event: waited for now
    }
  }
  if (!open) waited = batch->settle();
  std::lock_guard lock(mutex_);
  Open o{std::move(batch), {}};
  for (std::size_t k = 0; k < arrived.size(); ++k) {
    if (!out[k].taken) continue;
    auto it = locate(arrived[k].r, arrived[k].id);
    if (it == table_.end()) continue;
    Outcome& r = out[k];
    if (r.deferred && waited != MPI_SUCCESS && r.rc == MPI_SUCCESS) r.rc = waited;
    count_stub(it->second, -1);
    it->second.stub_state = r.stub ? 1 : 2;
    it->second.stub_rc = r.rc;
    it->second.in_flight = open && r.deferred;
    if (it->second.in_flight) o.members.emplace_back(arrived[k].r, arrived[k].id);
    MPI_Count n = 0;
    PMPI_Get_elements_x(&arrived[k].st, MPI_BYTE, &n);
    it->second.stub_bytes = n;
  }
  if (open) {  // members may be none (freed meanwhile): the senders are still answered by settle_open
    open_.push_back(std::move(o));
    hot::stubs.fetch_add(1, std::memory_order_acq_rel);
  }
}

Requests::KeepOpen::~KeepOpen() {
  if (!outermost()) return;  // the enclosing scope settles
  try {
    requests().settle_open(true);
  } catch (...) {  // out of memory: what is left settles in a later call's progress
  }
}

void Requests::settle_open(bool wait) {
  std::unique_lock stub_lock(stub_mutex_);
  if (open_.empty()) return;
  std::vector<Open> keep;
  keep.reserve(open_.size());  // no allocation while batches are being settled
  for (Open& o : open_) {
    bool ready = wait;
    if (!ready) try {
        ready = o.batch->done();
      } catch (...) {
        ready = true;  // settle() reports the failure
      }
    if (!ready) {
      keep.push_back(std::move(o));
      continue;
    }
    const int rc = o.batch->settle();
    hot::stubs.fetch_sub(1, std::memory_order_acq_rel);
    std::lock_guard lock(mutex_);
    for (auto [r, id] : o.members) {
      auto it = locate(r, id);
      if (it == table_.end()) continue;
      it->second.in_flight = false;
      if (rc != MPI_SUCCESS && it->second.stub_rc == MPI_SUCCESS) it->second.stub_rc = rc;
    }
  }
  open_ = std::move(keep);
}

void Requests::progress_of(bool all_threads, std::thread::id me, bool leave_open) {
  // Not again from inside itself (a detached send's finish step serves while it waits): the outer
  // pass holds handles that the inner one could complete and MPI free.
  static thread_local bool busy = false;
  if (busy) return;
  std::unique_lock stub_lock(stub_mutex_, std::try_to_lock);
  if (!stub_lock.owns_lock()) return;  // another thread is at it
  busy = true;
  struct Done {
    ~Done() { busy = false; }
  } done;
  std::vector<std::pair<MPI_Request, std::uint64_t>> candidates, detached, sends, drives;
  {
    std::lock_guard lock(mutex_);
    for (auto& [r, p] : table_) {
      // A collective's messages may be waited for from any thread (they are driven one pass at
      // a time: this pass holds stub_mutex_).
      if (p.drive && !p.driven) drives.emplace_back(r, p.id);
      if (!all_threads && p.owner != me) continue;
      if (p.detached) {
        detached.emplace_back(r, p.id);
      } else if (p.may_be_stub && p.stub_state == 0 && (!p.persistent || p.active)) {
        candidates.emplace_back(r, p.id);
      } else if (p.serve && !p.served) {
        sends.emplace_back(r, p.id);
      }
    }
  }
  for (auto [r, id] : detached) complete_detached(r);
  // Sends whose request completed: their serve step now (a receiver may wait for its data).
  for (auto [r, id] : sends) {
    int flag = 0;
    MPI_Status st;
    if (PMPI_Request_get_status(r, &flag, &st) != MPI_SUCCESS || !flag) continue;
    std::function<void()> serve;
    {
      std::lock_guard lock(mutex_);
      auto it = locate(r, id);
      if (it == table_.end() || it->second.served) continue;
      count_stub(it->second, -1);
      it->second.served = true;
      serve = it->second.serve;
    }
    try {
      serve();
    } catch (...) {  // the send's completion reports what failed (Rendezvous keeps its result)
    }
  }
  std::vector<Arrived> arrived;
  for (auto [r, id] : candidates) {
    int flag = 0;
    MPI_Status st;
    if (PMPI_Request_get_status(r, &flag, &st) == MPI_SUCCESS && flag) arrived.push_back({r, id, st});
  }
  if (!arrived.empty()) fetch_stubs(arrived, transport::ReceiveBatch::enabled() && (leave_open || KeepOpen::on()));
  settle_open(false);
  // Generalized requests of Ferry's: their messages advanced, completed once all are done. Last:
  // a drive completes and frees requests of its own that the loops above may have listed.
  for (auto [r, id] : drives) {
    std::function<bool()> drive;
    {
      std::lock_guard lock(mutex_);
      auto it = locate(r, id);
      if (it == table_.end() || it->second.driven) continue;
      drive = it->second.drive;
    }
    bool done = true;
    try {
      done = drive();
    } catch (...) {  // the drive keeps its own result for the finish step
    }
    if (!done) continue;
    {
      std::lock_guard lock(mutex_);
      auto it = locate(r, id);
      if (it == table_.end() || it->second.driven) continue;
      count_stub(it->second, -1);
      it->second.driven = true;
    }
    PMPI_Grequest_complete(r);
  }
}

void serve_now() { serve(); }

int wait_serving(MPI_Request* request, MPI_Status* status) {
  if (!requests().polling()) return PMPI_Wait(request, status);
  for (;;) {
    int flag = 0;
    int rc = PMPI_Test(request, &flag, status);
    if (rc != MPI_SUCCESS || flag) return rc;
    requests().progress();
  }
}

ServeWhileBlocked::ServeWhileBlocked() {
  serve();
  requests().settle_open(true);  // without a helper nobody answers their senders while this blocks
  if (!hot::threads || !requests().polling()) return;
  const int device = ferry::gpu::current_device();
  helper_ = std::thread([this, owner = std::this_thread::get_id(), device] {
    // On the owner's device (IPC copies go to its current device). Polls while the owner blocks;
    // backs off when nothing arrives, so the blocked call keeps most of the MPI to itself.
    try {
      ferry::gpu::set_device(device);
    } catch (const ferry::Error&) {
      return;  // no GPU to serve from: the entry was served, as without threads
    }
    int idle = 0;
    while (!stop_.load(std::memory_order_acquire) && requests().polling()) try {
      const int before = hot::stubs.load() + hot::detached.load();
      requests().progress_for(owner);
      if (hot::stubs.load() + hot::detached.load() < before) {
        idle = 0;
      } else if (++idle > 64) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      } else {
        std::this_thread::yield();
      }
    } catch (...) {  // progress keeps its errors for the requests; nothing else may escape a thread
      return;
    }
  });
}

ServeWhileBlocked::~ServeWhileBlocked() {
  stop_.store(true, std::memory_order_release);
  if (helper_.joinable()) helper_.join();
}

}  // namespace ferry::mpi_detail
