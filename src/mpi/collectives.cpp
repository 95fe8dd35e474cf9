// The interposer's collectives on GPU buffers: each GPU buffer is mirrored in host memory with its
// own layout, so the system MPI runs the collective (reductions included, on any datatype)
// unchanged. Blocking, non-blocking (MPI_I*) and neighbourhood forms of bcast, reduce, allreduce,
// scan, exscan, gather(v), scatter(v), allgather(v), alltoall(v/w), reduce_scatter(_block).
//
// Each function names its buffer arguments (Elems: `count` elements; Blocks: the per-process
// blocks of a v-collective; Typed: the per-process (count, byte displacement, type) runs of a
// w-collective) and says how the call uses each at this process (Use), following MPI: root-only
// arguments are not looked at elsewhere, nor the send arguments of an MPI_IN_PLACE call. When no
// significant buffer is GPU memory the call goes straight to PMPI after that one pointer check;
// otherwise the GPU buffers are mirrored (inputs copied in), PMPI runs on the mirrors and the
// outputs go back: at return for a blocking call; for a non-blocking one when its request
// completes (any wait or test), which also keeps every mirror alive until then, since the MPI
// reads the inputs and writes the outputs in the meantime. One template per argument list serves
// the blocking and the non-blocking form: `request...` is empty or the MPI_Request*.
#include "mpi/common.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>

using namespace ferry::mpi_detail;

namespace {

// How a collective uses a buffer argument at this process.
enum class Use {
  none,     // not significant here, or MPI_IN_PLACE: passed on untouched
  in,       // read: the mirror is filled from it
  out,      // written: the mirror's elements go back
  inout,    // both: the receive buffer of an MPI_IN_PLACE call, which holds the input
  scratch,  // may be written, but the result is undefined (MPI_Exscan at rank 0): never goes back
};

// A receive buffer is also the input when the send buffer is MPI_IN_PLACE.
Use received(const void* sendbuf) {
  return sendbuf == MPI_IN_PLACE ? Use::inout : Use::out;
}

// `bytes` past `buf`, computed on the address: `buf` may be MPI_BOTTOM (null) with absolute
// displacements.
const void* at(const void* buf, i64 bytes) {
  return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(buf) +
                                       static_cast<std::uintptr_t>(bytes));
}

bool candidate(const void* buf, Use use) {
  return use != Use::none && buf != MPI_IN_PLACE;
}

// `count` elements of `type`.
struct Elems {
  const void* buf;
  i64 count;
  MPI_Datatype type;
  Use use;
  // on_device counts in int; past INT_MAX only "more than one" matters to it.
  bool device() const {
    return candidate(buf, use) &&
           on_device(buf, static_cast<int>(std::min<i64>(count, INT_MAX)), type);
  }
  std::shared_ptr<Mirror> mirror(bool copy_in) const {
    if (count <= INT_MAX)
      return std::make_shared<Mirror>(buf, static_cast<int>(count), type, copy_in);
    // The one-run form counts in int too; as blocks, only the first (which it checks) must fit.
    std::vector<std::pair<i64, i64>> blocks{{0, INT_MAX}, {INT_MAX, count - INT_MAX}};
    return std::make_shared<Mirror>(buf, type, std::move(blocks), copy_in);
  }
};

// Of a v- or w-collective's n per-process entries, the first with elements (n if none).
int first_nonempty(int n, const int* counts) {
  int i = 0;
  while (i < n && counts[i] <= 0) ++i;
  return i;
}

// Which of the n receive blocks of a neighbourhood collective the MPI fills: all but, in a
// cartesian topology `cart`, those of MPI_PROC_NULL neighbours (beyond the edge of a non-periodic
// dimension), which keep their contents, so their mirrors must not go back. The neighbours are
// listed by dimension, the negative side first, as MPI_Cart_shift gives them.
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

