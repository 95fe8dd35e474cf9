// Collectives made of Ferry's point-to-point messages (coll_pairs.hpp).
#include "mpi/coll_pairs.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "gpu/runtime.hpp"
#include "mpi/coll_standin.hpp"
#include "mpi/p2p.hpp"
#include "mpi/stream.hpp"
#include "sys/env.hpp"

namespace ferry::mpi_detail::coll::pairs {

namespace env = ferry::detail::env;

namespace {

std::atomic<long> made{0};
std::atomic<int> forced{-1};

// The messages of one collective call, and the first error among them.
class Messages : public Flight {
 public:
  std::vector<MPI_Request> requests;
  std::shared_ptr<const Legs> legs;  // the merged types, kept while the messages are under way
  // Completes what has completed (`wait`: all of them); true when none is left. A wait takes
  // them all in one MPI_Waitall, whose progress fetches the blocks that arrive together as one
  // batch (one wait for the GPU, transport::ReceiveBatch), not one by one as MPI_Waitsome would.
  bool advance(bool wait) override {
    const int n = static_cast<int>(requests.size());
    statuses_.resize(requests.size());
    done_.resize(requests.size());
    if (wait) {
      const int e = MPI_Waitall(n, requests.data(), statuses_.data());
      if (e == MPI_ERR_IN_STATUS) {
        for (const MPI_Status& s : statuses_)
          if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING && rc_ == MPI_SUCCESS) rc_ = s.MPI_ERROR;
      } else if (e != MPI_SUCCESS) {  // nothing said which: give up on all of them
        if (rc_ == MPI_SUCCESS) rc_ = e;
        return true;
      }
      // After an error in one, MPI may leave others active (MPI_ERR_PENDING): they complete first,
      // the buffers stay the application's until then.
      for (MPI_Request r : requests)
        if (r != MPI_REQUEST_NULL) return false;
      return true;
    }
    int count = 0;
    const int e = MPI_Testsome(n, requests.data(), &count, done_.data(), statuses_.data());
    if (e != MPI_SUCCESS && e != MPI_ERR_IN_STATUS) {  // nothing said which: give up on all of them
      if (rc_ == MPI_SUCCESS) rc_ = e;
      return true;
    }
    if (count == MPI_UNDEFINED) return true;
    for (int k = 0; k < count && e == MPI_ERR_IN_STATUS; ++k) {
      const int s = statuses_[static_cast<std::size_t>(k)].MPI_ERROR;
      if (s != MPI_SUCCESS && rc_ == MPI_SUCCESS) rc_ = s;
    }
    for (MPI_Request r : requests)
      if (r != MPI_REQUEST_NULL) return false;
    return true;
  }
  int result() const override { return rc_; }

 private:
  std::vector<MPI_Status> statuses_;
  std::vector<int> done_;
  int rc_ = MPI_SUCCESS;
};

// The generalized request's callbacks: Ferry's Pending carries the state and the result, so the
// status says only that nothing was received (a collective's status is not defined).
int query(void*, MPI_Status* st) {
  PMPI_Status_set_elements(st, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(st, 0);
  st->MPI_SOURCE = MPI_UNDEFINED;
  st->MPI_TAG = MPI_UNDEFINED;
  return MPI_SUCCESS;
}
int release(void*) {
  return MPI_SUCCESS;
}
int cancel(void*, int) {
  return MPI_SUCCESS;
}  // a collective cannot be cancelled: it completes


}  // namespace

long calls() { return made.load(); }
void force(int native) { forced.store(native); }

i64 extent(MPI_Datatype type) {
  MPI_Aint lb = 0, ext = 0;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_get_extent(type, &lb, &ext) != MPI_SUCCESS) return 0;
  return ext;
}

bool peers(MPI_Comm comm, bool neighbourhood, Peers* p) {
  if (comm == MPI_COMM_NULL) return false;
  if (!neighbourhood) {
    int inter = 0, n = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return false;
    if ((inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS)
      return false;
    for (int i = 0; i < n; ++i) p->out.push_back(i);
    p->in = p->out;
    p->out_tag.assign(p->out.size(), kTagBase);
    p->in_tag = p->out_tag;
    p->first = inter || n == 0 ? 0 : static_cast<std::size_t>(comm_rank(comm));
    p->inter = inter != 0;
    return true;
  }
  int topo = MPI_UNDEFINED;
  if (PMPI_Topo_test(comm, &topo) != MPI_SUCCESS) return false;
  p->neighbourhood = true;
  if (topo == MPI_CART) {
    int ndims = 0;
    PMPI_Cartdim_get(comm, &ndims);
    // Block 2d goes down dimension d and block 2d + 1 up; the block from below (2d) came up.
    for (int d = 0; d < ndims; ++d) {
      int lower = MPI_PROC_NULL, upper = MPI_PROC_NULL;
      PMPI_Cart_shift(comm, d, 1, &lower, &upper);
      p->out.insert(p->out.end(), {lower, upper});
      p->in.insert(p->in.end(), {lower, upper});
      p->out_tag.insert(p->out_tag.end(), {kTagBase + 2 * d, kTagBase + 2 * d + 1});
      p->in_tag.insert(p->in_tag.end(), {kTagBase + 2 * d + 1, kTagBase + 2 * d});
    }
    return true;
  }
  if (topo == MPI_GRAPH) {
    int n = 0;
    PMPI_Graph_neighbors_count(comm, comm_rank(comm), &n);
    p->out.resize(static_cast<std::size_t>(n));
    if (n > 0) PMPI_Graph_neighbors(comm, comm_rank(comm), n, p->out.data());
    p->in = p->out;
  } else if (topo == MPI_DIST_GRAPH) {
    int in = 0, out = 0, weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, &in, &out, &weighted);
    p->in.resize(static_cast<std::size_t>(in));
    p->out.resize(static_cast<std::size_t>(out));
    std::vector<int> wi(p->in.size() + 1), wo(p->out.size() + 1);
    PMPI_Dist_graph_neighbors(comm, in, p->in.data(), wi.data(), out, p->out.data(), wo.data());
  } else {
    return false;
  }
  p->out_tag.assign(p->out.size(), kTagBase);
  p->in_tag.assign(p->in.size(), kTagBase);
  return true;
}

