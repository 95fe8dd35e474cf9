// ferry/halo.hpp — halo exchange for 3-D structured grids split across ranks, GPUs and subdomains.
//
// The user owns the arrays. A Domain splits a global grid into subdomains (several per rank, and
// several per GPU, are allowed) and places them on ranks and GPUs; a Plan, built once from the
// fields of every local subdomain, knows each neighbour pair's regions and method, its messages and
// buffers; exchange() (or start()/finish() on a CUDA stream) then fills every halo many times, and
// swap() flips double-buffered arrays without re-planning.
//
//   namespace fh = ferry::halo;
//   fh::DomainOptions o;
//   o.periodic = {true, true, true};
//   auto dom = fh::Domain::create(MPI_COMM_WORLD, {512, 512, 512}, o);
//   const fh::Subdomain& sub = dom.local()[0];   // extent, global offset, GPU of my subdomain
//   double* u = allocate((sub.extent[0] + 6) * (sub.extent[1] + 6) * (sub.extent[2] + 6));
//   auto plan = fh::plan(dom, {{fh::dense_field(u, sub.extent, fh::Widths::uniform(3))}});
//   for (...) { plan.exchange(); stencil(u); }
//
// Coordinates. Axis 0 is x, 1 is y, 2 is z. A subdomain's interior points have local indices
// 0..extent-1 per axis; its halo lies at negative indices and at extent and above. A Field says
// where local point (0,0,0) is in its allocation (`origin`) and the byte stride of each axis, so any
// axis order, padding and element type (any trivially copyable type: only its size matters) work.
//
// Widths (what an edge or corner width means). Directions are the 26 neighbours d = (dx, dy, dz),
// each component -1, 0 or +1, not all 0. The halo region that comes from direction d is a box: along
// an axis where d is 0 it spans the interior (0..extent-1); along an axis where d is -1 or +1 it is
// `thickness(d, axis)` points thick, just outside the interior on that side. The default form gives
// a minus and a plus width per axis (GCL/GHEX): the region from d is then as thick, along each of
// its non-zero axes, as that side's width, so the edge (-x, -y) is minus_x × minus_y × extent_z and
// a corner is the product of three widths. The 26-value form overrides single directions: set(d, w)
// makes the region from d w points thick along each of its non-zero axes (an edge of width 2 is
// 2 × 2 × extent); w = 0 skips the direction (a star stencil sends no edges or corners). The
// neighbour sends the interior points nearest to the shared side, as many as the region is thick.
//
// Errors: ferry::Error with an MPI error class; bad descriptions are found when the Plan is built,
// on every rank together (the checks are collective), so a mistake on one rank never leaves the
// others waiting: a null pointer, a negative width, a width larger than a neighbouring subdomain, a
// halo that does not fit its allocation, fields that differ across ranks (count, element size,
// widths, axis order) -> MPI_ERR_ARG; mismatched collective arguments -> MPI_ERR_ARG too.
//
// Threads and progress: see Plan below and docs/design.md ("Halo exchange").
#pragma once

#include <ferry/error.hpp>
#include <ferry/gpu.hpp>
#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ferry::halo {

using i64 = std::int64_t;
using Index3 = std::array<i64, 3>;

// A neighbour direction; each component is -1, 0 or +1.
struct Dir {
  int x = 0, y = 0, z = 0;
  int operator[](int axis) const { return axis == 0 ? x : axis == 1 ? y : z; }
};
constexpr int kDirections = 27;  // index (x+1) + 3(y+1) + 9(z+1); 13 is the subdomain itself
inline int index_of(Dir d) { return (d.x + 1) + 3 * (d.y + 1) + 9 * (d.z + 1); }
inline Dir dir_of(int index) { return {index % 3 - 1, index / 3 % 3 - 1, index / 9 - 1}; }

// Halo widths per direction (see the header comment for what they mean).
class Widths {
 public:
  Widths() = default;  // no halo
  static Widths uniform(int w);  // every direction, w points thick
  static Widths axes(std::array<int, 3> minus, std::array<int, 3> plus);
  // The 26-value form: the region from d is w thick along each of d's non-zero axes; 0 skips it.
  Widths& set(Dir d, int w);
  Widths& faces_only();  // edges and corners 0 (star stencils)
  Widths& no_corners();  // corners 0
  // Thickness of the region from d along `axis` (0 where d is 0 on that axis or d is skipped).
  int thickness(Dir d, int axis) const { return t_[index_of(d)][axis]; }
  bool sends(Dir d) const;  // the region from d is not empty
  // The thickest region on one side of an axis (sign -1 or +1): the halo the allocation needs there.
  int side(int axis, int sign) const;
  bool operator==(const Widths& o) const { return t_ == o.t_; }