// A neighbourhood collective's receive buffer, `per` elements from each of n neighbours: as Elems,
// less the blocks the MPI leaves alone (see filled).
struct Slots : Elems {
  int n;
  int per;
  MPI_Comm cart;
  std::shared_ptr<Mirror> mirror(bool copy_in) const {
    if (cart == MPI_COMM_NULL) return Elems::mirror(copy_in);
    const std::vector<bool> f = filled(cart, n);
    std::vector<std::pair<i64, i64>> blocks;
    for (int i = 0; i < n; ++i)
      if (f[static_cast<std::size_t>(i)]) blocks.emplace_back(i64{i} * per, per);
    return std::make_shared<Mirror>(buf, type, std::move(blocks), copy_in);
  }
};

// The blocks of a v-collective: counts[i] elements of `type` at displs[i] elements, i < n (less
// those a cartesian topology leaves alone). The buffer is one allocation, so its first non-empty
// block tells where it lives.
struct Blocks {
  const void* buf;
  int n;
  const int* counts;
  const int* displs;
  MPI_Datatype type;
  Use use;
  MPI_Comm cart = MPI_COMM_NULL;
  bool device() const {
    // Mirror's blocks form takes no MPI_BOTTOM; nor do counts matter without a GPU.
    if (!candidate(buf, use) || buf == nullptr || !ferry::gpu::available()) return false;
    const int i = first_nonempty(n, counts);
    MPI_Aint lb = 0, extent = 0;  // MPI's own answer: no type lookup for named types
    if (i == n || type == MPI_DATATYPE_NULL ||
        PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS)
      return false;  // nothing to move, or a bad type the collective itself reports
    return on_device(at(buf, displs[i] * i64{extent}), counts[i], type);
  }
  std::shared_ptr<Mirror> mirror(bool copy_in) const {
    const std::vector<bool> f = filled(cart, n);
    std::vector<std::pair<i64, i64>> blocks;
    for (int i = 0; i < n; ++i)
      if (counts[i] > 0 && f[static_cast<std::size_t>(i)])
        blocks.emplace_back(displs[i], counts[i]);
    return std::make_shared<Mirror>(buf, type, std::move(blocks), copy_in);
  }
};

// One run of a buffer seen through several types: `count` elements of `type`, `disp` bytes from
// the buffer. Runs that are not `out` are only read (the input part of an in-place
// reduce_scatter).
struct Run {
  std::shared_ptr<const ferry::Type> type;
  i64 disp;
  i64 count;
  bool out;
};

// Mirror's counterpart for a buffer seen through runs of different types at byte displacements
// (a w-collective's buffer), made only for GPU memory: the host copy covers the span the runs
// reach, and only each output run's type map goes back, so bytes between and inside the runs,
// which the application may be changing meanwhile, are never overwritten.
class RunsMirror {
 public:
  RunsMirror(const void* buf, std::vector<Run> runs, bool copy_in)
      : user_(const_cast<void*>(buf)), runs_(std::move(runs)) {
    bool any = false;
    i64 lo = 0, hi = 0;
    for (const Run& r : runs_) {
      if (r.count <= 0 || r.type->size() == 0) continue;
      const i64 reach = (r.count - 1) * r.type->extent();
      const i64 r_lo = r.disp + r.type->true_lb() + std::min<i64>(reach, 0);
      const i64 r_hi = r.disp + r.type->true_lb() + r.type->true_extent() + std::max<i64>(reach, 0);
      lo = any ? std::min(lo, r_lo) : r_lo;
      hi = any ? std::max(hi, r_hi) : r_hi;
      any = true;
    }
    if (!any) return;
    staged_ = true;
    lo_ = lo;
    host_.resize(static_cast<std::size_t>(hi - lo));
    if (copy_in) ferry::gpu::copy(host_.data(), at(user_, lo), hi - lo);
  }
  bool staged() const { return staged_; }
  // The mirror's origin: where the user's buffer start would be in host memory.
  void* ptr() { return staged_ ? const_cast<void*>(at(host_.data(), -lo_)) : user_; }
  void write_back() {
    if (!staged_) return;
    std::vector<char> packed;
    for (const Run& r : runs_) {
      if (!r.out || r.count <= 0 || r.type->size() == 0) continue;
      packed.resize(static_cast<std::size_t>(ferry::pack_size(r.count, *r.type)));
      i64 pos = 0;
      ferry::pack(at(ptr(), r.disp), r.count, *r.type, packed.data(),
                  static_cast<i64>(packed.size()), &pos);
      ferry::gpu::unpack(packed.data(), const_cast<void*>(at(user_, r.disp)), r.count, *r.type);
    }
  }

