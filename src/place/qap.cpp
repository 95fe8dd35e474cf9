// place/qap.cpp — the quadratic assignment of dissertation §4.4 (subdomains or ranks onto the GPUs
// of a node by flow × link cost), the placement strategies of fig. 4.11, and the traffic report.
//
// §4.4 enumerates every mapping. Here the exact solver is a branch and bound seeded by the heuristic,
// so it visits a small part of the 8! = 40,320 mappings of a node of 8 GPUs, and the heuristic takes
// over where enumeration stops being cheap. The heuristic is greedy construction + pairwise-swap
// local search, iterated (kicks of a few random swaps of the best assignment, and random restarts):
// for the sizes that reach it (nodes of 9-72 GPUs, or groups of ranks) it lands within a few percent
// of the optimum (tests/test_place.cpp measures it against the exact solver), with one parameter,
// the number of iterations; robust tabu search would do better on large hard instances, which node
// placement does not produce (its flows are sparse and its distances take two or three values).
#include "place/detail.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace ferry::place {

using detail::bad;

Matrix::Matrix(int size, double fill) : n(size) {
  if (size < 0) bad("matrix size < 0");
  a.assign(static_cast<std::size_t>(size) * size, fill);
}

namespace {

void check_matrix(const Matrix& x, const char* what) {
  if (x.n < 0 || x.a.size() != static_cast<std::size_t>(x.n) * x.n)
    bad(std::string(what) + ": storage does not match its size");
  for (double v : x.a)
    if (!(v >= 0) || !std::isfinite(v)) bad(std::string(what) + ": negative or non-finite entry");
}

bool better(double x, double best) { return x < best - 1e-12 * std::abs(best); }

struct Qap {
  const Matrix& f;
  const Matrix& d;
  int n, m;
  const std::vector<int>* fc = nullptr;  // classes, or null
  const std::vector<int>* lc = nullptr;
  bool ok(int i, int l) const { return !fc || (*fc)[i] == (*lc)[l]; }
};

// Cost change of swapping the locations of facilities r and s.
double delta_swap(const Qap& q, const std::vector<int>& pos, int r, int s) {
  const Matrix& f = q.f;
  const Matrix& d = q.d;
  const int a = pos[r], b = pos[s];
  double delta = f(r, r) * (d(b, b) - d(a, a)) + f(s, s) * (d(a, a) - d(b, b)) +
                 f(r, s) * (d(b, a) - d(a, b)) + f(s, r) * (d(a, b) - d(b, a));
  for (int k = 0; k < q.n; ++k) {
    if (k == r || k == s) continue;
    const int pk = pos[k];
    delta += (f(r, k) - f(s, k)) * (d(b, pk) - d(a, pk)) + (f(k, r) - f(k, s)) * (d(pk, b) - d(pk, a));
  }
  return delta;
}

// Cost change of moving facility r to the free location b.
double delta_move(const Qap& q, const std::vector<int>& pos, int r, int b) {
  const Matrix& f = q.f;
  const Matrix& d = q.d;
  const int a = pos[r];
  double delta = f(r, r) * (d(b, b) - d(a, a));
  for (int k = 0; k < q.n; ++k) {
    if (k == r) continue;
    const int pk = pos[k];
    delta += f(r, k) * (d(b, pk) - d(a, pk)) + f(k, r) * (d(pk, b) - d(pk, a));
  }
  return delta;
}

// Best-improvement swaps and moves to free locations until none lowers the cost.
void local_search(const Qap& q, std::vector<int>& pos) {
  std::vector<int> occ(q.m, -1);
  for (int i = 0; i < q.n; ++i) occ[pos[i]] = i;
  const double scale = 1e-12 * std::max(1.0, qap_cost(q.f, q.d, pos));
  for (int iter = 0; iter < 100 * (q.n + q.m); ++iter) {
    double best = -scale;
    int br = -1, bs = -1, bl = -1;
    for (int r = 0; r < q.n; ++r) {
      for (int s = r + 1; s < q.n; ++s) {
        if (q.fc && (*q.fc)[r] != (*q.fc)[s]) continue;
        const double dl = delta_swap(q, pos, r, s);
        if (dl < best) best = dl, br = r, bs = s, bl = -1;
      }
      for (int l = 0; l < q.m; ++l) {
        if (occ[l] >= 0 || !q.ok(r, l)) continue;
        const double dl = delta_move(q, pos, r, l);
        if (dl < best) best = dl, br = r, bs = -1, bl = l;
      }
    }
    if (br < 0) return;
    if (bs >= 0) {
      std::swap(pos[br], pos[bs]);
      occ[pos[br]] = br;
      occ[pos[bs]] = bs;
    } else {
      occ[pos[br]] = -1;
      pos[br] = bl;
      occ[bl] = br;
    }
  }
}

std::vector<double> totals(const Qap& q) {
  std::vector<double> t(q.n, 0.0);
  for (int i = 0; i < q.n; ++i)
    for (int j = 0; j < q.n; ++j) t[i] += q.f(i, j) + q.f(j, i);
  return t;
}

// Greedy: the heaviest facility on the most central location, then repeatedly the facility with the
// most flow to those placed, on its cheapest free location.
std::vector<int> greedy(const Qap& q) {
  const std::vector<double> tot = totals(q);
  std::vector<double> central(q.m, 0.0);
  for (int l = 0; l < q.m; ++l)
    for (int k = 0; k < q.m; ++k) central[l] += q.d(l, k) + q.d(k, l);
  std::vector<int> pos(q.n, -1);
  std::vector<char> used(q.m, 0);
  std::vector<double> pull(q.n, 0.0);                           // flow to placed facilities
  std::vector<double> lin(static_cast<std::size_t>(q.n) * q.m);  // cost against placed ones
  for (int i = 0; i < q.n; ++i)
    for (int l = 0; l < q.m; ++l) lin[static_cast<std::size_t>(i) * q.m + l] = q.f(i, i) * q.d(l, l);
  for (int step = 0; step < q.n; ++step) {
    int i = -1;
    for (int c = 0; c < q.n; ++c) {
      if (pos[c] >= 0) continue;
      if (i < 0 || pull[c] > pull[i] || (pull[c] == pull[i] && tot[c] > tot[i])) i = c;
    }
    int best = -1;
    double best_v = 0;
    for (int l = 0; l < q.m; ++l) {
      if (used[l] || !q.ok(i, l)) continue;
      const double v = lin[static_cast<std::size_t>(i) * q.m + l] + (step == 0 ? central[l] : 0.0);
      if (best < 0 || v < best_v) best = l, best_v = v;
    }
    pos[i] = best;
    used[best] = 1;
    for (int h = 0; h < q.n; ++h) {
      if (pos[h] >= 0) continue;
      pull[h] += q.f(h, i) + q.f(i, h);
      for (int l = 0; l < q.m; ++l)
        lin[static_cast<std::size_t>(h) * q.m + l] += q.f(h, i) * q.d(l, best) + q.f(i, h) * q.d(best, l);
    }
  }
  return pos;
}

std::vector<int> random_start(const Qap& q, detail::Rng& rng) {
  std::vector<int> locs(q.m);
  std::iota(locs.begin(), locs.end(), 0);
  rng.shuffle(locs);
  std::vector<int> pos(q.n, -1);
  std::vector<char> used(q.m, 0);
  for (int i = 0; i < q.n; ++i)
    for (int l : locs)
      if (!used[l] && q.ok(i, l)) {
        pos[i] = l;
        used[l] = 1;
        break;
      }
  return pos;
}

// Iterated local search's kick: a few random swaps (within a class) of a good assignment.
std::vector<int> kick(const Qap& q, std::vector<int> pos, int swaps, detail::Rng& rng) {
  for (int t = 0; t < swaps; ++t) {
    const int r = rng.below(q.n), s = rng.below(q.n);
    if (r != s && (!q.fc || (*q.fc)[r] == (*q.fc)[s])) std::swap(pos[r], pos[s]);
  }
  return pos;
}

class BranchAndBound {
 public:
  BranchAndBound(const Qap& q, std::vector<int> best, double best_cost)
      : q_(q), best_(std::move(best)), best_cost_(best_cost) {
    const std::vector<double> tot = totals(q);
    order_.resize(q.n);
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(), [&](int x, int y) { return tot[x] > tot[y]; });
    const std::size_t nm = static_cast<std::size_t>(q.n) * q.m;
    lin_.assign(static_cast<std::size_t>(q.n + 1) * nm, 0.0);
    for (int h = 0; h < q.n; ++h)
      for (int l = 0; l < q.m; ++l) lin_[static_cast<std::size_t>(h) * q.m + l] = q.f(h, h) * q.d(l, l);
    pos_.assign(q.n, -1);
    used_.assign(q.m, 0);
    // Twins: locations that swapping leaves the problem unchanged (same distances to every other
    // location and to each other both ways, same class). Among free twins one branch suffices: a
    // completion through the other is the same completion with the two swapped. On a Summit node the
    // 6 GPUs are two classes of 3 twins; on an NVSwitch node all are twins.
    twin_.resize(q.m);
    for (int l = 0; l < q.m; ++l) {
      twin_[l] = l;
      for (int t = 0; t < l && twin_[l] == l; ++t)
        if (twin_[t] == t && twins(t, l)) twin_[l] = t;
    }
  }
  void run() { dfs(0, 0.0); }
  const std::vector<int>& best() const { return best_; }

