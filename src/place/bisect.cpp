// place/bisect.cpp — the built-in graph partitioner: multilevel recursive bisection (the scheme of
// METIS' pmetis, Karypis & Kumar 1998), for builds without METIS.
//
// One bisection: coarsen by heavy-edge matching until about 64 vertices remain; split the coarsest
// graph by greedy graph growing from several random seeds, each refined by Fiduccia-Mattheyses;
// project back level by level, refining with FM at each; at the finest level (unit weights) move
// vertices until side 0 has exactly its target. k parts: bisect into the first k/2 parts' total and
// the rest, recurse on both induced subgraphs. Cost O(E log V) per level of the recursion, log2 k
// levels.
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "place/detail.hpp"

namespace ferry::place::detail {

namespace {

constexpr int kCoarsest = 64;  // stop coarsening at about this many vertices
// Grown starts per bisection of the coarsest graph: 2 cut as well as 4 or 6 on our tests (the
// levels above refine them), at half the time of 4 when thousands of small bisections run.
constexpr int kInitialTries = 2;

// A max-heap of (gain, vertex) whose storage outlives a call: the many small bisections of a deep
// recursion would otherwise spend their time in the allocator.
class Heap {
 public:
  void clear() { v_.clear(); }
  bool empty() const { return v_.empty(); }
  const std::pair<i64, int>& top() const { return v_.front(); }
  void push(std::pair<i64, int> e) {
    v_.push_back(e);
    std::push_heap(v_.begin(), v_.end());
  }
  void pop() {
    std::pop_heap(v_.begin(), v_.end());
    v_.pop_back();
  }

