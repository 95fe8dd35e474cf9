// Persistent collectives on host mirrors (coll_standin.hpp), and the persistent init calls that
// take no other path: MPI-4's MPI_Allreduce_init, _Reduce_init, _Bcast_init, _Allgather(v)_init,
// _Gather(v)_init, _Scatter(v)_init, _Reduce_scatter(_block)_init, _Scan_init and _Exscan_init
// (where the MPI's header is MPI-4), and Open MPI 4.1's MPIX_ forms of the same (its mpi-ext.h,
// pcollreq). MPI_Barrier_init has no buffer: the MPI's own.
#include "mpi/coll_standin.hpp"

#include <atomic>

#include "mpi/coll.hpp"
#include "mpi/coll_pairs.hpp"
#include "mpi/persistent.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace ferry::mpi_detail::coll::standin {
namespace {

std::atomic<long> count{0};

}  // namespace

Kept::~Kept() {
  int finalized = 0;
  PMPI_Finalized(&finalized);
  if (finalized) return;
  // Ferry's own entries: what Ferry's layers keep for these handles (type translations, rank
  // tables, private duplicates) goes with them, as MPI may hand the same handles out again.
  for (auto& [app, mine] : types_) MPI_Type_free(&mine);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

MPI_Datatype Kept::keep(MPI_Datatype type) {
  int ints = 0, addrs = 0, types = 0, combiner = MPI_COMBINER_NAMED;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_get_envelope(type, &ints, &addrs, &types, &combiner) != MPI_SUCCESS ||
      combiner == MPI_COMBINER_NAMED)
    return type;
  auto it = types_.find(type);
  if (it != types_.end()) return it->second;
  MPI_Datatype d = MPI_DATATYPE_NULL;
  // Committed through Ferry's own entry, so that its type registry knows the duplicate: a
  // duplicate it cannot read would send GPU buffers to the MPI as host memory.
  if (PMPI_Type_dup(type, &d) != MPI_SUCCESS) throw ferry::Error(MPI_ERR_TYPE, "a persistent collective's type");
  types_[type] = d;
  if (MPI_Type_commit(&d) != MPI_SUCCESS) throw ferry::Error(MPI_ERR_TYPE, "a persistent collective's type");
  return d;
}

const MPI_Datatype* Kept::keep(const MPI_Datatype* types, int n) {
  if (!types || n <= 0) return types;
  arrays_.push_back(std::make_unique<MPI_Datatype[]>(static_cast<std::size_t>(n)));
  for (int i = 0; i < n; ++i) arrays_.back()[i] = keep(types[i]);
  return arrays_.back().get();
}

void Kept::duplicate(MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  if (PMPI_Comm_idup(comm, &comm_, &r) != MPI_SUCCESS || wait_serving(&r, MPI_STATUS_IGNORE) != MPI_SUCCESS)
    throw ferry::Error(MPI_ERR_INTERN, "no communicator for a persistent collective");
}

int install(MPI_Comm comm, MPI_Request* request, Start start) {
  const int rc = PMPI_Send_init(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, comm, request);
  if (rc != MPI_SUCCESS) return rc;
  persistent::forget(*request);
  persistent::Args a;
  a.comm = comm;
  a.collective = std::move(start);
  persistent::remember(*request, std::move(a));
  return MPI_SUCCESS;
}

int make(MPI_Comm comm, bool gpu_here, MPI_Request* request, const std::function<int()>& own,
         const std::function<Start(Kept&)>& plan) {
  if (comm == MPI_COMM_NULL || !request) return own();  // the MPI says what is wrong
  if (!pairs::any_process(comm, gpu_here || hot::host_sends)) return own();
  auto kept = std::make_shared<Kept>();
  kept->duplicate(comm);
  Start start = plan(*kept);
  const int rc = install(comm, request, [kept, start = std::move(start)](MPI_Request* started) { return start(started); });
  if (rc == MPI_SUCCESS) count.fetch_add(1);
  return rc;
}

long made() { return count.load(); }

}  // namespace ferry::mpi_detail::coll::standin

