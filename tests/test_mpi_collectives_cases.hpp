// tests/test_mpi_collectives_cases.hpp — collectives catalogue, part 2: v-, all-to-all, the list.
#pragma once

#include "test_mpi_collectives.hpp"

namespace collectives {

// The root's blocks in a v-call: process i's contribution(i) ints as elements of `layout`, at
// reversed displacements.
struct VBlocks {
  std::vector<int> counts, displs;
  int total = 0;  // elements the buffer spans
};
inline VBlocks contributions(const Setup& s, const Layout& layout) {
  VBlocks b;
  for (int i = 0; i < s.peers(); ++i) b.counts.push_back(contribution(i) / layout.ints);
  b.displs = reversed_displs(b.counts, &b.total);
  return b;
}

inline std::vector<Case> gatherv_cases(const std::vector<Topology>& on = world(),
                                       InPlace in_place = in_place_too) {
  return cases("MPI_Gatherv", on, two_types, in_place, [](const Setup& s, Case& c) {
    const int ks = contribution(s.t.at.me) / s.S.ints;
    const Roles r(s);
    const MPI_Datatype st = s.S.type, rt = s.R.type;
    const VBlocks v = contributions(s, s.R);
    if (r.member) c.send = initial(ks * s.S.extent, true);
    if (r.at_root) c.recv = initial(v.total * s.R.extent, false);
    c.receives = r.at_root;
    forms(c, MPI_Gatherv, PMPI_Gatherv, MPI_Igatherv, [=](auto fn, void* sb, void* rb, auto... q) {
      return fn(r.own(sb), ks, st, r.rooted(rb), r.rooted(v.counts), r.rooted(v.displs), rt, r.root,
                r.comm, q...);
    });
  });
}

// In place at the root, recvbuf is MPI_IN_PLACE: its share stays where it is in sendbuf.
inline std::vector<Case> scatter_cases(const std::vector<Topology>& on = world(),
                                       InPlace in_place = in_place_too) {
  return cases("MPI_Scatter", on, two_types, in_place, [](const Setup& s, Case& c) {
    const int ks = 4 / s.S.ints, kr = 4 / s.R.ints;
    const Roles r(s);
    const MPI_Datatype st = s.S.type, rt = s.R.type;
    if (r.at_root) c.send = initial(s.peers() * ks * s.S.extent, true);
    if (r.member) c.recv = initial(kr * s.R.extent, false);
    c.receives = r.member && !(r.in_place && r.at_root);
    forms(c, MPI_Scatter, PMPI_Scatter, MPI_Iscatter, [=](auto fn, void* sb, void* rb, auto... q) {
      return fn(r.rooted(sb), ks, st, r.own(rb), kr, rt, r.root, r.comm, q...);
    });
  });
}

// Open MPI 4.1 on an intercommunicator takes the root's send counts as counts of the receive
// type (coll/inter sends them to the other group's leader as they are): one type there.
inline std::vector<Case> scatterv_cases(const std::vector<Topology>& on = world(),
                                        InPlace in_place = in_place_too) {
  const Sides sides = on[0].group ? one_type : two_types;
  return cases("MPI_Scatterv", on, sides, in_place, [](const Setup& s, Case& c) {
    const int kr = contribution(s.t.at.me) / s.R.ints;
    const Roles r(s);
    const MPI_Datatype st = s.S.type, rt = s.R.type;
    const VBlocks v = contributions(s, s.S);
    if (r.at_root) c.send = initial(v.total * s.S.extent, true);
    if (r.member) c.recv = initial(kr * s.R.extent, false);
    c.receives = r.member && kr > 0 && !(r.in_place && r.at_root);
    forms(c, MPI_Scatterv, PMPI_Scatterv, MPI_Iscatterv,
          [=](auto fn, void* sb, void* rb, auto... q) {
            return fn(r.rooted(sb), r.rooted(v.counts), r.rooted(v.displs), st, r.own(rb), kr, rt,
                      r.root, r.comm, q...);
          });
  });
}

using FanFn = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
using IfanFn = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm,
                       MPI_Request*);

