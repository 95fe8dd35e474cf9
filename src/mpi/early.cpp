#include "mpi/early.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "mpi/ipc.hpp"

namespace ferry::mpi_detail::early {
namespace {

struct Message {
  MPI_Comm comm;
  MPI_Status status;  // as MPI received it: kStubBytes from the sender
  std::vector<char> bytes;
};

class Store {
 public:
  bool any() const { return size_.load(std::memory_order_acquire) > 0; }
  void push(std::unique_ptr<Message> m) {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(m));
    size_.fetch_add(1);
  }
  // The oldest message matching (source, tag) on comm, removed; null if none.
  std::unique_ptr<Message> take(int source, int tag, MPI_Comm comm) {
    std::lock_guard lock(mutex_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      Message& m = **it;
      if (m.comm != comm || (source != MPI_ANY_SOURCE && m.status.MPI_SOURCE != source) ||
          (tag != MPI_ANY_TAG && m.status.MPI_TAG != tag))
        continue;
      auto out = std::move(*it);
      queue_.erase(it);
      size_.fetch_sub(1);
      return out;
    }
    return nullptr;
  }
  // Applies f to the oldest message matching (source, tag) on comm, left in place.
  template <class F>
  bool peek(int source, int tag, MPI_Comm comm, F f) {
    std::lock_guard lock(mutex_);
    for (auto& m : queue_)
      if (m->comm == comm && (source == MPI_ANY_SOURCE || m->status.MPI_SOURCE == source) &&
          (tag == MPI_ANY_TAG || m->status.MPI_TAG == tag)) {
        f(*m);
        return true;
      }
    return false;
  }
  // Ferry message handles: the address of a Message handed to the application.
  MPI_Message hand_out(std::unique_ptr<Message> m) {
    std::lock_guard lock(mutex_);
    Message* raw = m.release();
    handles_.insert(raw);
    size_.fetch_add(1);
    return reinterpret_cast<MPI_Message>(raw);
  }
  std::unique_ptr<Message> redeem(MPI_Message h) {
    std::lock_guard lock(mutex_);
    auto* raw = reinterpret_cast<Message*>(h);
    if (!handles_.erase(raw)) return nullptr;
    size_.fetch_sub(1);
    return std::unique_ptr<Message>(raw);
  }

 private:
  std::mutex mutex_;
  std::deque<std::unique_ptr<Message>> queue_;
  std::set<Message*> handles_;
  std::atomic<int> size_{0};
};
Store& store() {
  static auto* s = new Store();
  return *s;
}

// The size a stub announces, for the probe's status (the message itself if it is no stub).
void announce(const Message& m, MPI_Status* st) {
  *st = m.status;
  ferry::i64 bytes = 0;
  if (ipc::stub_size(m.bytes.data(), m.comm, m.status, &bytes)) PMPI_Status_set_elements_x(st, MPI_BYTE, bytes);
}

int deliver(Message& m, void* buf, int count, MPI_Datatype type, MPI_Status* st) {
  *st = m.status;
  int rc = MPI_SUCCESS;
  const bool dev = on_device(buf, count, type);
  if (ipc::finish_recv(buf, count, type, dev, m.bytes.data(), m.comm, st, &rc)) return rc;
  // Not a stub: the bytes of an ordinary message of that size, delivered as MPI would.
  int size = 0;
  PMPI_Type_size(type, &size);
  const ferry::i64 capacity = static_cast<ferry::i64>(count) * size;
  const int n = static_cast<int>(std::min<ferry::i64>(capacity, static_cast<ferry::i64>(m.bytes.size())));
  const int elems = size ? n / size : 0;
  if (dev) {
    auto t = ferry::lookup(type);
    ferry::gpu::unpack(m.bytes.data(), buf, elems, *t);
  } else {
    int pos = 0;
    PMPI_Unpack(m.bytes.data(), n, &pos, buf, elems, type, MPI_COMM_SELF);
  }
  if (capacity < static_cast<ferry::i64>(m.bytes.size())) {
    PMPI_Status_set_elements_x(st, MPI_BYTE, n);
    st->MPI_ERROR = MPI_ERR_TRUNCATE;
    return MPI_ERR_TRUNCATE;
  }
  return MPI_SUCCESS;
}

struct Done {
  MPI_Status st;
  int rc;
};
int done_query(void* state, MPI_Status* st) {
  auto* d = static_cast<Done*>(state);
  MPI_Count n = 0;
  PMPI_Get_elements_x(&d->st, MPI_BYTE, &n);
  PMPI_Status_set_elements_x(st, MPI_BYTE, n);
  PMPI_Status_set_cancelled(st, 0);
  st->MPI_SOURCE = d->st.MPI_SOURCE;
  st->MPI_TAG = d->st.MPI_TAG;
  st->MPI_ERROR = d->rc;
  return d->rc;
}
int done_free(void* state) {
  delete static_cast<Done*>(state);
  return MPI_SUCCESS;
}
int done_cancel(void*, int) { return MPI_SUCCESS; }

}  // namespace

bool any() { return store().any(); }

int after_probe(MPI_Comm comm, MPI_Status* st, MPI_Message* message) {
  int got = 0;
  PMPI_Get_count(st, MPI_BYTE, &got);
  if (got != ipc::kStubBytes || ipc::world_rank(comm, st->MPI_SOURCE) < 0) return MPI_SUCCESS;
  auto m = std::make_unique<Message>();
  m->comm = comm;
  m->bytes.resize(ipc::kStubBytes);
  MPI_Message mine = MPI_MESSAGE_NULL;
  const bool plain = message == nullptr;
  if (plain) {  // a plain probe: match the same message (the oldest from that source and tag)
    int rc = PMPI_Mprobe(st->MPI_SOURCE, st->MPI_TAG, comm, &mine, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    message = &mine;
  }
  int rc = PMPI_Mrecv(m->bytes.data(), ipc::kStubBytes, MPI_BYTE, message, &m->status);
  if (rc != MPI_SUCCESS) return rc;
  announce(*m, st);
  if (!plain) {
    *message = store().hand_out(std::move(m));
  } else {
    store().push(std::move(m));
  }
  return MPI_SUCCESS;
}

bool probe(int source, int tag, MPI_Comm comm, MPI_Status* st, MPI_Message* message) {
  if (!any()) return false;
  MPI_Status local;
  if (!message)
    return store().peek(source, tag, comm, [&](const Message& m) { announce(m, st ? st : &local); });
  auto taken = store().take(source, tag, comm);
  if (!taken) return false;
  announce(*taken, st ? st : &local);
  *message = store().hand_out(std::move(taken));
  return true;
}

bool recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
          MPI_Status* st, int* rc) {
  if (!any()) return false;
  auto m = store().take(source, tag, comm);
  if (!m) return false;
  *rc = deliver(*m, buf, count, type, st);
  return true;
}

bool mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* st, int* rc) {
  if (!any() || !message) return false;
  auto m = store().redeem(*message);
  if (!m) return false;
  *rc = deliver(*m, buf, count, type, st);
  *message = MPI_MESSAGE_NULL;
  return true;
}

int completed_request(const MPI_Status& st, int rc, MPI_Request* request) {
  auto* d = new Done{st, rc};
  int r = PMPI_Grequest_start(done_query, done_free, done_cancel, d, request);
  if (r != MPI_SUCCESS) {
    delete d;
    return r;
  }
  return PMPI_Grequest_complete(*request);
}

}  // namespace ferry::mpi_detail::early