  std::array<std::array<int, 3>, kDirections> t_{};  // raw thickness per direction and axis
};

// Memory order of a dense field: x_fastest is a C array a[z][y][x] (Fortran a(x,y,z)).
enum class Order { x_fastest, z_fastest };

// One array of one subdomain.
struct Field {
  void* data = nullptr;       // byte address of allocation point (0, 0, 0)
  void* data_next = nullptr;  // optional second array of the same layout, for swap()
  i64 elem_bytes = 0;         // bytes of one element
  Index3 alloc{};             // points allocated per axis, halos and padding included
  Index3 origin{};            // allocation index of local point (0, 0, 0): at least the minus halo
  Index3 strides{};           // bytes between neighbouring points per axis (positive)
  Widths widths;
  std::string name;           // for messages
};

// A field without padding: alloc = extent + halo on both sides, origin = the minus halos, dense
// strides in `order`. T is any trivially copyable type.
template <class T>
Field dense_field(T* data, Index3 extent, const Widths& w, Order order = Order::x_fastest,
                  T* next = nullptr, std::string name = "");
Field dense_field_bytes(void* data, i64 elem_bytes, Index3 extent, const Widths& w,
                        Order order = Order::x_fastest, void* next = nullptr, std::string name = "");

// How subdomains are assigned to ranks and GPUs within a node (dissertation §4.4).
enum class Placement {
  trivial,     // in order
  random,      // shuffled with DomainOptions::seed (the same on every rank)
  node_aware,  // neighbours on one node, then GPU pairs by the bandwidth matrix (exact QAP <= 8)
};

struct DomainOptions {
  std::array<bool, 3> periodic{false, false, false};
  int subdomains = 1;        // subdomains this rank holds (may differ between ranks)
  std::vector<int> devices;  // GPU of each of this rank's subdomains; empty: the current device
  // A given decomposition: subdomains per axis (product = all ranks' subdomains), optionally the
  // cut positions per axis (grid[a] + 1 increasing values from 0 to global[a]) and the rank of each
  // cell of the grid (x fastest; each rank must get `subdomains` cells). Zeros: partition by prime
  // factors, nodes then GPUs, so that the surface sent is smallest (dissertation §4.3).
  Index3 grid{0, 0, 0};
  std::array<std::vector<i64>, 3> cuts;
  std::vector<int> owner;
  Placement placement = Placement::node_aware;
  std::uint64_t seed = 1;
  // The halo the placement weighs communication by (bytes between neighbours) before fields exist.
  Widths halo_hint = Widths::uniform(1);
};

// Where one exchange's halo points go under a placement (the default partition's, weighed with
// DomainOptions::halo_hint; per byte of element): inside one GPU (or, for host memory, one
// process), between nodes, and between the GPUs of a node per class of link bandwidth (GB/s from
// the transport's matrix, FERRY_BANDWIDTH; 0 where every link is alike).
struct PlacementReport {
  i64 same_gpu = 0;
  i64 inter_node = 0;
  std::vector<std::pair<double, i64>> links;
};

struct Subdomain {
  int id = 0;         // cell of the subdomain grid, x fastest
  Index3 coord{};     // position in the subdomain grid
  Index3 offset{};    // global index of local point (0, 0, 0)
  Index3 extent{};    // interior points per axis
  int device = -1;    // GPU ordinal, -1 for host memory
};

class Domain {
 public:
  // Collective over `comm` (which is duplicated). Errors: a global extent < 1, a grid that does not
  // multiply to the number of subdomains or is finer than the grid points, bad cuts or owners,
  // arguments that differ between ranks -> MPI_ERR_ARG.
  static Domain create(MPI_Comm comm, Index3 global, const DomainOptions& options = {});
  const std::vector<Subdomain>& local() const;  // this rank's subdomains
  Index3 global() const;
  Index3 grid() const;                           // subdomains per axis
  std::array<bool, 3> periodic() const;
  Subdomain at(Index3 coord) const;             // any cell of the grid
  int owner(int id) const;                       // rank of a cell
  std::string describe() const;                  // partition and placement, for people
  PlacementReport placement_report() const;

