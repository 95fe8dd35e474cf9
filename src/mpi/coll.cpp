// What the collectives share (coll.hpp): buffer routes, roles, degrees; and MPI_Barrier.
#include "mpi/coll.hpp"
#include "mpi/coll_pairs.hpp"

#include <algorithm>
#include <map>
#include <mutex>

namespace ferry::mpi_detail::coll {

std::shared_ptr<const Type> gpu_type(const void* buf, i64 count, MPI_Datatype type) {
  if (!hot::gpu || count <= 0 || buf == MPI_IN_PLACE || type == MPI_DATATYPE_NULL) return nullptr;
  transport::Route r = transport::route(buf, count, type);
  return r.device() && r.method != transport::Method::passthrough ? r.type : nullptr;
}

std::vector<bool> filled(MPI_Comm cart, int n) {
  std::vector<bool> f(static_cast<std::size_t>(n), true);
  for (int dim = 0; cart != MPI_COMM_NULL && 2 * dim + 1 < n; ++dim) {
    int lower = MPI_PROC_NULL, upper = MPI_PROC_NULL;
    PMPI_Cart_shift(cart, dim, 1, &lower, &upper);
    f[static_cast<std::size_t>(2 * dim)] = lower != MPI_PROC_NULL;
    f[static_cast<std::size_t>(2 * dim + 1)] = upper != MPI_PROC_NULL;
  }
  return f;
}

std::shared_ptr<const Type> Blocks::gpu() const {
  if (use == Use::none || buf == MPI_IN_PLACE || !hot::gpu) return nullptr;
  const int i = first_nonempty(n, counts);
  MPI_Aint lb = 0, extent = 0;  // MPI's own answer: no type lookup for named types
  if (i == n || type == MPI_DATATYPE_NULL || PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS)
    return nullptr;  // nothing to move, or a bad type the collective itself reports
  return gpu_type(at(buf, displs[i] * i64{extent}), counts[i], type);
}

std::vector<Run> Blocks::runs(const std::shared_ptr<const Type>& t) const {
  const std::vector<bool> f = filled(cart, n);
  std::vector<Run> runs;
  for (int i = 0; i < n; ++i)
    if (counts[i] > 0) runs.push_back({t, displs[i] * t->extent(), counts[i], writes(use) && f[static_cast<std::size_t>(i)]});
  return runs;
}

namespace {

bool is_inter(MPI_Comm comm) {
  int flag = 0;
  return comm != MPI_COMM_NULL && PMPI_Comm_test_inter(comm, &flag) == MPI_SUCCESS && flag;
}

int remote_size(MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_remote_size(comm, &n);
  return n;
}

}  // namespace

Rooted rooted(MPI_Comm comm, int root) {
  if (comm == MPI_COMM_NULL) return {false, false, 0};
  if (!is_inter(comm)) return {comm_rank(comm) == root, true, comm_size(comm)};
  return {root == MPI_ROOT, root != MPI_ROOT && root != MPI_PROC_NULL, remote_size(comm)};
}

Degrees everyone(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return {};  // PMPI reports it
  const int n = is_inter(comm) ? remote_size(comm) : comm_size(comm);
  return {n, n};
}

// A cartesian topology has two neighbours per dimension (MPI_PROC_NULL at a border included).
// Without a topology: none, and PMPI reports it.
Degrees neighbors(MPI_Comm comm) {
  int topo = MPI_UNDEFINED;
  if (comm == MPI_COMM_NULL || PMPI_Topo_test(comm, &topo) != MPI_SUCCESS) return {};
  Degrees d;
  if (topo == MPI_CART) {
    int ndims = 0;
    PMPI_Cartdim_get(comm, &ndims);
    d = {2 * ndims, 2 * ndims, comm, true};
  } else if (topo == MPI_GRAPH) {
    int n = 0;
    PMPI_Graph_neighbors_count(comm, comm_rank(comm), &n);
    d = {n, n, MPI_COMM_NULL, true};
  } else if (topo == MPI_DIST_GRAPH) {
    int weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, &d.in, &d.out, &weighted);
    d.neighbourhood = true;
  }
  return d;
}