 private:
  std::vector<std::pair<i64, int>> v_;
};

struct Workspace {
  std::vector<i64> gain;
  std::vector<i64> ext;
  std::vector<std::uint8_t> locked;
  std::vector<int> moves;
  std::vector<int> order;
  Heap heap[2];
};

// Heavy-edge matching: visit vertices in random order, pair each with the unmatched neighbour of
// heaviest edge (keeping coarse vertices under max_vw so balance stays reachable).
WGraph coarsen(const WGraph& g, Rng& rng, i64 max_vw, std::vector<int>& cmap) {
  std::vector<int> match(g.n, -1), order(g.n);
  std::iota(order.begin(), order.end(), 0);
  rng.shuffle(order);
  for (int u : order) {
    if (match[u] >= 0) continue;
    int best = -1;
    i64 bw = -1;
    for (int e = g.xadj[u]; e < g.xadj[u + 1]; ++e) {
      const int v = g.adj[e];
      if (match[v] < 0 && g.vw[u] + g.vw[v] <= max_vw && g.w[e] > bw) best = v, bw = g.w[e];
    }
    match[u] = best >= 0 ? best : u;
    if (best >= 0) match[best] = u;
  }
  cmap.assign(g.n, -1);
  int nc = 0;
  for (int u = 0; u < g.n; ++u)
    if (cmap[u] < 0) cmap[u] = cmap[match[u]] = nc++;
  WGraph c;
  c.n = nc;
  c.vw.assign(nc, 0);
  c.total_vw = g.total_vw;
  c.xadj.reserve(static_cast<std::size_t>(nc) + 1);
  c.xadj.assign(1, 0);
  c.adj.reserve(g.adj.size());
  c.w.reserve(g.adj.size());
  std::vector<int> slot(nc, -1);  // position of a coarse neighbour in the row being built
  int row = 0;
  for (int u = 0; u < g.n; ++u) {
    if (match[u] < u) continue;  // each coarse vertex once, from its lower member
    const int members[2] = {u, match[u]};
    const int count = match[u] == u ? 1 : 2;
    const std::size_t start = c.adj.size();
    for (int m = 0; m < count; ++m) {
      const int x = members[m];
      c.vw[row] += g.vw[x];
      for (int e = g.xadj[x]; e < g.xadj[x + 1]; ++e) {
        const int cv = cmap[g.adj[e]];
        if (cv == row) continue;
        if (slot[cv] < 0) {
          slot[cv] = static_cast<int>(c.adj.size());
          c.adj.push_back(cv);
          c.w.push_back(g.w[e]);
        } else {
          c.w[slot[cv]] += g.w[e];
        }
      }
    }
    for (std::size_t e = start; e < c.adj.size(); ++e) slot[c.adj[e]] = -1;
    c.xadj.push_back(static_cast<int>(c.adj.size()));
    ++row;
  }
  return c;
}

i64 weight0(const WGraph& g, const std::vector<std::uint8_t>& side) {
  i64 w0 = 0;
  for (int v = 0; v < g.n; ++v)
    if (side[v] == 0) w0 += g.vw[v];
  return w0;
}

// Fiduccia-Mattheyses: per pass, move the unlocked vertex of highest gain whose move keeps the
// imbalance within tol (or lowers it), lock it, and keep the best prefix of the moves. Gains and
// external degrees are computed once and then kept up to date through moves and rollbacks, so a
// pass costs O(n + moves * degree * log), not O(E).
i64 fm(const WGraph& g, std::vector<std::uint8_t>& side, i64 target0, i64 tol, int passes,
       Workspace& ws) {
  const int n = g.n;
  std::vector<i64>& gain = ws.gain;
  std::vector<i64>& ext = ws.ext;
  std::vector<std::uint8_t>& locked = ws.locked;
  std::vector<int>& moves = ws.moves;
  Heap* heap = ws.heap;
  gain.resize(n);
  ext.resize(n);
  locked.resize(n);
  i64 w0 = 0, cut = 0;
  for (int v = 0; v < n; ++v) {
    i64 x = 0, in = 0;
    for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e) (side[g.adj[e]] != side[v] ? x : in) += g.w[e];
    ext[v] = x;
    gain[v] = x - in;
    cut += x;
    if (side[v] == 0) w0 += g.vw[v];
  }
  cut /= 2;
  auto flip = [&](int v) {
    const std::uint8_t to = static_cast<std::uint8_t>(1 - side[v]);
    side[v] = to;
    const i64 in = ext[v] - gain[v];
    ext[v] = in;
    gain[v] = -gain[v];
    w0 += to == 1 ? -g.vw[v] : g.vw[v];
    for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
      const int u = g.adj[e];
      const i64 w = g.w[e];
      if (side[u] == to) {
        ext[u] -= w;
        gain[u] -= 2 * w;
      } else {
        ext[u] += w;
        gain[u] += 2 * w;
      }
    }
  };
  // Moves past the best before a pass gives up: 1 % of the vertices, 4..50 (METIS: 15..100;
  // fewer cost no cut on our tests and halve the time of the many small bisections).
  const int patience = std::min(50, std::max(4, n / 100));
  for (int pass = 0; pass < passes; ++pass) {
    heap[0].clear();
    heap[1].clear();
    for (int v = 0; v < n; ++v) {
      locked[v] = 0;
      // Only the boundary to begin with: an interior vertex joins when a neighbour moves.
      if (ext[v] > 0) heap[side[v]].push({gain[v], v});
    }
    moves.clear();
    const i64 start_cut = cut;
    i64 best_cut = cut, best_imb = std::abs(w0 - target0);
    std::size_t best_len = 0;
    int since_best = 0;
    for (;;) {
      const i64 imb = std::abs(w0 - target0);
      int pick = -1;
      for (int s = 0; s < 2; ++s) {
        auto& h = heap[s];
        while (!h.empty() && (locked[h.top().second] || side[h.top().second] != s ||
                              h.top().first != gain[h.top().second]))
          h.pop();
        if (h.empty()) continue;
        const int v = h.top().second;
        const i64 nw0 = s == 0 ? w0 - g.vw[v] : w0 + g.vw[v];
        const i64 nimb = std::abs(nw0 - target0);
        if (nimb > tol && nimb >= imb) continue;
        if (pick < 0 || gain[v] > gain[pick]) pick = v;
      }
      if (pick < 0) break;
      const int v = pick;
      cut -= gain[v];
      locked[v] = 1;
      flip(v);
      for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
        const int u = g.adj[e];
        if (!locked[u] && ext[u] > 0) heap[side[u]].push({gain[u], u});
      }
      moves.push_back(v);
      const i64 nimb = std::abs(w0 - target0);
      const bool ok = nimb <= tol;
      if ((ok && (best_imb > tol || cut < best_cut || (cut == best_cut && nimb < best_imb))) ||
          (!ok && best_imb > tol && nimb < best_imb)) {
        best_cut = cut, best_imb = nimb, best_len = moves.size(), since_best = 0;
      } else if (++since_best > patience) {
        break;
      }
    }
    for (std::size_t i = moves.size(); i > best_len; --i) flip(moves[i - 1]);
    cut = best_cut;
    if (best_len == 0 || cut >= start_cut) break;
  }
  return cut;
}