 private:
  bool twins(int a, int b) const {
    const Matrix& d = q_.d;
    if (q_.lc && (*q_.lc)[a] != (*q_.lc)[b]) return false;
    if (d(a, a) != d(b, b) || d(a, b) != d(b, a)) return false;
    for (int x = 0; x < q_.m; ++x)
      if (x != a && x != b && (d(a, x) != d(b, x) || d(x, a) != d(x, b))) return false;
    return true;
  }

  double& lin(int depth, int h, int l) {
    return lin_[(static_cast<std::size_t>(depth) * q_.n + h) * q_.m + l];
  }

  void dfs(int t, double partial) {
    if (t == q_.n) {
      if (better(partial, best_cost_)) best_cost_ = partial, best_ = pos_;
      return;
    }
    const int fi = order_[t];
    std::vector<std::pair<double, int>> cand;
    std::vector<char> seen(q_.m, 0);  // twin classes already branched on at this node
    for (int l = 0; l < q_.m; ++l)
      if (!used_[l] && q_.ok(fi, l) && !seen[twin_[l]]) {
        seen[twin_[l]] = 1;
        cand.push_back({lin(t, fi, l), l});
      }
    std::sort(cand.begin(), cand.end());
    for (const auto& [inc, l] : cand) {
      const double p = partial + inc;
      if (!better(p, best_cost_)) break;  // sorted: the rest cost more
      pos_[fi] = l;
      used_[l] = 1;
      double bound = p;
      for (int u = t + 1; u < q_.n; ++u) {
        const int h = order_[u];
        double lo = -1;
        for (int k = 0; k < q_.m; ++k) {
          if (used_[k]) continue;
          const double v = lin(t, h, k) + q_.f(h, fi) * q_.d(k, l) + q_.f(fi, h) * q_.d(l, k);
          lin(t + 1, h, k) = v;
          if (q_.ok(h, k) && (lo < 0 || v < lo)) lo = v;
        }
        if (lo < 0) {  // no free location of its class: a dead end
          bound = best_cost_;
          break;
        }
        bound += lo;
      }
      if (better(bound, best_cost_)) dfs(t + 1, p);
      pos_[fi] = -1;
      used_[l] = 0;
    }
  }