namespace {

using namespace ferry::mpi_detail;
using namespace ferry::mpi_detail::coll;
using standin::Kept;
using standin::Start;

// Where nothing can be Ferry's (no GPU, no protocol test), the MPI's own init at once: the same
// answer at every process.
bool mpi_own() { return !hot::gpu && !hot::host_sends; }

bool gpu(const void* buf, ferry::i64 count, MPI_Datatype type) { return gpu_type(buf, count, type) != nullptr; }

// Any of the `n` blocks `counts[i]` elements of `type` at element `displs[i]` of `buf`.
bool gpu_blocks(const void* buf, int n, const int* counts, const int* displs, MPI_Datatype type) {
  if (!counts || !displs) return false;
  MPI_Aint lb = 0, extent = 0;
  if (PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS) return false;
  for (int i = 0; i < n; ++i)
    if (counts[i] > 0 && gpu(at(buf, ferry::i64{displs[i]} * extent), counts[i], type)) return true;
  return false;
}

int size_of(MPI_Comm comm) {
  int inter = 0, n = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) PMPI_Comm_remote_size(comm, &n);
  else PMPI_Comm_size(comm, &n);
  return n;
}
int local_size(MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_size(comm, &n);
  return n;
}
// The root-only arguments are significant here (MPI_ROOT in an intercommunicator's root group).
bool is_root(int root, MPI_Comm comm) {
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) return root == MPI_ROOT;
  return comm_rank(comm) == root;
}
// A rooted call's non-root arguments are significant here (not in the root's group of an
// intercommunicator).
bool is_member(int root, MPI_Comm comm) {
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  return inter ? root != MPI_ROOT && root != MPI_PROC_NULL : true;
}

// The entry's boundary around standin::make.
int boundary(MPI_Comm comm, bool gpu_here, MPI_Request* request, const std::function<int()>& own,
             const std::function<Start(Kept&)>& plan) noexcept {
  return guard(comm, [&] { return standin::make(comm, gpu_here, request, own, plan); });
}

}  // namespace

