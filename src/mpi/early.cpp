#include "mpi/early.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <map>
#include <type_traits>
#include <vector>

#include <ferry/registry.hpp>

#include "mpi/requests.hpp"

namespace ferry::mpi_detail::early {
namespace {

struct Message {
  MPI_Comm comm;  // for matching
  transport::Ranks ranks;  // of comm, when it was received
  MPI_Status status;  // as MPI received it: kStubBytes from the sender
  std::vector<char> bytes;
};

class Store {
 public:
  bool any() const { return hot::early.load(std::memory_order_acquire) > 0; }
  void push(std::unique_ptr<Message> m) {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(m));
    hot::early.fetch_add(1);
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
      hot::early.fetch_sub(1);
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
  // Ferry message handles, handed to the application. MPI_Message is a pointer in Open MPI: the
  // handle is the Message's address, which no MPI object has. It is an int in MPICH: the handle
  // is a number below 2^26, which MPICH never gives out (each of its handles, the null ones too,
  // carries a nonzero object kind in bits 26-29).
  MPI_Message hand_out(std::unique_ptr<Message> m) {
    std::lock_guard lock(mutex_);
    const MPI_Message h = new_handle<MPI_Message>(m.get());
    handles_.emplace(h, std::move(m));
    hot::early.fetch_add(1);
    return h;
  }
  std::unique_ptr<Message> redeem(MPI_Message h) {
    std::lock_guard lock(mutex_);
    auto it = handles_.find(h);
    if (it == handles_.end()) return nullptr;
    auto m = std::move(it->second);
    handles_.erase(it);
    hot::early.fetch_sub(1);
    return m;
  }

 private:
  std::mutex mutex_;
  std::deque<std::unique_ptr<Message>> queue_;
  std::map<MPI_Message, std::unique_ptr<Message>> handles_;
  unsigned next_ = 0;