// MPI_Allgather / MPI_Alltoall (`each`: a block per peer) and their neighbourhood forms: four ints
// a block.
inline std::vector<Case> fan_cases(const char* name, FanFn mpi, FanFn pmpi, IfanFn impi, bool each,
                                   const std::vector<Topology>& topologies, InPlace in_place) {
  return cases(name, topologies, two_types, in_place, [=](const Setup& s, Case& c) {
    const int ks = 4 / s.S.ints, kr = 4 / s.R.ints;
    const bool ip = s.in_place;
    const MPI_Datatype st = s.S.type, rt = s.R.type;
    const MPI_Comm comm = s.t.comm;
    const int outs = each ? static_cast<int>(s.t.destinations.size()) : 1;
    c.send = initial(outs * ks * s.S.extent, true);
    c.recv = initial(static_cast<int>(s.t.sources.size()) * kr * s.R.extent, false);
    c.receives = s.t.receives(ip, std::vector<int>(s.t.sources.size(), kr));
    if (each) c.mpi_wrong = mpich_repeats_wrong(s.t);
    forms(c, mpi, pmpi, impi, [=](auto fn, void* sb, void* rb, auto... q) {
      return fn(ip ? MPI_IN_PLACE : sb, ks, st, rb, kr, rt, comm, q...);
    });
  });
}

inline std::vector<Case> allgather_cases() {
  return fan_cases("MPI_Allgather", MPI_Allgather, PMPI_Allgather, MPI_Iallgather, false, world(),
                   in_place_too);
}
inline std::vector<Case> alltoall_cases() {
  return fan_cases("MPI_Alltoall", MPI_Alltoall, PMPI_Alltoall, MPI_Ialltoall, true, world(),
                   in_place_too);
}
inline std::vector<Case> neighbor_allgather_cases() {
  return fan_cases("MPI_Neighbor_allgather", MPI_Neighbor_allgather, PMPI_Neighbor_allgather,
                   MPI_Ineighbor_allgather, false, neighbourhoods(), not_in_place);
}
inline std::vector<Case> neighbor_alltoall_cases() {
  return fan_cases("MPI_Neighbor_alltoall", MPI_Neighbor_alltoall, PMPI_Neighbor_alltoall,
                   MPI_Ineighbor_alltoall, true, neighbourhoods(), not_in_place);
}

using GathervFn = int (*)(const void*, int, MPI_Datatype, void*, const int*, const int*,
                          MPI_Datatype, MPI_Comm);
using IgathervFn = int (*)(const void*, int, MPI_Datatype, void*, const int*, const int*,
                           MPI_Datatype, MPI_Comm, MPI_Request*);

// MPI_Allgatherv and MPI_Neighbor_allgatherv: from each source its contribution, reversed.
inline std::vector<Case> allgatherv_cases(const char* name, GathervFn mpi, GathervFn pmpi,
                                          IgathervFn impi, const std::vector<Topology>& topologies,
                                          InPlace in_place) {
  return cases(name, topologies, two_types, in_place, [=](const Setup& s, Case& c) {
    const int ks = contribution(s.t.at.me) / s.S.ints;
    const bool ip = s.in_place;
    const MPI_Datatype st = s.S.type, rt = s.R.type;
    const MPI_Comm comm = s.t.comm;
    std::vector<int> counts;
    for (int source : s.t.sources) counts.push_back(contribution(source) / s.R.ints);
    int total = 0;
    const std::vector<int> displs = reversed_displs(counts, &total);
    c.send = initial(ks * s.S.extent, true);
    c.recv = initial(total * s.R.extent, false);
    c.receives = s.t.receives(ip, counts);
    forms(c, mpi, pmpi, impi, [=](auto fn, void* sb, void* rb, auto... q) {
      return fn(ip ? MPI_IN_PLACE : sb, ks, st, rb, counts.data(), displs.data(), rt, comm, q...);
    });
  });
}

inline std::vector<Case> allgatherv_cases() {
  return allgatherv_cases("MPI_Allgatherv", MPI_Allgatherv, PMPI_Allgatherv, MPI_Iallgatherv,
                          world(), in_place_too);
}
inline std::vector<Case> neighbor_allgatherv_cases() {
  return allgatherv_cases("MPI_Neighbor_allgatherv", MPI_Neighbor_allgatherv,
                          PMPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv, neighbourhoods(),
                          not_in_place);
}

// One side of an alltoall-v/w call: per peer the count of `layout(i)` elements carrying the
// pairwise ints, and where each block starts in ints: last peer first, a spare int after each.
struct Side {
  std::vector<int> counts, offsets;
  std::vector<MPI_Datatype> types;
  int ints = 0;  // the buffer's size
};

