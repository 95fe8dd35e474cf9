#include "mpi/common.hpp"

#include "mpi/ipc.hpp"
#include "sys/env.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ferry::mpi_detail {

bool verbose() {
  static const bool v = ferry::detail::env::flag(ferry::detail::env::Knob::mpi_verbose);
  return v;
}

namespace {
// Named types, most used first, with their sizes: their data starts at the buffer (lower bound
// 0), so the pointer check needs no type lookup, and their size needs no call into MPI. This keeps
// small host messages within a few nanoseconds of plain MPI.
struct Named {
  MPI_Datatype type;
  int size;
};
const std::vector<Named>& named_types() {
  static const std::vector<Named> table = [] {
    const MPI_Datatype types[] = {
        MPI_BYTE,     MPI_DOUBLE,        MPI_INT,            MPI_FLOAT,         MPI_CHAR,
        MPI_LONG,     MPI_UNSIGNED_CHAR, MPI_UINT8_T,        MPI_INT64_T,       MPI_UINT64_T,
        MPI_INT32_T,  MPI_UINT32_T,      MPI_LONG_LONG,      MPI_UNSIGNED_LONG_LONG, MPI_UNSIGNED,
        MPI_UNSIGNED_LONG, MPI_SHORT,    MPI_UNSIGNED_SHORT, MPI_SIGNED_CHAR,   MPI_LONG_DOUBLE,
        MPI_INT8_T,   MPI_INT16_T,       MPI_UINT16_T,       MPI_C_BOOL,        MPI_PACKED,
        MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX, MPI_AINT, MPI_OFFSET,        MPI_COUNT};
    std::vector<Named> t;
    for (MPI_Datatype d : types) {
      int size = 0;
      PMPI_Type_size(d, &size);
      t.push_back({d, size});
    }
    return t;
  }();
  return table;
}

bool starts_at_buffer(MPI_Datatype type) {
  for (const Named& n : named_types())
    if (n.type == type) return true;
  return false;
}
}  // namespace

namespace hot {
bool gpu = true;  // until init() knows: with no named types yet, every call takes the full path
bool stubs_on = false;
bool host_sends = false;
bool threads = false;
std::atomic<int> stubs{0}, detached{0}, early{0};
std::atomic<std::size_t> pending{0};
std::atomic<int> remembered{0}, remembered_sends{0}, stand_ins{0};
NamedSize named[kMaxNamed];
int named_count = 0;

void init() {
  int n = 0;
  for (const Named& t : named_types())
    if (n < kMaxNamed) named[n++] = {t.type, t.size};
  named_count = n;
  gpu = ferry::gpu::available();
  stubs_on = ipc::enabled();
  host_sends = ipc::enabled() && ipc::host_protocol_test();
  int level = MPI_THREAD_SINGLE;
  threads = PMPI_Query_thread(&level) == MPI_SUCCESS && level == MPI_THREAD_MULTIPLE;
}
}  // namespace hot

int type_size(MPI_Datatype type) {
  for (const Named& n : named_types())
    if (n.type == type) return n.size;
  int size = 0;
  PMPI_Type_size(type, &size);
  return size;
}

bool on_device(const void* buf, int count, MPI_Datatype type) {
  if (count <= 0 || !ferry::gpu::available()) return false;
  if (starts_at_buffer(type)) {
    const auto m = ferry::gpu::memory_of(buf);
    return m == ferry::gpu::Memory::device || m == ferry::gpu::Memory::managed;
  }
  try {
    auto t = ferry::lookup(type);
    if (t->size() == 0) return false;
    auto m = ferry::gpu::memory_of(static_cast<const char*>(buf) + t->data_lb(count));
    return m == ferry::gpu::Memory::device || m == ferry::gpu::Memory::managed;
  } catch (const ferry::Error&) {
    return false;  // a type Ferry cannot read: the system MPI decides (and reports) as it would
  }
}

bool any_device(std::initializer_list<std::tuple<const void*, int, MPI_Datatype>> bufs) {
  for (const auto& [buf, count, type] : bufs)
    if (buf != MPI_IN_PLACE && buf != nullptr && on_device(buf, count, type)) return true;
  return false;
}

