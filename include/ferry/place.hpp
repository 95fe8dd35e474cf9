// ferry/place.hpp — where data and ranks go: the partition of a 3-D grid into subdomains
// (dissertation §4.3), the placement of subdomains on the GPUs of a node as a quadratic assignment
// problem (§4.4), and the partition of a weighted graph into parts of exact sizes with per-node
// placement, for rank reordering (§5.7). The halo library and the interposer's reordering share it.
//
// Everything here is a pure function of its arguments: no MPI, no GPU, no environment, no global
// state; results depend only on the inputs and the seed. Bad input (negative or zero sizes, grids
// that cannot be split, matrices of the wrong size, asymmetric graphs, sizes that do not add up) is
// a ferry::Error with MPI_ERR_ARG (MPI_ERR_DIMS for an impossible process grid,
// MPI_ERR_UNSUPPORTED_OPERATION for METIS in a build without it); nothing here crashes on it.
//
// Conventions. Axis 0 is x, the fastest in memory. A linear index over a 3-D grid runs x fastest.
// Costs are non-negative doubles: a GPU cost matrix holds seconds per byte (1 / bandwidth) between
// two GPUs of a node, its diagonal the cost inside one GPU. Bytes are i64.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::place {

using i64 = std::int64_t;
using Int3 = std::array<int, 3>;
using Ext3 = std::array<i64, 3>;

// ---- directions --------------------------------------------------------------------------------

// The 26 neighbour directions, components in {-1, 0, 1}, indexed k = 0..25 in x-fastest order with
// (0,0,0) left out: k = 0 is (-1,-1,-1), k = 12 is (-1,0,0), k = 13 is (1,0,0), k = 25 is (1,1,1).
constexpr int kDirections = 26;
Int3 direction(int k);               // MPI_ERR_ARG unless 0 <= k < 26
int direction_index(const Int3& d);  // -1 for (0,0,0) or components outside {-1,0,1}

// ---- halo description (what a subdomain receives) ----------------------------------------------

// Halo widths: minus[a] cells on the low side of axis a, plus[a] on the high side, and which of the
// 26 directions are exchanged (a star stencil sends faces only). The region received from
// direction d by a subdomain of extent e has, along each axis a, e[a] cells where d[a] == 0 and
// the width of that side where d[a] != 0 (so an edge region is w_x × w_y × e_z cells).
struct Halo {
  Ext3 minus{1, 1, 1};
  Ext3 plus{1, 1, 1};
  std::array<bool, kDirections> exchange{};  // all true by default (box stencil)

  Halo();
  static Halo box(i64 width);   // all 26 directions
  static Halo star(i64 width);  // the 6 faces only
  // Cells received from direction k by a subdomain of `extent` (0 if that direction is off).
  i64 cells(int k, const Ext3& extent) const;
  void check() const;  // MPI_ERR_ARG on negative widths
};

// ---- §4.3: grid partition ----------------------------------------------------------------------

// How many pieces at each level: nodes, GPUs per node, subdomains per GPU.
struct Shape {
  int nodes = 1;
  int gpus_per_node = 1;
  int subdomains_per_gpu = 1;
};

// A decomposition the user fixes, in whole or in part: a 0 entry is chosen by partition_grid (as in
// MPI_Dims_create), a non-zero one is kept. nodes[a] * gpus[a] * subdomains[a] pieces along axis a.
struct GridOptions {
  Int3 nodes{0, 0, 0};
  Int3 gpus{0, 0, 0};
  Int3 subdomains{0, 0, 0};
};

struct Box {
  Ext3 origin{0, 0, 0};
  Ext3 extent{0, 0, 0};
  i64 volume() const { return extent[0] * extent[1] * extent[2]; }
};

struct Subdomain {
  Box box;
  Int3 coords{0, 0, 0};  // in the global subdomain grid
  int node = 0;          // node block, linear over the node grid
  int gpu = 0;           // GPU block inside its node, linear over the GPU grid (before placement)
  int sub = 0;           // subdomain on its GPU, linear over the subdomain grid
};

// Halo cells of a partition by where their source is, seen from the receiver: another node, another
// GPU block of the same node, the same GPU block (another subdomain, or itself across a periodic
// boundary of one piece). Each class excludes the others.
struct Surface {
  i64 inter_node = 0;
  i64 inter_gpu = 0;
  i64 same_gpu = 0;
  i64 total() const { return inter_node + inter_gpu + same_gpu; }
};

