// The interposer's collectives (libferry-mpi linked before the MPI library), under mpiexec -n 2 and
// -n 4, on host buffers: every blocking, non-blocking and neighbourhood collective, with a
// contiguous type, a vector with a gap inside each element and a type resized to leave a gap after
// each element (send and receive types differ where MPI allows), in place where MPI allows, with
// zero counts among the blocks and poisoned pointers for the arguments MPI does not look at. Each
// result must be what the same call gives straight from the MPI (PMPI_*, which bypasses the
// interposer), the ints between the elements included; the non-blocking forms are completed by
// MPI_Wait, and two at a time by MPI_Waitall. A last test checks a few results against values
// computed by hand.
//
// The catalogue of calls and the checking are shared with test_mpi_gpu_collectives, which
// includes this file with FERRY_COLLECTIVES_CATALOGUE_ONLY defined and runs the same calls on GPU
// buffers.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace collectives {

// Where this process stands in a communicator.
struct Place {
  int me = 0, n = 0;
};
Place place(MPI_Comm comm) {
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

const std::vector<Layout>& layouts();

// MPI's predefined operations take predefined types only (Open MPI refuses them on derived
// ones): the derived layouts are summed by a user operation, which sees the layout itself.
void sum_layout(void* in, void* inout, int* len, MPI_Datatype* type) {
  for (const Layout& L : layouts()) {
    if (L.type != *type) continue;
    const int* a = static_cast<const int*>(in);
    int* b = static_cast<int*>(inout);
    for (int e = 0; e < *len; ++e)
      for (int j = 0; j < L.ints; ++j) b[e * L.extent + j * L.step] += a[e * L.extent + j * L.step];
  }
}

const std::vector<Layout>& layouts() {
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
std::vector<int> initial(int ints, bool send) {
  std::vector<int> v(static_cast<std::size_t>(ints));
  const int base = (place(MPI_COMM_WORLD).me + 1) * 100000;
  for (int i = 0; i < ints; ++i) v[static_cast<std::size_t>(i)] = (send ? 1 : -1) * (base + i + 1);
  return v;
}
int sent_value(int rank, int i) {
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
  // False where the MPI's own non-blocking form is known wrong (nothing to compare with).
  bool nonblocking = true;
  // Why the MPI's own result is known wrong for every form; empty where it is right.
  std::string mpi_wrong;
};

// MPICH (4.0.2, Debian 12's) gets two of these calls wrong by itself, straight through PMPI_*:
// MPI_Ialltoallw in place (its blocking form is right), and MPI_Neighbor_alltoallw on the
// distributed graph with per-neighbour derived types (the data differ from run to run). Those are
// not compared there (mpich(), Case::nonblocking, Case::mpi_wrong).
bool mpich() {
  static const bool is = [] {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    return std::string(v, static_cast<std::size_t>(len)).find("MPICH") != std::string::npos;
  }();
  return is;
}

// Sets both forms from one argument list, `args(fn, send, recv, request...)`.
template <class Args, class Blocking, class NonBlocking>
void forms(Case& c, Blocking mpi, Blocking pmpi, NonBlocking nonblocking, Args args) {
  c.blocking = [=](bool p, void* s, void* r) { return args(p ? pmpi : mpi, s, r); };
  c.start = [=](void* s, void* r, MPI_Request* q) { return args(nonblocking, s, r, q); };
}

// Where the buffers a call sees live: host memory here, GPU memory in test_mpi_gpu_collectives.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual void* put(const std::vector<int>& v) = 0;  // a new buffer holding v
  virtual std::vector<int> get(const void* p, std::size_t n) = 0;
  virtual void release(void* p) = 0;
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
void compare(const Case& c, const std::string& where, const Placed& b,
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
void check(const Case& c, Memory& sm, Memory& rm, const std::string& memories = "") {
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
}

// Displacements (in elements) of blocks of `counts` laid out last process first, one spare
// element after each block: the blocks are out of order and the spares are gaps.
std::vector<int> reversed_displs(const std::vector<int>& counts, int* total) {
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
int contribution(int rank) {
  return rank == MPI_PROC_NULL ? 2 : 2 * ((rank + 1) % 3);
}
// Ints of data from one process to another in the alltoall-v/w collectives; symmetric ones for in
// place, where each pair exchanges through the same counts.
int pairwise(int from, int to, bool symmetric) {
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
};

const std::vector<Topology>& world() {
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
const std::vector<Topology>& neighbourhoods() {
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
const std::vector<Topology>& intercommunicator() {
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
std::vector<Case> cases(const char* name, const std::vector<Topology>& topologies, Sides sides,
                        InPlace in_place, Make make) {
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

std::vector<Case> bcast_cases(const std::vector<Topology>& on = world()) {
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

std::vector<Case> reduce_cases(const std::vector<Topology>& on = world(),
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
std::vector<Case> reduce_all_cases(const char* name, ReduceFn mpi, ReduceFn pmpi, IreduceFn impi,
                                   Prefix prefix) {
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

std::vector<Case> allreduce_cases() {
  return reduce_all_cases("MPI_Allreduce", MPI_Allreduce, PMPI_Allreduce, MPI_Iallreduce,
                          Prefix::none);
}
std::vector<Case> scan_cases() {
  return reduce_all_cases("MPI_Scan", MPI_Scan, PMPI_Scan, MPI_Iscan, Prefix::inclusive);
}
std::vector<Case> exscan_cases() {
  return reduce_all_cases("MPI_Exscan", MPI_Exscan, PMPI_Exscan, MPI_Iexscan, Prefix::exclusive);
}

// In place the whole receive buffer is the input and only this rank's share is defined after.
std::vector<Case> reduce_scatter_cases() {
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

std::vector<Case> reduce_scatter_block_cases() {
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
std::vector<Case> gather_cases(const std::vector<Topology>& on = world(),
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

// The root's blocks in a v-call: process i's contribution(i) ints as elements of `layout`, at
// reversed displacements.
struct VBlocks {
  std::vector<int> counts, displs;
  int total = 0;  // elements the buffer spans
};
VBlocks contributions(const Setup& s, const Layout& layout) {
  VBlocks b;
  for (int i = 0; i < s.peers(); ++i) b.counts.push_back(contribution(i) / layout.ints);
  b.displs = reversed_displs(b.counts, &b.total);
  return b;
}

std::vector<Case> gatherv_cases(const std::vector<Topology>& on = world(),
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
std::vector<Case> scatter_cases(const std::vector<Topology>& on = world(),
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
std::vector<Case> scatterv_cases(const std::vector<Topology>& on = world(),
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
std::vector<Case> fan_cases(const char* name, FanFn mpi, FanFn pmpi, IfanFn impi, bool each,
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
    forms(c, mpi, pmpi, impi, [=](auto fn, void* sb, void* rb, auto... q) {
      return fn(ip ? MPI_IN_PLACE : sb, ks, st, rb, kr, rt, comm, q...);
    });
  });
}

std::vector<Case> allgather_cases() {
  return fan_cases("MPI_Allgather", MPI_Allgather, PMPI_Allgather, MPI_Iallgather, false, world(),
                   in_place_too);
}
std::vector<Case> alltoall_cases() {
  return fan_cases("MPI_Alltoall", MPI_Alltoall, PMPI_Alltoall, MPI_Ialltoall, true, world(),
                   in_place_too);
}
std::vector<Case> neighbor_allgather_cases() {
  return fan_cases("MPI_Neighbor_allgather", MPI_Neighbor_allgather, PMPI_Neighbor_allgather,
                   MPI_Ineighbor_allgather, false, neighbourhoods(), not_in_place);
}
std::vector<Case> neighbor_alltoall_cases() {
  return fan_cases("MPI_Neighbor_alltoall", MPI_Neighbor_alltoall, PMPI_Neighbor_alltoall,
                   MPI_Ineighbor_alltoall, true, neighbourhoods(), not_in_place);
}

using GathervFn = int (*)(const void*, int, MPI_Datatype, void*, const int*, const int*,
                          MPI_Datatype, MPI_Comm);
using IgathervFn = int (*)(const void*, int, MPI_Datatype, void*, const int*, const int*,
                           MPI_Datatype, MPI_Comm, MPI_Request*);

// MPI_Allgatherv and MPI_Neighbor_allgatherv: from each source its contribution, reversed.
std::vector<Case> allgatherv_cases(const char* name, GathervFn mpi, GathervFn pmpi, IgathervFn impi,
                                   const std::vector<Topology>& topologies, InPlace in_place) {
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

std::vector<Case> allgatherv_cases() {
  return allgatherv_cases("MPI_Allgatherv", MPI_Allgatherv, PMPI_Allgatherv, MPI_Iallgatherv,
                          world(), in_place_too);
}
std::vector<Case> neighbor_allgatherv_cases() {
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
Side side(const Setup& s, bool sending, LayoutOf layout) {
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
std::vector<Case> alltoallv_cases(const char* name, AlltoallvFn mpi, AlltoallvFn pmpi,
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
    forms(c, mpi, pmpi, impi, [=](auto fn, void* sb, void* rb, auto... q) {
      if (ip)
        return fn(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, rb, recv.counts.data(),
                  rd.data(), rt, comm, q...);
      return fn(sb, send.counts.data(), sd.data(), st, rb, recv.counts.data(), rd.data(), rt, comm,
                q...);
    });
  });
}

std::vector<Case> alltoallv_cases() {
  return alltoallv_cases("MPI_Alltoallv", MPI_Alltoallv, PMPI_Alltoallv, MPI_Ialltoallv, world(),
                         in_place_too);
}
std::vector<Case> neighbor_alltoallv_cases() {
  return alltoallv_cases("MPI_Neighbor_alltoallv", MPI_Neighbor_alltoallv, PMPI_Neighbor_alltoallv,
                         MPI_Ineighbor_alltoallv, neighbourhoods(), not_in_place);
}

// MPI_Alltoallw (int byte displacements) and MPI_Neighbor_alltoallw (MPI_Aint ones): a layout per
// peer, starting from the case's, the send and receive layouts of a pair different.
template <class Disp, class Fn, class Ifn>
std::vector<Case> alltoallw_cases(const char* name, Fn mpi, Fn pmpi, Ifn impi,
                                  const std::vector<Topology>& topologies, InPlace in_place) {
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
    if (mpich() && s.t.name == "distributed graph" && (s.S.type != MPI_INT || s.R.type != MPI_INT))
      c.mpi_wrong = "MPICH's own MPI_Neighbor_alltoallw delivers varying data here";
    forms(c, mpi, pmpi, impi, [=](auto fn, void* sb, void* rb, auto... q) {
      if (ip)
        return fn(MPI_IN_PLACE, nullptr, nullptr, nullptr, rb, recv.counts.data(), rd.data(),
                  recv.types.data(), comm, q...);
      return fn(sb, send.counts.data(), sd.data(), send.types.data(), rb, recv.counts.data(),
                rd.data(), recv.types.data(), comm, q...);
    });
  });
}

std::vector<Case> alltoallw_cases() {
  return alltoallw_cases<int>("MPI_Alltoallw", MPI_Alltoallw, PMPI_Alltoallw, MPI_Ialltoallw,
                              world(), in_place_too);
}
std::vector<Case> neighbor_alltoallw_cases() {
  return alltoallw_cases<MPI_Aint>("MPI_Neighbor_alltoallw", MPI_Neighbor_alltoallw,
                                   PMPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw,
                                   neighbourhoods(), not_in_place);
}

// The rooted calls and those to every peer, on the intercommunicator.
std::vector<Case> intercommunicator_cases() {
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

#ifndef FERRY_COLLECTIVES_CATALOGUE_ONLY

namespace collectives {
namespace {

#define FERRY_HOST_TEST(Name, cases)                \
  TEST(Collectives, Name) {                         \
    HostMemory host;                                \
    const std::vector<Case> all = cases();          \
    EXPECT_GE(all.size(), layouts().size());        \
    for (const Case& c : all) check(c, host, host); \
  }
FERRY_COLLECTIVES(FERRY_HOST_TEST)
#undef FERRY_HOST_TEST

// A few results against values computed by hand (every rank's initial values are known).
TEST(Collectives, ByHand) {
  const auto [me, n] = place(MPI_COMM_WORLD);
  const Layout &vec = layouts()[1], &resized = layouts()[2];
  // Gatherv of two vector elements (4 ints) from each rank into resized ints at the root, rank i
  // at element 5 * i: element j of the block is the j-th data int of the sender's vector.
  std::vector<int> send = initial(6, true), recv = initial(n * 10, false);
  const std::vector<int> before = recv;
  std::vector<int> counts(static_cast<std::size_t>(n), 4), displs;
  for (int i = 0; i < n; ++i) displs.push_back(5 * i);
  ASSERT_EQ(MPI_Gatherv(send.data(), 2, vec.type, recv.data(), counts.data(), displs.data(),
                        resized.type, 0, MPI_COMM_WORLD),
            MPI_SUCCESS);
  if (me == 0) {
    const int picked[4] = {0, 2, 3, 5};  // the vector's data ints
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < 10; ++j) {
        const std::size_t at = static_cast<std::size_t>(10 * i + j);
        if (j % 2 == 0 && j < 8)
          EXPECT_EQ(recv[at], sent_value(i, picked[j / 2])) << "rank " << i << " int " << j;
        else
          EXPECT_EQ(recv[at], before[at]) << "gap overwritten at int " << at;
      }
  }
  // Alltoallw: to each peer p, p + 1 ints as MPI_INT at byte 8 * p (the blocks overlap: sending
  // may); received from each peer q as resized ints, me + 1 of them, at int 2 * n * q.
  std::vector<int> scounts, sdispls, rcounts, rdispls;
  std::vector<MPI_Datatype> stypes, rtypes;
  for (int p = 0; p < n; ++p) {
    scounts.push_back(p + 1);
    sdispls.push_back(8 * p);
    stypes.push_back(MPI_INT);
    rcounts.push_back(me + 1);
    rdispls.push_back(2 * n * p * static_cast<int>(sizeof(int)));
    rtypes.push_back(resized.type);
  }
  std::vector<int> ssrc = initial(3 * n, true), rdst = initial(2 * n * n, false);
  std::vector<int> want = rdst;
  ASSERT_EQ(MPI_Alltoallw(ssrc.data(), scounts.data(), sdispls.data(), stypes.data(), rdst.data(),
                          rcounts.data(), rdispls.data(), rtypes.data(), MPI_COMM_WORLD),
            MPI_SUCCESS);
  for (int q = 0; q < n; ++q)
    for (int j = 0; j <= me; ++j)
      want[static_cast<std::size_t>(2 * n * q + 2 * j)] = sent_value(q, 2 * me + j);
  EXPECT_EQ(rdst, want);
  // Reduce_scatter in place: rank i's share is i + 1 ints, the sum over ranks of their inputs.
  std::vector<int> rc;
  int total = 0;
  for (int i = 0; i < n; ++i) total += rc.emplace_back(i + 1);
  std::vector<int> inout = initial(total, true);
  ASSERT_EQ(
      MPI_Reduce_scatter(MPI_IN_PLACE, inout.data(), rc.data(), MPI_INT, MPI_SUM, MPI_COMM_WORLD),
      MPI_SUCCESS);
  const int first = me * (me + 1) / 2;
  for (int j = 0; j <= me; ++j) {
    int sum = 0;
    for (int r = 0; r < n; ++r) sum += sent_value(r, first + j);
    EXPECT_EQ(inout[static_cast<std::size_t>(j)], sum) << "element " << j;
  }
}

}  // namespace
}  // namespace collectives

#endif  // FERRY_COLLECTIVES_CATALOGUE_ONLY