 private:
  void* user_;
  std::vector<Run> runs_;
  bool staged_ = false;
  i64 lo_ = 0;
  std::vector<char> host_;
};

// The runs of a w-collective: counts[i] elements of types[i] at displs[i] bytes, i < n (displs
// are int for MPI_Alltoallw, MPI_Aint for MPI_Neighbor_alltoallw), less those a cartesian
// topology leaves alone.
template <class Disp>
struct Typed {
  const void* buf;
  int n;
  const int* counts;
  const Disp* displs;
  const MPI_Datatype* types;
  Use use;
  MPI_Comm cart = MPI_COMM_NULL;
  bool device() const {
    if (!candidate(buf, use)) return false;
    const int i = first_nonempty(n, counts);
    return i < n && on_device(at(buf, displs[i]), counts[i], types[i]);
  }
  std::shared_ptr<RunsMirror> mirror(bool copy_in) const {
    const std::vector<bool> f = filled(cart, n);
    std::vector<Run> runs;
    for (int i = 0; i < n; ++i)
      if (counts[i] > 0 && f[static_cast<std::size_t>(i)])
        runs.push_back({ferry::lookup(types[i]), static_cast<i64>(displs[i]), counts[i], true});
    return std::make_shared<RunsMirror>(buf, std::move(runs), copy_in);
  }
};

// A reduce_scatter's receive buffer: `count` elements of which the first `share` are the result
// (count > share in place, where the whole buffer is the input).
struct Share : Elems {
  i64 share;
  std::shared_ptr<RunsMirror> mirror(bool copy_in) const {
    auto t = ferry::lookup(type);
    std::vector<Run> runs{{t, 0, share, true}};
    if (count > share) runs.push_back({t, share * t->extent(), count - share, false});
    return std::make_shared<RunsMirror>(buf, std::move(runs), copy_in);
  }
};

// The mirrors of one collective call: inputs are kept until the collective is done, outputs are
// written back then.
class Mirrors {
 public:
  template <class Spec>
  void* add(const Spec& spec, bool device) {
    if (!device) return const_cast<void*>(spec.buf);
    auto m = spec.mirror(spec.use == Use::in || spec.use == Use::inout);
    if (spec.use == Use::out || spec.use == Use::inout)
      back_.emplace_back([m] { m->write_back(); });
    else
      keep_.push_back(m);
    return m->ptr();
  }
  // A blocking call: the outputs go back now.
  int done(int rc, MPI_Comm) {
    if (rc == MPI_SUCCESS)
      for (auto& write : back_) write();
    return rc;
  }
  // A non-blocking call: its request carries the mirrors and writes the outputs back when it
  // completes; a failure then is the completing call's result (MPI_Wait's, or the status' error
  // under MPI_ERR_IN_STATUS).
  int done(int rc, MPI_Comm /*comm*/, MPI_Request* request) {
    if (rc != MPI_SUCCESS) return rc;
    Pending p;
    p.finish = [keep = std::move(keep_), back = std::move(back_)](const MPI_Status*) {
      try {
        for (auto& write : back) write();
      } catch (const ferry::Error& e) {
        return e.mpi_error_class();
      }
      return MPI_SUCCESS;
    };
    requests().add(*request, std::move(p));
    return rc;
  }

 private:
  std::vector<std::shared_ptr<void>> keep_;
  std::vector<std::function<void()>> back_;
};