Mirror::Mirror(const void* buf, int count, MPI_Datatype type, bool copy_in)
    : user_(const_cast<void*>(buf)), mpi_type_(type), blocks_{{0, count}} {
  if (buf == MPI_IN_PLACE || !on_device(buf, count, type)) return;
  init(copy_in);
}

Mirror::Mirror(const void* buf, MPI_Datatype type, std::vector<std::pair<i64, i64>> blocks,
               bool copy_in)
    : user_(const_cast<void*>(buf)), mpi_type_(type), blocks_(std::move(blocks)) {
  if (buf == MPI_IN_PLACE || buf == nullptr) return;
  bool dev = false;
  for (auto& [first, n] : blocks_) {
    if (n <= 0) continue;
    auto t = ferry::lookup(type);
    dev = on_device(static_cast<const char*>(buf) + first * t->extent(), static_cast<int>(n), type);
    break;
  }
  if (dev) init(copy_in);
}

void Mirror::init(bool copy_in) {
  type_ = ferry::lookup(mpi_type_);
  bool any = false;
  i64 lo = 0, hi = 0;
  for (auto& [first, n] : blocks_) {
    if (n <= 0) continue;
    const i64 base = first * type_->extent();
    const i64 reach = (n - 1) * type_->extent();
    const i64 b_lo = base + type_->true_lb() + (reach < 0 ? reach : 0);
    const i64 b_hi = base + type_->true_lb() + type_->true_extent() + (reach > 0 ? reach : 0);
    lo = any ? std::min(lo, b_lo) : b_lo;
    hi = any ? std::max(hi, b_hi) : b_hi;
    any = true;
  }
  if (!any) {
    type_ = nullptr;
    return;
  }
  lo_ = lo;
  host_.resize(static_cast<std::size_t>(hi - lo));
  if (copy_in) ferry::gpu::copy(host_.data(), static_cast<char*>(user_) + lo, hi - lo);
}

void Mirror::write_back() {
  if (!staged()) return;
  std::vector<char> packed;
  for (auto& [first, n] : blocks_) {
    if (n <= 0) continue;
    const i64 offset = first * type_->extent();
    packed.resize(static_cast<std::size_t>(ferry::pack_size(n, *type_)) + 1);
    i64 pos = 0;
    ferry::pack(static_cast<char*>(ptr()) + offset, n, *type_, packed.data(),
                static_cast<i64>(packed.size()), &pos);
    ferry::gpu::unpack(packed.data(), static_cast<char*>(user_) + offset, n, *type_);
  }
}

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

int report(MPI_Comm comm, const ferry::Error& e) {
  if (verbose()) std::fprintf(stderr, "ferry-mpi: %s\n", e.what());
  PMPI_Comm_call_errhandler(comm, e.mpi_error_class());
  return e.mpi_error_class();
}

std::shared_ptr<const ferry::Type> staged_type(MPI_Datatype type, int count, int* bytes) {
  auto t = ferry::lookup(type);
  const i64 n = ferry::pack_size(count, *t);
  if (n > INT32_MAX) throw ferry::Error(MPI_ERR_COUNT, "staged message over 2 GiB");
  *bytes = static_cast<int>(n);
  return t;
}

void unpack_into(const void* packed, i64 nbytes, const Target& to, i64 first) {
  const ferry::Type& t = *to.type;
  const i64 size = t.size();
  if (size <= 0 || nbytes <= 0) return;
  const char* src = static_cast<const char*>(packed);
  if (t.dense()) {  // one run: the bytes go where they belong, a partial element included
    char* dst = to.element(first) + t.true_lb();
    if (to.device) {
      ferry::gpu::copy(dst, src, nbytes);
    } else {
      std::memcpy(dst, src, static_cast<std::size_t>(nbytes));
    }
    return;
  }
  const i64 full = nbytes / size, rem = nbytes % size;
  if (full > 0) {
    if (to.device) {
      ipc::stage_unpack(src, to.element(first), full, t);
    } else {
      i64 pos = 0;
      ferry::unpack(src, full * size, &pos, to.element(first), full, t);
    }
  }
  if (rem == 0) return;
  std::vector<char> tmp(static_cast<std::size_t>(size));
  char* last = to.element(first + full);
  i64 pos = 0;
  if (to.device) {
    ferry::gpu::pack(last, 1, t, tmp.data());
  } else {
    ferry::pack(last, 1, t, tmp.data(), size, &pos);
  }
  std::memcpy(tmp.data(), src + full * size, static_cast<std::size_t>(rem));
  pos = 0;
  if (to.device) {
    ferry::gpu::unpack(tmp.data(), last, 1, t);
  } else {
    ferry::unpack(tmp.data(), size, &pos, last, 1, t);
  }
}

