// place/cart.cpp — Cartesian process grids (MPI_Cart_create with reorder): the §4.3 blocks over an
// n-D grid of ranks instead of a graph partitioner, which on a regular grid can only do as well.
//
// A block shape b (b_i dividing dims_i, product = ranks per node) cuts, along dimension i, as many
// grid planes as there are block boundaries (dims_i / b_i - 1, one more across a periodic edge),
// each plane crossed by n / dims_i edges; the shape with the fewest cut edges wins, the GPU blocks
// inside it likewise (inter-node first). Such a shape always exists when the ranks per node divide
// n: each prime of the count can be taken from the dimensions that hold it.

#include <algorithm>
#include <map>
#include <numeric>

#include "place/detail.hpp"

namespace ferry::place {

using detail::bad;

namespace {

i64 check_dims(const std::vector<int>& dims, const std::vector<int>& periods) {
  if (dims.size() != periods.size()) bad("dims and periods differ in length");
  i64 n = 1;
  for (int d : dims) {
    if (d < 1) bad("process grid dimension " + std::to_string(d) + " < 1");
    n *= d;
    if (n > (i64{1} << 30)) bad("process grid too large");
  }
  return n;
}

// Row-major (last dimension fastest) index of coords over extents.
int row_major(const std::vector<int>& c, const std::vector<int>& ext) {
  int r = 0;
  for (std::size_t i = 0; i < c.size(); ++i) r = r * ext[i] + c[i];
  return r;
}

// Edges cut along each dimension by blocks of shape b: sum_i planes_i * n / dims_i.
i64 cut_edges(const std::vector<int>& dims, const std::vector<int>& periods,
              const std::vector<int>& b, i64 n) {
  i64 cut = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int blocks = dims[i] / b[i];
    const i64 planes = blocks - 1 + (periods[i] && blocks > 1 ? 1 : 0);
    cut += planes * (n / dims[i]);
  }
  return cut;
}

// Every shape s with s_i dividing within[i] and product `count`.
void shapes(const std::vector<int>& within, int count, std::vector<int>& cur,
            std::vector<std::vector<int>>& out) {
  const std::size_t i = cur.size();
  if (i == within.size()) {
    if (count == 1) out.push_back(cur);
    return;
  }
  for (int d : detail::divisors(within[i])) {
    if (count % d != 0) continue;
    cur.push_back(d);
    shapes(within, count / d, cur, out);
    cur.pop_back();
  }
}

}  // namespace

Graph cart_graph(const std::vector<int>& dims, const std::vector<int>& periods) {
  const int n = static_cast<int>(check_dims(dims, periods));
  const int nd = static_cast<int>(dims.size());
  std::vector<Flow> flows;
  std::vector<int> c(nd, 0);
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < nd; ++i) {
      std::vector<int> nb = c;
      if (++nb[i] == dims[i]) {
        if (!periods[i]) continue;
        nb[i] = 0;
      }
      const int s = row_major(nb, dims);
      if (s != r) flows.push_back({r, s, 1});
    }
    for (int i = nd - 1; i >= 0; --i) {  // next coordinates, last dimension fastest
      if (++c[i] < dims[i]) break;
      c[i] = 0;
    }
  }
  return graph_from_flows(n, flows);
}

CartBlocks cart_blocks(const std::vector<int>& dims, const std::vector<int>& periods, int nodes,
                       int gpus_per_node) {
  const i64 n = check_dims(dims, periods);
  if (nodes < 1 || gpus_per_node < 1) bad("node and GPU counts must be >= 1");
  if (n % nodes != 0 || (n / nodes) % gpus_per_node != 0)
    bad(std::to_string(nodes) + " nodes x " + std::to_string(gpus_per_node) +
        " GPUs do not divide " + std::to_string(n) + " ranks evenly");
  const int per_node = static_cast<int>(n / nodes), per_gpu = per_node / gpus_per_node;
  std::vector<std::vector<int>> node_shapes;
  std::vector<int> cur;
  shapes(dims, per_node, cur, node_shapes);
  // Lexicographic: node cut, GPU cut, then larger blocks along the last dimensions (consecutive
  // ranks together, as MPI numbers them).
  std::vector<i64> best_key;
  CartBlocks cb;
  for (const auto& b : node_shapes) {
    std::vector<std::vector<int>> gpu_shapes;
    shapes(b, per_gpu, cur, gpu_shapes);
    const i64 node_cut = cut_edges(dims, periods, b, n);
    for (const auto& c : gpu_shapes) {
      // Edges between GPU blocks of one node: all cut by c minus those cut by b.
      const i64 gpu_cut = cut_edges(dims, periods, c, n) - node_cut;
      std::vector<i64> key{node_cut, gpu_cut};
      for (std::size_t i = dims.size(); i-- > 0;) key.push_back(-b[i]);
      for (std::size_t i = dims.size(); i-- > 0;) key.push_back(-c[i]);
      if (best_key.empty() || key < best_key) best_key = key, cb.node_block = b, cb.gpu_block = c;
    }
  }
  const std::size_t nd = dims.size();
  std::vector<int> node_grid(nd), gpu_grid(nd);
  for (std::size_t i = 0; i < nd; ++i) {
    node_grid[i] = dims[i] / cb.node_block[i];
    gpu_grid[i] = cb.node_block[i] / cb.gpu_block[i];
  }
  cb.node.resize(n);
  cb.gpu.resize(n);
  cb.sub.resize(n);
  std::vector<int> c(nd, 0), nc(nd), gc(nd), sc(nd);
  for (i64 r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < nd; ++i) {
      nc[i] = c[i] / cb.node_block[i];
      gc[i] = (c[i] % cb.node_block[i]) / cb.gpu_block[i];
      sc[i] = c[i] % cb.gpu_block[i];
    }
    cb.node[r] = row_major(nc, node_grid);
    cb.gpu[r] = row_major(gc, gpu_grid);
    cb.sub[r] = row_major(sc, cb.gpu_block);
    for (std::size_t i = nd; i-- > 0;) {
      if (++c[i] < dims[i]) break;
      c[i] = 0;
    }
  }
  return cb;
}

