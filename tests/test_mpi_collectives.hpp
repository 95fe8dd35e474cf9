// tests/test_mpi_collectives.hpp — collectives catalogue, part 1: layouts, checking, rooted calls.
#pragma once

#include <ferry/ferry_mpi.h>
#include <gtest/gtest.h>
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace collectives {

// Where this process stands in a communicator.
struct Place {
  int me = 0, n = 0;
};
inline Place place(MPI_Comm comm) {
  Place p;
  MPI_Comm_rank(comm, &p.me);
  MPI_Comm_size(comm, &p.n);
  return p;
}

// An argument the MPI must not look at (a non-root's receive buffer, say): any use crashes.
void* const poison = reinterpret_cast<void*>(0x40);

// A datatype over ints, as buffers of ints see it.
struct Layout {
  const char* name;
  MPI_Datatype type;
  int extent;  // ints from one element to the next
  int ints;    // ints of data in one element
  int step;    // ints from one of them to the next
  MPI_Op sum;  // MPI_SUM (predefined types), or a user operation that adds the data ints
};

inline const std::vector<Layout>& layouts();

// MPI's predefined operations take predefined types only (Open MPI refuses them on derived
// ones): the derived layouts are summed by a user operation, which sees the layout itself. It
// knows a layout by its size and extent, not by its handle: a persistent collective may hand it a
// duplicate of the type (Open MPI 4.1's own MPIX_Allreduce_init does, and so do Ferry's stand-ins).
inline void sum_layout(void* in, void* inout, int* len, MPI_Datatype* type) {
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  MPI_Type_size(*type, &size);
  MPI_Type_get_extent(*type, &lb, &extent);
  for (const Layout& L : layouts()) {
    if (size != L.ints * static_cast<int>(sizeof(int)) || extent != L.extent * static_cast<MPI_Aint>(sizeof(int)))
      continue;
    const int* a = static_cast<const int*>(in);
    int* b = static_cast<int*>(inout);
    for (int e = 0; e < *len; ++e)
      for (int j = 0; j < L.ints; ++j) b[e * L.extent + j * L.step] += a[e * L.extent + j * L.step];
  }
}

inline const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = [] {
    MPI_Datatype vec, resized;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);  // x.x: a gap inside each element
    MPI_Type_commit(&vec);
    MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &resized);  // x.: a gap after each
    MPI_Type_commit(&resized);
    MPI_Op sum;
    MPI_Op_create(sum_layout, 1, &sum);
    return std::vector<Layout>{{"contiguous", MPI_INT, 1, 1, 1, MPI_SUM},
                               {"vector", vec, 3, 2, 2, sum},
                               {"resized", resized, 2, 1, 1, sum}};
  }();
  return all;
}

// A buffer's initial contents: send buffers hold positive values, receive buffers negative ones,
// all different, so a value that arrived (or an int overwritten) shows.
inline std::vector<int> initial(int ints, bool send) {
  std::vector<int> v(static_cast<std::size_t>(ints));
  const int base = (place(MPI_COMM_WORLD).me + 1) * 100000;
  for (int i = 0; i < ints; ++i) v[static_cast<std::size_t>(i)] = (send ? 1 : -1) * (base + i + 1);
  return v;
}
inline int sent_value(int rank, int i) {
  return (rank + 1) * 100000 + i + 1;
}

// One collective call at this rank: its buffers' initial contents and its forms.
struct Case {
  std::string name;
  std::vector<int> send, recv;
  std::size_t compared = SIZE_MAX;  // leading ints of recv with a defined result
  bool receives = true;             // some of them must change here
  // The blocking form, through the interposer (pmpi false) or straight to the MPI.
  std::function<int(bool pmpi, void* send, void* recv)> blocking;
  // The non-blocking form, through the interposer.
  std::function<int(void* send, void* recv, MPI_Request* request)> start;
  // The persistent form's init (MPI-4's MPI_*_init, Open MPI 4.1's MPIX_*_init), through the
  // interposer; empty where the MPI has none.
  std::function<int(void* send, void* recv, MPI_Request* request)> persist;
  // False where the MPI's own non-blocking form is known wrong (nothing to compare with).
  bool nonblocking = true;
  // Why the MPI's own result is known wrong for every form; empty where it is right.
  std::string mpi_wrong;
};