  struct Impl;
  std::shared_ptr<const Impl> shared() const { return impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

// How one neighbour pair's data travels (dissertation §4.5, Table 4.1).
enum class Method : std::uint8_t {
  local,      // same GPU (or host): one copy from the source interior to the destination halo
  peer,       // same process, other GPU: through the peer; forceable on one GPU for testing
  ipc,        // other process on the node: put into the neighbour's memory + two-way flags
  staged,     // through host memory and MPI
  pipelined,  // staged in chunks that overlap the copy to the host with MPI
  mpi,        // the device buffer handed to a CUDA-aware MPI (unmeasured on the lent machines)
};
constexpr int kMethods = 6;
const char* name(Method m);
std::optional<Method> method_named(const std::string& s);

struct Options {
  // Use this method wherever it can apply (benchmarks); elsewhere, and when unset, Ferry's measured
  // model picks. local is always possible within a process, ipc within a node; peer, staged,
  // pipelined and mpi anywhere.
  std::optional<Method> method;
  bool graphs = true;         // GPU: capture the GPU-only part once, replay it each exchange
  bool fused = true;          // one pack and one unpack launch per GPU; false: one per region
  // GPU: a stream of the highest priority per GPU, handed the work by events (§4.5.5); false, with
  // one GPU: the exchange runs on the caller's stream itself (two fewer calls each way).
  bool priority_stream = true;
  i64 split_bytes = 0;        // MPI messages above this go in parts of at most this (0: whole)
  bool progress_thread = false;  // progress MPI messages between start and finish from a thread
};

struct MethodStats {
  i64 messages = 0;  // messages (MPI or IPC puts) or copies per exchange, sent by this rank
  i64 bytes = 0;     // bytes sent per exchange
  i64 regions = 0;   // (field, direction, pair) regions
};
struct Stats {
  std::array<MethodStats, kMethods> sent{};
  std::array<MethodStats, kMethods> received{};
  int neighbour_ranks = 0;
  int pack_launches = 0;    // per exchange, GPU backend
  int unpack_launches = 0;
};

// A box of points in a subdomain's local coordinates.
struct Box {
  Index3 lo{};
  Index3 extent{};
  i64 points() const { return extent[0] * extent[1] * extent[2]; }
};

struct VerifyResult {
  i64 cells_checked = 0;  // over all ranks
  i64 bad_cells = 0;      // over all ranks
  std::string first_errors;  // up to a few, from the lowest rank with errors
  bool ok() const { return bad_cells == 0; }
};

// Threads: MPI is called from the thread that calls start/finish/test (MPI_THREAD_FUNNELED from
// the main thread, SERIALIZED otherwise; Options::progress_thread needs MULTIPLE). Every rank calls
// the exchanges and swap() the same number of times. Destroying a plan is collective over the ranks
// of a node (the host backend frees a shared window); one with an exchange in flight finishes it.
// Costs: plan() a few collectives and, on the GPU, buffer allocation, IPC handshakes and graph
// capture; start() a few CUDA calls (or the host packing), no allocation, no host wait on the GPU.
class Plan {
 public:
  Plan();
  ~Plan();
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;

  // Fills every halo region that has a neighbour; blocking (start + finish on the null stream).
  void exchange();
  // Starts the exchange, ordered after the work already on `stream` (GPU fields): returns without
  // waiting for the GPU. Host fields: packs and posts every message (stream ignored).
  void start(gpu::Stream stream = nullptr);
  // Completes it: work queued on `stream` after this call sees every halo filled. Returns once the
  // messages from other nodes (staged, MPI) have arrived; GPU-only parts are not waited for.
  void finish(gpu::Stream stream = nullptr);
  // Progresses messages between start and finish; true when finish will not wait for the network.
  bool test();
  // Flips every field to its other array (data <-> data_next). Every rank must swap alike.
  void swap();

  // Points whose stencil reads no halo (computable while the halo moves), and the rest of the
  // interior as at most 6 disjoint boxes (compute them after finish()).
  Box interior(int subdomain) const;
  std::vector<Box> exterior(int subdomain) const;

  Stats stats() const;
  std::string describe() const;  // methods, bytes and messages per method, for people
  // Collective. Fills every field with known values, exchanges, checks every halo cell (and that
  // nothing else changed), restores the fields. Throws nothing for bad cells: see the result.
  VerifyResult verify();

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit Plan(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend Plan plan(const Domain&, const std::vector<std::vector<Field>>&, const Options&);
};

// Collective over the domain's ranks. fields[s] are the fields of local subdomain s, the same
// number and kinds (element size, widths, axis order) on every subdomain of every rank. All fields
// of a plan are host memory, or all device memory.
Plan plan(const Domain& domain, const std::vector<std::vector<Field>>& fields,
          const Options& options = {});

template <class T>
Field dense_field(T* data, Index3 extent, const Widths& w, Order order, T* next, std::string name) {
  return dense_field_bytes(data, static_cast<i64>(sizeof(T)), extent, w, order, next,
                           std::move(name));
}

}  // namespace ferry::halo