// Runs a collective with a send-side and a receive-side buffer argument: straight to PMPI when
// neither is GPU memory, else on host mirrors of the GPU ones. `call(send, recv, request...)`
// issues the PMPI call.
template <class Send, class Recv, class Call, class... Req>
int exchange_now(MPI_Comm comm, const Send& send, const Recv& recv, Call call, Req... request) {
  const bool send_dev = send.device(), recv_dev = recv.device();
  if (!send_dev && !recv_dev)
    return call(const_cast<void*>(send.buf), const_cast<void*>(recv.buf), request...);
  try {
    Mirrors m;
    void* s = m.add(send, send_dev);
    void* r = m.add(recv, recv_dev);
    return m.done(call(s, r, request...), comm, request...);
  } catch (const ferry::Error& e) {
    return report(comm, e);
  }
}

// The same; a blocking one, while stub receives of this thread are pending (one atomic load when
// there are none), serves them on entry and while it blocks (ServeWhileBlocked): their senders may
// be waiting for them before they reach the collective.
template <class Send, class Recv, class Call, class... Req>
int exchange(MPI_Comm comm, const Send& send, const Recv& recv, Call call, Req... request) {
  if constexpr (sizeof...(Req) == 0) {
    if (requests().polling()) {
      ServeWhileBlocked serving;
      return exchange_now(comm, send, recv, call);
    }
  }
  return exchange_now(comm, send, recv, call, request...);
}

bool is_inter(MPI_Comm comm) {
  int flag = 0;
  return comm != MPI_COMM_NULL && PMPI_Comm_test_inter(comm, &flag) == MPI_SUCCESS && flag;
}

int remote_size(MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_remote_size(comm, &n);
  return n;
}

// The processes a collective exchanges with: the group, or the remote group of an
// intercommunicator. (MPI_COMM_NULL: none; PMPI reports it.)
int peers(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return 0;
  return is_inter(comm) ? remote_size(comm) : comm_size(comm);
}

// Who does what in a rooted collective. In an intracommunicator every process takes part and the
// root also holds the root-only arguments; in an intercommunicator the root's group passes
// MPI_ROOT (the root) or MPI_PROC_NULL (no part), and the other group passes the root's rank.
struct Rooted {
  bool root;    // the root-only arguments are significant here
  bool member;  // the others are (a gather's send side, a scatter's receive side)
  int peers;    // the processes the root-only arguments describe
};

Rooted rooted(MPI_Comm comm, int root) {
  if (comm == MPI_COMM_NULL) return {false, false, 0};
  if (!is_inter(comm)) return {comm_rank(comm) == root, true, comm_size(comm)};
  return {root == MPI_ROOT, root != MPI_ROOT && root != MPI_PROC_NULL, remote_size(comm)};
}

// Blocks received (in) and sent (out) by a collective without a root; in a cartesian topology
// some may be MPI_PROC_NULL's (see filled).
struct Degrees {
  int in = 0, out = 0;
  MPI_Comm cart = MPI_COMM_NULL;
};

Degrees everyone(MPI_Comm comm) {
  const int n = peers(comm);
  return {n, n};
}

// The neighbours of a process topology (a cartesian one has two per dimension, MPI_PROC_NULL at
// a border included). Without a topology: none, and PMPI reports it.
Degrees neighbors(MPI_Comm comm) {
  int topo = MPI_UNDEFINED;
  if (comm == MPI_COMM_NULL || PMPI_Topo_test(comm, &topo) != MPI_SUCCESS) return {};
  Degrees d;
  if (topo == MPI_CART) {
    int ndims = 0;
    PMPI_Cartdim_get(comm, &ndims);
    d = {2 * ndims, 2 * ndims, comm};
  } else if (topo == MPI_GRAPH) {
    int n = 0;
    PMPI_Graph_neighbors_count(comm, comm_rank(comm), &n);
    d = {n, n};
  } else if (topo == MPI_DIST_GRAPH) {
    int weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, &d.in, &d.out, &weighted);
  }
  return d;
}

template <class Fn, class... Req>
int bcast(Fn fn, void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{buf, count, type, r.root ? Use::in : Use::none},
      Elems{buf, count, type, r.member && !r.root ? Use::out : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(r.root ? s : b, count, type, root, comm, q...);
      },
      request...);
}

template <class Fn, class... Req>
int reduce(Fn fn, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
           int root, MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{sendbuf, count, type, r.member ? Use::in : Use::none},
      Elems{recvbuf, count, type, r.root ? received(sendbuf) : Use::none},
      [&](void* s, void* b, auto... q) { return fn(s, b, count, type, op, root, comm, q...); },
      request...);
}