void unpack_arrived(const void* staging, const MPI_Status* st, void* buf, const ferry::Type& type) {
  MPI_Count got = 0;
  PMPI_Get_elements_x(st, MPI_BYTE, &got);
  Target to;
  to.buf = buf;
  to.type = std::shared_ptr<const ferry::Type>(&type, [](const ferry::Type*) {});
  to.device = true;
  unpack_into(staging, got, to);
}

void Requests::count_stub(const Pending& p, int delta) {
  if (p.may_be_stub && p.stub_state == 0 && (!p.persistent || p.active))
    hot::stubs.fetch_add(delta, std::memory_order_acq_rel);
}

Requests::Table::iterator Requests::locate(MPI_Request r, std::uint64_t id) {
  auto [first, last] = table_.equal_range(r);
  if (first == last) return table_.end();
  if (id) {
    for (auto it = first; it != last; ++it)
      if (it->second.id == id) return it;
    return table_.end();
  }
  const auto me = std::this_thread::get_id();
  for (auto it = first; it != last; ++it)
    if (it->second.owner == me) return it;
  return first;
}

void Requests::add(MPI_Request r, Pending p) {
  std::lock_guard lock(mutex_);
  p.id = ++next_id_;
  count_stub(p, 1);
  table_.emplace(r, std::move(p));  // after any entry with the same handle: oldest first
  hot::pending.store(table_.size(), std::memory_order_release);
}

bool Requests::contains(MPI_Request r) {
  std::lock_guard lock(mutex_);
  return table_.count(r) != 0;
}

bool Requests::cancellable(MPI_Request r) {
  std::lock_guard lock(mutex_);
  auto it = locate(r);
  return it == table_.end() || !it->second.uncancellable;
}

namespace {
Target target_of(const Pending& p) {
  Target t;
  t.buf = p.buf;
  t.count = p.count;
  t.type = p.type;
  t.device = p.device;
  return t;
}
}  // namespace

int Requests::complete(MPI_Request r, MPI_Status* st, bool errors_in_status) {
  if (errors_in_status && st->MPI_ERROR == MPI_ERR_PENDING) return -1;  // still active
  const bool ok = !errors_in_status || st->MPI_ERROR == MPI_SUCCESS;
  std::unique_lock stub_lock(stub_mutex_);  // an early fetch of this request may be under way
  Pending p;
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r);
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
  if (ok) PMPI_Test_cancelled(st, &cancelled);
  if (p.recv && !cancelled && ok && p.delivered) {
    if (p.stub_state == 1) {
      PMPI_Status_set_elements_x(st, MPI_BYTE, p.stub_bytes);
      rc = p.stub_rc;
      if (rc != MPI_SUCCESS) st->MPI_ERROR = rc;
    }
  } else if (p.recv && !cancelled && ok) {
    bool stub = false;
    if (p.may_be_stub && p.stub_state == 1) {
      stub = true;
      rc = p.stub_rc;
      PMPI_Status_set_elements_x(st, MPI_BYTE, p.stub_bytes);
      if (rc != MPI_SUCCESS) st->MPI_ERROR = rc;
    } else if (p.may_be_stub && p.stub_state == 0) {
      stub = ipc::finish_recv(target_of(p), p.staging, p.ranks, st, &rc);
    }
    if (!stub && p.device) unpack_arrived(p.staging, st, p.buf, *p.type);
  }
  stub_lock.unlock();
  if (p.finish && !cancelled && ok) {
    const int r = p.finish(st);
    if (r != MPI_SUCCESS && rc == MPI_SUCCESS) {
      rc = r;
      st->MPI_ERROR = r;
    }
  }
  if (!p.persistent) pool().put(p.staging);
  return rc;
}