  const Qap& q_;
  std::vector<int> best_;
  double best_cost_;
  std::vector<int> order_;
  std::vector<double> lin_;
  std::vector<int> pos_;
  std::vector<char> used_;
  std::vector<int> twin_;  // the first location of each one's twin class
};

}  // namespace

Matrix cost_from_bandwidth(const Matrix& bandwidth) {
  check_matrix(bandwidth, "bandwidth matrix");
  Matrix c(bandwidth.n);
  for (int i = 0; i < c.n; ++i)
    for (int j = 0; j < c.n; ++j) {
      const double b = bandwidth(i, j);
      if (b <= 0 && i != j) bad("bandwidth <= 0 between GPUs " + std::to_string(i) + " and " + std::to_string(j));
      c(i, j) = b > 0 ? 1.0 / b : 0.0;
    }
  return c;
}

double qap_cost(const Matrix& flow, const Matrix& dist, const std::vector<int>& assignment) {
  if (static_cast<int>(assignment.size()) != flow.n) bad("assignment size differs from the flow matrix");
  double c = 0;
  for (int i = 0; i < flow.n; ++i) {
    const int pi = assignment[i];
    if (pi < 0 || pi >= dist.n) bad("assignment outside the distance matrix");
    for (int j = 0; j < flow.n; ++j) {
      const double w = flow(i, j);
      if (w != 0) c += w * dist(pi, assignment[j]);
    }
  }
  return c;
}