class Partition {
 public:
  Ext3 extent{0, 0, 0};
  std::array<bool, 3> periodic{false, false, false};
  Int3 node_grid{1, 1, 1};
  Int3 gpu_grid{1, 1, 1};
  Int3 sub_grid{1, 1, 1};
  // Ordered by id = (node * gpus_per_node + gpu) * subdomains_per_gpu + sub: the subdomains of
  // one node are consecutive, and so are those of one GPU.
  std::vector<Subdomain> subdomains;

  Int3 grid() const;  // subdomains per axis: node_grid * gpu_grid * sub_grid
  int size() const { return static_cast<int>(subdomains.size()); }
  int nodes() const { return node_grid[0] * node_grid[1] * node_grid[2]; }
  int gpus_per_node() const { return gpu_grid[0] * gpu_grid[1] * gpu_grid[2]; }
  int subdomains_per_gpu() const { return sub_grid[0] * sub_grid[1] * sub_grid[2]; }
  // The id of the subdomain at global grid coordinates (MPI_ERR_ARG outside the grid). O(1).
  int id(const Int3& coords) const;
  // The neighbour of subdomain `id` in direction d (components in {-1,0,1}), across periodic
  // boundaries; -1 where there is none (a non-periodic edge of the domain). Periodic axes of one
  // piece make a subdomain its own neighbour. O(1).
  int neighbour(int id, const Int3& d) const;
};

// Splits `extent` into shape.nodes node blocks, each into gpus_per_node GPU blocks, each into
// subdomains_per_gpu subdomains, as a grid at each level. The grids are chosen by enumerating the
// ordered factorizations (by prime factors) of each level's count over the three axes and taking,
// lexicographically, the least inter-node halo volume, then inter-GPU, then same-GPU (§4.3 splits
// greedily by the largest prime factor along the longest axis; the exhaustive search finds the
// minimum that greedy misses on uneven shapes). Preferred first: subdomains at least as wide as the
// halo; among equal costs, more pieces along z, then y (their faces are contiguous in memory).
// Uneven sizes are balanced at each level: pieces of one level differ by at most one cell per axis
// (so do the subdomains overall). Errors: MPI_ERR_ARG for extents or counts < 1, or more pieces
// along an axis than cells; MPI_ERR_DIMS when no grid matches fixed entries of `options`.
// Cost: O(T(N) T(P) T(S)) cost evaluations of O(1), T(n) the number of ordered 3-factorizations
// of n (66 for 1024), plus O(subdomains) to build the result.
Partition partition_grid(const Ext3& extent, const std::array<bool, 3>& periodic,
                         const Shape& shape, const Halo& halo, const GridOptions& options = {});
// The halo volume of a partition, by class, in cells (closed form, O(1)).
Surface surface(const Partition& p, const Halo& halo);

// ---- flows, cost matrices and the QAP (§4.4) ---------------------------------------------------

// `bytes` moved from subdomain (or vertex) src to dst.
struct Flow {
  int src = 0;
  int dst = 0;
  i64 bytes = 0;
};
// Bytes each subdomain receives from each neighbour in one exchange: `bytes_per_cell` (the sum of
// the fields' element sizes) times the halo cells, summed per (src, dst) pair; self flows (periodic
// wrap of one piece) included. O(26 * subdomains).
std::vector<Flow> halo_flows(const Partition& p, const Halo& halo, i64 bytes_per_cell);

// A dense square matrix, row-major.
struct Matrix {
  int n = 0;
  std::vector<double> a;
  Matrix() = default;
  explicit Matrix(int size, double fill = 0.0);
  double& operator()(int i, int j) { return a[static_cast<std::size_t>(i) * n + j]; }
  double operator()(int i, int j) const { return a[static_cast<std::size_t>(i) * n + j]; }
  bool empty() const { return n == 0; }
};
// Costs from bandwidths: 1 / b[i][j] (MPI_ERR_ARG for b <= 0 off the diagonal; a diagonal entry
// <= 0 means free: cost 0).
Matrix cost_from_bandwidth(const Matrix& bandwidth);