// MPI_Allreduce, MPI_Scan, MPI_Exscan.
template <class Fn, class... Req>
int reduce_all(Fn fn, bool exscan, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
               MPI_Op op, MPI_Comm comm, Req... request) {
  Use use = received(sendbuf);
  // MPI_Exscan's recvbuf at rank 0 is not significant (only the input, in place).
  if (exscan && comm != MPI_COMM_NULL && comm_rank(comm) == 0)
    use = sendbuf == MPI_IN_PLACE ? Use::in : Use::scratch;
  return exchange(
      comm, Elems{sendbuf, count, type, Use::in}, Elems{recvbuf, count, type, use},
      [&](void* s, void* b, auto... q) { return fn(s, b, count, type, op, comm, q...); },
      request...);
}

template <class Fn, class... Req>
int gather(Fn fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
           int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{sendbuf, sendcount, sendtype, r.member ? Use::in : Use::none},
      Elems{recvbuf, i64{recvcount} * r.peers, recvtype, r.root ? received(sendbuf) : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcount, recvtype, root, comm, q...);
      },
      request...);
}

template <class Fn, class... Req>
int gatherv(Fn fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
            const int* recvcounts, const int* displs, MPI_Datatype recvtype, int root,
            MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{sendbuf, sendcount, sendtype, r.member ? Use::in : Use::none},
      Blocks{recvbuf, r.peers, recvcounts, displs, recvtype,
             r.root ? received(sendbuf) : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcounts, displs, recvtype, root, comm, q...);
      },
      request...);
}

// At the root of an intracommunicator recvbuf may be MPI_IN_PLACE: its part stays in sendbuf.
template <class Fn, class... Req>
int scatter(Fn fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
            int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Elems{sendbuf, i64{sendcount} * r.peers, sendtype, r.root ? Use::in : Use::none},
      Elems{recvbuf, recvcount, recvtype, r.member ? Use::out : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcount, recvtype, root, comm, q...);
      },
      request...);
}

template <class Fn, class... Req>
int scatterv(Fn fn, const void* sendbuf, const int* sendcounts, const int* displs,
             MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
             MPI_Comm comm, Req... request) {
  const Rooted r = rooted(comm, root);
  return exchange(
      comm, Blocks{sendbuf, r.peers, sendcounts, displs, sendtype, r.root ? Use::in : Use::none},
      Elems{recvbuf, recvcount, recvtype, r.member ? Use::out : Use::none},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcounts, displs, sendtype, b, recvcount, recvtype, root, comm, q...);
      },
      request...);
}

// MPI_Allgather (one block to every peer) and MPI_Alltoall (`each`: a block per peer), to the
// whole group or to the neighbours.
template <class Fn, class... Req>
int fan(Fn fn, Degrees d, bool each, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
        void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, Req... request) {
  const i64 sent = each ? i64{sendcount} * d.out : d.out > 0 ? sendcount : 0;
  return exchange(
      comm, Elems{sendbuf, sent, sendtype, Use::in},
      Slots{{recvbuf, i64{recvcount} * d.in, recvtype, received(sendbuf)}, d.in, recvcount, d.cart},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcount, recvtype, comm, q...);
      },
      request...);
}

template <class Fn, class... Req>
int allgatherv(Fn fn, Degrees d, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
               void* recvbuf, const int* recvcounts, const int* displs, MPI_Datatype recvtype,
               MPI_Comm comm, Req... request) {
  return exchange(
      comm, Elems{sendbuf, d.out > 0 ? sendcount : 0, sendtype, Use::in},
      Blocks{recvbuf, d.in, recvcounts, displs, recvtype, received(sendbuf), d.cart},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcount, sendtype, b, recvcounts, displs, recvtype, comm, q...);
      },
      request...);
}