Reordering reorder_cart(const std::vector<int>& dims, const std::vector<int>& periods,
                        const std::vector<Slot>& slots, const Matrix& gpu_cost,
                        const ReorderOptions& o) {
  const Graph g = cart_graph(dims, periods);
  const int n = g.vertices();
  if (static_cast<int>(slots.size()) != n)
    bad(std::to_string(slots.size()) + " slots for a process grid of " + std::to_string(n) +
        " ranks");
  const detail::Nodes nodes = detail::group_nodes(slots, gpu_cost);
  // Uniform: every node the same rank count, the same number of GPUs (when GPUs matter) and every
  // GPU the same number of ranks. Otherwise the graph path.
  const int k = static_cast<int>(nodes.slots.size());
  const int per_node = static_cast<int>(nodes.slots[0].size());
  std::vector<std::vector<int>> gpus(k);  // GPU ids per node, ascending
  bool uniform = true;
  int G = 1;
  for (int j = 0; j < k && uniform; ++j) {
    std::map<int, int> count;
    for (int s : nodes.slots[j]) ++count[slots[s].gpu];
    for (const auto& [gpu, c] : count) gpus[j].push_back(gpu);
    if (gpu_cost.empty()) gpus[j].assign(1, -1);
    if (j == 0) G = static_cast<int>(gpus[j].size());
    uniform = static_cast<int>(nodes.slots[j].size()) == per_node &&
              static_cast<int>(gpus[j].size()) == G;
    for (const auto& [gpu, c] : count) uniform = uniform && (gpu_cost.empty() || c * G == per_node);
  }
  if (!uniform) return reorder(g, slots, gpu_cost, o);

  const CartBlocks cb = cart_blocks(dims, periods, k, G);
  const std::vector<int> node_of_part = detail::match_parts(cb.node, nodes);
  std::vector<int> node_of(n), gpu_of(n, -1);
  for (int v = 0; v < n; ++v) node_of[v] = node_of_part[cb.node[v]];
  if (G > 1) {
    // Flows between the GPU blocks of a node block: the same for every node block.
    Matrix flow(G);
    for (int v = 0; v < n; ++v)
      for (i64 e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
        const int u = g.adjncy[e];
        if (cb.node[u] == cb.node[v])
          flow(cb.gpu[v], cb.gpu[u]) += static_cast<double>(g.weight[e]);
      }
    std::vector<int> identity(G);
    std::iota(identity.begin(), identity.end(), 0);
    std::vector<std::vector<int>> block_gpu(k);
    for (int j = 0; j < k; ++j) {
      Matrix dist(G);
      for (int a = 0; a < G; ++a)
        for (int b = 0; b < G; ++b) dist(a, b) = gpu_cost(gpus[j][a], gpus[j][b]);
      QapOptions qo = o.qap;
      qo.seed = o.qap.seed + static_cast<std::uint64_t>(j);
      block_gpu[j] = solve_qap(flow, dist, qo, &identity).assignment;
    }
    for (int v = 0; v < n; ++v) gpu_of[v] = gpus[node_of[v]][block_gpu[node_of[v]][cb.gpu[v]]];
  }
  return detail::finish(detail::to_wgraph(g), detail::fill_slots(node_of, gpu_of, nodes, slots),
                        nodes, slots, gpu_cost, "cartesian");
}

}  // namespace ferry::place