// MPICH (4.0.2, Debian 12's) gets two of these calls wrong by itself, straight through PMPI_*:
// MPI_Ialltoallw in place (its blocking form is right), and MPI_Neighbor_alltoallw on the
// distributed graph with per-neighbour derived types (the data differ from run to run). Those are
// not compared there (mpich(), Case::nonblocking, Case::mpi_wrong).
inline bool mpich() {
  static const bool is = [] {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    return std::string(v, static_cast<std::size_t>(len)).find("MPICH") != std::string::npos;
  }();
  return is;
}

#include "test_mpi_collectives_persistent.hpp"

// Sets every form from one argument list, `args(fn, send, recv, request...)`.
template <class Args, class Blocking, class NonBlocking>
inline void forms(Case& c, Blocking mpi, Blocking pmpi, NonBlocking nonblocking, Args args) {
  c.blocking = [=](bool p, void* s, void* r) { return args(p ? pmpi : mpi, s, r); };
  c.start = [=](void* s, void* r, MPI_Request* q) { return args(nonblocking, s, r, q); };
  persistent_form(c, nonblocking, args);
}

// Where the buffers a call sees live: host memory here, GPU memory in test_mpi_gpu_collectives.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual void* put(const std::vector<int>& v) = 0;  // a new buffer holding v
  virtual std::vector<int> get(const void* p, std::size_t n) = 0;
  virtual void set(void* p, const std::vector<int>& v) = 0;  // p's first ints become v
  virtual void release(void* p) = 0;
  virtual bool device() const { return false; }
};

class HostMemory : public Memory {
 public:
  void* put(const std::vector<int>& v) override {
    int* p = new int[v.size() + 1];
    std::copy(v.begin(), v.end(), p);
    return p;
  }
  std::vector<int> get(const void* p, std::size_t n) override {
    const int* q = static_cast<const int*>(p);
    return std::vector<int>(q, q + n);
  }
  void set(void* p, const std::vector<int>& v) override { std::copy(v.begin(), v.end(), static_cast<int*>(p)); }
  void release(void* p) override { delete[] static_cast<int*>(p); }
};

// A case's send and receive buffers, placed in their memories.
struct Placed {
  Memory &sm, &rm;
  void *s, *r;
  Placed(const Case& c, Memory& send_memory, Memory& recv_memory)
      : sm(send_memory), rm(recv_memory), s(sm.put(c.send)), r(rm.put(c.recv)) {}
  ~Placed() {
    sm.release(s);
    rm.release(r);
  }
  Placed(const Placed&) = delete;
  Placed& operator=(const Placed&) = delete;
};

// `got` against `want` (the MPI's own result) over the defined part of the receive buffer. Ints
// the MPI leaves alone (gaps between and inside elements, blocks nobody sends) are counted apart.
inline void compare(const Case& c, const std::string& where, const Placed& b,
                    const std::vector<int>& want) {
  EXPECT_EQ(b.sm.get(b.s, c.send.size()), c.send) << where << ": the send buffer changed";
  const std::vector<int> got = b.rm.get(b.r, c.recv.size());
  const std::size_t n = std::min(c.compared, got.size());
  std::size_t wrong = 0, overwritten = 0, first = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (got[i] == want[i]) continue;
    ++(want[i] == c.recv[i] ? overwritten : wrong);
    first = std::min(first, i);
  }
  EXPECT_EQ(overwritten, 0u) << where << ": ints the call must leave alone were written";
  EXPECT_EQ(wrong, 0u) << where << ": wrong results";
  if (first < n)
    ADD_FAILURE() << where << ": first difference at int " << first << ": got " << got[first]
                  << ", want " << want[first];
  const auto end = got.begin() + static_cast<std::ptrdiff_t>(n);
  if (c.receives)
    EXPECT_FALSE(std::equal(got.begin(), end, c.recv.begin())) << where << ": nothing arrived";
}