// In place (MPI_Alltoallv/w), the send counts, displacements and types are not looked at.
template <class Fn, class... Req>
int alltoallv(Fn fn, Degrees d, const void* sendbuf, const int* sendcounts, const int* sdispls,
              MPI_Datatype sendtype, void* recvbuf, const int* recvcounts, const int* rdispls,
              MPI_Datatype recvtype, MPI_Comm comm, Req... request) {
  return exchange(
      comm, Blocks{sendbuf, d.out, sendcounts, sdispls, sendtype, Use::in},
      Blocks{recvbuf, d.in, recvcounts, rdispls, recvtype, received(sendbuf), d.cart},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcounts, sdispls, sendtype, b, recvcounts, rdispls, recvtype, comm, q...);
      },
      request...);
}

template <class Fn, class Disp, class... Req>
int alltoallw(Fn fn, Degrees d, const void* sendbuf, const int* sendcounts, const Disp* sdispls,
              const MPI_Datatype* sendtypes, void* recvbuf, const int* recvcounts,
              const Disp* rdispls, const MPI_Datatype* recvtypes, MPI_Comm comm, Req... request) {
  return exchange(
      comm, Typed<Disp>{sendbuf, d.out, sendcounts, sdispls, sendtypes, Use::in},
      Typed<Disp>{recvbuf, d.in, recvcounts, rdispls, recvtypes, received(sendbuf), d.cart},
      [&](void* s, void* b, auto... q) {
        return fn(s, sendcounts, sdispls, sendtypes, b, recvcounts, rdispls, recvtypes, comm, q...);
      },
      request...);
}

// The vector a reduce_scatter reduces (over this process's group, also in an intercommunicator)
// and this process's share of the result: per-process counts, or one count for all (_block).
std::pair<i64, i64> shares(const int* recvcounts, int n, int me) {
  i64 total = 0;
  for (int i = 0; i < n; ++i) total += recvcounts[i];
  return {total, me >= 0 && me < n ? recvcounts[me] : 0};
}
std::pair<i64, i64> shares(int recvcount, int n, int) {
  return {i64{recvcount} * n, recvcount};
}

// In place, the input is the whole receive buffer and only this process's share is written.
template <class Fn, class Counts, class... Req>
int reduce_scatter(Fn fn, const void* sendbuf, void* recvbuf, Counts recvcounts, MPI_Datatype type,
                   MPI_Op op, MPI_Comm comm, Req... request) {
  const bool null = comm == MPI_COMM_NULL;
  const auto [total, share] =
      shares(recvcounts, null ? 0 : comm_size(comm), null ? -1 : comm_rank(comm));
  const bool in_place = sendbuf == MPI_IN_PLACE;
  return exchange(
      comm, Elems{sendbuf, total, type, Use::in},
      Share{{recvbuf, in_place ? total : share, type, received(sendbuf)}, share},
      [&](void* s, void* b, auto... q) { return fn(s, b, recvcounts, type, op, comm, q...); },
      request...);
}

}  // namespace

extern "C" {

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return bcast(PMPI_Bcast, buf, count, type, root, comm);
}

int MPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request* request) {
  return bcast(PMPI_Ibcast, buf, count, type, root, comm, request);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm) {
  return reduce(PMPI_Reduce, sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  return reduce(PMPI_Ireduce, sendbuf, recvbuf, count, type, op, root, comm, request);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  return reduce_all(PMPI_Allreduce, false, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  return reduce_all(PMPI_Iallreduce, false, sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
  return reduce_all(PMPI_Scan, false, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
              MPI_Comm comm, MPI_Request* request) {
  return reduce_all(PMPI_Iscan, false, sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
  return reduce_all(PMPI_Exscan, true, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, MPI_Request* request) {
  return reduce_all(PMPI_Iexscan, true, sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return reduce_scatter(PMPI_Reduce_scatter, sendbuf, recvbuf, recvcounts, type, op, comm);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter(PMPI_Ireduce_scatter, sendbuf, recvbuf, recvcounts, type, op, comm,
                        request);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm) {
  return reduce_scatter(PMPI_Reduce_scatter_block, sendbuf, recvbuf, recvcount, type, op, comm);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                              MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter(PMPI_Ireduce_scatter_block, sendbuf, recvbuf, recvcount, type, op, comm,
                        request);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather(PMPI_Gather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                comm);
}

int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request) {
  return gather(PMPI_Igather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                comm, request);
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
  return gatherv(PMPI_Gatherv, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                 root, comm);
}

int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request* request) {
  return gatherv(PMPI_Igatherv, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                 root, comm, request);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter(PMPI_Scatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                 comm);
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  return scatter(PMPI_Iscatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                 comm, request);
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
  return scatterv(PMPI_Scatterv, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                  recvtype, root, comm);
}

int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request* request) {
  return scatterv(PMPI_Iscatterv, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                  recvtype, root, comm, request);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return fan(PMPI_Allgather, everyone(comm), false, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return fan(PMPI_Iallgather, everyone(comm), false, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm, request);
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  return allgatherv(PMPI_Allgatherv, everyone(comm), sendbuf, sendcount, sendtype, recvbuf,
                    recvcounts, displs, recvtype, comm);
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  return allgatherv(PMPI_Iallgatherv, everyone(comm), sendbuf, sendcount, sendtype, recvbuf,
                    recvcounts, displs, recvtype, comm, request);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return fan(PMPI_Alltoall, everyone(comm), true, sendbuf, sendcount, sendtype, recvbuf, recvcount,
             recvtype, comm);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return fan(PMPI_Ialltoall, everyone(comm), true, sendbuf, sendcount, sendtype, recvbuf, recvcount,
             recvtype, comm, request);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoallv(PMPI_Alltoallv, everyone(comm), sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                   recvcounts, rdispls, recvtype, comm);
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  return alltoallv(PMPI_Ialltoallv, everyone(comm), sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                   recvcounts, rdispls, recvtype, comm, request);
}

int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return alltoallw(PMPI_Alltoallw, everyone(comm), sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                   recvcounts, rdispls, recvtypes, comm);
}

int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request* request) {
  return alltoallw(PMPI_Ialltoallw, everyone(comm), sendbuf, sendcounts, sdispls, sendtypes,
                   recvbuf, recvcounts, rdispls, recvtypes, comm, request);
}

int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return fan(PMPI_Neighbor_allgather, neighbors(comm), false, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm);
}

int MPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Request* request) {
  return fan(PMPI_Ineighbor_allgather, neighbors(comm), false, sendbuf, sendcount, sendtype,
             recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, const int recvcounts[], const int displs[],
                            MPI_Datatype recvtype, MPI_Comm comm) {
  return allgatherv(PMPI_Neighbor_allgatherv, neighbors(comm), sendbuf, sendcount, sendtype,
                    recvbuf, recvcounts, displs, recvtype, comm);
}

int MPI_Ineighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return allgatherv(PMPI_Ineighbor_allgatherv, neighbors(comm), sendbuf, sendcount, sendtype,
                    recvbuf, recvcounts, displs, recvtype, comm, request);
}

int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return fan(PMPI_Neighbor_alltoall, neighbors(comm), true, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm);
}

int MPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                           MPI_Request* request) {
  return fan(PMPI_Ineighbor_alltoall, neighbors(comm), true, sendbuf, sendcount, sendtype, recvbuf,
             recvcount, recvtype, comm, request);
}

int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                           MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                           const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoallv(PMPI_Neighbor_alltoallv, neighbors(comm), sendbuf, sendcounts, sdispls, sendtype,
                   recvbuf, recvcounts, rdispls, recvtype, comm);
}

int MPI_Ineighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                            MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Request* request) {
  return alltoallv(PMPI_Ineighbor_alltoallv, neighbors(comm), sendbuf, sendcounts, sdispls,
                   sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request);
}

int MPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                           const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                           const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                           MPI_Comm comm) {
  return alltoallw(PMPI_Neighbor_alltoallw, neighbors(comm), sendbuf, sendcounts, sdispls,
                   sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
}

int MPI_Ineighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                            const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                            MPI_Request* request) {
  return alltoallw(PMPI_Ineighbor_alltoallw, neighbors(comm), sendbuf, sendcounts, sdispls,
                   sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, request);
}

}  // extern "C"