QapResult solve_qap(const Matrix& flow, const Matrix& dist, const QapOptions& o,
                    const std::vector<int>* start) {
  check_matrix(flow, "flow matrix");
  check_matrix(dist, "distance matrix");
  const int n = flow.n, m = dist.n;
  if (n > m) bad("more facilities (" + std::to_string(n) + ") than locations (" + std::to_string(m) + ")");
  if (o.restarts < 0) bad("negative restart count");
  Qap q{flow, dist, n, m};
  if (!o.facility_class.empty() || !o.location_class.empty()) {
    if (static_cast<int>(o.facility_class.size()) != n || static_cast<int>(o.location_class.size()) != m)
      bad("facility/location classes must have one entry per facility and per location");
    std::map<int, int> need;
    for (int c : o.facility_class) ++need[c];
    for (int c : o.location_class) --need[c];
    for (const auto& [c, k] : need)
      if (k > 0) bad("class " + std::to_string(c) + " has more facilities than locations");
    q.fc = &o.facility_class;
    q.lc = &o.location_class;
  }
  QapResult r;
  if (n == 0) {
    r.exact = true;
    return r;
  }
  if (start) {
    if (static_cast<int>(start->size()) != n) bad("start assignment has the wrong size");
    std::vector<char> seen(m, 0);
    for (int i = 0; i < n; ++i) {
      const int l = (*start)[i];
      if (l < 0 || l >= m || seen[l] || !q.ok(i, l)) bad("start assignment is not a valid assignment");
      seen[l] = 1;
    }
  }
  // Heuristic first: its answer is the result above exact_max, and the exact solver's first bound.
  std::vector<int> best = start ? *start : greedy(q);
  double best_cost = qap_cost(flow, dist, best);
  auto consider = [&](std::vector<int> pos) {
    local_search(q, pos);
    const double c = qap_cost(flow, dist, pos);
    if (better(c, best_cost)) best = std::move(pos), best_cost = c;
  };
  if (start) consider(greedy(q));
  consider(best);
  const bool exact = o.method == QapMethod::exact ||
                     (o.method == QapMethod::automatic && n <= o.exact_max);
  // Iterated local search: mostly kicks of the best so far, every fourth a fresh random start.
  // The exact solver needs only a good first bound, which the greedy start gives.
  detail::Rng rng(o.seed);
  for (int i = 0; !exact && i < o.restarts; ++i)
    consider(i % 4 == 3 ? random_start(q, rng) : kick(q, best, 2 + i % 3, rng));
  if (exact) {
    BranchAndBound bb(q, best, best_cost);
    bb.run();
    best = bb.best();
    best_cost = qap_cost(flow, dist, best);
  }
  r.assignment = std::move(best);
  r.cost = best_cost;
  r.exact = exact;
  return r;
}