enum class QapMethod { automatic, exact, heuristic };
struct QapOptions {
  QapMethod method = QapMethod::automatic;
  int exact_max = 8;  // automatic: exact up to this many facilities, the heuristic above
  int restarts = 16;  // heuristic: local searches after the greedy one (kicks and random starts)
  std::uint64_t seed = 1;
  // Optional classes: facility i may only go to a location of the same class (both empty, or
  // sized n and m). Used to keep groups on GPUs with as many slots as the group has members.
  std::vector<int> facility_class;
  std::vector<int> location_class;
};
struct QapResult {
  std::vector<int> assignment;  // facility i -> location assignment[i], distinct
  double cost = 0;
  bool exact = false;  // proven optimal
};
// sum over i, j of flow(i,j) * dist(assignment[i], assignment[j]).
double qap_cost(const Matrix& flow, const Matrix& dist, const std::vector<int>& assignment);
// Assigns the n facilities of `flow` to n distinct of the m >= n locations of `dist`, minimizing
// qap_cost. Exact (m <= 8): every assignment in turn (Heap's algorithm, O(m! n): about 3 ms for 8
// on this project's CI VM) where no two locations are interchangeable; where some are (twins: a
// Summit node's triples, an NVSwitch node), a depth-first search that tries one location per twin
// class and prunes by the cost so far (microseconds). Exact beyond 8 (QapMethod::exact): branch and
// bound with a Gilmore-Lawler-style bound, exponential in the worst case. Heuristic: greedy
// construction (heaviest facility on the most central location, then the facility with most flow to
// those placed on its cheapest free location), then best-improvement pairwise swaps (and moves to
// free locations) to a local optimum, iterated `restarts` times from kicks (a few random swaps) of
// the best so far and from random starts; O(restarts * passes * n^3). `start`, if given, is kept
// unless something strictly cheaper is found (an assignment that is already optimal stays as it
// is), and the exact search is seeded with the heuristic's result. Errors: MPI_ERR_ARG for n > m,
// negative or non-finite entries, a start or classes that are not valid, or classes no assignment
// satisfies.
QapResult solve_qap(const Matrix& flow, const Matrix& dist, const QapOptions& options = {},
                    const std::vector<int>* start = nullptr);

// ---- placement of a grid partition -------------------------------------------------------------

struct Machine {
  int nodes = 1;
  int gpus_per_node = 1;
  Matrix gpu_cost;  // gpus_per_node square, or empty (all links alike)
};

// How subdomains get a (node, GPU), after the dissertation's fig. 4.11:
//   trivial     subdomains in global linear order (x fastest) fill node 0's GPUs, then node 1's:
//               no node blocks (the dissertation's baseline);
//   random      the same over a random permutation (seeded): a scrambled layout;
//   node_aware  the partition's node blocks and GPU blocks as they are ("intra-node" without QAP);
//   qap         node blocks, and per node the GPU blocks placed on GPUs by solve_qap with the bytes
//               between blocks as flow and gpu_cost as distance ("optimized").
enum class Strategy { trivial, random, node_aware, qap };
struct PlaceOptions {
  Strategy strategy = Strategy::qap;
  std::uint64_t seed = 1;
  QapOptions qap;
};
struct Placement {
  std::vector<int> node;  // per subdomain id
  std::vector<int> gpu;   // physical GPU index in its node
};
// Errors: MPI_ERR_ARG when the machine's nodes or GPUs do not match the partition's, or its cost
// matrix has the wrong size. Cost: O(subdomains) plus one QAP of gpus_per_node per node.
Placement place(const Partition& p, const Halo& halo, i64 bytes_per_cell, const Machine& machine,
                const PlaceOptions& options = {});

// Bytes of `flows` by the link they cross under a placement: inside one GPU, between two nodes,
// and between two GPUs of a node grouped by the cost of their link (ascending; equal costs are one
// class, so on a Summit-like node the last class is the slow X-bus). `cost` is the sum of bytes ×
// link cost over the intra-node links. O(flows).
struct LinkClass {
  double cost = 0;
  i64 bytes = 0;
};
struct Traffic {
  i64 same_gpu = 0;
  i64 inter_node = 0;
  std::vector<LinkClass> intra_node;
  double cost = 0;
};
Traffic traffic(const std::vector<Flow>& flows, const std::vector<int>& node,
                const std::vector<int>& gpu, const Matrix& gpu_cost);

// ---- graphs: partition into exact sizes, rank reordering (§5.7) ---------------------------------

// An undirected weighted graph in CSR form: the neighbours of v are adjncy[xadj[v] .. xadj[v+1]),
// with weights `weight` (empty: all 1). Symmetric: every (u, v, w) has its (v, u, w). Self loops
// are allowed and ignored.
struct Graph {
  std::vector<i64> xadj{0};
  std::vector<int> adjncy;
  std::vector<i64> weight;
  int vertices() const { return static_cast<int>(xadj.size()) - 1; }
};
// The undirected graph of directed flows: w(u, v) = bytes u -> v plus bytes v -> u, duplicates
// summed, self flows dropped. MPI_ERR_ARG for vertices outside [0, n) or negative bytes.
Graph graph_from_flows(int n, const std::vector<Flow>& flows);
// MPI_ERR_ARG unless g is well-formed and symmetric (weights of (u,v) and (v,u) equal, duplicates
// summed). O(E log E).
void check_graph(const Graph& g);
// Sum of the weights of edges whose ends are in different parts, each undirected edge once.
i64 edge_cut(const Graph& g, const std::vector<int>& part);