// Every form of a case through the interposer (blocking; non-blocking completed by MPI_Wait; two
// at once completed by MPI_Waitall), the buffers in `sm` and `rm`, against the blocking call
// straight to the MPI on host buffers. Failures are EXPECTs: every rank goes on to the next call.
inline void check(const Case& c, Memory& sm, Memory& rm, const std::string& memories = "") {
  if (!c.mpi_wrong.empty()) {
    if (place(MPI_COMM_WORLD).me == 0) std::printf("not compared: %s: %s\n", c.name.c_str(), c.mpi_wrong.c_str());
    return;
  }
  std::vector<int> want_send = c.send, want = c.recv;
  want_send.push_back(0);  // never empty: a valid pointer
  want.push_back(0);
  EXPECT_EQ(c.blocking(true, want_send.data(), want.data()), MPI_SUCCESS) << c.name << " (PMPI)";
  want.pop_back();
  if (c.receives) EXPECT_NE(want, c.recv) << c.name << ": the test itself receives nothing";
  {
    Placed b(c, sm, rm);
    EXPECT_EQ(c.blocking(false, b.s, b.r), MPI_SUCCESS) << c.name << memories;
    compare(c, c.name + " blocking" + memories, b, want);
  }
  if (!c.nonblocking) return;
  for (std::size_t copies : {1, 2}) {
    const std::string where = c.name + (copies == 1 ? " MPI_Wait" : " MPI_Waitall") + memories;
    std::vector<std::unique_ptr<Placed>> b;
    std::vector<MPI_Request> reqs(copies, MPI_REQUEST_NULL);
    for (std::size_t k = 0; k < copies; ++k) {
      b.push_back(std::make_unique<Placed>(c, sm, rm));
      EXPECT_EQ(c.start(b[k]->s, b[k]->r, &reqs[k]), MPI_SUCCESS) << where;
    }
    if (copies == 1)
      EXPECT_EQ(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE), MPI_SUCCESS) << where;
    else
      EXPECT_EQ(MPI_Waitall(2, reqs.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS) << where;
    for (std::size_t k = 0; k < copies; ++k) {
      EXPECT_EQ(reqs[k], MPI_REQUEST_NULL) << where;
      compare(c, where, *b[k], want);
    }
  }
  // The persistent form: one init, two starts, the receive buffer reset in between (in place it
  // is the input). Under FERRY_PROTOCOL_TEST host buffers take Ferry's paths too: its messages, or
  // a stand-in. MPICH 4.0.2's own persistent collectives are not compared: restarted, its
  // MPI_Scatter and MPI_Allgather between two types deliver nothing, and a later MPI_Allgather
  // crashes in UCX.
  const char* protocol = std::getenv("FERRY_PROTOCOL_TEST");
  const bool ours = protocol && std::string(protocol) == "1";
  if (!c.persist || (mpich() && !ours && !sm.device() && !rm.device())) return;
  const std::string where = c.name + " persistent" + memories;
  Placed b(c, sm, rm);
  MPI_Request q = MPI_REQUEST_NULL;
  const long before = ferry_mpi_persistent_standins() + ferry_mpi_collective_messages();
  ASSERT_EQ(c.persist(b.s, b.r, &q), MPI_SUCCESS) << where;
  for (int start = 0; start < 2; ++start) {
    if (start > 0) b.rm.set(b.r, c.recv);
    EXPECT_EQ(MPI_Start(&q), MPI_SUCCESS) << where;
    EXPECT_EQ(MPI_Wait(&q, MPI_STATUS_IGNORE), MPI_SUCCESS) << where;
    EXPECT_NE(q, MPI_REQUEST_NULL) << where << ": a persistent request stays";
    compare(c, where + ", start " + std::to_string(start + 1), b, want);
  }
  EXPECT_EQ(MPI_Request_free(&q), MPI_SUCCESS) << where;
  if (ours)
    EXPECT_GT(ferry_mpi_persistent_standins() + ferry_mpi_collective_messages(), before)
        << where << ": neither Ferry's messages nor a stand-in";
}