namespace {

// The agreements (agreed()), and a thread's last answer, valid while no communicator was freed
// since (its handle may come back).
struct Agreements {
  std::mutex mutex;
  std::map<std::pair<MPI_Comm, int>, bool> by;
  std::atomic<unsigned> generation{1};
};
Agreements& agreements() {
  static auto* a = new Agreements();
  return *a;
}
struct Last {
  MPI_Comm comm = MPI_COMM_NULL;
  int call = -1;
  unsigned generation = 0;
  bool native = false;
};
thread_local Last last;
std::atomic<int> wish{-1};  // ferry_mpi_collective_wish

}  // namespace

bool any_process(MPI_Comm comm, bool mine) {
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return false;
  int in = mine ? 1 : 0, out = 0;
  ServeWhileBlocked serving;  // senders of pending stubs may wait for them before they get here
  for (int round = 0; round < (inter ? 2 : 1); ++round) {
    if (PMPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return false;
    in = std::max(in, out);
  }
  return out != 0;
}

int choice(MPI_Comm comm, Call call) noexcept {
  static const bool on = env::flag(env::Knob::native_collectives);
  const int f = forced.load(std::memory_order_relaxed);
  if (f >= 0) return f >= 1 ? 1 : 0;
  const int w = wish.load(std::memory_order_relaxed);
  if (!on || comm == MPI_COMM_NULL || (w < 0 && !hot::gpu && !hot::host_sends)) return 0;
  if (w < 0 && hot::host_sends) return 1;  // the protocol test: host buffers too, at every process
  Agreements& a = agreements();
  const unsigned g = a.generation.load(std::memory_order_acquire);
  const int c = static_cast<int>(call);
  if (last.comm == comm && last.call == c && last.generation == g) return last.native ? 1 : 0;
  try {
    std::lock_guard lock(a.mutex);
    auto it = a.by.find({comm, c});
    if (it == a.by.end()) return -1;
    last = {comm, c, g, it->second};
    return it->second ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

bool agreed(MPI_Comm comm, Call call, bool mine) {
  const int known = choice(comm, call);
  if (known >= 0) return known == 1;
  const int w = wish.load(std::memory_order_relaxed);
  if (w >= 0) mine = w == 1;
  Agreements& a = agreements();
  const unsigned g = a.generation.load(std::memory_order_acquire);
  const bool native = any_process(comm, mine);
  std::lock_guard lock(a.mutex);
  a.by[{comm, static_cast<int>(call)}] = native;
  last = {comm, static_cast<int>(call), g, native};
  return native;
}

void set_wish(int w) { wish.store(w); }

void forget(MPI_Comm comm) {
  forget_pulls(comm);
  Agreements& a = agreements();
  std::lock_guard lock(a.mutex);
  for (auto it = a.by.begin(); it != a.by.end();) it = it->first.first == comm ? a.by.erase(it) : std::next(it);
  a.generation.fetch_add(1, std::memory_order_acq_rel);
}

bool wanted(const void* sendbuf, const void* recvbuf, const Block& first_send, const Block& first_recv) {
  static const bool on = env::flag(env::Knob::native_collectives);
  const int f = forced.load(std::memory_order_relaxed);
  if (sendbuf == MPI_IN_PLACE || f == 0 || (f < 0 && !on)) return false;
  if (hot::host_sends || f >= 1) return true;
  auto gpu = [](const void* base, const Block& first) {
    if (!empty(first)) return gpu_type(first.buf, first.count, first.type) != nullptr;
    return base != nullptr && gpu_type(base, 1, MPI_BYTE) != nullptr;  // no data: where the buffer is
  };
  return gpu(sendbuf, first_send) || gpu(recvbuf, first_recv);
}

bool mirrored(MPI_Comm comm, int scount, MPI_Datatype stype, int rcount, MPI_Datatype rtype, bool blocking) {
  static const i64 max = env::integer(env::Knob::mirror_max);
  int ssize = 0, rsize = 0;
  if (max <= 0 || forced.load(std::memory_order_relaxed) >= 0 || hot::host_sends || rtype == MPI_DATATYPE_NULL ||
      PMPI_Type_size(rtype, &rsize) != MPI_SUCCESS || rsize < 0)
    return false;
  if (scount != 0 && (stype == MPI_DATATYPE_NULL || PMPI_Type_size(stype, &ssize) != MPI_SUCCESS || ssize < 0))
    return false;
  return std::max(i64{scount} * ssize, i64{rcount} * rsize) <= max && !(blocking && pull_suits(comm));
}

MPI_Comm channel_of(MPI_Comm comm, const Plan& plan) {
  const MPI_Comm c = plan.channel != MPI_COMM_NULL ? plan.channel : private_comm(comm);
  if (c == MPI_COMM_NULL) throw ferry::Error(MPI_ERR_INTERN, "no private communicator for a collective");
  return c;
}

std::shared_ptr<Flight> post(MPI_Comm comm, const Plan& plan) {
  const Peers& p = plan.peers;
  const std::shared_ptr<const Legs> legs_made = plan.legs ? plan.legs : legs(plan, true);
  const Legs& l = *legs_made;
  const MPI_Comm dup = channel_of(comm, plan);
  made.fetch_add(1);
  auto m = std::make_shared<Messages>();
  m->legs = legs_made;
  m->requests.reserve(l.sends.size() + l.recvs.size());
  Posting posting;  // every message out before any arrival is fetched
  auto started = [&](int rc) {
    if (rc != MPI_SUCCESS) {  // what was posted completes first: the buffers stay the application's
      while (!m->advance(true)) {
      }
      throw ferry::Error(rc, "a message of a collective could not start");
    }
  };
  for (const Leg& g : l.recvs) {
    MPI_Request r = MPI_REQUEST_NULL;
    started(p2p::irecv(g.block.buf, g.block.count, g.block.type, g.peer, g.tag, dup, &r));
    m->requests.push_back(r);
  }
  // In turn from this process's own position (its own block first in MPI_Alltoall), so that the
  // processes do not all send to the same one at once.
  const bool counting = transport::initialized();
  const int me = counting ? transport::world_rank(comm, comm_rank(comm)) : 0;
  for (const Leg& g : l.sends) {
    // A merged block's data is produced on its type's stream (issue 14), which the struct type of
    // the merge does not carry: those streams are waited for here.
    if (!g.parts.empty() && producer::named.load(std::memory_order_acquire) && gpu::available()) {
      int rc = MPI_SUCCESS;
      try {
        for (MPI_Datatype t : g.parts)
          if (gpu::Stream s = producer::of(dup, t)) gpu::sync_stream(s);
      } catch (const ferry::Error& e) {
        rc = e.mpi_error_class();
      }
      started(rc);
    }
    MPI_Request r = MPI_REQUEST_NULL;
    started(p2p::isend(p2p::kSend, g.block.buf, g.block.count, g.block.type, g.peer, g.tag, dup, &r));
    m->requests.push_back(r);
    if (counting && !p.inter && !transport::world().same_node(me, transport::world_rank(comm, g.peer)))
      count_crossing(i64{g.block.count} * type_size(g.block.type));
  }
  return m;
}

int finish(std::shared_ptr<Flight> f, MPI_Request* request) {
  if (!request) {
    while (!f->advance(true)) {
    }
    return f->result();
  }
  Pending pending;
  pending.drive = [f] { return f->advance(false); };
  pending.finish = [f](const MPI_Status*) { return f->result(); };
  const int rc = PMPI_Grequest_start(query, release, cancel, nullptr, request);
  if (rc != MPI_SUCCESS) {
    while (!f->advance(true)) {
    }
    return rc;
  }
  requests().add(*request, std::move(pending));
  return MPI_SUCCESS;
}

int run(MPI_Comm comm, const Plan& plan, MPI_Request* request) {
  int rc = MPI_SUCCESS;
  if (!request && forced.load(std::memory_order_relaxed) != 2 && pulled(comm, plan, &rc)) {
    made.fetch_add(1);
    return rc;
  }
  return finish(post(comm, plan), request);
}

int init(MPI_Comm comm, Plan plan, MPI_Request* request, const Ids* ids) {
  // The plan's own communicator (persistent collectives may start in different orders on
  // different processes: they must not share tags) and duplicates of the application's types.
  auto kept = std::make_shared<standin::Kept>();
  for (auto* side : {&plan.sends, &plan.recvs})
    for (Block& b : *side) b.type = kept->keep(b.type);
  kept->duplicate(comm);
  plan.channel = kept->comm();
  plan.owned = kept;
  // Across nodes, small blocks may go aggregated (coll_aggregate.cpp), decided here once.
  std::shared_ptr<const Aggregation> agg = plan.peers.neighbourhood ? aggregate(comm, plan, ids) : nullptr;
  if (!agg) plan.legs = legs(plan, false);
  return standin::install(comm, request, [comm, plan = std::move(plan), agg](MPI_Request* started) {
    return finish(agg ? post(comm, agg) : post(comm, plan), started);
  });
}

}  // namespace ferry::mpi_detail::coll::pairs