// Greedy graph growing: side 0 grows from `seed`, always by the outside vertex most connected to
// it (net of its other edges), until it reaches target0.
std::vector<std::uint8_t> grow(const WGraph& g, int seed, i64 target0, Rng& rng, Workspace& ws) {
  std::vector<std::uint8_t> side(g.n, 1);
  std::vector<i64>& gain = ws.gain;  // to side 0 minus to side 1, for side-1 vertices
  gain.resize(g.n);
  for (int v = 0; v < g.n; ++v) {
    i64 d = 0;
    for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e) d += g.w[e];
    gain[v] = -d;
  }
  Heap& heap = ws.heap[0];
  heap.clear();
  i64 w0 = 0;
  int next = seed;
  std::vector<int>& rest = ws.order;
  rest.resize(g.n);
  std::iota(rest.begin(), rest.end(), 0);
  rng.shuffle(rest);
  std::size_t r = 0;
  while (w0 < target0) {
    if (next < 0) {
      while (!heap.empty() &&
             (side[heap.top().second] == 0 || heap.top().first != gain[heap.top().second]))
        heap.pop();
      if (!heap.empty()) {
        next = heap.top().second;
      } else {  // nothing touches side 0 (disconnected graph): start anywhere
        while (r < rest.size() && side[rest[r]] == 0) ++r;
        if (r == rest.size()) break;
        next = rest[r];
      }
    }
    // Stop rather than overshoot by more than the deficit.
    if (w0 > 0 && w0 + g.vw[next] - target0 > target0 - w0) break;
    side[next] = 0;
    w0 += g.vw[next];
    for (int e = g.xadj[next]; e < g.xadj[next + 1]; ++e) {
      const int u = g.adj[e];
      gain[u] += 2 * g.w[e];
      if (side[u] == 1) heap.push({gain[u], u});
    }
    next = -1;
  }
  return side;
}

// Moves single vertices (unit weights) from the side above its target, best gain first, until
// side 0 has exactly target0.
void exact_balance(const WGraph& g, std::vector<std::uint8_t>& side, i64 target0) {
  i64 w0 = weight0(g, side);
  while (w0 != target0) {
    const std::uint8_t from = w0 > target0 ? 0 : 1;
    int best = -1;
    i64 best_gain = 0;
    for (int v = 0; v < g.n; ++v) {
      if (side[v] != from) continue;
      i64 gain = 0;
      for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e)
        gain += side[g.adj[e]] != from ? g.w[e] : -g.w[e];
      if (best < 0 || gain > best_gain) best = v, best_gain = gain;
    }
    side[best] = static_cast<std::uint8_t>(1 - from);
    w0 += from == 0 ? -g.vw[best] : g.vw[best];
  }
}

std::vector<std::uint8_t> bisect(const WGraph& g, i64 target0, Rng& rng, Workspace& ws) {
  std::vector<WGraph> levels;
  std::vector<std::vector<int>> cmaps;
  const WGraph* cur = &g;
  const i64 max_vw = std::max<i64>(1, 3 * g.total_vw / (2 * kCoarsest));
  while (cur->n > kCoarsest) {
    std::vector<int> cmap;
    WGraph c = coarsen(*cur, rng, max_vw, cmap);
    if (c.n > cur->n * 19 / 20) break;  // matching stalled
    levels.push_back(std::move(c));
    cmaps.push_back(std::move(cmap));
    cur = &levels.back();
  }
  auto tolerance = [](const WGraph& x) { return *std::max_element(x.vw.begin(), x.vw.end()); };
  // The coarsest graph: several grown bisections, FM on each, keep the best balanced one.
  const WGraph& c = *cur;
  const i64 tol = tolerance(c);
  std::vector<std::uint8_t> side;
  i64 best_cut = 0;
  bool best_ok = false;
  for (int t = 0; t < kInitialTries; ++t) {
    std::vector<std::uint8_t> s = grow(c, rng.below(c.n), target0, rng, ws);
    const i64 cut = fm(c, s, target0, tol, 2, ws);
    const bool ok = std::abs(weight0(c, s) - target0) <= tol;
    if (side.empty() || (ok && !best_ok) || (ok == best_ok && cut < best_cut))
      side = std::move(s), best_cut = cut, best_ok = ok;
  }
  // Back up through the levels.
  for (int l = static_cast<int>(levels.size()) - 1; l >= 0; --l) {
    const WGraph& fine = l == 0 ? g : levels[l - 1];
    std::vector<std::uint8_t> fs(fine.n);
    for (int u = 0; u < fine.n; ++u) fs[u] = side[cmaps[l][u]];
    side = std::move(fs);
    fm(fine, side, target0, tolerance(fine), 4, ws);
  }
  exact_balance(g, side, target0);
  return side;
}

