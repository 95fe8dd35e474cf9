// The collectives on GPU buffers: each GPU buffer is mirrored in host memory with its own layout
// (mirror.hpp), so the system MPI runs the collective unchanged.
//
// Each collective names its buffer arguments (Elems: `count` elements; Slots: a neighbourhood
// collective's receive blocks; Blocks: the per-process blocks of a v-collective; Typed: the
// per-process (count, byte displacement, type) runs of a w-collective; Share: a reduce_scatter's
// receive buffer) and says how the call uses each at this process (Use), following MPI: root-only
// arguments are not looked at elsewhere, nor the send arguments of an MPI_IN_PLACE call. Host
// buffers take the fast path in the entry (hot.hpp: a few loads); otherwise each buffer's route
// says whether it is GPU memory (one type lookup, one pointer query), GPU buffers are mirrored,
// PMPI runs on the mirrors, and the outputs go back: at return for a blocking call; for a
// non-blocking one when its request completes (any wait or test), which also keeps every mirror
// alive until then. One template per argument list serves the blocking and the non-blocking form:
// `request...` is empty or the MPI_Request*.
#pragma once

#include <ferry/registry.hpp>
#include <ferry/transport.hpp>
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <vector>

#include "mpi/boundary.hpp"
#include "mpi/mirror.hpp"
#include "mpi/requests.hpp"

namespace ferry::mpi_detail::coll {

// How a collective uses a buffer argument at this process.
enum class Use {
  none,     // not significant here, or MPI_IN_PLACE: passed on untouched
  in,       // read: the mirror is filled from it
  out,      // written: the mirror's elements go back
  inout,    // both: the receive buffer of an MPI_IN_PLACE call, which holds the input
  scratch,  // may be written, but the result is undefined (MPI_Exscan at rank 0): never goes back
};

// A receive buffer is also the input when the send buffer is MPI_IN_PLACE.
inline Use received(const void* sendbuf) { return sendbuf == MPI_IN_PLACE ? Use::inout : Use::out; }
inline bool reads(Use u) { return u == Use::in || u == Use::inout; }
inline bool writes(Use u) { return u == Use::out || u == Use::inout; }

// `bytes` past `buf`, computed on the address: `buf` may be MPI_BOTTOM (null).
inline const void* at(const void* buf, i64 bytes) {
  return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(buf) + static_cast<std::uintptr_t>(bytes));
}

// The type of `count` elements of `type` at `buf` when they are GPU memory Ferry must mirror (not
// for a CUDA-aware MPI), else null. Their route: one type lookup, one pointer query.
std::shared_ptr<const Type> gpu_type(const void* buf, i64 count, MPI_Datatype type);

// `count` elements of `type`.
struct Elems {
  const void* buf;
  i64 count;
  MPI_Datatype type;
  Use use;
  std::shared_ptr<const Type> gpu() const {
    return use == Use::none || buf == MPI_IN_PLACE ? nullptr : gpu_type(buf, count, type);
  }
  std::vector<Run> runs(const std::shared_ptr<const Type>& t) const { return {{t, 0, count, writes(use)}}; }
};

// Which of the n receive blocks of a neighbourhood collective the MPI fills: all but, in a
// cartesian topology `cart`, those of MPI_PROC_NULL neighbours (beyond the edge of a non-periodic
// dimension), which keep their contents, so their mirrors must not go back.
std::vector<bool> filled(MPI_Comm cart, int n);

// A neighbourhood collective's receive buffer, `per` elements from each of n neighbours.
struct Slots : Elems {
  int n;
  int per;
  MPI_Comm cart;
  std::vector<Run> runs(const std::shared_ptr<const Type>& t) const {
    if (cart == MPI_COMM_NULL) return Elems::runs(t);
    const std::vector<bool> f = filled(cart, n);
    std::vector<Run> runs;
    for (int i = 0; i < n; ++i) runs.push_back({t, i64{i} * per * t->extent(), per, writes(use) && f[static_cast<std::size_t>(i)]});
    return runs;
  }
};

// Of a v- or w-collective's n per-process entries, the first with elements (n if none).
inline int first_nonempty(int n, const int* counts) {
  int i = 0;
  while (i < n && counts[i] <= 0) ++i;
  return i;
}

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
  std::shared_ptr<const Type> gpu() const;
  std::vector<Run> runs(const std::shared_ptr<const Type>& t) const;
};

// The runs of a w-collective: counts[i] elements of types[i] at displs[i] bytes, i < n (displs
// are int for MPI_Alltoallw, MPI_Aint for MPI_Neighbor_alltoallw).
template <class Disp>
struct Typed {
  const void* buf;
  int n;
  const int* counts;
  const Disp* displs;
  const MPI_Datatype* types;
  Use use;
  MPI_Comm cart = MPI_COMM_NULL;
  std::shared_ptr<const Type> gpu() const {
    if (use == Use::none || buf == MPI_IN_PLACE) return nullptr;
    const int i = first_nonempty(n, counts);
    return i < n ? gpu_type(at(buf, displs[i]), counts[i], types[i]) : nullptr;
  }
  std::vector<Run> runs(const std::shared_ptr<const Type>&) const {
    const std::vector<bool> f = filled(cart, n);
    std::vector<Run> runs;
    for (int i = 0; i < n; ++i)
      if (counts[i] > 0)
        runs.push_back({ferry::lookup(types[i]), static_cast<i64>(displs[i]), counts[i],
                        writes(use) && f[static_cast<std::size_t>(i)]});
    return runs;
  }
};