  template <class Handle>
  Handle new_handle(Message* m) {
    if constexpr (std::is_pointer_v<Handle>) {
      return reinterpret_cast<Handle>(m);
    } else {
      constexpr unsigned kIds = 1u << 26;
      do next_ = next_ % (kIds - 1) + 1;  // 1 .. 2^26 - 1, skipping those still out
      while (handles_.count(static_cast<Handle>(next_)));
      return static_cast<Handle>(next_);
    }
  }
};
Store& store() {
  static auto* s = new Store();
  return *s;
}

// The size a stub announces, for the probe's status (the message itself if it is no stub).
void announce(const Message& m, MPI_Status* st) {
  *st = m.status;
  ferry::i64 bytes = 0;
  if (transport::stub_size(m.bytes.data(), m.ranks, m.status, &bytes)) PMPI_Status_set_elements_x(st, MPI_BYTE, bytes);
}

int deliver(Message& m, const transport::Target& to, MPI_Status* st) {
  *st = m.status;
  int rc = MPI_SUCCESS;
  if (transport::receive(to, m.bytes.data(), m.ranks, st, &rc)) return rc;
  // Not a stub: the bytes of an ordinary message, delivered as MPI would.
  const ferry::i64 capacity = to.capacity();
  const ferry::i64 n = std::min<ferry::i64>(capacity, static_cast<ferry::i64>(m.bytes.size()));
  transport::unstage(m.bytes.data(), n, to);
  if (capacity < static_cast<ferry::i64>(m.bytes.size())) {
    PMPI_Status_set_elements_x(st, MPI_BYTE, n);
    st->MPI_ERROR = MPI_ERR_TRUNCATE;
    return MPI_ERR_TRUNCATE;
  }
  return MPI_SUCCESS;
}

transport::Target target_of(void* buf, int count, MPI_Datatype type) {
  transport::Route r = transport::route(buf, count, ferry::lookup(type));
  transport::choose_unpack(r);
  return transport::target(r);
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

int after_probe(MPI_Comm comm, MPI_Status* st, MPI_Message* message, bool* taken) {
  *taken = false;
  int got = 0;
  PMPI_Get_count(st, MPI_BYTE, &got);
  const transport::Ranks ranks = transport::ranks_of(comm);
  if (got != transport::kStubBytes || ranks.to_world(st->MPI_SOURCE) < 0) return MPI_SUCCESS;
  auto m = std::make_unique<Message>();
  m->comm = comm;
  m->ranks = ranks;
  MPI_Message mine = MPI_MESSAGE_NULL;
  const bool plain = message == nullptr;
  MPI_Status matched = *st;
  if (plain) {  // a plain probe: match the same message (the oldest from that source and tag)
    int flag = 0;
    int rc = PMPI_Improbe(st->MPI_SOURCE, st->MPI_TAG, comm, &flag, &mine, &matched);
    if (rc != MPI_SUCCESS) return rc;
    if (!flag) return MPI_SUCCESS;  // another thread took it: nothing to fix
    message = &mine;
  }
  // Whatever was matched (another thread may have changed which), it is received whole.
  int bytes = 0;
  PMPI_Get_count(&matched, MPI_BYTE, &bytes);
  m->bytes.resize(static_cast<std::size_t>(std::max(bytes, 1)));
  int rc = PMPI_Mrecv(m->bytes.data(), bytes, MPI_BYTE, message, &m->status);
  if (rc != MPI_SUCCESS) return rc;
  *taken = true;
  m->bytes.resize(static_cast<std::size_t>(bytes));
  if (bytes == transport::kStubBytes) {
    announce(*m, st);
  } else {
    *st = m->status;
  }
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
  // The target (a type lookup, a pointer query) only when a message matches: a receive with a
  // type Ferry cannot read must not fail because some other message waits here.
  if (!any() || !store().peek(source, tag, comm, [](const Message&) {})) return false;
  return recv(target_of(buf, count, type), source, tag, comm, st, rc);
}

bool recv(const transport::Target& to, int source, int tag, MPI_Comm comm, MPI_Status* st, int* rc) {
  if (!any()) return false;
  auto m = store().take(source, tag, comm);
  if (!m) return false;
  *rc = deliver(*m, to, st);
  return true;
}

bool mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* st, int* rc,
           MPI_Comm* comm) {
  if (!any() || !message) return false;
  auto m = store().redeem(*message);
  if (!m) return false;
  if (comm) *comm = m->comm;
  *rc = deliver(*m, target_of(buf, count, type), st);
  *message = MPI_MESSAGE_NULL;
  return true;
}

int completed_request(const MPI_Status& st, int rc, MPI_Comm comm, MPI_Request* request) {
  // The query reports success: an error raised from a generalized request's wait would go to
  // MPI_COMM_WORLD's handler. The receive's error is its completion's finish step instead, which
  // raises it on the receive's communicator and makes it the wait's result.
  auto* d = new Done{st, MPI_SUCCESS};
  int r = PMPI_Grequest_start(done_query, done_free, done_cancel, d, request);
  if (r != MPI_SUCCESS) {
    delete d;
    return r;
  }
  r = PMPI_Grequest_complete(*request);
  if (r == MPI_SUCCESS && rc != MPI_SUCCESS) {
    Pending p;
    p.finish = [rc, comm](const MPI_Status*) {
      if (comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, rc);
      return rc;
    };
    requests().add(*request, std::move(p));
  }
  return r;
}

namespace {
class Messages {
 public:
  void add(MPI_Message m, MPI_Comm c) {
    if (m == MPI_MESSAGE_NULL || m == MPI_MESSAGE_NO_PROC) return;
    std::lock_guard lock(mutex_);
    comms_[m] = c;
  }
  MPI_Comm take(MPI_Message m) {
    std::lock_guard lock(mutex_);
    auto it = comms_.find(m);
    if (it == comms_.end()) return MPI_COMM_NULL;
    MPI_Comm c = it->second;
    comms_.erase(it);
    return c;
  }

 private:
  std::mutex mutex_;
  std::map<MPI_Message, MPI_Comm> comms_;
};
Messages& messages() {
  static auto* m = new Messages();
  return *m;
}
}  // namespace

void remember_message(MPI_Message m, MPI_Comm c) { messages().add(m, c); }
MPI_Comm take_message(MPI_Message m) { return messages().take(m); }

}  // namespace ferry::mpi_detail::early
