// place/refine.cpp — what makes any k-way partition (METIS' or the built-in one) have exactly the
// requested part sizes, and then improves it without changing them.
//
// METIS balances to a tolerance (at least 0.1 %: a part of 6 ranks may come back with 5 or 7), and
// a rank count must be exact. Rebalancing moves vertices out of parts that are too large, each time
// the move that costs the least cut (a heap of candidate moves, refreshed lazily). Refinement then
// swaps pairs of vertices between adjacent parts — a swap keeps both sizes — taking per part pair
// the best of the most promising candidates, as long as a swap lowers the cut (Kernighan-Lin's
// move, without its hill climbing).
#include <algorithm>
#include <queue>
#include <tuple>

#include "place/detail.hpp"

namespace ferry::place::detail {

namespace {

// The weight from v to each part it touches (parts listed in `touched`, weights in `conn`).
struct Connectivity {
  std::vector<i64> conn;
  std::vector<int> touched;
  explicit Connectivity(int k) : conn(k, 0) {}
  void of(const WGraph& g, const std::vector<int>& part, int v) {
    for (int p : touched) conn[p] = 0;
    touched.clear();
    for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
      const int p = part[g.adj[e]];
      if (conn[p] == 0) touched.push_back(p);
      conn[p] += g.w[e];
    }
  }
};

i64 edge_weight(const WGraph& g, int u, int v) {
  i64 w = 0;
  for (int e = g.xadj[u]; e < g.xadj[u + 1]; ++e)
    if (g.adj[e] == v) w += g.w[e];
  return w;
}

}  // namespace

i64 cut_of(const WGraph& g, const std::vector<int>& part) {
  i64 cut = 0;
  for (int v = 0; v < g.n; ++v)
    for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e)
      if (part[g.adj[e]] != part[v]) cut += g.w[e];
  return cut / 2;
}

void rebalance(const WGraph& g, const std::vector<int>& sizes, std::vector<int>& part) {
  const int k = static_cast<int>(sizes.size());
  std::vector<int> count(k, 0);
  for (int p : part) ++count[p];
  std::vector<int> under;  // parts below their size, for vertices that touch none of them
  auto refresh_under = [&] {
    under.clear();
    for (int p = 0; p < k; ++p)
      if (count[p] < sizes[p]) under.push_back(p);
  };
  refresh_under();
  if (under.empty()) return;
  Connectivity c(k);
  // The cheapest move of v out of its (too large) part: (gain, v, target).
  auto best_move = [&](int v, i64& gain, int& to) {
    c.of(g, part, v);
    const int from = part[v];
    to = -1;
    for (int p : c.touched)
      if (p != from && count[p] < sizes[p] && (to < 0 || c.conn[p] > c.conn[to])) to = p;
    if (to < 0) to = under.front();
    gain = c.conn[to] - c.conn[from];
  };
  using Entry = std::tuple<i64, int, int>;
  std::priority_queue<Entry> heap;
  for (int v = 0; v < g.n; ++v) {
    if (count[part[v]] <= sizes[part[v]]) continue;
    i64 gain;
    int to;
    best_move(v, gain, to);
    heap.push({gain, v, to});
  }
  while (!heap.empty()) {
    auto [gain, v, to] = heap.top();
    heap.pop();
    const int from = part[v];
    if (count[from] <= sizes[from]) continue;  // its part has shrunk enough
    i64 fresh;
    int fresh_to;
    best_move(v, fresh, fresh_to);
    if (fresh != gain || fresh_to != to) {  // stale: requeue with what it is now
      heap.push({fresh, v, fresh_to});
      continue;
    }
    part[v] = to;
    --count[from];
    ++count[to];
    if (count[to] == sizes[to]) {
      refresh_under();
      if (under.empty()) break;
    }
    for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
      const int u = g.adj[e];
      if (count[part[u]] <= sizes[part[u]]) continue;
      i64 gu;
      int tu;
      best_move(u, gu, tu);
      heap.push({gu, u, tu});
    }
  }
}