Placement place(const Partition& p, const Halo& halo, i64 bytes_per_cell, const Machine& mc,
                const PlaceOptions& o) {
  const int N = p.nodes(), P = p.gpus_per_node(), S = p.subdomains_per_gpu();
  if (mc.nodes != N || mc.gpus_per_node != P)
    bad("machine of " + std::to_string(mc.nodes) + " nodes x " + std::to_string(mc.gpus_per_node) +
        " GPUs does not match the partition's " + std::to_string(N) + " x " + std::to_string(P));
  if (!mc.gpu_cost.empty() && mc.gpu_cost.n != P) bad("GPU cost matrix size differs from GPUs per node");
  if (!mc.gpu_cost.empty()) check_matrix(mc.gpu_cost, "GPU cost matrix");
  const int total = p.size();
  Placement pl;
  pl.node.resize(total);
  pl.gpu.resize(total);
  if (o.strategy == Strategy::trivial || o.strategy == Strategy::random) {
    // Rank order = the global grid's linear order, x fastest: what a code without node blocks does.
    const Int3 g = p.grid();
    std::vector<int> order(total);
    for (int i = 0; i < total; ++i) {
      const Int3 c = p.subdomains[i].coords;
      order[c[0] + g[0] * (c[1] + g[1] * c[2])] = i;
    }
    if (o.strategy == Strategy::random) {
      detail::Rng rng(o.seed);
      rng.shuffle(order);
    }
    for (int k = 0; k < total; ++k) {
      pl.node[order[k]] = k / (P * S);
      pl.gpu[order[k]] = (k % (P * S)) / S;
    }
    return pl;
  }
  for (int i = 0; i < total; ++i) {
    pl.node[i] = p.subdomains[i].node;
    pl.gpu[i] = p.subdomains[i].gpu;
  }
  if (o.strategy == Strategy::node_aware || mc.gpu_cost.empty() || P == 1) return pl;
  // Per node, the bytes between its GPU blocks, then the blocks onto GPUs.
  const std::vector<Flow> flows = halo_flows(p, halo, bytes_per_cell);
  std::vector<Matrix> between(N, Matrix(P));
  for (const Flow& f : flows) {
    const Subdomain& s = p.subdomains[f.src];
    const Subdomain& d = p.subdomains[f.dst];
    if (s.node == d.node) between[s.node](s.gpu, d.gpu) += static_cast<double>(f.bytes);
  }
  std::vector<int> identity(P);
  std::iota(identity.begin(), identity.end(), 0);
  for (int node = 0; node < N; ++node) {
    QapOptions qo = o.qap;
    qo.seed = o.qap.seed + static_cast<std::uint64_t>(node);
    const QapResult r = solve_qap(between[node], mc.gpu_cost, qo, &identity);
    for (int i = node * P * S; i < (node + 1) * P * S; ++i) pl.gpu[i] = r.assignment[p.subdomains[i].gpu];
  }
  return pl;
}

Traffic traffic(const std::vector<Flow>& flows, const std::vector<int>& node,
                const std::vector<int>& gpu, const Matrix& gpu_cost) {
  if (node.size() != gpu.size()) bad("node and GPU vectors differ in size");
  if (!gpu_cost.empty()) check_matrix(gpu_cost, "GPU cost matrix");
  const int n = static_cast<int>(node.size());
  std::map<double, i64> classes;
  Traffic t;
  for (const Flow& f : flows) {
    if (f.src < 0 || f.src >= n || f.dst < 0 || f.dst >= n) bad("flow between unknown subdomains");
    if (f.bytes < 0) bad("negative flow");
    if (node[f.src] != node[f.dst]) {
      t.inter_node += f.bytes;
    } else if (gpu[f.src] == gpu[f.dst]) {
      t.same_gpu += f.bytes;
    } else {
      double c = 0;
      if (!gpu_cost.empty()) {
        if (gpu[f.src] < 0 || gpu[f.src] >= gpu_cost.n || gpu[f.dst] < 0 || gpu[f.dst] >= gpu_cost.n)
          bad("GPU index outside the cost matrix");
        c = gpu_cost(gpu[f.src], gpu[f.dst]);
      }
      classes[c] += f.bytes;
      t.cost += c * static_cast<double>(f.bytes);
    }
  }
  for (const auto& [c, b] : classes) t.intra_node.push_back({c, b});
  return t;
}

}  // namespace ferry::place