// A reduce_scatter's receive buffer: `count` elements of which the first `share` are the result
// (count > share in place, where the whole buffer is the input).
struct Share : Elems {
  i64 share;
  std::vector<Run> runs(const std::shared_ptr<const Type>& t) const {
    std::vector<Run> runs{{t, 0, share, writes(use)}};
    if (count > share) runs.push_back({t, share * t->extent(), count - share, false});
    return runs;
  }
};

// Runs a collective with a send-side and a receive-side buffer argument: straight to PMPI when
// neither is GPU memory, else on host mirrors of the GPU ones. `call(send, recv, request...)`
// issues the PMPI call. Throws ferry::Error (the caller's guard reports it).
template <class Send, class Recv, class Call, class... Req>
int mirrored(const Send& send, const Recv& recv, Call call, Req... request) {
  const auto st = send.gpu(), rt = recv.gpu();
  if (!st && !rt) return call(const_cast<void*>(send.buf), const_cast<void*>(recv.buf), request...);
  auto m = std::make_shared<Mirrors>();
  void* s = st ? m->add(send.buf, send.runs(st), reads(send.use), writes(send.use)) : const_cast<void*>(send.buf);
  void* r = rt ? m->add(recv.buf, recv.runs(rt), reads(recv.use), writes(recv.use)) : const_cast<void*>(recv.buf);
  m->ready();
  const int rc = call(s, r, request...);
  if (rc != MPI_SUCCESS) return rc;
  if constexpr (sizeof...(Req) == 0) {
    m->done();
    return rc;
  } else {
    // Non-blocking: the request carries the mirrors and writes the outputs back when it completes;
    // a failure then is the completing call's result.
    Pending p;
    p.finish = [m](const MPI_Status*) {
      try {
        m->done();
      } catch (const ferry::Error& e) {
        return e.mpi_error_class();
      }
      return MPI_SUCCESS;
    };
    MPI_Request* req = (..., request);
    return requests().add_or_finish(*req, std::move(p));
  }
}

// The same inside the one boundary; a blocking one, while stub receives of this thread are pending
// (one atomic load when there are none), serves them on entry and while it blocks
// (ServeWhileBlocked): their senders may be waiting for them before they reach the collective.
template <class Send, class Recv, class Call, class... Req>
int exchange(MPI_Comm comm, const Send& send, const Recv& recv, Call call, Req... request) noexcept {
  return guard(comm, [&] {
    if constexpr (sizeof...(Req) == 0) {
      if (requests().polling()) {
        ServeWhileBlocked serving;
        return mirrored(send, recv, call);
      }
    }
    return mirrored(send, recv, call, request...);
  });
}

// Who does what in a rooted collective. In an intracommunicator every process takes part and the
// root also holds the root-only arguments; in an intercommunicator the root's group passes
// MPI_ROOT (the root) or MPI_PROC_NULL (no part), and the other group passes the root's rank.
struct Rooted {
  bool root;    // the root-only arguments are significant here
  bool member;  // the others are (a gather's send side, a scatter's receive side)
  int peers;    // the processes the root-only arguments describe
};
Rooted rooted(MPI_Comm comm, int root);

// Blocks received (in) and sent (out) by a collective without a root; in a cartesian topology
// some may be MPI_PROC_NULL's (see filled).
struct Degrees {
  int in = 0, out = 0;
  MPI_Comm cart = MPI_COMM_NULL;
  bool neighbourhood = false;  // of a process topology (else the group)
};
Degrees everyone(MPI_Comm comm);   // the group, or the remote group of an intercommunicator
Degrees neighbors(MPI_Comm comm);  // the neighbours of a process topology
using mpi_detail::comm_rank;
using mpi_detail::comm_size;

// MPI_Comm_free: Ferry's barrier communicator of `comm` goes too.
void forget(MPI_Comm comm);
// Ferry's private duplicate of `comm` (its barrier's, and its collectives' messages), made at the
// first call that needs it, which every process of `comm` makes (collectively); null on failure.
MPI_Comm private_comm(MPI_Comm comm);
// Dissemination over `dup` (a private duplicate), serving while it waits: ceil(log2 n) rounds of one
// message each way, tags `tag` + round. No process returns before every process has entered (a
// barrier); with `value`, each ends with the minimum of every process's (MIN repeats harmlessly),
// else the messages are empty. MPI_SUCCESS or the first failure's class (every message posted is
// waited for).
int disseminate(MPI_Comm dup, int tag, int* value = nullptr);

}  // namespace ferry::mpi_detail::coll
