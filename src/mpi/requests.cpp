// The table of Ferry's non-blocking requests (requests.hpp).
#include "mpi/requests.hpp"

namespace ferry::mpi_detail {

int unpack_arrived(const void* staging, MPI_Status* st, const transport::Target& to, bool handoff,
                   bool* handed) {
  if (handed) *handed = false;
  MPI_Count got = 0;
  PMPI_Get_elements_x(st, MPI_BYTE, &got);
  const i64 capacity = to.capacity();
  const bool truncated = got > capacity;
  const i64 take = truncated ? capacity : got;
  const bool took = transport::unstage(staging, take, to, 0, true, handoff && !truncated ? const_cast<void*>(staging) : nullptr);
  if (handed) *handed = took;
  if (!truncated) return MPI_SUCCESS;
  PMPI_Status_set_elements_x(st, MPI_BYTE, take);
  st->MPI_ERROR = MPI_ERR_TRUNCATE;
  return MPI_ERR_TRUNCATE;
}

void Requests::count_stub(const Pending& p, int delta) {
  if ((p.may_be_stub && p.stub_state == 0 && (!p.persistent || p.active)) || (p.serve && !p.served) ||
      (p.drive && !p.driven))
    hot::stubs.fetch_add(delta, std::memory_order_acq_rel);
}

// The entry a handle names (mutex_ held): with `id`, exactly that entry; else, among the entries
// up to id `before` (see complete()), when MPI has handed the handle out again while an older
// entry still waits for its completion here, the calling thread's own entry first, then the
// oldest.
Requests::Table::iterator Requests::locate(MPI_Request r, std::uint64_t id, std::uint64_t before) {
  auto [first, last] = table_.equal_range(r);
  if (first == last) return table_.end();
  if (id) {
    for (auto it = first; it != last; ++it)
      if (it->second.id == id) return it;
    return table_.end();
  }
  const auto me = std::this_thread::get_id();
  auto oldest = table_.end();
  for (auto it = first; it != last; ++it) {
    const Pending& p = it->second;
    if (p.id > before || (p.claimed != std::thread::id{} && p.claimed != me)) continue;
    if (p.owner == me) return it;
    if (oldest == table_.end()) oldest = it;
  }
  return oldest;
}

void Requests::claim(const MPI_Request* reqs, int n, bool take) {
  const std::thread::id me = std::this_thread::get_id(), none{};
  const std::thread::id from = take ? none : me, to = take ? me : none;
  std::lock_guard lock(mutex_);
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    auto [first, last] = table_.equal_range(reqs[i]);
    for (auto it = first; it != last; ++it)
      if (it->second.claimed == from) it->second.claimed = to;
  }
}

void Requests::add(MPI_Request r, Pending p) {
  std::lock_guard lock(mutex_);
  p.id = ++next_id_;
  count_stub(p, 1);
  table_.emplace(r, std::move(p));  // after any entry with the same handle: oldest first
  hot::pending.store(table_.size(), std::memory_order_release);
}

int Requests::add_or_finish(MPI_Request r, Pending p) {
  int flag = 0;
  MPI_Status st;
  if (r != MPI_REQUEST_NULL && PMPI_Request_get_status(r, &flag, &st) == MPI_SUCCESS && !flag) {
    add(r, std::move(p));
    return MPI_SUCCESS;
  }
  const int rc = p.finish ? p.finish(&st) : MPI_SUCCESS;
  transport::pinned_pool().put(p.staging);
  return rc;
}

void Requests::keep(MPI_Request r, std::shared_ptr<void> what) {
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r);
    if (it != table_.end()) {
      auto finish = std::move(it->second.finish);
      it->second.finish = [finish, what](const MPI_Status* st) { return finish ? finish(st) : MPI_SUCCESS; };
      return;
    }
  }
  Pending p;
  p.finish = [what](const MPI_Status*) { return MPI_SUCCESS; };
  add_or_finish(r, std::move(p));
}

bool Requests::cancellable(MPI_Request r) {
  std::lock_guard lock(mutex_);
  auto it = locate(r);
  return it == table_.end() || !it->second.uncancellable;
}

