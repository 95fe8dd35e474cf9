// MPI-4's large-count v- and w-collectives (MPI_Alltoallv_c, ..., their persistent
// MPI_*_init_c; large_count.cpp has the others),
// served by Ferry's int entries: MPICH's mpi_f08 bindings call the _c forms for every call, and C
// programs may, so without these GPU buffers would reach an MPI that cannot take them.
//
// Where every count and displacement fits an int, the int entry runs on int copies of the arrays
// (a non-blocking call's copies live until its request completes: Requests::keep). Where one does
// not, the MPI's own _c call runs when the buffers are host memory, and GPU buffers get
// MPI_ERR_COUNT (as large_count.cpp's reductions do). Arrays MPI does not look at (a non-root's
// in a rooted call, the send side in place) are not read.
//
// Compiled against an MPI-4 header only.
#include <mpi.h>

#if MPI_VERSION >= 4

#include <climits>
#include <ferry/gpu.hpp>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "mpi/coll.hpp"
#include "mpi/requests.hpp"

namespace {

using namespace ferry::mpi_detail;

// The int copies of one call's arrays, and whether every value fitted.
class Ints {
 public:
  // `n` values of `a` (null, or not looked at: stays null).
  template <class T>
  const int* of(const T* a, int n) {
    if (!a) return nullptr;
    auto& v = kept_.emplace_back(static_cast<std::size_t>(n > 0 ? n : 0) + 1, 0);
    for (int i = 0; i < n; ++i) {
      if (a[i] > INT_MAX || a[i] < INT_MIN) fits_ = false;
      v[static_cast<std::size_t>(i)] = static_cast<int>(a[i]);
    }
    return v.data();
  }
  int one(MPI_Count c) {
    if (c > INT_MAX) fits_ = false;
    return c < 0 ? -1 : static_cast<int>(c);
  }
  bool fits() const { return fits_; }

 private:
  std::vector<std::vector<int>> kept_;
  bool fits_ = true;
};

// No buffer is GPU memory (MPI_IN_PLACE and null are not).
bool host(const void* a, const void* b) {
  for (const void* p : {a, b})
    if (p != nullptr && p != MPI_IN_PLACE && ferry::gpu::reachable(ferry::gpu::where(p).kind))
      return false;
  return true;
}

// The entries a call's arrays have: the group (remote group), or the neighbours in and out.
coll::Degrees degrees(MPI_Comm comm, bool neighbourhood) {
  return neighbourhood ? coll::neighbors(comm) : coll::everyone(comm);
}

// A persistent init's int copies: every start reads them (the MPI's own request, or Ferry's plan
// or stand-in) until MPI_Request_free, which Ferry does not see for the MPI's own requests, so
// they are kept for the life of the process (a few ints per init call).
struct ForGood {
  std::mutex mutex;
  std::vector<std::shared_ptr<Ints>> kept;
};
ForGood& for_good() {
  static auto* f = new ForGood();
  return *f;
}
// Room for one more, made before the init (false: no memory, and no init is made).
bool room_for_good() noexcept {
  try {
    std::lock_guard lock(for_good().mutex);
    for_good().kept.reserve(for_good().kept.size() + 1);
    return true;
  } catch (...) {
    return false;
  }
}
void keep_for_good(std::shared_ptr<Ints> x) noexcept {
  std::lock_guard lock(for_good().mutex);
  if (for_good().kept.size() < for_good().kept.capacity()) for_good().kept.push_back(std::move(x));
  else new (std::nothrow) std::shared_ptr<Ints>(std::move(x));  // raced for the room: leaked instead
}

// Runs the int entry `call` where all fitted (keeping the copies for a non-blocking one's
// request, or for good after a persistent init), else the MPI's own `own` on host buffers, else
// MPI_ERR_COUNT.
template <class Call, class Own>
int run(std::shared_ptr<Ints> x, const void* sendbuf, const void* recvbuf, MPI_Request* request,
        bool persistent, Call call, Own own) {
  if (x->fits()) {
    if (persistent && !room_for_good()) return MPI_ERR_NO_MEM;
    const int rc = call();
    if (rc == MPI_SUCCESS && persistent) {
      keep_for_good(x);
    } else if (rc == MPI_SUCCESS && request && *request != MPI_REQUEST_NULL) {
      try {
        requests().keep(*request, x);
      } catch (...) {  // out of memory: the operation is under way, the copies must stay
        new std::shared_ptr<Ints>(x);
      }
    }
    return rc;
  }
  return host(sendbuf, recvbuf) ? own() : MPI_ERR_COUNT;
}

}  // namespace

