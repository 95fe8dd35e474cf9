// Persistent requests that Ferry starts itself: see persistent.hpp.
#include "mpi/persistent.hpp"

#include <map>
#include <mutex>

#include "mpi/early.hpp"

namespace ferry::mpi_detail::persistent {
namespace {

struct Entry {
  Args args;
  MPI_Request inner = MPI_REQUEST_NULL;  // the stand-in while active
  bool comm_gone = false;
};

class Table {
 public:
  void add(MPI_Request r, Args a) {
    std::lock_guard lock(mutex_);
    // A handle MPI freed behind Ferry's back (a persistent request it freed on an error the
    // wait wrappers did not see) may come back: the old entry goes.
    if (auto old = entries_.find(r); old != entries_.end()) {
      if (old->second.inner != MPI_REQUEST_NULL) hot::stand_ins.fetch_sub(1);
      if (!old->second.args.recv) hot::remembered_sends.fetch_sub(1);
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
    std::lock_guard lock(mutex_);
    auto it = entries_.find(r);
    if (it == entries_.end()) return false;
    *inner = it->second.inner;
    if (it->second.inner != MPI_REQUEST_NULL) hot::stand_ins.fetch_sub(1);
    if (!it->second.args.recv) hot::remembered_sends.fetch_sub(1);
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
      if (!e.args.recv && e.args.comm == comm) e.comm_gone = true;
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
  try {
    return start(r, e.args, rc);
  } catch (const ferry::Error& err) {
    *rc = report(e.args.comm, err);
    return true;
  }
}

bool start(MPI_Request r, const Args& a, int* rc) {
  MPI_Request in = MPI_REQUEST_NULL;
  if (a.recv) {
    if (!early::any()) return false;
    MPI_Status st;
    int result = MPI_SUCCESS;
    Target to;
    to.buf = a.buf;
    to.count = a.count;
    to.type = a.type;
    to.device = a.device;
    if (!early::recv(to, a.peer, a.tag, a.comm, &st, &result)) return false;
    *rc = early::completed_request(st, result, a.comm, &in);
  } else if (a.buffered) {
    ipc::stage_pack(a.buf, a.count, *a.type, a.staging);
    *rc = PMPI_Ibsend(a.staging, a.bytes, MPI_BYTE, a.peer, a.tag, a.comm, &in);
  } else {
    if (!a.device || !ipc::try_send(a.mode, a.buf, a.count, a.type, a.peer, a.tag, a.comm, &in, rc))
      return false;
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