void split_parts(const WGraph& g, const std::vector<int>& ids, const int* sizes, int k, int first,
                 std::vector<int>& part, Rng& rng, Workspace& ws) {
  if (k == 1) {
    for (int id : ids) part[id] = first;
    return;
  }
  const int k0 = k / 2;
  const i64 target0 = std::accumulate(sizes, sizes + k0, i64{0});
  const std::vector<std::uint8_t> side = bisect(g, target0, rng, ws);
  std::vector<int> local[2], global[2];
  for (int v = 0; v < g.n; ++v) {
    local[side[v]].push_back(v);
    global[side[v]].push_back(ids[v]);
  }
  split_parts(induced(g, local[0]), global[0], sizes, k0, first, part, rng, ws);
  split_parts(induced(g, local[1]), global[1], sizes + k0, k - k0, first + k0, part, rng, ws);
}

}  // namespace

WGraph to_wgraph(const Graph& g) {
  WGraph w;
  w.n = g.vertices();
  w.vw.assign(w.n, 1);
  w.total_vw = w.n;
  w.xadj.reserve(static_cast<std::size_t>(w.n) + 1);
  w.xadj.assign(1, 0);
  w.adj.reserve(g.adjncy.size());
  w.w.reserve(g.adjncy.size());
  for (int v = 0; v < w.n; ++v) {
    for (i64 e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
      if (g.adjncy[e] == v || (!g.weight.empty() && g.weight[e] == 0)) continue;  // cuts nothing
      w.adj.push_back(g.adjncy[e]);
      w.w.push_back(g.weight.empty() ? 1 : g.weight[e]);
    }
    w.xadj.push_back(static_cast<int>(w.adj.size()));
  }
  return w;
}

WGraph induced(const WGraph& g, const std::vector<int>& vertices) {
  std::vector<int> local(g.n, -1);
  for (std::size_t i = 0; i < vertices.size(); ++i) local[vertices[i]] = static_cast<int>(i);
  WGraph s;
  s.n = static_cast<int>(vertices.size());
  s.xadj.reserve(vertices.size() + 1);
  s.xadj.assign(1, 0);
  s.vw.reserve(vertices.size());
  std::size_t edges = 0;
  for (int v : vertices) edges += static_cast<std::size_t>(g.xadj[v + 1] - g.xadj[v]);
  s.adj.reserve(edges);
  s.w.reserve(edges);
  for (int v : vertices) {
    s.vw.push_back(g.vw[v]);
    s.total_vw += g.vw[v];
    for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
      const int u = local[g.adj[e]];
      if (u < 0) continue;
      s.adj.push_back(u);
      s.w.push_back(g.w[e]);
    }
    s.xadj.push_back(static_cast<int>(s.adj.size()));
  }
  return s;
}

std::vector<int> recursive_bisection(const WGraph& g, const std::vector<int>& sizes, Rng& rng) {
  std::vector<int> part(g.n, 0);
  std::vector<int> ids(g.n);
  std::iota(ids.begin(), ids.end(), 0);
  Workspace ws;
  split_parts(g, ids, sizes.data(), static_cast<int>(sizes.size()), 0, part, rng, ws);
  return part;
}

}  // namespace ferry::place::detail