template <class LayoutOf>
inline Side side(const Setup& s, bool sending, LayoutOf layout) {
  const std::vector<int>& peers = sending ? s.t.destinations : s.t.sources;
  const int me = s.t.at.me;
  Side out;
  out.offsets.resize(peers.size());
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const int ints =
        sending ? pairwise(me, peers[i], s.in_place) : pairwise(peers[i], me, s.in_place);
    out.counts.push_back(ints / layout(i).ints);
    out.types.push_back(layout(i).type);
  }
  for (std::size_t i = peers.size(); i-- > 0;) {
    out.offsets[i] = out.ints;
    out.ints += out.counts[i] * layout(i).extent + 1;
  }
  return out;
}

using AlltoallvFn = int (*)(const void*, const int*, const int*, MPI_Datatype, void*, const int*,
                            const int*, MPI_Datatype, MPI_Comm);
using IalltoallvFn = int (*)(const void*, const int*, const int*, MPI_Datatype, void*, const int*,
                             const int*, MPI_Datatype, MPI_Comm, MPI_Request*);

// MPI_Alltoallv and MPI_Neighbor_alltoallv: one layout a side, displacements in its elements. In
// place the send counts, displacements and type are null: MPI does not look at them.
inline std::vector<Case> alltoallv_cases(const char* name, AlltoallvFn mpi, AlltoallvFn pmpi,
                                         IalltoallvFn impi, const std::vector<Topology>& topologies,
                                         InPlace in_place) {
  return cases(name, topologies, two_types, in_place, [=](const Setup& s, Case& c) {
    const Side send = side(s, true, [&](std::size_t) -> const Layout& { return s.S; });
    const Side recv = side(s, false, [&](std::size_t) -> const Layout& { return s.R; });
    int total_s = 0, total_r = 0;
    const std::vector<int> sd = reversed_displs(send.counts, &total_s);
    const std::vector<int> rd = reversed_displs(recv.counts, &total_r);
    const bool ip = s.in_place;
    const MPI_Datatype st = s.S.type, rt = s.R.type;
    const MPI_Comm comm = s.t.comm;
    if (!ip) c.send = initial(total_s * s.S.extent, true);
    c.recv = initial(total_r * s.R.extent, false);
    c.receives = s.t.receives(ip, recv.counts);
    c.mpi_wrong = mpich_repeats_wrong(s.t);
    forms(c, mpi, pmpi, impi, [=](auto fn, void* sb, void* rb, auto... q) {
      if (ip)
        return fn(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, rb, recv.counts.data(),
                  rd.data(), rt, comm, q...);
      return fn(sb, send.counts.data(), sd.data(), st, rb, recv.counts.data(), rd.data(), rt, comm,
                q...);
    });
  });
}

inline std::vector<Case> alltoallv_cases() {
  return alltoallv_cases("MPI_Alltoallv", MPI_Alltoallv, PMPI_Alltoallv, MPI_Ialltoallv, world(),
                         in_place_too);
}
inline std::vector<Case> neighbor_alltoallv_cases() {
  return alltoallv_cases("MPI_Neighbor_alltoallv", MPI_Neighbor_alltoallv, PMPI_Neighbor_alltoallv,
                         MPI_Ineighbor_alltoallv, neighbourhoods(), not_in_place);
}

// MPI_Alltoallw (int byte displacements) and MPI_Neighbor_alltoallw (MPI_Aint ones): a layout per
// peer, starting from the case's, the send and receive layouts of a pair different.
template <class Disp, class Fn, class Ifn>
inline std::vector<Case> alltoallw_cases(const char* name, Fn mpi, Fn pmpi, Ifn impi,
                                         const std::vector<Topology>& topologies,
                                         InPlace in_place) {
  return cases(name, topologies, one_type, in_place, [=](const Setup& s, Case& c) {
    const std::size_t shift = s.l, others = s.in_place ? 0 : 1;
    auto layout = [](std::size_t i) -> const Layout& { return layouts()[i % layouts().size()]; };
    const Side send =
        side(s, true, [&](std::size_t i) -> const Layout& { return layout(i + shift); });
    const Side recv =
        side(s, false, [&](std::size_t i) -> const Layout& { return layout(i + shift + others); });
    auto bytes = [](const std::vector<int>& ints) {
      std::vector<Disp> d;
      for (int i : ints) d.push_back(static_cast<Disp>(i * static_cast<int>(sizeof(int))));
      return d;
    };
    const std::vector<Disp> sd = bytes(send.offsets), rd = bytes(recv.offsets);
    const bool ip = s.in_place;
    const MPI_Comm comm = s.t.comm;
    if (!ip) c.send = initial(send.ints, true);
    c.recv = initial(recv.ints, false);
    c.receives = s.t.receives(ip, recv.counts);
    c.nonblocking = !(ip && mpich());
    // (Every case there has derived types: the layouts differ from peer to peer.)
    if (mpich() && s.t.name == "distributed graph")
      c.mpi_wrong = "MPICH's own MPI_Neighbor_alltoallw delivers varying data here";
    if (c.mpi_wrong.empty()) c.mpi_wrong = mpich_repeats_wrong(s.t);
    forms(c, mpi, pmpi, impi, [=](auto fn, void* sb, void* rb, auto... q) {
      if (ip)
        return fn(MPI_IN_PLACE, nullptr, nullptr, nullptr, rb, recv.counts.data(), rd.data(),
                  recv.types.data(), comm, q...);
      return fn(sb, send.counts.data(), sd.data(), send.types.data(), rb, recv.counts.data(),
                rd.data(), recv.types.data(), comm, q...);
    });
  });
}

