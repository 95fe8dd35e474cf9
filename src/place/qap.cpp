// place/qap.cpp — the quadratic assignment of dissertation §4.4: subdomains or ranks onto the GPUs
// of a node by flow × link cost.
//
// §4.4 enumerates every mapping; so does the exact solver here up to 8 GPUs, unless the node has
// interchangeable GPUs (twins), where a search over one GPU per twin class is far cheaper. The
// heuristic takes over where enumeration stops being cheap: greedy construction + pairwise-swap
// local search, iterated (kicks of a few random swaps of the best assignment, and random
// restarts). For the sizes that reach it (nodes of 9-72 GPUs) it lands within a few percent of the
// optimum (tests/test_place.cpp measures it against the exact solver) with one parameter, the
// number of iterations; robust tabu search would do better on large hard instances, which node
// placement does not produce (its flows are sparse and its distances take two or three values).

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>

#include "place/detail.hpp"

namespace ferry::place {

using detail::bad;

namespace detail {

void check_matrix(const Matrix& x, const char* what) {
  if (x.n < 0 || x.a.size() != static_cast<std::size_t>(x.n) * x.n)
    bad(std::string(what) + ": storage does not match its size");
  for (double v : x.a)
    if (!(v >= 0) || !std::isfinite(v)) bad(std::string(what) + ": negative or non-finite entry");
}

}  // namespace detail

Matrix::Matrix(int size, double fill) : n(size) {
  if (size < 0) bad("matrix size < 0");
  a.assign(static_cast<std::size_t>(size) * size, fill);
}

namespace {

bool better(double x, double best) {
  return x < best - 1e-12 * std::abs(best);
}

// Exact search up to this many locations: every assignment (Heap's algorithm) where they have no
// twins, else a depth-first search that prunes by the cost so far, one branch per twin class.
// Beyond, branch and bound with per-node bounds. Random 8x8 instances: 21-26 M instructions for
// branch and bound, 9 M for the enumeration; a Summit node: a few hundred nodes.
constexpr int kEnumerateMax = 8;

struct Qap {
  Qap(const Matrix& flow, const Matrix& dist, int facilities, int locations)
      : f(flow), d(dist), n(facilities), m(locations), ft(transpose(flow)), dt(transpose(dist)) {}
  const Matrix& f;
  const Matrix& d;
  int n, m;
  Matrix ft, dt;                         // transposes: the delta loops read columns as rows
  const std::vector<int>* fc = nullptr;  // classes, or null
  const std::vector<int>* lc = nullptr;
  bool ok(int i, int l) const { return !fc || (*fc)[i] == (*lc)[l]; }
  static Matrix transpose(const Matrix& x) {
    Matrix t(x.n);
    for (int i = 0; i < x.n; ++i)
      for (int j = 0; j < x.n; ++j) t(j, i) = x(i, j);
    return t;
  }
  const double* row(const Matrix& x, int i) const {
    return x.a.data() + static_cast<std::size_t>(i) * x.n;
  }
};

// Cost change of swapping the locations of facilities r and s. O(n).
double delta_swap(const Qap& q, const std::vector<int>& pos, int r, int s) {
  const int a = pos[r], b = pos[s];
  const double *fr = q.row(q.f, r), *fs = q.row(q.f, s), *ftr = q.row(q.ft, r),
               *fts = q.row(q.ft, s);
  const double *da = q.row(q.d, a), *db = q.row(q.d, b), *dta = q.row(q.dt, a),
               *dtb = q.row(q.dt, b);
  double delta = fr[r] * (db[b] - da[a]) + fs[s] * (da[a] - db[b]) + fr[s] * (db[a] - da[b]) +
                 fs[r] * (da[b] - db[a]);
  for (int k = 0; k < q.n; ++k) {
    if (k == r || k == s) continue;
    const int pk = pos[k];
    delta += (fr[k] - fs[k]) * (db[pk] - da[pk]) + (ftr[k] - fts[k]) * (dtb[pk] - dta[pk]);
  }
  return delta;
}

// Cost change of moving facility r to the free location b. O(n).
double delta_move(const Qap& q, const std::vector<int>& pos, int r, int b) {
  const int a = pos[r];
  const double *fr = q.row(q.f, r), *ftr = q.row(q.ft, r);
  const double *da = q.row(q.d, a), *db = q.row(q.d, b), *dta = q.row(q.dt, a),
               *dtb = q.row(q.dt, b);
  double delta = fr[r] * (db[b] - da[a]);
  for (int k = 0; k < q.n; ++k) {
    if (k == r) continue;
    const int pk = pos[k];
    delta += fr[k] * (db[pk] - da[pk]) + ftr[k] * (dtb[pk] - dta[pk]);
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
  std::vector<double> pull(q.n, 0.0);                            // flow to placed facilities
  std::vector<double> lin(static_cast<std::size_t>(q.n) * q.m);  // cost against placed ones
  for (int i = 0; i < q.n; ++i)
    for (int l = 0; l < q.m; ++l)
      lin[static_cast<std::size_t>(i) * q.m + l] = q.f(i, i) * q.d(l, l);
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
        lin[static_cast<std::size_t>(h) * q.m + l] +=
            q.f(h, i) * q.d(l, best) + q.f(i, h) * q.d(best, l);
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

// Twins: locations that swapping leaves the problem unchanged (same distances to every other
// location and to each other both ways, same class). Among free twins one branch suffices: a
// completion through the other is the same completion with the two swapped. On a Summit node the 6
// GPUs are two classes of 3 twins; on an NVSwitch node all are twins. Returns, per location, the
// first location of its class (swaps of twins compose, so the relation is an equivalence).
std::vector<int> twins_of(const Qap& q) {
  const Matrix& d = q.d;
  auto twins = [&](int a, int b) {
    if (q.lc && (*q.lc)[a] != (*q.lc)[b]) return false;
    if (d(a, a) != d(b, b) || d(a, b) != d(b, a)) return false;
    for (int x = 0; x < q.m; ++x)
      if (x != a && x != b && (d(a, x) != d(b, x) || d(x, a) != d(x, b))) return false;
    return true;
  };
  std::vector<int> twin(q.m);
  for (int l = 0; l < q.m; ++l) {
    twin[l] = l;
    for (int t = 0; t < l && twin[l] == l; ++t)
      if (twin[t] == t && twins(t, l)) twin[l] = t;
  }
  return twin;
}

// Every assignment, for up to 8 locations without symmetry (8! = 40,320): Heap's algorithm visits
// them by single swaps, each costed by its O(n) delta; a candidate better than the best is
// confirmed by a full evaluation, so rounding in the running sum cannot pick a wrong one. Fewer
// facilities than locations are padded with facilities of no flow. O(m! n).
std::vector<int> enumerate_all(const Qap& q, std::vector<int> best, double best_cost) {
  Matrix pad(q.m);
  for (int i = 0; i < q.n; ++i)
    for (int j = 0; j < q.n; ++j) pad(i, j) = q.f(i, j);
  const Qap p(pad, q.d, q.m, q.m);
  std::vector<int> pos(best);
  std::vector<char> used(q.m, 0);
  for (int l : pos) used[l] = 1;
  for (int l = 0; l < q.m; ++l)
    if (!used[l]) pos.push_back(l);
  double cost = best_cost;
  std::vector<int> c(q.m, 0);
  long step = 0;
  for (int i = 0; i < q.m;) {
    if (c[i] < i) {
      const int a = i % 2 == 0 ? 0 : c[i];
      cost += delta_swap(p, pos, a, i);
      std::swap(pos[a], pos[i]);
      if (++step % 1024 == 0) cost = qap_cost(pad, q.d, pos);  // keep rounding from piling up
      if (better(cost, best_cost)) {
        cost = qap_cost(pad, q.d, pos);
        if (better(cost, best_cost)) best_cost = cost, best.assign(pos.begin(), pos.begin() + q.n);
      }
      ++c[i];
      i = 0;
    } else {
      c[i] = 0;
      ++i;
    }
  }
  return best;
}

class BranchAndBound {
 public:
  BranchAndBound(const Qap& q, std::vector<int> best, double best_cost)
      : q_(q),
        best_(std::move(best)),
        best_cost_(best_cost),
        twin_(twins_of(q)),
        bounded_(q.m > kEnumerateMax) {
    const std::vector<double> tot = totals(q);
    order_.resize(q.n);
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(), [&](int x, int y) { return tot[x] > tot[y]; });
    if (bounded_) {
      const std::size_t nm = static_cast<std::size_t>(q.n) * q.m;
      lin_.assign(static_cast<std::size_t>(q.n + 1) * nm, 0.0);
      for (int h = 0; h < q.n; ++h)
        for (int l = 0; l < q.m; ++l)
          lin_[static_cast<std::size_t>(h) * q.m + l] = q.f(h, h) * q.d(l, l);
    }
    pos_.assign(q.n, -1);
    used_.assign(q.m, 0);
    cand_.resize(q.n);
    seen_.assign(q.n, std::vector<char>(q.m, 0));
    e_.resize(static_cast<std::size_t>(q.m) * q.m);
    flows_.resize(q.n);
  }
  void run() { dfs(0, 0.0); }
  const std::vector<int>& best() const { return best_; }

 private:
  // What facility fi = order_[t] adds at location l against order_[0..t). O(t).
  double increment(int t, int fi, int l) const {
    double inc = q_.f(fi, fi) * q_.d(l, l);
    for (int u = 0; u < t; ++u) {
      const int j = order_[u], pj = pos_[j];
      inc += q_.f(fi, j) * q_.d(l, pj) + q_.f(j, fi) * q_.d(pj, l);
    }
    return inc;
  }

  double& lin(int depth, int h, int l) {
    return lin_[(static_cast<std::size_t>(depth) * q_.n + h) * q_.m + l];
  }

  // A lower bound on what facilities order_[t..n) add to a partial assignment, each facility
  // relaxed on its own: facility h at free location k costs at least its cost against the placed
  // ones, lin; with `pairs` (Gilmore-Lawler style) also half the least pairing of its flows to the
  // other unplaced facilities (largest first) with k's distances to the other free locations
  // (smallest first).
  double bound(int t, bool pairs) {
    if (t == q_.n) return 0;
    if (!pairs) {
      double total = 0;
      for (int u = t; u < q_.n; ++u) {
        double lo = -1;
        for (int k = 0; k < q_.m; ++k)
          if (!used_[k] && q_.ok(order_[u], k) && (lo < 0 || lin(t, order_[u], k) < lo))
            lo = lin(t, order_[u], k);
        if (lo < 0) return best_cost_;  // no free location of its class: a dead end
        total += lo;
      }
      return total;
    }
    free_.clear();
    for (int k = 0; k < q_.m; ++k)
      if (!used_[k]) free_.push_back(k);
    const int nf = static_cast<int>(free_.size());
    for (int i = 0; i < nf; ++i) {  // per free location, its distances to the others, ascending
      double* e = &e_[static_cast<std::size_t>(i) * q_.m];
      int c = 0;
      for (int j = 0; j < nf; ++j)
        if (j != i) e[c++] = std::min(q_.d(free_[i], free_[j]), q_.d(free_[j], free_[i]));
      std::sort(e, e + c);
    }
    double total = 0;
    for (int u = t; u < q_.n; ++u) {
      const int h = order_[u];
      int c = 0;
      for (int w = t; w < q_.n; ++w)
        if (w != u) flows_[c++] = q_.f(h, order_[w]) + q_.f(order_[w], h);
      std::sort(flows_.begin(), flows_.begin() + c, std::greater<double>());
      double lo = -1;
      for (int i = 0; i < nf; ++i) {
        const int k = free_[i];
        if (!q_.ok(h, k)) continue;
        const double* e = &e_[static_cast<std::size_t>(i) * q_.m];
        double pair = 0;
        for (int j = 0; j < c; ++j) pair += flows_[j] * e[j];
        const double v = lin(t, h, k) + 0.5 * pair;
        if (lo < 0 || v < lo) lo = v;
      }
      if (lo < 0) return best_cost_;  // no free location of its class: a dead end
      total += lo;
    }
    return total;
  }

  void dfs(int t, double partial) {
    if (t == q_.n) {
      if (better(partial, best_cost_)) best_cost_ = partial, best_ = pos_;
      return;
    }
    const int fi = order_[t];
    std::vector<std::pair<double, int>>& cand = cand_[t];
    std::vector<char>& seen = seen_[t];  // twin classes already branched on at this node
    cand.clear();
    std::fill(seen.begin(), seen.end(), 0);
    for (int l = 0; l < q_.m; ++l)
      if (!used_[l] && q_.ok(fi, l) && !seen[twin_[l]]) {
        seen[twin_[l]] = 1;
        cand.push_back({bounded_ ? lin(t, fi, l) : increment(t, fi, l), l});
      }
    std::sort(cand.begin(), cand.end());
    for (const auto& [inc, l] : cand) {
      const double p = partial + inc;
      if (!better(p, best_cost_)) break;  // sorted: the rest cost more
      pos_[fi] = l;
      used_[l] = 1;
      bool go = true;
      if (bounded_) {
        for (int u = t + 1; u < q_.n; ++u) {
          const int h = order_[u];
          for (int k = 0; k < q_.m; ++k)
            if (!used_[k])
              lin(t + 1, h, k) = lin(t, h, k) + q_.f(h, fi) * q_.d(k, l) + q_.f(fi, h) * q_.d(l, k);
        }
        // The cheap bound first; the stronger one only where the cheap one does not prune.
        go = better(p + bound(t + 1, false), best_cost_) &&
             better(p + bound(t + 1, true), best_cost_);
      }
      if (go) dfs(t + 1, p);
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
  // Bounds at every node (lin_, bound()): worth their O(n m) where the tree is deep; up to
  // kEnumerateMax locations, with twins cutting the tree, pruning by the cost so far is cheaper.
  bool bounded_;
  std::vector<std::vector<std::pair<double, int>>> cand_;  // per depth: (increment, location)
  std::vector<std::vector<char>> seen_;
  std::vector<int> free_;
  std::vector<double> e_;
  std::vector<double> flows_;
};

}  // namespace

Matrix cost_from_bandwidth(const Matrix& bandwidth) {
  detail::check_matrix(bandwidth, "bandwidth matrix");
  Matrix c(bandwidth.n);
  for (int i = 0; i < c.n; ++i)
    for (int j = 0; j < c.n; ++j) {
      const double b = bandwidth(i, j);
      if (b <= 0 && i != j)
        bad("bandwidth <= 0 between GPUs " + std::to_string(i) + " and " + std::to_string(j));
      c(i, j) = b > 0 ? 1.0 / b : 0.0;
    }
  return c;
}

double qap_cost(const Matrix& flow, const Matrix& dist, const std::vector<int>& assignment) {
  if (static_cast<int>(assignment.size()) != flow.n)
    bad("assignment size differs from the flow matrix");
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
  detail::check_matrix(flow, "flow matrix");
  detail::check_matrix(dist, "distance matrix");
  const int n = flow.n, m = dist.n;
  if (n > m)
    bad("more facilities (" + std::to_string(n) + ") than locations (" + std::to_string(m) + ")");
  if (o.restarts < 0) bad("negative restart count");
  Qap q(flow, dist, n, m);
  if (!o.facility_class.empty() || !o.location_class.empty()) {
    if (static_cast<int>(o.facility_class.size()) != n ||
        static_cast<int>(o.location_class.size()) != m)
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
      if (l < 0 || l >= m || seen[l] || !q.ok(i, l))
        bad("start assignment is not a valid assignment");
      seen[l] = 1;
    }
  }
  const bool exact =
      o.method == QapMethod::exact || (o.method == QapMethod::automatic && n <= o.exact_max);
  // Heuristic first: its answer is the result above exact_max, and branch and bound's first bound.
  // Up to kEnumerateMax locations the exact search needs no more than the greedy start: the
  // enumeration visits everything anyway, the twin search only a handful of nodes.
  std::vector<int> best = start ? *start : greedy(q);
  double best_cost = qap_cost(flow, dist, best);
  auto consider = [&](std::vector<int> pos, bool improve) {
    if (improve) local_search(q, pos);
    const double c = qap_cost(flow, dist, pos);
    if (better(c, best_cost)) best = std::move(pos), best_cost = c;
  };
  const bool improve = !exact || m > kEnumerateMax;
  if (start) consider(greedy(q), improve);
  if (improve) consider(best, true);
  // Iterated local search: mostly kicks of the best so far, every fourth a fresh random start.
  detail::Rng rng(o.seed);
  for (int i = 0; !exact && i < o.restarts; ++i)
    consider(i % 4 == 3 ? random_start(q, rng) : kick(q, best, 2 + i % 3, rng), true);
  bool symmetric = false;
  if (exact) {
    const std::vector<int> twin = twins_of(q);
    for (int l = 0; l < m; ++l) symmetric = symmetric || twin[l] != l;
  }
  if (exact && m <= kEnumerateMax && !q.fc && !symmetric) {
    best = enumerate_all(q, best, best_cost);
    best_cost = qap_cost(flow, dist, best);
  } else if (exact) {
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

}  // namespace ferry::place