// Displacements (in elements) of blocks of `counts` laid out last process first, one spare
// element after each block: the blocks are out of order and the spares are gaps.
inline std::vector<int> reversed_displs(const std::vector<int>& counts, int* total) {
  std::vector<int> displs(counts.size());
  int pos = 0;
  for (std::size_t i = counts.size(); i-- > 0;) {
    displs[i] = pos;
    pos += counts[i] + 1;
  }
  *total = pos;
  return displs;
}

// Ints of data a process contributes in the v-collectives: 2, 4, 0, 2, ... (zero counts included).
inline int contribution(int rank) {
  return rank == MPI_PROC_NULL ? 2 : 2 * ((rank + 1) % 3);
}
// Ints of data from one process to another in the alltoall-v/w collectives; symmetric ones for in
// place, where each pair exchanges through the same counts.
inline int pairwise(int from, int to, bool symmetric) {
  if (from == MPI_PROC_NULL || to == MPI_PROC_NULL) return 2;
  return 2 * ((from + (symmetric ? 1 : 2) * to) % 3);
}

// The processes a collective without a root exchanges with, in the order of its blocks.
struct Topology {
  std::string name;
  MPI_Comm comm;
  Place at;
  std::vector<int> sources, destinations;
  int group = 0;  // of an intercommunicator: 1 holds the root of rooted calls, 2 the others
  // Blocks from the sources that carry data (not MPI_PROC_NULL's, nor in place this process's).
  bool receives(bool in_place, const std::vector<int>& counts) const {
    for (std::size_t i = 0; i < sources.size(); ++i)
      if (sources[i] != MPI_PROC_NULL && counts[i] > 0 && !(in_place && sources[i] == at.me))
        return true;
    return false;
  }
  // Some process is a neighbour twice (a ring of 2 as a graph): its blocks match in list order.
  bool repeats() const {
    for (const auto* v : {&sources, &destinations}) {
      std::vector<int> sorted = *v;
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return true;
    }
    return false;
  }
};

// MPICH 4.0 matches a process that is a neighbour twice in a graph in reverse list order (it
// reverses every receive list, its fix for the periodic cartesian case; MPICH pull request 7945,
// 2026), against the standard (MPI-4.1 8.6: the k-th block to a process arrives in the k-th slot
// from it), which Ferry's own messages follow. Where the blocks differ, nothing to compare with.
inline std::string mpich_repeats_wrong(const Topology& t) {
  return mpich() && t.repeats() ? "MPICH's own matches a repeated neighbour's blocks in reverse" : "";
}

inline const std::vector<Topology>& world() {
  static const std::vector<Topology> all = [] {
    const Place at = place(MPI_COMM_WORLD);
    std::vector<int> ranks(static_cast<std::size_t>(at.n));
    for (int i = 0; i < at.n; ++i) ranks[static_cast<std::size_t>(i)] = i;
    return std::vector<Topology>{{"", MPI_COMM_WORLD, at, ranks, ranks}};
  }();
  return all;
}