i64 refine_swaps(const WGraph& g, int k, std::vector<int>& part) {
  constexpr int kTop = 12;  // candidates per side tried per pair
  constexpr int kPasses = 20;
  constexpr i64 kGone = INT64_MIN / 4;  // a candidate that left its part this pass
  struct Cand {
    i64 pair;  // a * k + b: a vertex of part a touching part b
    i64 gain;  // of moving it to b, at the start of the pass
    int v;
  };
  Connectivity c(k);
  std::vector<Cand> cand;
  std::vector<std::pair<i64, int>> ab, ba;
  std::vector<int> start(static_cast<std::size_t>(k) + 1), order(g.n);
  for (int pass = 0; pass < kPasses; ++pass) {
    // Vertices by part (a counting sort), so the candidates come out grouped by part and only
    // each part's few need sorting.
    std::fill(start.begin(), start.end(), 0);
    for (int v = 0; v < g.n; ++v) ++start[part[v] + 1];
    for (int p = 0; p < k; ++p) start[p + 1] += start[p];
    for (int v = 0; v < g.n; ++v) order[start[part[v]]++] = v;
    cand.clear();
    for (int v : order) {
      c.of(g, part, v);
      const int a = part[v];
      for (int b : c.touched)
        if (b != a) cand.push_back({i64{a} * k + b, c.conn[b] - c.conn[a], v});
    }
    // A swap wins only if one of its moves gains and the other loses less than that: drop the
    // candidates that cannot be part of one.
    i64 most = 0;
    for (const Cand& x : cand) most = std::max(most, x.gain);
    if (most <= 0) break;
    cand.erase(
        std::remove_if(cand.begin(), cand.end(), [&](const Cand& x) { return x.gain <= -most; }),
        cand.end());
    // By pair, best gain first; ties by vertex, so the result does not depend on the sort.
    const auto by_pair = [](const Cand& x, const Cand& y) {
      return x.pair != y.pair ? x.pair < y.pair : x.gain != y.gain ? x.gain > y.gain : x.v < y.v;
    };
    for (auto it = cand.begin(); it != cand.end();) {
      auto end = it;
      while (end != cand.end() && end->pair / k == it->pair / k) ++end;
      std::sort(it, end, by_pair);
      it = end;
    }
    auto group = [&](i64 pair) {
      return std::lower_bound(cand.begin(), cand.end(), pair,
                              [](const Cand& x, i64 p) { return x.pair < p; });
    };
    i64 improved = 0;
    for (auto it = cand.begin(); it != cand.end();) {
      const i64 pair = it->pair;
      auto end = it;
      while (end != cand.end() && end->pair == pair) ++end;
      const int a = static_cast<int>(pair / k), b = static_cast<int>(pair % k);
      const auto other = a < b ? group(i64{b} * k + a) : cand.end();
      const auto group_begin = it;
      it = end;
      // Stale gains bound what a swap can win (a shared edge only lowers it): skip hopeless pairs.
      if (other == cand.end() || other->pair != i64{b} * k + a ||
          group_begin->gain + other->gain <= 0)
        continue;
      ab.clear();
      ba.clear();
      for (auto x = group_begin; x != end && static_cast<int>(ab.size()) < kTop; ++x)
        ab.push_back({x->gain, x->v});
      for (auto x = other;
           x != cand.end() && x->pair == other->pair && static_cast<int>(ba.size()) < kTop; ++x)
        ba.push_back({x->gain, x->v});
      for (;;) {
        // Fresh gains (earlier swaps change them), then the best pair.
        auto fresh = [&](std::vector<std::pair<i64, int>>& list, int from, int to) {
          for (auto& [gain, v] : list) {
            if (part[v] != from) {
              gain = kGone;
              continue;
            }
            c.of(g, part, v);
            gain = c.conn[to] - c.conn[from];
          }
        };
        fresh(ab, a, b);
        fresh(ba, b, a);
        i64 best = 0;
        int bu = -1, bv = -1;
        for (const auto& [gu, u] : ab) {
          if (gu == kGone) continue;
          for (const auto& [gv, v] : ba) {
            if (gv == kGone || gu + gv <= best) continue;
            const i64 gain = gu + gv - 2 * edge_weight(g, u, v);
            if (gain > best) best = gain, bu = u, bv = v;
          }
        }
        if (bu < 0) break;
        part[bu] = b;
        part[bv] = a;
        improved += best;
      }
    }
    if (improved == 0) break;
  }
  return cut_of(g, part);
}

}  // namespace ferry::place::detail