#define FERRY_UNPAREN(...) __VA_ARGS__

extern "C" {

// Allgatherv and the neighbourhood form: the receive arrays, one entry per source.
#define FERRY_ALLGATHERV_C(NAME, NEIGHBOURHOOD, PARAMS, TAIL, REQ, PERSIST)             \
  int NAME##_c(const void* sb, MPI_Count sc, MPI_Datatype st, void* rb, const MPI_Count rcs[], \
               const MPI_Aint ds[], MPI_Datatype rt, MPI_Comm comm FERRY_UNPAREN PARAMS) {     \
    auto x = std::make_shared<Ints>();                                                         \
    const int n = degrees(comm, NEIGHBOURHOOD).in;                                             \
    const int c = x->one(sc);                                                                  \
    const int *r = x->of(rcs, n), *d = x->of(ds, n);                                           \
    return run(                                                                                \
        x, sb, rb, REQ, PERSIST, [&] { return NAME(sb, c, st, rb, r, d, rt, FERRY_UNPAREN TAIL); },     \
        [&] { return P##NAME##_c(sb, sc, st, rb, rcs, ds, rt, FERRY_UNPAREN TAIL); });         \
  }

FERRY_ALLGATHERV_C(MPI_Allgatherv, false, (), (comm), nullptr, false)
FERRY_ALLGATHERV_C(MPI_Iallgatherv, false, (, MPI_Request* request), (comm, request), request, false)
FERRY_ALLGATHERV_C(MPI_Neighbor_allgatherv, true, (), (comm), nullptr, false)
FERRY_ALLGATHERV_C(MPI_Ineighbor_allgatherv, true, (, MPI_Request* request), (comm, request),
                   request, false)
// The persistent inits (MPI-4): their int copies are kept for good (keep_for_good).
FERRY_ALLGATHERV_C(MPI_Allgatherv_init, false, (, MPI_Info info, MPI_Request* request), (comm, info, request), request, true)
FERRY_ALLGATHERV_C(MPI_Neighbor_allgatherv_init, true, (, MPI_Info info, MPI_Request* request), (comm, info, request), request, true)

// Alltoallv and the neighbourhood form (in place, the send arrays are not looked at).
#define FERRY_ALLTOALLV_C(NAME, NEIGHBOURHOOD, PARAMS, TAIL, REQ, PERSIST)               \
  int NAME##_c(const void* sb, const MPI_Count scs[], const MPI_Aint sds[], MPI_Datatype st,    \
               void* rb, const MPI_Count rcs[], const MPI_Aint rds[], MPI_Datatype rt,          \
               MPI_Comm comm FERRY_UNPAREN PARAMS) {                                            \
    auto x = std::make_shared<Ints>();                                                          \
    const coll::Degrees dg = degrees(comm, NEIGHBOURHOOD);                                      \
    const bool in_place = sb == MPI_IN_PLACE;                                                   \
    const int *s = in_place ? nullptr : x->of(scs, dg.out),                                     \
              *sd = in_place ? nullptr : x->of(sds, dg.out);                                    \
    const int *r = x->of(rcs, dg.in), *rd = x->of(rds, dg.in);                                  \
    return run(                                                                                 \
        x, sb, rb, REQ, PERSIST, [&] { return NAME(sb, s, sd, st, rb, r, rd, rt, FERRY_UNPAREN TAIL); }, \
        [&] { return P##NAME##_c(sb, scs, sds, st, rb, rcs, rds, rt, FERRY_UNPAREN TAIL); });   \
  }
FERRY_ALLTOALLV_C(MPI_Alltoallv, false, (), (comm), nullptr, false)
FERRY_ALLTOALLV_C(MPI_Ialltoallv, false, (, MPI_Request* request), (comm, request), request, false)
FERRY_ALLTOALLV_C(MPI_Neighbor_alltoallv, true, (), (comm), nullptr, false)
FERRY_ALLTOALLV_C(MPI_Ineighbor_alltoallv, true, (, MPI_Request* request), (comm, request), request, false)
FERRY_ALLTOALLV_C(MPI_Alltoallv_init, false, (, MPI_Info info, MPI_Request* request), (comm, info, request), request, true)
FERRY_ALLTOALLV_C(MPI_Neighbor_alltoallv_init, true, (, MPI_Info info, MPI_Request* request), (comm, info, request), request, true)

// Alltoallw: int byte displacements in the int interface; the neighbourhood form keeps MPI_Aint
// ones.
#define FERRY_ALLTOALLW_C(NAME, NEIGHBOURHOOD, DISPS, PARAMS, TAIL, REQ, PERSIST)          \
  int NAME##_c(const void* sb, const MPI_Count scs[], const MPI_Aint sds[],                       \
               const MPI_Datatype sts[], void* rb, const MPI_Count rcs[], const MPI_Aint rds[],   \
               const MPI_Datatype rts[], MPI_Comm comm FERRY_UNPAREN PARAMS) {                    \
    auto x = std::make_shared<Ints>();                                                            \
    const coll::Degrees dg = degrees(comm, NEIGHBOURHOOD);                                        \
    const bool in_place = sb == MPI_IN_PLACE;                                                     \
    const int* s = in_place ? nullptr : x->of(scs, dg.out);                                       \
    const int* r = x->of(rcs, dg.in);                                                             \
    auto sd = DISPS(in_place ? nullptr : sds, dg.out);                                            \
    auto rd = DISPS(rds, dg.in);                                                                  \
    return run(                                                                                   \
        x, sb, rb, REQ, PERSIST, [&] { return NAME(sb, s, sd, sts, rb, r, rd, rts, FERRY_UNPAREN TAIL); }, \
        [&] { return P##NAME##_c(sb, scs, sds, sts, rb, rcs, rds, rts, FERRY_UNPAREN TAIL); });   \
  }
#define FERRY_INT_DISPS(a, n) x->of(a, n)
#define FERRY_AINT_DISPS(a, n) (a)
FERRY_ALLTOALLW_C(MPI_Alltoallw, false, FERRY_INT_DISPS, (), (comm), nullptr, false)
FERRY_ALLTOALLW_C(MPI_Ialltoallw, false, FERRY_INT_DISPS, (, MPI_Request* request), (comm, request),
                  request, false)
FERRY_ALLTOALLW_C(MPI_Neighbor_alltoallw, true, FERRY_AINT_DISPS, (), (comm), nullptr, false)
FERRY_ALLTOALLW_C(MPI_Ineighbor_alltoallw, true, FERRY_AINT_DISPS, (, MPI_Request* request),
                  (comm, request), request, false)
FERRY_ALLTOALLW_C(MPI_Alltoallw_init, false, FERRY_INT_DISPS, (, MPI_Info info, MPI_Request* request), (comm, info, request), request, true)
FERRY_ALLTOALLW_C(MPI_Neighbor_alltoallw_init, true, FERRY_AINT_DISPS, (, MPI_Info info, MPI_Request* request), (comm, info, request), request, true)

// Gatherv and Scatterv: the root's arrays, one entry per process (remote ones, across an
// intercommunicator); elsewhere they are not looked at.
#define FERRY_GATHERV_C(NAME, PARAMS, TAIL, REQ, PERSIST)                                 \
  int NAME##_c(const void* sb, MPI_Count sc, MPI_Datatype st, void* rb, const MPI_Count rcs[],   \
               const MPI_Aint ds[], MPI_Datatype rt, int root,                                   \
               MPI_Comm comm FERRY_UNPAREN PARAMS) {                                             \
    auto x = std::make_shared<Ints>();                                                           \
    const coll::Rooted who = coll::rooted(comm, root);                                           \
    const int c = x->one(sc);                                                                    \
    const int *r = who.root ? x->of(rcs, who.peers) : nullptr,                                   \
              *d = who.root ? x->of(ds, who.peers) : nullptr;                                    \
    return run(                                                                                  \
        x, sb, rb, REQ, PERSIST, [&] { return NAME(sb, c, st, rb, r, d, rt, root, FERRY_UNPAREN TAIL); }, \
        [&] { return P##NAME##_c(sb, sc, st, rb, rcs, ds, rt, root, FERRY_UNPAREN TAIL); });     \
  }
FERRY_GATHERV_C(MPI_Gatherv, (), (comm), nullptr, false)
FERRY_GATHERV_C(MPI_Igatherv, (, MPI_Request* request), (comm, request), request, false)
FERRY_GATHERV_C(MPI_Gatherv_init, (, MPI_Info info, MPI_Request* request), (comm, info, request), request, true)

#define FERRY_SCATTERV_C(NAME, PARAMS, TAIL, REQ, PERSIST)                                \
  int NAME##_c(const void* sb, const MPI_Count scs[], const MPI_Aint ds[], MPI_Datatype st,      \
               void* rb, MPI_Count rc, MPI_Datatype rt, int root,                                \
               MPI_Comm comm FERRY_UNPAREN PARAMS) {                                             \
    auto x = std::make_shared<Ints>();                                                           \
    const coll::Rooted who = coll::rooted(comm, root);                                           \
    const int *s = who.root ? x->of(scs, who.peers) : nullptr,                                   \
              *d = who.root ? x->of(ds, who.peers) : nullptr;                                    \
    const int c = x->one(rc);                                                                    \
    return run(                                                                                  \
        x, sb, rb, REQ, PERSIST, [&] { return NAME(sb, s, d, st, rb, c, rt, root, FERRY_UNPAREN TAIL); }, \
        [&] { return P##NAME##_c(sb, scs, ds, st, rb, rc, rt, root, FERRY_UNPAREN TAIL); });     \
  }
FERRY_SCATTERV_C(MPI_Scatterv, (), (comm), nullptr, false)
FERRY_SCATTERV_C(MPI_Iscatterv, (, MPI_Request* request), (comm, request), request, false)
FERRY_SCATTERV_C(MPI_Scatterv_init, (, MPI_Info info, MPI_Request* request), (comm, info, request), request, true)

// Reduce_scatter: one count per process of this group.
#define FERRY_REDUCE_SCATTER_C(NAME, PARAMS, TAIL, REQ, PERSIST)                    \
  int NAME##_c(const void* sb, void* rb, const MPI_Count rcs[], MPI_Datatype t, MPI_Op op, \
               MPI_Comm comm FERRY_UNPAREN PARAMS) {                                       \
    auto x = std::make_shared<Ints>();                                                     \
    const int* r = x->of(rcs, comm == MPI_COMM_NULL ? 0 : comm_size(comm));                \
    return run(                                                                            \
        x, sb, rb, REQ, PERSIST, [&] { return NAME(sb, rb, r, t, op, FERRY_UNPAREN TAIL); },        \
        [&] { return P##NAME##_c(sb, rb, rcs, t, op, FERRY_UNPAREN TAIL); });              \
  }
FERRY_REDUCE_SCATTER_C(MPI_Reduce_scatter, (), (comm), nullptr, false)
FERRY_REDUCE_SCATTER_C(MPI_Ireduce_scatter, (, MPI_Request* request), (comm, request), request, false)
FERRY_REDUCE_SCATTER_C(MPI_Reduce_scatter_init, (, MPI_Info info, MPI_Request* request), (comm, info, request), request, true)

}  // extern "C"

#endif  // MPI_VERSION >= 4
