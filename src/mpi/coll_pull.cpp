// MPI_Alltoall(v/w) and the neighbourhood alltoall(v/w) and allgather(v) read in place
// (coll_pairs.hpp, pulled()). Where every process of the communicator is on one node, each block
// is offered where it lies (an IPC export, and an interprocess event where the sender's legacy
// stream is busy: transport::Pull), the offers go to the blocks' readers, each process copies
// every block it receives from the senders' buffers with one kernel (waited for), and a
// dissemination of MIN says all could and is the barrier that keeps each sender's buffer until its
// readers are done. A few host messages and one host-waited GPU operation per call, whatever the
// number of peers, against a stub, a fetch and an answer per block for the messages
// (docs/performance.md).
//
// Every process of a call takes part in the offers whatever its buffers are (the processes decide
// alike on the communicator alone). Where some block cannot be read in place (host or managed
// memory, a type that is not contiguous, a mapping the driver refused, a size that does not
// match), every process goes on to the messages, and the next 1, 3, 7, ... 63 calls on that
// communicator skip the attempt.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include <ferry/registry.hpp>
#include <ferry/transport.hpp>

#include "gpu/runtime.hpp"
#include "mpi/coll_pairs.hpp"
#include "mpi/requests.hpp"
#include "mpi/stream.hpp"
#include "sys/error.hpp"