inline std::vector<Case> alltoallw_cases() {
  return alltoallw_cases<int>("MPI_Alltoallw", MPI_Alltoallw, PMPI_Alltoallw, MPI_Ialltoallw,
                              world(), in_place_too);
}
inline std::vector<Case> neighbor_alltoallw_cases() {
  return alltoallw_cases<MPI_Aint>("MPI_Neighbor_alltoallw", MPI_Neighbor_alltoallw,
                                   PMPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw,
                                   neighbourhoods(), not_in_place);
}

// The rooted calls and those to every peer, on the intercommunicator.
inline std::vector<Case> intercommunicator_cases() {
  const std::vector<Topology>& on = intercommunicator();
  std::vector<Case> all;
  for (std::vector<Case> more :
       {bcast_cases(on), reduce_cases(on, not_in_place), gather_cases(on, not_in_place),
        gatherv_cases(on, not_in_place), scatter_cases(on, not_in_place),
        scatterv_cases(on, not_in_place),
        fan_cases("MPI_Allgather", MPI_Allgather, PMPI_Allgather, MPI_Iallgather, false, on,
                  not_in_place),
        fan_cases("MPI_Alltoall", MPI_Alltoall, PMPI_Alltoall, MPI_Ialltoall, true, on,
                  not_in_place),
        allgatherv_cases("MPI_Allgatherv", MPI_Allgatherv, PMPI_Allgatherv, MPI_Iallgatherv, on,
                         not_in_place),
        alltoallv_cases("MPI_Alltoallv", MPI_Alltoallv, PMPI_Alltoallv, MPI_Ialltoallv, on,
                        not_in_place),
        alltoallw_cases<int>("MPI_Alltoallw", MPI_Alltoallw, PMPI_Alltoallw, MPI_Ialltoallw, on,
                             not_in_place)})
    all.insert(all.end(), more.begin(), more.end());
  return all;
}

// Every catalogue entry, for the tests of both files: X(test name, cases).
#define FERRY_COLLECTIVES(X)                        \
  X(Bcast, bcast_cases)                             \
  X(Reduce, reduce_cases)                           \
  X(Allreduce, allreduce_cases)                     \
  X(Scan, scan_cases)                               \
  X(Exscan, exscan_cases)                           \
  X(ReduceScatter, reduce_scatter_cases)            \
  X(ReduceScatterBlock, reduce_scatter_block_cases) \
  X(Gather, gather_cases)                           \
  X(Gatherv, gatherv_cases)                         \
  X(Scatter, scatter_cases)                         \
  X(Scatterv, scatterv_cases)                       \
  X(Allgather, allgather_cases)                     \
  X(Allgatherv, allgatherv_cases)                   \
  X(Alltoall, alltoall_cases)                       \
  X(Alltoallv, alltoallv_cases)                     \
  X(Alltoallw, alltoallw_cases)                     \
  X(NeighborAllgather, neighbor_allgather_cases)    \
  X(NeighborAllgatherv, neighbor_allgatherv_cases)  \
  X(NeighborAlltoall, neighbor_alltoall_cases)      \
  X(NeighborAlltoallv, neighbor_alltoallv_cases)    \
  X(NeighborAlltoallw, neighbor_alltoallw_cases)    \
  X(Intercommunicator, intercommunicator_cases)

}  // namespace collectives