// A non-periodic line (MPI_PROC_NULL beyond the ends), a ring as a graph (for two processes each
// neighbour twice), and a distributed graph whose in- and out-degrees differ.
inline const std::vector<Topology>& neighbourhoods() {
  static const std::vector<Topology> all = [] {
    const Place at = place(MPI_COMM_WORLD);
    const int n = at.n, me = at.me;
    std::vector<Topology> t(3);
    int dims[1] = {n}, periods[1] = {0};
    t[0].name = "cartesian";
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &t[0].comm);
    int left = 0, right = 0;
    MPI_Cart_shift(t[0].comm, 0, 1, &left, &right);
    t[0].sources = t[0].destinations = {left, right};

    t[1].name = "graph";
    std::vector<int> index, edges;
    for (int r = 0; r < n; ++r) {
      edges.push_back((r + n - 1) % n);
      edges.push_back((r + 1) % n);
      index.push_back(static_cast<int>(edges.size()));
    }
    MPI_Graph_create(MPI_COMM_WORLD, n, index.data(), edges.data(), 0, &t[1].comm);
    t[1].sources.resize(2);
    MPI_Graph_neighbors(t[1].comm, me, 2, t[1].sources.data());
    t[1].destinations = t[1].sources;

    // Edges s -> s+1, and from even s also s -> s+3.
    t[2].name = "distributed graph";
    t[2].destinations = {(me + 1) % n};
    if (me % 2 == 0) t[2].destinations.push_back((me + 3) % n);
    t[2].sources = {(me + n - 1) % n};
    if ((me + 3 * n - 3) % n % 2 == 0) t[2].sources.push_back((me + 3 * n - 3) % n);
    MPI_Dist_graph_create_adjacent(
        MPI_COMM_WORLD, static_cast<int>(t[2].sources.size()), t[2].sources.data(), MPI_UNWEIGHTED,
        static_cast<int>(t[2].destinations.size()), t[2].destinations.data(), MPI_UNWEIGHTED,
        MPI_INFO_NULL, 0, &t[2].comm);
    for (Topology& each : t) each.at = place(each.comm);
    return t;
  }();
  return all;
}

// An intercommunicator between the even ranks (group 1, whose first is the root of rooted calls)
// and the odd ones (group 2): each side's peers are the other group.
inline const std::vector<Topology>& intercommunicator() {
  static const std::vector<Topology> all = [] {
    const Place w = place(MPI_COMM_WORLD);
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, w.me % 2, w.me, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, w.me % 2 == 0 ? 1 : 0, 7, &inter);
    MPI_Comm_free(&local);
    int remote = 0;
    MPI_Comm_remote_size(inter, &remote);
    std::vector<int> ranks(static_cast<std::size_t>(remote));
    for (int i = 0; i < remote; ++i) ranks[static_cast<std::size_t>(i)] = i;
    return std::vector<Topology>{
        {"intercommunicator", inter, place(inter), ranks, ranks, w.me % 2 == 0 ? 1 : 2}};
  }();
  return all;
}

// What a catalogue entry is made from: the topology, the send layout and a receive layout (a
// different one where the call takes two types), and whether the call is in place. Case forms
// capture values, never the Setup.
struct Setup {
  const Topology& t;
  std::size_t l;  // the send layout's index
  const Layout& S;
  const Layout& R;
  bool in_place;
  // The root argument: the last rank (not the usual 0); on the intercommunicator MPI_ROOT at the
  // root, MPI_PROC_NULL at the rest of its group, the root's rank (0) in the other group.
  int root() const {
    if (t.group == 0) return t.at.n - 1;
    if (t.group == 2) return 0;
    return t.at.me == 0 ? MPI_ROOT : MPI_PROC_NULL;
  }
  bool at_root() const { return t.group == 0 ? t.at.me == root() : root() == MPI_ROOT; }
  // Takes part as a non-root: everyone on an intracommunicator, the other group on the
  // intercommunicator.
  bool member() const { return t.group != 1; }
  int peers() const { return static_cast<int>(t.sources.size()); }
};

enum Sides { one_type, two_types };
enum InPlace { not_in_place, in_place_too };