int Requests::complete(MPI_Request r, MPI_Status* st, bool errors_in_status, std::uint64_t before) {
  if (errors_in_status && st->MPI_ERROR == MPI_ERR_PENDING) return -1;  // still active
  const bool ok = !errors_in_status || st->MPI_ERROR == MPI_SUCCESS;
  std::unique_lock stub_lock(stub_mutex_);  // an early fetch of this request may be under way
  if (!open_.empty() && in_flight(r)) settle_open(true);  // its data in place before MPI says so
  Pending p;
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r, 0, before);
    if (it == table_.end()) return -1;
    count_stub(it->second, -1);
    if (it->second.persistent) {
      // Completing an inactive persistent request (MPI returns at once) does nothing.
      if (!it->second.active) return MPI_SUCCESS;
      p = it->second;
      it->second.active = false;
      it->second.delivered = false;
    } else {
      p = std::move(it->second);
      table_.erase(it);
      hot::pending.store(table_.size(), std::memory_order_release);
    }
  }
  int rc = MPI_SUCCESS;
  int cancelled = 0;
  bool handed = false;
  if (ok) PMPI_Test_cancelled(st, &cancelled);
  if (p.recv && !cancelled && ok) {
    bool stub = false;
    if (p.may_be_stub && p.stub_state == 1) {  // fetched early (progress or Request_get_status)
      stub = true;
      rc = p.stub_rc;
      PMPI_Status_set_elements_x(st, MPI_BYTE, p.stub_bytes);
      if (rc != MPI_SUCCESS) st->MPI_ERROR = rc;
    } else if (p.may_be_stub && p.stub_state == 0 && !p.delivered) {
      stub = transport::receive(p.to, p.staging, p.ranks, st, &rc);
    }
    // A finish step may read what arrived: the copy is waited for before it.
    if (!stub && p.to.device && !p.delivered)
      rc = unpack_arrived(p.staging, st, p.to, !p.persistent && !p.finish, &handed);
  }
  stub_lock.unlock();
  if (p.finish && !cancelled && ok) {
    const int e = p.finish(st);
    if (e != MPI_SUCCESS && rc == MPI_SUCCESS) {
      rc = e;
      st->MPI_ERROR = e;
    }
  }
  if (!p.persistent && !handed) transport::pinned_pool().put(p.staging);
  return rc;
}

void Requests::deliver_early(MPI_Request r, MPI_Status* st) {
  std::unique_lock stub_lock(stub_mutex_);
  if (!open_.empty() && in_flight(r)) settle_open(true);
  Pending p;
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r);
    if (it == table_.end() || !it->second.recv || it->second.delivered) return;
    if (it->second.persistent && !it->second.active) return;
    p = it->second;
  }
  int cancelled = 0;
  PMPI_Test_cancelled(st, &cancelled);
  if (cancelled) return;
  int rc = MPI_SUCCESS;
  bool stub = p.may_be_stub && p.stub_state == 1;
  if (p.may_be_stub && p.stub_state == 0) stub = transport::receive(p.to, p.staging, p.ranks, st, &rc);
  if (stub && p.stub_state == 1) {
    rc = p.stub_rc;
    PMPI_Status_set_elements_x(st, MPI_BYTE, p.stub_bytes);
  }
  if (!stub && p.to.device) rc = unpack_arrived(p.staging, st, p.to);
  std::lock_guard lock(mutex_);
  auto it = locate(r);
  if (it == table_.end()) return;
  count_stub(it->second, -1);
  it->second.delivered = true;
  if (stub || rc != MPI_SUCCESS) {  // the later completion repeats what happened here
    it->second.may_be_stub = true;
    it->second.stub_state = 1;
    it->second.stub_rc = rc;
    MPI_Count n = 0;
    PMPI_Get_elements_x(st, MPI_BYTE, &n);
    it->second.stub_bytes = n;
  } else if (it->second.may_be_stub) {
    it->second.stub_state = 2;
  }
}

bool Requests::detach(MPI_Request r) {
  std::lock_guard lock(mutex_);
  auto it = locate(r);
  if (it == table_.end() || it->second.detached) return false;
  if (it->second.persistent && !it->second.active) return false;  // inactive: freed at once
  it->second.detached = true;
  it->second.owner = std::this_thread::get_id();  // the handle is now only Ferry's, in this thread
  hot::detached.fetch_add(1);
  return true;
}

void Requests::drain() {
  while (hot::detached.load() > 0) progress(true);
  settle_open(true);
}

bool Requests::in_flight(MPI_Request r) {
  std::lock_guard lock(mutex_);
  auto it = locate(r);
  return it != table_.end() && it->second.in_flight;
}

bool Requests::start(MPI_Request r) {
  Pending p;
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r);
    if (it == table_.end() || !it->second.persistent) return false;
    p = it->second;
  }
  if (!p.recv && p.route.type) transport::stage(p.route, p.staging);
  return true;
}

void Requests::activate(MPI_Request r) {
  std::lock_guard lock(mutex_);
  auto it = locate(r);
  if (it == table_.end() || !it->second.persistent || it->second.active) return;
  it->second.active = true;
  it->second.stub_state = 0;
  it->second.delivered = false;
  it->second.owner = std::this_thread::get_id();
  count_stub(it->second, 1);
}

void* Requests::staging_of(MPI_Request r) {
  std::lock_guard lock(mutex_);
  auto it = locate(r);
  return it == table_.end() ? nullptr : it->second.staging;
}

void Requests::drop(MPI_Request r, std::uint64_t before) {
  void* staging = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r, 0, before);
    if (it == table_.end()) return;
    count_stub(it->second, -1);
    if (it->second.persistent) {  // stays for MPI_Request_free; no longer active
      it->second.active = false;
      return;
    }
    staging = it->second.staging;
    table_.erase(it);
    hot::pending.store(table_.size(), std::memory_order_release);
  }
  transport::pinned_pool().put(staging);
}

int Requests::forget_persistent(MPI_Request r) {
  void* staging = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r);
    if (it == table_.end() || !it->second.persistent) return 0;
    if (it->second.active) return 2;
    staging = it->second.staging;
    table_.erase(it);
    hot::pending.store(table_.size(), std::memory_order_release);
  }
  transport::pinned_pool().put(staging);
  return 1;
}

Requests& requests() {
  static auto* r = new Requests();
  return *r;
}

}  // namespace ferry::mpi_detail