enum class Partitioner { automatic, metis, builtin };
// Whether this build has METIS (FERRY_METIS at configure time).
bool metis_available();
const char* name(Partitioner p);

struct GraphOptions {
  Partitioner partitioner = Partitioner::automatic;  // automatic: METIS where built, else builtin
  std::uint64_t seed = 1;
};
struct GraphPartition {
  std::vector<int> part;  // per vertex, in [0, sizes.size())
  i64 cut = 0;
  Partitioner used = Partitioner::builtin;
};
// Splits g into k = sizes.size() parts, part i of exactly sizes[i] vertices, minimizing the edge
// cut. METIS (its recursive bisection, 0.1 % imbalance) or the built-in multilevel recursive
// bisection (heavy-edge matching, greedy graph growing, Fiduccia-Mattheyses refinement), then in
// both cases a rebalancing to the exact sizes (moves of least cut increase) and a size-preserving
// refinement by pairwise swaps between parts. Errors: MPI_ERR_ARG for a bad graph, sizes < 1,
// k > n, sizes not summing to n; MPI_ERR_UNSUPPORTED_OPERATION for metis in a build without it.
// Cost: O(E log V) per level of bisection, log2 k levels; bench_place measures 3,072 vertices of
// degree 26 into 512 parts.
GraphPartition partition_graph(const Graph& g, const std::vector<int>& sizes,
                               const GraphOptions& options = {});

// Where an old rank runs: its node and its GPU (an index into the GPU cost matrix).
struct Slot {
  int node = 0;
  int gpu = 0;
};
struct ReorderOptions {
  GraphOptions graph;
  QapOptions qap;
};
// The result of reordering. Vertex i of the graph is the role of new rank i (the application
// places its data by rank); the process that was old rank old_of_new[i] becomes new rank i, and
// new_of_old is the inverse. Costs are given for the identity (before) and the result (after): the
// edge weight between nodes, and the sum over nodes of the intra-node QAP cost (weight × gpu_cost).
struct Reordering {
  std::vector<int> old_of_new;
  std::vector<int> new_of_old;
  i64 cut_before = 0;
  i64 cut_after = 0;
  double gpu_cost_before = 0;
  double gpu_cost_after = 0;
  std::string method;  // "metis", "builtin", "cartesian", or "identity" (nothing better found)
};
// Reorders the ranks of `slots` (one per old rank, size = vertices) for graph g: g is partitioned
// into one part per node of exactly that node's rank count; parts go to the nodes they overlap most
// with; inside a node, ranks are grouped by GPU (partition_graph again, when a GPU holds several)
// and the groups placed on GPUs by solve_qap with gpu_cost. Never worse than the identity: when the
// result is not better (inter-node cut, then GPU cost), the identity is returned. Errors as
// partition_graph, and MPI_ERR_ARG for slots of the wrong size or GPUs outside gpu_cost.
Reordering reorder(const Graph& g, const std::vector<Slot>& slots, const Matrix& gpu_cost,
                   const ReorderOptions& options = {});

// ---- Cartesian process grids (MPI_Cart_create with reorder) -------------------------------------

// The face-neighbour graph of an n-D process grid, ranks row-major (the last dimension fastest, as
// MPI_Cart_rank), weight 1 per neighbour pair and direction (a periodic dimension of 2 gives the
// pair weight 2). MPI_ERR_ARG for dims < 1 or sizes that differ.
Graph cart_graph(const std::vector<int>& dims, const std::vector<int>& periods);
// The §4.3 blocks of a process grid: node blocks of shape node_block (dividing dims), each split
// into gpus_per_node GPU blocks of shape gpu_block, each block shape chosen to cut the fewest grid
// edges (inter-node first). Per rank (row-major): node, gpu block in the node, and index in its GPU
// block. MPI_ERR_ARG unless nodes * gpus_per_node divides the number of ranks.
struct CartBlocks {
  std::vector<int> node_block;
  std::vector<int> gpu_block;
  std::vector<int> node;
  std::vector<int> gpu;
  std::vector<int> sub;
};
CartBlocks cart_blocks(const std::vector<int>& dims, const std::vector<int>& periods, int nodes,
                       int gpus_per_node);
// reorder() for a Cartesian grid: where every node has the same rank count and every GPU in use the
// same count, the cart_blocks() layout with its GPU blocks placed by solve_qap ("cartesian");
// otherwise reorder() on cart_graph(). Same result conventions and errors as reorder().
Reordering reorder_cart(const std::vector<int>& dims, const std::vector<int>& periods,
                        const std::vector<Slot>& slots, const Matrix& gpu_cost,
                        const ReorderOptions& options = {});

}  // namespace ferry::place