// A case per topology, layout and in-place choice: `make(setup, case)` fills in its buffers and
// forms.
template <class Make>
inline std::vector<Case> cases(const char* name, const std::vector<Topology>& topologies,
                               Sides sides, InPlace in_place, Make make) {
  std::vector<Case> out;
  for (const Topology& t : topologies)
    for (std::size_t l = 0; l < layouts().size(); ++l)
      for (bool ip : {false, true}) {
        if (ip && in_place == not_in_place) continue;
        const Layout& R = layouts()[(l + (sides == two_types ? 1 : 0)) % layouts().size()];
        const Setup s{t, l, layouts()[l], R, ip};
        Case c;
        c.name = std::string(name) + (t.name.empty() ? "" : " " + t.name) + " " + s.S.name +
                 (sides == two_types ? std::string(" to ") + R.name : "") + (ip ? " in place" : "");
        make(s, c);
        out.push_back(std::move(c));
      }
  return out;
}

// ---- the catalogue ----

// A rooted call's roles at this process, kept by value in its forms: the root argument, and
// which buffers MPI looks at here (the others get the poison). The rooted calls take the
// communicator (world or the intercommunicator) and whether to try in place (not on an
// intercommunicator).
struct Roles {
  int root;
  bool at_root, member, in_place;
  MPI_Comm comm;
  explicit Roles(const Setup& s)
      : root(s.root()),
        at_root(s.at_root()),
        member(s.member()),
        in_place(s.in_place),
        comm(s.t.comm) {}
  // This process's own part (a gather's send buffer, a scatter's receive buffer).
  void* own(void* b) const {
    if (in_place && at_root) return MPI_IN_PLACE;
    return member ? b : poison;
  }
  // The root's arguments.
  void* rooted(void* b) const { return at_root ? b : poison; }
  const int* rooted(const std::vector<int>& v) const { return at_root ? v.data() : nullptr; }
};

inline std::vector<Case> bcast_cases(const std::vector<Topology>& on = world()) {
  return cases("MPI_Bcast", on, one_type, not_in_place, [](const Setup& s, Case& c) {
    const int k = 3;
    const Roles r(s);
    const bool used = r.at_root || r.member;
    const MPI_Datatype type = s.S.type;
    if (used) c.recv = initial(k * s.S.extent, r.at_root);
    c.receives = used && !r.at_root;
    forms(c, MPI_Bcast, PMPI_Bcast, MPI_Ibcast, [=](auto fn, void*, void* rb, auto... q) {
      return fn(used ? rb : poison, k, type, r.root, r.comm, q...);
    });
  });
}

inline std::vector<Case> reduce_cases(const std::vector<Topology>& on = world(),
                                      InPlace in_place = in_place_too) {
  return cases("MPI_Reduce", on, one_type, in_place, [](const Setup& s, Case& c) {
    const int k = 3;
    const Roles r(s);
    const Layout L = s.S;
    if (r.member) c.send = initial(k * L.extent, true);
    if (r.at_root) c.recv = initial(k * L.extent, false);
    c.receives = r.at_root;
    forms(c, MPI_Reduce, PMPI_Reduce, MPI_Ireduce, [=](auto fn, void* sb, void* rb, auto... q) {
      return fn(r.own(sb), r.rooted(rb), k, L.type, L.sum, r.root, r.comm, q...);
    });
  });
}

using ReduceFn = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
using IreduceFn = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
enum class Prefix { none, inclusive, exclusive };

// MPI_Allreduce, MPI_Scan (rank 0's result in place is its input) and MPI_Exscan (whose result at
// rank 0 is undefined).
inline std::vector<Case> reduce_all_cases(const char* name, ReduceFn mpi, ReduceFn pmpi,
                                          IreduceFn impi, Prefix prefix) {
  return cases(name, world(), one_type, in_place_too, [=](const Setup& s, Case& c) {
    const int k = 3, me = s.t.at.me;
    const bool in_place = s.in_place;
    const Layout L = s.S;
    c.send = initial(k * L.extent, true);
    c.recv = initial(k * L.extent, false);
    if (me == 0 && prefix == Prefix::exclusive) c.compared = 0;
    c.receives = me > 0 || prefix == Prefix::none || (prefix == Prefix::inclusive && !in_place);
    forms(c, mpi, pmpi, impi, [=](auto fn, void* sb, void* rb, auto... q) {
      return fn(in_place ? MPI_IN_PLACE : sb, rb, k, L.type, L.sum, MPI_COMM_WORLD, q...);
    });
  });
}

