// The templates of the collectives without a root (coll_all.cpp, coll_neighbor.cpp).
#pragma once

#include <type_traits>

#include "mpi/coll.hpp"
#include "mpi/coll_pairs.hpp"
#include "mpi/coll_standin.hpp"

namespace ferry::mpi_detail::coll {

// The `request...` of a persistent init call.
template <class... Req>
inline constexpr bool persists = (std::is_same_v<Req, pairs::Persist> || ...);

// A persistent init that Ferry's messages did not take: a stand-in on host mirrors where any
// process has GPU memory in the call (coll_standin.hpp), else `fn`, the MPI's own init. `plan`
// gives each start's call of Fn::start, Ferry's non-blocking entry.
template <class Fn, class Send, class Recv, class Plan, class... Req>
int persist(MPI_Comm comm, const Send& send, const Recv& recv, Fn fn, Plan plan, Req... request) noexcept {
  return guard(comm, [&] {
    const pairs::Persist p = (..., request);
    return standin::make(comm, send.gpu() != nullptr || recv.gpu() != nullptr, p.request, fn, plan);
  });
}

// The call as Ferry's own messages (coll_pairs.hpp) where they take it: `send_at(i)` and
// `recv_at(j)` give the blocks to and from the i-th and j-th peer. -1 where they do not (the
// caller goes on to the mirrors, or to the MPI's own persistent init); else the call's result.
// A persistent init is made by every process alike: they agree (one allreduce) that all can
// and one wants.
template <class SendAt, class RecvAt, class... Req>
int by_pairs(pairs::Call call, MPI_Comm comm, bool neighbourhood, const void* sendbuf, const void* recvbuf,
             SendAt send_at, RecvAt recv_at, Req... request) noexcept {
  return guard(comm, [&]() -> int {
    pairs::Plan plan;
    const bool can = pairs::plan(comm, neighbourhood, sendbuf, recvbuf, send_at, recv_at, &plan);
    if constexpr (persists<Req...>) {
      // (Not across an intercommunicator, where an allreduce gives each group the other's.)
      int inter = 0;
      if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return -1;
      int mine[2] = {can ? 0 : 1, can && plan.wanted ? 1 : 0}, all[2] = {1, 0};
      {
        ServeWhileBlocked serving;
        if (PMPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return -1;
      }
      if (all[0] != 0 || all[1] == 0) return -1;
      return pairs::init(comm, std::move(plan), (..., request).request);
    } else {
      // Every process agrees (pairs::agreed; not in place, where the MPI's own takes it anyway).
      if (sendbuf == MPI_IN_PLACE || !pairs::agreed(comm, call, can && plan.wanted) || !can) return -1;
      MPI_Request* req = nullptr;
      if constexpr (sizeof...(Req) > 0) req = (..., request);
      return pairs::run(comm, plan, req);
    }
  });
}

// MPI_Allreduce, MPI_Scan, MPI_Exscan.
template <class Fn, class... Req>
[[gnu::noinline]] int reduce_all(Fn fn, bool exscan, const void* sendbuf, void* recvbuf, int count,
                                 MPI_Datatype type, MPI_Op op, MPI_Comm comm, Req... request) {
  Use use = received(sendbuf);
  // MPI_Exscan's recvbuf at rank 0 is not significant (only the input, in place).
  if (exscan && comm != MPI_COMM_NULL && comm_rank(comm) == 0)
    use = sendbuf == MPI_IN_PLACE ? Use::in : Use::scratch;
  return exchange(
      comm, Elems{sendbuf, count, type, Use::in}, Elems{recvbuf, count, type, use},
      [&](void* s, void* b, auto... q) { return fn(s, b, count, type, op, comm, q...); },
      request...);
}

// MPI_Allgather (one block to every peer) and MPI_Alltoall (`each`: a block per peer), to the
// whole group or to the neighbours.
template <class Fn, class... Req>
[[gnu::noinline]] int fan(Fn fn, Degrees d, bool each, const void* sendbuf, int sendcount,
                          MPI_Datatype sendtype, void* recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm, Req... request) {
  // Small blocks of MPI_Alltoall may go to the mirrors below (pairs::mirrored).
  if ((each || d.neighbourhood) &&
      (d.neighbourhood || !pairs::mirrored(comm, sendbuf == MPI_IN_PLACE ? 0 : sendcount, sendtype, recvcount,
                                           recvtype, sizeof...(Req) == 0))) {
    const i64 se = pairs::extent(sendtype), re = pairs::extent(recvtype);
    using C = pairs::Call;
    const C call = !each ? C::neighbor_allgather : d.neighbourhood ? C::neighbor_alltoall : C::alltoall;
    const int rc = by_pairs(
        call, comm, d.neighbourhood, sendbuf, recvbuf,
        [&](std::size_t i) {
          return pairs::block(sendbuf, each ? static_cast<i64>(i) * sendcount * se : 0, sendcount,
                              sendtype);
        },
        [&](std::size_t j) {
          return pairs::block(recvbuf, static_cast<i64>(j) * recvcount * re, recvcount, recvtype);
        },
        request...);
    if (rc >= 0) return rc;
  }
  const i64 sent = each ? i64{sendcount} * d.out : d.out > 0 ? sendcount : 0;
  if constexpr (persists<Req...>) {
    return persist(
        comm, Elems{sendbuf, sent, sendtype, Use::in},
        Slots{{recvbuf, i64{recvcount} * d.in, recvtype, received(sendbuf)}, d.in, recvcount, d.cart},
        [&] { return fn(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request...); },
        [&](standin::Kept& k) -> standin::Start {
          return [=, st = k.keep(sendtype), rt = k.keep(recvtype), c = k.comm()](MPI_Request* q) {
            return Fn::start(sendbuf, sendcount, st, recvbuf, recvcount, rt, c, q);
          };
        },
        request...);
  } else {
    return exchange(
        comm, Elems{sendbuf, sent, sendtype, Use::in},
        Slots{
            {recvbuf, i64{recvcount} * d.in, recvtype, received(sendbuf)}, d.in, recvcount, d.cart},
        [&](void* s, void* b, auto... q) {
          return fn(s, sendcount, sendtype, b, recvcount, recvtype, comm, q...);
        },
        request...);
  }
}

template <class Fn, class... Req>
[[gnu::noinline]] int allgatherv(Fn fn, Degrees d, const void* sendbuf, int sendcount,
                                 MPI_Datatype sendtype, void* recvbuf, const int* recvcounts,
                                 const int* displs, MPI_Datatype recvtype, MPI_Comm comm,
                                 Req... request) {
  if (d.neighbourhood && (d.in == 0 || (recvcounts && displs))) {
    const i64 re = pairs::extent(recvtype);
    const int rc = by_pairs(
        pairs::Call::neighbor_allgatherv, comm, true, sendbuf, recvbuf,
        [&](std::size_t) { return pairs::block(sendbuf, 0, sendcount, sendtype); },
        [&](std::size_t j) {
          return pairs::block(recvbuf, displs[j] * re, recvcounts[j], recvtype);
        },
        request...);
    if (rc >= 0) return rc;
  }
  if constexpr (persists<Req...>) {
    return persist(
        comm, Elems{sendbuf, d.out > 0 ? sendcount : 0, sendtype, Use::in},
        Blocks{recvbuf, d.in, recvcounts, displs, recvtype, received(sendbuf), d.cart},
        [&] { return fn(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request...); },
        [&](standin::Kept& k) -> standin::Start {
          return [=, st = k.keep(sendtype), rt = k.keep(recvtype), c = k.comm()](MPI_Request* q) {
            return Fn::start(sendbuf, sendcount, st, recvbuf, recvcounts, displs, rt, c, q);
          };
        },
        request...);
  } else {
    return exchange(
        comm, Elems{sendbuf, d.out > 0 ? sendcount : 0, sendtype, Use::in},
        Blocks{recvbuf, d.in, recvcounts, displs, recvtype, received(sendbuf), d.cart},
        [&](void* s, void* b, auto... q) {
          return fn(s, sendcount, sendtype, b, recvcounts, displs, recvtype, comm, q...);
        },
        request...);
  }
}

// In place (MPI_Alltoallv/w), the send counts, displacements and types are not looked at.
template <class Fn, class... Req>
[[gnu::noinline]] int alltoallv(Fn fn, Degrees d, const void* sendbuf, const int* sendcounts,
                                const int* sdispls, MPI_Datatype sendtype, void* recvbuf,
                                const int* recvcounts, const int* rdispls, MPI_Datatype recvtype,
                                MPI_Comm comm, Req... request) {
  // Arrays MPI does not read may be null (the send side in place; a side without peers in a
  // process topology): every process must reach the same path.
  if ((sendbuf == MPI_IN_PLACE || (d.neighbourhood && d.out == 0) || (sendcounts && sdispls)) &&
      ((d.neighbourhood && d.in == 0) || (recvcounts && rdispls))) {
    const i64 se = pairs::extent(sendtype), re = pairs::extent(recvtype);
    const int rc = by_pairs(
        d.neighbourhood ? pairs::Call::neighbor_alltoallv : pairs::Call::alltoallv, comm, d.neighbourhood,
        sendbuf, recvbuf,
        [&](std::size_t i) {
          return pairs::block(sendbuf, sdispls[i] * se, sendcounts[i], sendtype);
        },
        [&](std::size_t j) {
          return pairs::block(recvbuf, rdispls[j] * re, recvcounts[j], recvtype);
        },
        request...);
    if (rc >= 0) return rc;
  }
  if constexpr (persists<Req...>) {
    return persist(
        comm, Blocks{sendbuf, d.out, sendcounts, sdispls, sendtype, Use::in},
        Blocks{recvbuf, d.in, recvcounts, rdispls, recvtype, received(sendbuf), d.cart},
        [&] {
          return fn(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request...);
        },
        [&](standin::Kept& k) -> standin::Start {
          return [=, st = k.keep(sendtype), rt = k.keep(recvtype), c = k.comm()](MPI_Request* q) {
            return Fn::start(sendbuf, sendcounts, sdispls, st, recvbuf, recvcounts, rdispls, rt, c, q);
          };
        },
        request...);
  } else {
    return exchange(
        comm, Blocks{sendbuf, d.out, sendcounts, sdispls, sendtype, Use::in},
        Blocks{recvbuf, d.in, recvcounts, rdispls, recvtype, received(sendbuf), d.cart},
        [&](void* s, void* b, auto... q) {
          return fn(s, sendcounts, sdispls, sendtype, b, recvcounts, rdispls, recvtype, comm, q...);
        },
        request...);
  }
}

template <class Fn, class Disp, class... Req>
[[gnu::noinline]] int alltoallw(Fn fn, Degrees d, const void* sendbuf, const int* sendcounts,
                                const Disp* sdispls, const MPI_Datatype* sendtypes, void* recvbuf,
                                const int* recvcounts, const Disp* rdispls,
                                const MPI_Datatype* recvtypes, MPI_Comm comm, Req... request) {
  if ((sendbuf == MPI_IN_PLACE || (d.neighbourhood && d.out == 0) || (sendcounts && sdispls && sendtypes)) &&
      ((d.neighbourhood && d.in == 0) || (recvcounts && rdispls && recvtypes))) {
    const int rc = by_pairs(
        d.neighbourhood ? pairs::Call::neighbor_alltoallw : pairs::Call::alltoallw, comm, d.neighbourhood,
        sendbuf, recvbuf,
        [&](std::size_t i) {
          return pairs::block(sendbuf, sdispls[i], sendcounts[i], sendtypes[i]);
        },
        [&](std::size_t j) {
          return pairs::block(recvbuf, rdispls[j], recvcounts[j], recvtypes[j]);
        },
        request...);
    if (rc >= 0) return rc;
  }
  if constexpr (persists<Req...>) {
    return persist(
        comm, Typed<Disp>{sendbuf, d.out, sendcounts, sdispls, sendtypes, Use::in},
        Typed<Disp>{recvbuf, d.in, recvcounts, rdispls, recvtypes, received(sendbuf), d.cart},
        [&] {
          return fn(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                    request...);
        },
        [&](standin::Kept& k) -> standin::Start {
          const MPI_Datatype* st = k.keep(sendtypes, sendbuf == MPI_IN_PLACE ? 0 : d.out);
          const MPI_Datatype* rt = k.keep(recvtypes, d.in);
          return [=, c = k.comm()](MPI_Request* q) {
            return Fn::start(sendbuf, sendcounts, sdispls, st, recvbuf, recvcounts, rdispls, rt, c, q);
          };
        },
        request...);
  } else {
    return exchange(
        comm, Typed<Disp>{sendbuf, d.out, sendcounts, sdispls, sendtypes, Use::in},
        Typed<Disp>{recvbuf, d.in, recvcounts, rdispls, recvtypes, received(sendbuf), d.cart},
        [&](void* s, void* b, auto... q) {
          return fn(s, sendcounts, sdispls, sendtypes, b, recvcounts, rdispls, recvtypes, comm,
                    q...);
        },
        request...);
  }
}

// The vector a reduce_scatter reduces (over this process's group, also in an intercommunicator)
// and this process's share of the result: per-process counts, or one count for all (_block).
inline std::pair<i64, i64> shares(const int* recvcounts, int n, int me) {
  i64 total = 0;
  for (int i = 0; i < n; ++i) total += recvcounts[i];
  return {total, me >= 0 && me < n ? recvcounts[me] : 0};
}
inline std::pair<i64, i64> shares(int recvcount, int n, int) {
  return {i64{recvcount} * n, recvcount};
}

// In place, the input is the whole receive buffer and only this process's share is written.
template <class Fn, class Counts, class... Req>
[[gnu::noinline]] int reduce_scatter(Fn fn, const void* sendbuf, void* recvbuf, Counts recvcounts,
                                     MPI_Datatype type, MPI_Op op, MPI_Comm comm, Req... request) {
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

}  // namespace ferry::mpi_detail::coll
