// place/grid.cpp — the hierarchical grid partition of dissertation §4.3: node blocks, GPU blocks,
// subdomains, each level a grid chosen among the factorizations of its count.
//
// The cost of a candidate is the halo volume by class (inter-node, inter-GPU, same GPU) in closed
// form: the subdomains are a Cartesian product of per-axis pieces, so the volume received from
// direction d, summed over all subdomains, is a product over axes of per-axis sums — the total
// extent L_a where d_a == 0, width × (number of pieces that have a neighbour on that side, and for
// a class, in the same block) where d_a != 0. Uneven splits do not change these sums, so the cost
// is exact for any extent, and O(26) per candidate.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <tuple>

#include "place/detail.hpp"
#include "sys/error.hpp"

namespace ferry::place {

namespace detail {

void bad(const std::string& what) {
  ferry::detail::fail(MPI_ERR_ARG, "ferry::place: " + what);
}

std::vector<int> divisors(int n) {
  if (n < 1) bad("divisors of a count < 1");
  std::vector<int> d{1};
  int m = n;
  for (int p = 2; static_cast<i64>(p) * p <= m; ++p) {
    if (m % p != 0) continue;
    const std::size_t before = d.size();
    i64 pk = 1;
    while (m % p == 0) {
      m /= p;
      pk *= p;
      for (std::size_t i = 0; i < before; ++i) d.push_back(static_cast<int>(d[i] * pk));
    }
  }
  if (m > 1) {
    const std::size_t before = d.size();
    for (std::size_t i = 0; i < before; ++i) d.push_back(d[i] * m);
  }
  std::sort(d.begin(), d.end());
  return d;
}

}  // namespace detail

using detail::bad;

Int3 direction(int k) {
  if (k < 0 || k >= kDirections) bad("direction index " + std::to_string(k) + " outside 0..25");
  const int j = k < 13 ? k : k + 1;  // skip the centre, (0,0,0) = 13
  return {j % 3 - 1, (j / 3) % 3 - 1, j / 9 - 1};
}

int direction_index(const Int3& d) {
  for (int c : d)
    if (c < -1 || c > 1) return -1;
  const int j = (d[0] + 1) + 3 * (d[1] + 1) + 9 * (d[2] + 1);
  if (j == 13) return -1;
  return j < 13 ? j : j - 1;
}

Halo::Halo() {
  exchange.fill(true);
}

Halo Halo::box(i64 width) {
  Halo h;
  h.minus = h.plus = {width, width, width};
  return h;
}

Halo Halo::star(i64 width) {
  Halo h = box(width);
  for (int k = 0; k < kDirections; ++k) {
    const Int3 d = direction(k);
    h.exchange[k] = std::abs(d[0]) + std::abs(d[1]) + std::abs(d[2]) == 1;
  }
  return h;
}

void Halo::check() const {
  for (int a = 0; a < 3; ++a)
    if (minus[a] < 0 || plus[a] < 0) bad("negative halo width on axis " + std::to_string(a));
}

i64 Halo::cells(int k, const Ext3& extent) const {
  if (!exchange[k]) return 0;
  const Int3 d = direction(k);
  i64 c = 1;
  for (int a = 0; a < 3; ++a) {
    const i64 f = d[a] == 0 ? extent[a] : d[a] < 0 ? minus[a] : plus[a];
    c = ferry::detail::checked_mul(c, f, MPI_ERR_ARG, "ferry::place: halo cells");
  }
  return c;
}

namespace {

struct Grids {
  Int3 node, gpu, sub;
};

// Per axis, per side of a direction component: how many pieces have a neighbour there, in total
// and inside the same node block / GPU block.
struct AxisCounts {
  i64 exist, same_node, same_gpu;
};

AxisCounts axis_counts(int n, int g, int s, bool periodic) {
  const i64 pieces = i64{n} * g * s;
  const i64 wrap = periodic ? 1 : 0;
  auto same = [&](i64 group) {
    const i64 blocks = pieces / group;
    return pieces - blocks + (periodic && blocks == 1 ? 1 : 0);
  };
  return {pieces - 1 + wrap, same(i64{g} * s), same(s)};
}

Surface closed_form(const Ext3& extent, const std::array<bool, 3>& periodic, const Grids& gr,
                    const Halo& halo) {
  AxisCounts ax[3];
  for (int a = 0; a < 3; ++a) ax[a] = axis_counts(gr.node[a], gr.gpu[a], gr.sub[a], periodic[a]);
  const char* what = "ferry::place: halo volume";
  auto mul = [&](i64 x, i64 y) { return ferry::detail::checked_mul(x, y, MPI_ERR_ARG, what); };
  auto add = [&](i64 x, i64 y) { return ferry::detail::checked_add(x, y, MPI_ERR_ARG, what); };
  Surface s;
  for (int k = 0; k < kDirections; ++k) {
    if (!halo.exchange[k]) continue;
    const Int3 d = direction(k);
    i64 all = 1, node = 1, gpu = 1;
    for (int a = 0; a < 3; ++a) {
      if (d[a] == 0) {
        all = mul(all, extent[a]);
        node = mul(node, extent[a]);
        gpu = mul(gpu, extent[a]);
      } else {
        const i64 w = d[a] < 0 ? halo.minus[a] : halo.plus[a];
        all = mul(all, mul(w, ax[a].exist));
        node = mul(node, mul(w, ax[a].same_node));
        gpu = mul(gpu, mul(w, ax[a].same_gpu));
      }
    }
    s.inter_node = add(s.inter_node, all - node);
    s.inter_gpu = add(s.inter_gpu, node - gpu);
    s.same_gpu = add(s.same_gpu, gpu);
  }
  return s;
}

// The ordered factorizations t of `count` with t[a] == fixed[a] wherever fixed[a] != 0.
std::vector<Int3> factorizations(int count, const Int3& fixed, const char* level) {
  if (count < 1) bad(std::string(level) + " count " + std::to_string(count) + " < 1");
  for (int a = 0; a < 3; ++a)
    if (fixed[a] < 0) bad(std::string(level) + " grid entry < 0");
  std::vector<Int3> out;
  for (int x : detail::divisors(count)) {
    if (fixed[0] && fixed[0] != x) continue;
    for (int y : detail::divisors(count / x)) {
      const int z = count / x / y;
      if ((fixed[1] && fixed[1] != y) || (fixed[2] && fixed[2] != z)) continue;
      out.push_back({x, y, z});
    }
  }
  if (out.empty())
    ferry::detail::fail(MPI_ERR_DIMS, std::string("ferry::place: no ") + level + " grid of " +
                                          std::to_string(count) + " matches the fixed entries");
  return out;
}

// Splits `length` cells into `pieces` whose sizes differ by at most one (the larger ones first).
void split(i64 origin, i64 length, int pieces, std::vector<i64>& o, std::vector<i64>& e) {
  const i64 base = length / pieces, extra = length % pieces;
  for (int i = 0; i < pieces; ++i) {
    const i64 len = base + (i < extra ? 1 : 0);
    o.push_back(origin);
    e.push_back(len);
    origin += len;
  }
}

int linear(const Int3& c, const Int3& g) {
  return c[0] + g[0] * (c[1] + g[1] * c[2]);
}
Int3 unlinear(int i, const Int3& g) {
  return {i % g[0], (i / g[0]) % g[1], i / (g[0] * g[1])};
}

}  // namespace

Int3 Partition::grid() const {
  Int3 g;
  for (int a = 0; a < 3; ++a) g[a] = node_grid[a] * gpu_grid[a] * sub_grid[a];
  return g;
}

int Partition::id(const Int3& c) const {
  const Int3 g = grid();
  for (int a = 0; a < 3; ++a)
    if (c[a] < 0 || c[a] >= g[a]) bad("subdomain coordinates outside the grid");
  Int3 nc, gc, sc;
  for (int a = 0; a < 3; ++a) {
    nc[a] = c[a] / (gpu_grid[a] * sub_grid[a]);
    gc[a] = (c[a] / sub_grid[a]) % gpu_grid[a];
    sc[a] = c[a] % sub_grid[a];
  }
  return (linear(nc, node_grid) * gpus_per_node() + linear(gc, gpu_grid)) * subdomains_per_gpu() +
         linear(sc, sub_grid);
}

int Partition::neighbour(int i, const Int3& d) const {
  if (i < 0 || i >= size()) bad("subdomain id " + std::to_string(i) + " outside the partition");
  if (direction_index(d) < 0) bad("neighbour direction components must be -1, 0 or 1, not all 0");
  const Int3 g = grid();
  Int3 c = subdomains[i].coords;
  for (int a = 0; a < 3; ++a) {
    c[a] += d[a];
    if (c[a] < 0 || c[a] >= g[a]) {
      if (!periodic[a]) return -1;
      c[a] = (c[a] + g[a]) % g[a];
    }
  }
  return id(c);
}

Surface surface(const Partition& p, const Halo& halo) {
  halo.check();
  return closed_form(p.extent, p.periodic, {p.node_grid, p.gpu_grid, p.sub_grid}, halo);
}

Partition partition_grid(const Ext3& extent, const std::array<bool, 3>& periodic,
                         const Shape& shape, const Halo& halo, const GridOptions& options) {
  halo.check();
  for (int a = 0; a < 3; ++a)
    if (extent[a] < 1)
      bad("extent " + std::to_string(extent[a]) + " < 1 on axis " + std::to_string(a));
  if (i64{shape.nodes} * shape.gpus_per_node * shape.subdomains_per_gpu > INT_MAX)
    bad("more than 2^31 - 1 subdomains");
  const auto nodes = factorizations(shape.nodes, options.nodes, "node");
  const auto gpus = factorizations(shape.gpus_per_node, options.gpus, "GPU");
  const auto subs = factorizations(shape.subdomains_per_gpu, options.subdomains, "subdomain");

  // Lexicographic: (halo wider than a piece?, inter-node, inter-GPU, same-GPU, then more pieces
  // along z and y at each level, outermost level first).
  using Key = std::tuple<bool, i64, i64, i64, int, int, int, int, int, int>;
  bool found = false;
  Key best{};
  Grids chosen{};
  for (const Int3& n : nodes)
    for (const Int3& g : gpus)
      for (const Int3& s : subs) {
        bool fits = true, narrow = false;
        for (int a = 0; a < 3; ++a) {
          const i64 pieces = i64{n[a]} * g[a] * s[a];
          if (pieces > extent[a]) fits = false;
          const bool has_neighbour = pieces > 1 || periodic[a];
          if (fits && has_neighbour && extent[a] / pieces < std::max(halo.minus[a], halo.plus[a]))
            narrow = true;
        }
        if (!fits) continue;
        const Surface c = closed_form(extent, periodic, {n, g, s}, halo);
        const Key key{narrow, c.inter_node, c.inter_gpu, c.same_gpu, -n[2],
                      -n[1],  -g[2],        -g[1],       -s[2],      -s[1]};
        if (!found || key < best) {
          found = true;
          best = key;
          chosen = {n, g, s};
        }
      }
  if (!found)
    bad("cannot split " + std::to_string(extent[0]) + "x" + std::to_string(extent[1]) + "x" +
        std::to_string(extent[2]) + " cells into " +
        std::to_string(i64{shape.nodes} * shape.gpus_per_node * shape.subdomains_per_gpu) +
        " pieces of at least one cell");

  Partition p;
  p.extent = extent;
  p.periodic = periodic;
  p.node_grid = chosen.node;
  p.gpu_grid = chosen.gpu;
  p.sub_grid = chosen.sub;
  // Per axis, the pieces' origins and extents, balanced level by level.
  std::vector<i64> org[3], ext[3];
  for (int a = 0; a < 3; ++a) {
    std::vector<i64> no, ne, go, ge;
    split(0, extent[a], p.node_grid[a], no, ne);
    for (std::size_t i = 0; i < no.size(); ++i) split(no[i], ne[i], p.gpu_grid[a], go, ge);
    for (std::size_t i = 0; i < go.size(); ++i) split(go[i], ge[i], p.sub_grid[a], org[a], ext[a]);
  }
  const int N = p.nodes(), P = p.gpus_per_node(), S = p.subdomains_per_gpu();
  p.subdomains.resize(static_cast<std::size_t>(N) * P * S);
  for (int node = 0; node < N; ++node)
    for (int gpu = 0; gpu < P; ++gpu)
      for (int sub = 0; sub < S; ++sub) {
        const Int3 nc = unlinear(node, p.node_grid), gc = unlinear(gpu, p.gpu_grid),
                   sc = unlinear(sub, p.sub_grid);
        Subdomain& sd = p.subdomains[(static_cast<std::size_t>(node) * P + gpu) * S + sub];
        sd.node = node;
        sd.gpu = gpu;
        sd.sub = sub;
        for (int a = 0; a < 3; ++a) {
          sd.coords[a] = (nc[a] * p.gpu_grid[a] + gc[a]) * p.sub_grid[a] + sc[a];
          sd.box.origin[a] = org[a][sd.coords[a]];
          sd.box.extent[a] = ext[a][sd.coords[a]];
        }
      }
  return p;
}

std::vector<Flow> halo_flows(const Partition& p, const Halo& halo, i64 bytes_per_cell) {
  halo.check();
  if (bytes_per_cell < 0) bad("negative bytes per cell");
  std::vector<Flow> flows;
  std::vector<Flow> mine;
  for (int i = 0; i < p.size(); ++i) {
    mine.clear();
    for (int k = 0; k < kDirections; ++k) {
      const int j = p.neighbour(i, direction(k));
      const i64 cells = halo.cells(k, p.subdomains[i].box.extent);
      if (j < 0 || cells == 0) continue;
      const i64 b = ferry::detail::checked_mul(cells, bytes_per_cell, MPI_ERR_ARG,
                                               "ferry::place: halo bytes");
      auto it = std::find_if(mine.begin(), mine.end(), [&](const Flow& f) { return f.src == j; });
      if (it == mine.end())
        mine.push_back({j, i, b});
      else
        it->bytes =
            ferry::detail::checked_add(it->bytes, b, MPI_ERR_ARG, "ferry::place: halo bytes");
    }
    std::sort(mine.begin(), mine.end(), [](const Flow& x, const Flow& y) { return x.src < y.src; });
    flows.insert(flows.end(), mine.begin(), mine.end());
  }
  return flows;
}

}  // namespace ferry::place