inline std::vector<Case> allreduce_cases() {
  return reduce_all_cases("MPI_Allreduce", MPI_Allreduce, PMPI_Allreduce, MPI_Iallreduce,
                          Prefix::none);
}
inline std::vector<Case> scan_cases() {
  return reduce_all_cases("MPI_Scan", MPI_Scan, PMPI_Scan, MPI_Iscan, Prefix::inclusive);
}
inline std::vector<Case> exscan_cases() {
  return reduce_all_cases("MPI_Exscan", MPI_Exscan, PMPI_Exscan, MPI_Iexscan, Prefix::exclusive);
}

// In place the whole receive buffer is the input and only this rank's share is defined after.
inline std::vector<Case> reduce_scatter_cases() {
  return cases("MPI_Reduce_scatter", world(), one_type, in_place_too, [](const Setup& s, Case& c) {
    const bool in_place = s.in_place;
    const Layout L = s.S;
    std::vector<int> counts;
    int total = 0;
    for (int i = 0; i < s.t.at.n; ++i) total += counts.emplace_back((i + 2) % 3);  // 2, 0, 1, 2
    const int mine = counts[static_cast<std::size_t>(s.t.at.me)];
    c.send = initial(total * L.extent, true);
    c.recv = initial((in_place ? total : mine) * L.extent, false);
    c.compared = static_cast<std::size_t>(mine * L.extent);
    c.receives = mine > 0;
    forms(c, MPI_Reduce_scatter, PMPI_Reduce_scatter, MPI_Ireduce_scatter,
          [=](auto fn, void* sb, void* rb, auto... q) {
            return fn(in_place ? MPI_IN_PLACE : sb, rb, counts.data(), L.type, L.sum,
                      MPI_COMM_WORLD, q...);
          });
  });
}

inline std::vector<Case> reduce_scatter_block_cases() {
  return cases(
      "MPI_Reduce_scatter_block", world(), one_type, in_place_too, [](const Setup& s, Case& c) {
        const int k = 2, n = s.t.at.n;
        const bool in_place = s.in_place;
        const Layout L = s.S;
        c.send = initial(n * k * L.extent, true);
        c.recv = initial((in_place ? n * k : k) * L.extent, false);
        c.compared = static_cast<std::size_t>(k * L.extent);
        forms(c, MPI_Reduce_scatter_block, PMPI_Reduce_scatter_block, MPI_Ireduce_scatter_block,
              [=](auto fn, void* sb, void* rb, auto... q) {
                return fn(in_place ? MPI_IN_PLACE : sb, rb, k, L.type, L.sum, MPI_COMM_WORLD, q...);
              });
      });
}

// Four ints a rank, as 4 / ints elements of either layout.
inline std::vector<Case> gather_cases(const std::vector<Topology>& on = world(),
                                      InPlace in_place = in_place_too) {
  return cases("MPI_Gather", on, two_types, in_place, [](const Setup& s, Case& c) {
    const int ks = 4 / s.S.ints, kr = 4 / s.R.ints;
    const Roles r(s);
    const MPI_Datatype st = s.S.type, rt = s.R.type;
    if (r.member) c.send = initial(ks * s.S.extent, true);
    if (r.at_root) c.recv = initial(s.peers() * kr * s.R.extent, false);
    c.receives = r.at_root;
    forms(c, MPI_Gather, PMPI_Gather, MPI_Igather, [=](auto fn, void* sb, void* rb, auto... q) {
      return fn(r.own(sb), ks, st, r.rooted(rb), kr, rt, r.root, r.comm, q...);
    });
  });
}

}  // namespace collectives