namespace ferry::mpi_detail::coll::pairs {

namespace {

std::atomic<long> pull_calls{0};

// Per communicator: whether its processes share one node (asked once), and how many calls skip
// the attempt after one that could not read in place (every process counts alike).
struct Standing {
  bool node = false;
  int skip = 0, backoff = 0;
};
struct Standings {
  std::mutex mutex;
  std::map<MPI_Comm, Standing> by;
};
Standings& standings() {
  static auto* s = new Standings();
  return *s;
}

bool one_node(MPI_Comm comm, int n) {
  if (!transport::initialized()) return false;
  const transport::Topology& w = transport::world();
  const transport::Ranks ranks = transport::ranks_of(comm);
  const int first = ranks.to_world(0);
  if (first < 0) return false;
  for (int i = 1; i < n; ++i) {
    const int r = ranks.to_world(i);
    if (r < 0 || !w.same_node(first, r)) return false;
  }
  return true;
}

Standing& standing_locked(Standings& s, MPI_Comm comm, int n) {
  auto it = s.by.find(comm);
  if (it == s.by.end()) it = s.by.emplace(comm, Standing{one_node(comm, n)}).first;
  return it->second;
}

// Whether this call tries: the same answer at every process of the communicator.
bool attempt(MPI_Comm comm, int n) {
  Standings& s = standings();
  std::lock_guard lock(s.mutex);
  Standing& st = standing_locked(s, comm, n);
  if (!st.node) return false;
  if (st.skip > 0) {
    --st.skip;
    return false;
  }
  return true;
}

void judged(MPI_Comm comm, bool pulled) {
  Standings& s = standings();
  std::lock_guard lock(s.mutex);
  Standing& st = s.by[comm];
  st.backoff = pulled ? 0 : std::min(2 * st.backoff + 1, 63);
  st.skip = st.backoff;
}

// The contiguous bytes of a block: its first byte and size; false where they are not contiguous
// (or the type is one Ferry cannot read). `last` caches the previous block's type.
struct Known {
  MPI_Datatype handle = MPI_DATATYPE_NULL;
  std::shared_ptr<const Type> type;
};
bool contiguous(const Block& b, Known& last, char** first, i64* bytes) {
  *first = nullptr;
  *bytes = 0;
  if (empty(b)) return true;
  if (b.type != last.handle || !last.type) {
    last.handle = b.type;
    last.type = ferry::lookup(b.type);
  }
  if (!last.type || !last.type->dense()) return false;
  *first = static_cast<char*>(const_cast<void*>(at(b.buf, last.type->true_lb())));  // MPI_BOTTOM: null
  *bytes = b.count * last.type->size();
  return true;
}

// This process's offers (one per send block, in the group's order); false where one is not ok.
bool offer(MPI_Comm comm, const Plan& plan, transport::Pull& pull, std::vector<transport::Offer>& out) {
  bool all = true;
  Known known;
  for (std::size_t i = 0; i < plan.sends.size(); ++i) {
    const Block& b = plan.sends[i];
    if (plan.peers.out[i] == MPI_PROC_NULL) {  // a cartesian border: nothing goes there
      out[i].ok = 1;
      continue;
    }
    char* first = nullptr;
    i64 bytes = 0;
    if (!contiguous(b, known, &first, &bytes)) {
      all = false;
      continue;
    }
    // Data produced on a stream the application named (issue 14): that stream first.
    if (bytes > 0 && producer::named.load(std::memory_order_acquire))
      if (gpu::Stream s = producer::of(comm, b.type)) gpu::sync_stream(s);
    all = pull.offer(first, bytes, &out[i]) && all;
  }
  return all;
}

// The receive blocks' copies queued (peer order); false where one cannot be read in place.
bool take(MPI_Comm comm, const Plan& plan, transport::Pull& pull, const std::vector<transport::Offer>& in) {
  const transport::Ranks ranks = transport::ranks_of(comm);
  bool all = true;
  Known known;
  for (std::size_t j = 0; j < plan.recvs.size() && all; ++j) {
    const int from = plan.peers.in[j];
    if (from == MPI_PROC_NULL) continue;  // a cartesian border: the block stays as it is
    char* first = nullptr;
    i64 bytes = 0;
    all = contiguous(plan.recvs[j], known, &first, &bytes) && bytes == in[j].bytes &&
          pull.take(ranks.to_world(from), in[j], first);
  }
  return all;
}

// The offers and the agreement travel as messages on the communicator's private duplicate (its
// barrier's), waited for while serving: a blocking collective could not serve (without
// MPI_THREAD_MULTIPLE), and a process that must serve a sender first may not switch alone to the
// non-blocking form, which MPI does not match with the blocking one. Tags below the messages'
// (kTagBase) and above the barrier's rounds.
constexpr int kOfferTag = kTagBase - 64;
constexpr int kAgreeTag = kTagBase - 63;  // + round

// out[i] to process to[i], in[j] from process from[j] (MPI_PROC_NULL: none).
void swap_offers(MPI_Comm dup, const std::vector<int>& to, const std::vector<transport::Offer>& out,
                 const std::vector<int>& from, std::vector<transport::Offer>& in) {
  const int bytes = static_cast<int>(sizeof(transport::Offer));
  std::vector<MPI_Request> r(from.size() + to.size(), MPI_REQUEST_NULL);
  int rc = MPI_SUCCESS;
  for (std::size_t j = 0; j < from.size() && rc == MPI_SUCCESS; ++j)
    if (from[j] != MPI_PROC_NULL) rc = PMPI_Irecv(&in[j], bytes, MPI_BYTE, from[j], kOfferTag, dup, &r[j]);
  for (std::size_t i = 0; i < to.size() && rc == MPI_SUCCESS; ++i)
    if (to[i] != MPI_PROC_NULL)
      rc = PMPI_Isend(&out[i], bytes, MPI_BYTE, to[i], kOfferTag, dup, &r[from.size() + i]);
  for (MPI_Request& q : r)  // every one, whatever failed: nothing is left in flight
    if (q != MPI_REQUEST_NULL) {
      const int e = wait_serving(&q, MPI_STATUS_IGNORE);
      if (rc == MPI_SUCCESS) rc = e;
    }
  if (rc != MPI_SUCCESS) throw Error(MPI_ERR_INTERN, "the offers of an in-place collective could not be exchanged");
}

// The minimum of `mine` over the processes of `dup`, which no process learns before every process
// has called it: also a barrier.
int agree(MPI_Comm dup, int mine) {
  int all = mine;
  if (disseminate(dup, kAgreeTag, &all) != MPI_SUCCESS) throw Error(MPI_ERR_INTERN, "an in-place collective could not agree");
  return all;
}

bool repeats(std::vector<int> ranks) {
  ranks.erase(std::remove(ranks.begin(), ranks.end(), MPI_PROC_NULL), ranks.end());
  std::sort(ranks.begin(), ranks.end());
  return std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end();
}

}  // namespace

long pulls() { return pull_calls.load(); }

bool pull_suits(MPI_Comm comm) {
  int n = 0, inter = 0;
  if (!transport::pull_on() || comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
      PMPI_Comm_size(comm, &n) != MPI_SUCCESS || n <= 2)
    return false;
  try {  // called before the entry's guard (mirrored()): nothing may escape
    Standings& s = standings();
    std::lock_guard lock(s.mutex);
    return standing_locked(s, comm, n).node;
  } catch (...) {
    return false;
  }
}

void forget_pulls(MPI_Comm comm) {
  Standings& s = standings();
  std::lock_guard lock(s.mutex);
  s.by.erase(comm);
}

bool pulled(MPI_Comm comm, const Plan& plan, int* rc) {
  // (pull_on(): the protocol is on, so no pass-through either.)
  if (!transport::pull_on() || plan.peers.inter || plan.channel != MPI_COMM_NULL) return false;
  int n = 0;
  if (PMPI_Comm_size(comm, &n) != MPI_SUCCESS || !attempt(comm, n)) return false;
  const MPI_Comm dup = private_comm(comm);
  if (dup == MPI_COMM_NULL) throw Error(MPI_ERR_INTERN, "no private communicator for a collective");
  std::unique_ptr<transport::Pull> pull;
  std::vector<transport::Offer> out(plan.sends.size()), in(plan.recvs.size());
  // A neighbour named twice (a periodic dimension of one or two processes, a graph that repeats
  // an edge) is left to the messages, which match repeated neighbours as MPI-4.1 says. (A group's
  // peers never repeat.)
  bool ok = !plan.peers.neighbourhood || (!repeats(plan.peers.out) && !repeats(plan.peers.in));
  try {
    pull = std::make_unique<transport::Pull>();
    ok = offer(comm, plan, *pull, out) && ok;
  } catch (...) {
    ok = false;  // the offers not made say "not ok"; every process still takes part
  }
  swap_offers(dup, plan.peers.out, out, plan.peers.in, in);
  try {
    ok = ok && take(comm, plan, *pull, in);
    if (ok) pull->run();  // waited for: this process has its blocks and reads no more
  } catch (...) {
    ok = false;  // the messages move it (CUDA's error, if it lasts, is theirs to report)
  }
  // Also the barrier after the reads: no sender returns (and reuses its buffer) before every
  // reader is done. Where one could not read, all go on to the messages, which deliver the same
  // bytes again to those that did (their senders have not returned).
  const int all = agree(dup, ok ? 1 : 0);
  judged(comm, all != 0);
  if (all == 0) return false;
  pull_calls.fetch_add(1);
  *rc = MPI_SUCCESS;
  return true;
}

}  // namespace ferry::mpi_detail::coll::pairs