// ---------------------------------------------------------------------------- MPI_Barrier

namespace {

// Barriers where the stub protocol is on: pending stub receives must be served while a rank waits
// in a barrier (their senders may be waiting for them before they reach it), and a rank cannot
// switch alone to MPI_Ibarrier (MPI does not match blocking with non-blocking collectives). So
// every rank runs Ferry's own barrier, a dissemination barrier of zero-byte messages on a private
// duplicate of the communicator (made at its first barrier, which all its ranks enter, with
// MPI_Comm_idup: a rank's first barrier on a communicator must serve too, or a sender blocked on a
// message to it never reaches the barrier), serving meanwhile.
class BarrierComms {
 public:
  MPI_Comm get(MPI_Comm comm) {
    {
      std::lock_guard lock(mutex_);
      auto it = dups_.find(comm);
      if (it != dups_.end()) return it->second;
    }
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Request r = MPI_REQUEST_NULL;
    if (PMPI_Comm_idup(comm, &dup, &r) != MPI_SUCCESS) return MPI_COMM_NULL;
    if (wait_serving(&r, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      if (dup != MPI_COMM_NULL) PMPI_Comm_free(&dup);
      return MPI_COMM_NULL;
    }
    std::lock_guard lock(mutex_);
    dups_[comm] = dup;
    return dup;
  }
  void forget(MPI_Comm comm) {
    MPI_Comm dup = MPI_COMM_NULL;
    {
      std::lock_guard lock(mutex_);
      auto it = dups_.find(comm);
      if (it == dups_.end()) return;
      dup = it->second;
      dups_.erase(it);
    }
    MPI_Comm_free(&dup);  // Ferry's own entry: what Ferry's layers keep for the duplicate goes too
  }

 private:
  std::mutex mutex_;
  std::map<MPI_Comm, MPI_Comm> dups_;
};
BarrierComms& barrier_comms() {
  static auto* b = new BarrierComms();
  return *b;
}

[[gnu::noinline]] int barrier(MPI_Comm comm) noexcept {
  return guard(comm, [&] {
    const MPI_Comm dup = barrier_comms().get(comm);
    if (dup == MPI_COMM_NULL) return PMPI_Barrier(comm);
    return disseminate(dup, 0);
  });
}

}  // namespace

void forget(MPI_Comm comm) {
  barrier_comms().forget(comm);
  pairs::forget(comm);
}

MPI_Comm private_comm(MPI_Comm comm) { return barrier_comms().get(comm); }

int disseminate(MPI_Comm dup, int tag, int* value) {
  const int n = comm_size(dup), me = comm_rank(dup);
  const int count = value ? 1 : 0;
  for (int k = 1, round = 0; k < n; k *= 2, ++round) {
    int sent = value ? *value : 0, got = sent;
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = PMPI_Irecv(&got, count, MPI_INT, (me - k + n) % n, tag + round, dup, &r[0]);
    if (rc == MPI_SUCCESS) rc = PMPI_Isend(&sent, count, MPI_INT, (me + k) % n, tag + round, dup, &r[1]);
    for (MPI_Request& q : r)
      if (q != MPI_REQUEST_NULL) {
        const int e = wait_serving(&q, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS) rc = e;
      }
    if (rc != MPI_SUCCESS) return rc;
    if (value) *value = std::min(*value, got);
  }
  return MPI_SUCCESS;
}

}  // namespace ferry::mpi_detail::coll

extern "C" int MPI_Barrier(MPI_Comm comm) {
  using namespace ferry::mpi_detail;
  int inter = 0;
  if (!hot::stubs_on || comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter)
    return PMPI_Barrier(comm);
  return coll::barrier(comm);
}