// The init calls under the names P_* (MPI, MPIX) over the MPI's own PP_* (PMPI, PMPIX). Each start
// calls Ferry's own non-blocking entry (MPI_I*), which mirrors what is GPU memory.
#define FERRY_MIRRORED_PERSISTENT(P, PP)                                                                         \
  int P##_Allreduce_init(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,              \
                         MPI_Info info, MPI_Request* req) {                                                      \
    auto own = [&] { return PP##_Allreduce_init(sb, rb, n, t, op, comm, info, req); };                           \
    if (mpi_own()) return own();                                                                                 \
    return boundary(comm, gpu(sb, n, t) || gpu(rb, n, t), req, own, [&](Kept& k) -> Start {                      \
      return [=, t = k.keep(t), c = k.comm()](MPI_Request* q) { return MPI_Iallreduce(sb, rb, n, t, op, c, q); }; \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Scan_init(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Info info,    \
                    MPI_Request* req) {                                                                          \
    auto own = [&] { return PP##_Scan_init(sb, rb, n, t, op, comm, info, req); };                                \
    if (mpi_own()) return own();                                                                                 \
    return boundary(comm, gpu(sb, n, t) || gpu(rb, n, t), req, own, [&](Kept& k) -> Start {                      \
      return [=, t = k.keep(t), c = k.comm()](MPI_Request* q) { return MPI_Iscan(sb, rb, n, t, op, c, q); };     \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Exscan_init(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Info info,  \
                      MPI_Request* req) {                                                                        \
    auto own = [&] { return PP##_Exscan_init(sb, rb, n, t, op, comm, info, req); };                              \
    if (mpi_own()) return own();                                                                                 \
    return boundary(comm, gpu(sb, n, t) || gpu(rb, n, t), req, own, [&](Kept& k) -> Start {                      \
      return [=, t = k.keep(t), c = k.comm()](MPI_Request* q) { return MPI_Iexscan(sb, rb, n, t, op, c, q); };   \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Reduce_init(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm,       \
                      MPI_Info info, MPI_Request* req) {                                                         \
    auto own = [&] { return PP##_Reduce_init(sb, rb, n, t, op, root, comm, info, req); };                        \
    if (mpi_own()) return own();                                                                                 \
    const bool here = (is_member(root, comm) && gpu(sb, n, t)) || (is_root(root, comm) && gpu(rb, n, t));        \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, t = k.keep(t), c = k.comm()](MPI_Request* q) {                                                  \
        return MPI_Ireduce(sb, rb, n, t, op, root, c, q);                                                        \
      };                                                                                                         \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Bcast_init(void* b, int n, MPI_Datatype t, int root, MPI_Comm comm, MPI_Info info, MPI_Request* req) { \
    auto own = [&] { return PP##_Bcast_init(b, n, t, root, comm, info, req); };                                  \
    if (mpi_own()) return own();                                                                                 \
    const bool here = (is_root(root, comm) || is_member(root, comm)) && gpu(b, n, t);                            \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, t = k.keep(t), c = k.comm()](MPI_Request* q) { return MPI_Ibcast(b, n, t, root, c, q); };       \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Reduce_scatter_block_init(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,   \
                                    MPI_Info info, MPI_Request* req) {                                           \
    auto own = [&] { return PP##_Reduce_scatter_block_init(sb, rb, n, t, op, comm, info, req); };                \
    if (mpi_own()) return own();                                                                                 \
    const bool here = gpu(sb, ferry::i64{n} * size_of(comm), t) || gpu(rb, n, t);                                \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, t = k.keep(t), c = k.comm()](MPI_Request* q) {                                                  \
        return MPI_Ireduce_scatter_block(sb, rb, n, t, op, c, q);                                                \
      };                                                                                                         \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Reduce_scatter_init(const void* sb, void* rb, const int counts[], MPI_Datatype t, MPI_Op op,           \
                              MPI_Comm comm, MPI_Info info, MPI_Request* req) {                                  \
    auto own = [&] { return PP##_Reduce_scatter_init(sb, rb, counts, t, op, comm, info, req); };                 \
    if (mpi_own()) return own();                                                                                 \
    ferry::i64 total = 0;                                                                                        \
    for (int i = 0; counts && i < local_size(comm); ++i) total += counts[i];                                     \
    const bool here = gpu(sb, total, t) || (counts && gpu(rb, counts[comm_rank(comm)], t));                      \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, t = k.keep(t), c = k.comm()](MPI_Request* q) {                                                  \
        return MPI_Ireduce_scatter(sb, rb, counts, t, op, c, q);                                                 \
      };                                                                                                         \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Allgather_init(const void* sb, int sc, MPI_Datatype st, void* rb, int rc, MPI_Datatype rt,             \
                         MPI_Comm comm, MPI_Info info, MPI_Request* req) {                                       \
    auto own = [&] { return PP##_Allgather_init(sb, sc, st, rb, rc, rt, comm, info, req); };                     \
    if (mpi_own()) return own();                                                                                 \
    const bool here = gpu(sb, sc, st) || gpu(rb, ferry::i64{rc} * size_of(comm), rt);                           \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, st = k.keep(st), rt = k.keep(rt), c = k.comm()](MPI_Request* q) {                               \
        return MPI_Iallgather(sb, sc, st, rb, rc, rt, c, q);                                                     \
      };                                                                                                         \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Allgatherv_init(const void* sb, int sc, MPI_Datatype st, void* rb, const int rcs[], const int ds[],    \
                          MPI_Datatype rt, MPI_Comm comm, MPI_Info info, MPI_Request* req) {                     \
    auto own = [&] { return PP##_Allgatherv_init(sb, sc, st, rb, rcs, ds, rt, comm, info, req); };               \
    if (mpi_own()) return own();                                                                                 \
    const bool here = gpu(sb, sc, st) || gpu_blocks(rb, size_of(comm), rcs, ds, rt);                             \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, st = k.keep(st), rt = k.keep(rt), c = k.comm()](MPI_Request* q) {                               \
        return MPI_Iallgatherv(sb, sc, st, rb, rcs, ds, rt, c, q);                                               \
      };                                                                                                         \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Gather_init(const void* sb, int sc, MPI_Datatype st, void* rb, int rc, MPI_Datatype rt, int root,      \
                      MPI_Comm comm, MPI_Info info, MPI_Request* req) {                                          \
    auto own = [&] { return PP##_Gather_init(sb, sc, st, rb, rc, rt, root, comm, info, req); };                  \
    if (mpi_own()) return own();                                                                                 \
    const bool here = (is_member(root, comm) && gpu(sb, sc, st)) ||                                              \
                      (is_root(root, comm) && gpu(rb, ferry::i64{rc} * size_of(comm), rt));                      \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, st = k.keep(st), rt = k.keep(rt), c = k.comm()](MPI_Request* q) {                               \
        return MPI_Igather(sb, sc, st, rb, rc, rt, root, c, q);                                                  \
      };                                                                                                         \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Gatherv_init(const void* sb, int sc, MPI_Datatype st, void* rb, const int rcs[], const int ds[],       \
                       MPI_Datatype rt, int root, MPI_Comm comm, MPI_Info info, MPI_Request* req) {              \
    auto own = [&] { return PP##_Gatherv_init(sb, sc, st, rb, rcs, ds, rt, root, comm, info, req); };            \
    if (mpi_own()) return own();                                                                                 \
    const bool here = (is_member(root, comm) && gpu(sb, sc, st)) ||                                              \
                      (is_root(root, comm) && gpu_blocks(rb, size_of(comm), rcs, ds, rt));                       \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, st = k.keep(st), rt = k.keep(rt), c = k.comm()](MPI_Request* q) {                               \
        return MPI_Igatherv(sb, sc, st, rb, rcs, ds, rt, root, c, q);                                            \
      };                                                                                                         \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Scatter_init(const void* sb, int sc, MPI_Datatype st, void* rb, int rc, MPI_Datatype rt, int root,     \
                       MPI_Comm comm, MPI_Info info, MPI_Request* req) {                                         \
    auto own = [&] { return PP##_Scatter_init(sb, sc, st, rb, rc, rt, root, comm, info, req); };                 \
    if (mpi_own()) return own();                                                                                 \
    const bool here = (is_root(root, comm) && gpu(sb, ferry::i64{sc} * size_of(comm), st)) ||                    \
                      (is_member(root, comm) && gpu(rb, rc, rt));                                                \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, st = k.keep(st), rt = k.keep(rt), c = k.comm()](MPI_Request* q) {                               \
        return MPI_Iscatter(sb, sc, st, rb, rc, rt, root, c, q);                                                 \
      };                                                                                                         \
    });                                                                                                          \
  }                                                                                                              \
  int P##_Scatterv_init(const void* sb, const int scs[], const int ds[], MPI_Datatype st, void* rb, int rc,      \
                        MPI_Datatype rt, int root, MPI_Comm comm, MPI_Info info, MPI_Request* req) {             \
    auto own = [&] { return PP##_Scatterv_init(sb, scs, ds, st, rb, rc, rt, root, comm, info, req); };           \
    if (mpi_own()) return own();                                                                                 \
    const bool here = (is_root(root, comm) && gpu_blocks(sb, size_of(comm), scs, ds, st)) ||                     \
                      (is_member(root, comm) && gpu(rb, rc, rt));                                                \
    return boundary(comm, here, req, own, [&](Kept& k) -> Start {                                                \
      return [=, st = k.keep(st), rt = k.keep(rt), c = k.comm()](MPI_Request* q) {                               \
        return MPI_Iscatterv(sb, scs, ds, st, rb, rc, rt, root, c, q);                                           \
      };                                                                                                         \
    });                                                                                                          \
  }

extern "C" {

#if MPI_VERSION >= 4
FERRY_MIRRORED_PERSISTENT(MPI, PMPI)
#endif
#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
FERRY_MIRRORED_PERSISTENT(MPIX, PMPIX)
#endif

}  // extern "C"