void Requests::deliver_early(MPI_Request r, MPI_Status* st) {
  std::unique_lock stub_lock(stub_mutex_);
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
  if (p.may_be_stub && p.stub_state == 0)
    stub = ipc::finish_recv(target_of(p), p.staging, p.ranks, st, &rc);
  if (stub && p.stub_state == 1) {
    rc = p.stub_rc;
    PMPI_Status_set_elements_x(st, MPI_BYTE, p.stub_bytes);
  }
  if (!stub && p.device) unpack_arrived(p.staging, st, p.buf, *p.type);
  std::lock_guard lock(mutex_);
  auto it = locate(r);
  if (it == table_.end()) return;
  count_stub(it->second, -1);
  it->second.delivered = true;
  if (stub) {
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
}

void Requests::progress_of(bool all_threads, std::thread::id me) {
  std::unique_lock stub_lock(stub_mutex_, std::try_to_lock);
  if (!stub_lock.owns_lock()) return;  // another thread is at it
  std::vector<std::pair<MPI_Request, std::uint64_t>> candidates, detached;
  {
    std::lock_guard lock(mutex_);
    for (auto& [r, p] : table_) {
      if (!all_threads && p.owner != me) continue;
      if (p.detached) {
        detached.emplace_back(r, p.id);
      } else if (p.may_be_stub && p.stub_state == 0 && (!p.persistent || p.active)) {
        candidates.emplace_back(r, p.id);
      }
    }
  }
  for (auto [r, id] : detached) {  // the application gave these up: Ferry completes and frees them
    MPI_Request h = r;
    int flag = 0;
    MPI_Status st;
    if (PMPI_Test(&h, &flag, &st) != MPI_SUCCESS) {  // it ended in an error nobody can be told
      drop(r);
      hot::detached.fetch_sub(1);
      continue;
    }
    if (!flag) continue;
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
  for (auto [r, id] : candidates) {
    int flag = 0;
    MPI_Status st;
    if (PMPI_Request_get_status(r, &flag, &st) != MPI_SUCCESS || !flag) continue;
    Pending p;
    {
      std::lock_guard lock(mutex_);
      auto it = locate(r, id);
      if (it == table_.end() || it->second.stub_state != 0) continue;
      p = it->second;
    }
    int cancelled = 0;
    PMPI_Test_cancelled(&st, &cancelled);
    int rc = MPI_SUCCESS;
    bool stub = false;
    try {  // progress runs inside any MPI call: an error is kept for the request's completion
      stub = !cancelled && ipc::finish_recv(target_of(p), p.staging, p.ranks, &st, &rc);
    } catch (const ferry::Error& e) {
      stub = true;
      rc = e.mpi_error_class();
    } catch (...) {
      stub = true;
      rc = MPI_ERR_OTHER;
    }
    std::lock_guard lock(mutex_);
    auto it = locate(r, id);
    if (it == table_.end()) continue;
    count_stub(it->second, -1);
    it->second.stub_state = stub ? 1 : 2;
    it->second.stub_rc = rc;
    MPI_Count n = 0;
    PMPI_Get_elements_x(&st, MPI_BYTE, &n);
    it->second.stub_bytes = n;
  }
}

ServeWhileBlocked::ServeWhileBlocked() {
  serve();
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

int wait_serving(MPI_Request* request, MPI_Status* status) {
  if (!requests().polling()) return PMPI_Wait(request, status);
  for (;;) {
    int flag = 0;
    int rc = PMPI_Test(request, &flag, status);
    if (rc != MPI_SUCCESS || flag) return rc;
    requests().progress();
  }
}

bool Requests::start(MPI_Request r) {
  Pending p;
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r);
    if (it == table_.end() || !it->second.persistent) return false;
    p = it->second;
  }
  if (!p.recv && p.buf) ipc::stage_pack(p.buf, p.count, *p.type, p.staging);
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

void Requests::drop(MPI_Request r) {
  void* staging = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = locate(r);
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
  pool().put(staging);
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
  pool().put(staging);
  return 1;
}

void stage_pack_now(const Pending& p, void* host) { ipc::stage_pack(p.buf, p.count, *p.type, host); }

Requests& requests() {
  static auto* r = new Requests();
  return *r;
}

}  // namespace ferry::mpi_detail
