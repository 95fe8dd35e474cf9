// The placement layer, part 1: the grid partition of §4.3 (coverage, balance, neighbours, minimal
// surface against brute force), the QAP of §4.4 (exact against full enumeration, the heuristic
// against exact), placement strategies and the traffic report on Summit-like and NVSwitch-like
// nodes. One process, no GPU. Seeds are printed; every failure names its case.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ferry/error.hpp>
#include <ferry/place.hpp>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace ferry::place;

template <class F>
int error_class(F&& f) {
  try {
    f();
  } catch (const ferry::Error& e) {
    return e.mpi_error_class();
  }
  return MPI_SUCCESS;
}

std::string str(const Int3& v) {
  return std::to_string(v[0]) + "x" + std::to_string(v[1]) + "x" + std::to_string(v[2]);
}

// The explicit halo volume by class: every subdomain, every direction, its neighbour's class.
Surface explicit_surface(const Partition& p, const Halo& h) {
  Surface s;
  for (int i = 0; i < p.size(); ++i)
    for (int k = 0; k < kDirections; ++k) {
      const int j = p.neighbour(i, direction(k));
      if (j < 0) continue;
      const i64 c = h.cells(k, p.subdomains[i].box.extent);
      const Subdomain &a = p.subdomains[i], &b = p.subdomains[j];
      (a.node != b.node ? s.inter_node : a.gpu != b.gpu ? s.inter_gpu : s.same_gpu) += c;
    }
  return s;
}

void check_partition(const Partition& p, const std::string& what) {
  SCOPED_TRACE(what);
  const Int3 g = p.grid();
  ASSERT_EQ(p.size(), g[0] * g[1] * g[2]);
  i64 volume = 0;
  Ext3 lo{INT64_MAX, INT64_MAX, INT64_MAX}, hi{0, 0, 0};
  for (int i = 0; i < p.size(); ++i) {
    const Subdomain& s = p.subdomains[i];
    ASSERT_EQ(p.id(s.coords), i);
    ASSERT_EQ((s.node * p.gpus_per_node() + s.gpu) * p.subdomains_per_gpu() + s.sub, i);
    for (int a = 0; a < 3; ++a) {
      ASSERT_GE(s.box.extent[a], 1);
      ASSERT_GE(s.box.origin[a], 0);
      ASSERT_LE(s.box.origin[a] + s.box.extent[a], p.extent[a]);
      lo[a] = std::min(lo[a], s.box.extent[a]);
      hi[a] = std::max(hi[a], s.box.extent[a]);
    }
    volume += s.box.volume();
    for (int k = 0; k < kDirections; ++k) {
      const Int3 d = direction(k);
      const int j = p.neighbour(i, d);
      bool inside = true;
      for (int a = 0; a < 3; ++a) {
        const int c = s.coords[a] + d[a];
        inside = inside && (p.periodic[a] || (c >= 0 && c < g[a]));
      }
      ASSERT_EQ(j >= 0, inside) << "direction " << str(d);
      if (j < 0) continue;
      ASSERT_EQ(p.neighbour(j, {-d[0], -d[1], -d[2]}), i);
      const Box& b = p.subdomains[j].box;
      for (int a = 0; a < 3; ++a) {  // the neighbour touches this box on that side
        if (d[a] == 0) {
          ASSERT_EQ(b.origin[a], s.box.origin[a]);
          ASSERT_EQ(b.extent[a], s.box.extent[a]);
        } else if (d[a] > 0) {
          ASSERT_EQ(b.origin[a], (s.box.origin[a] + s.box.extent[a]) % p.extent[a]);
        } else {
          ASSERT_EQ((b.origin[a] + b.extent[a]) % p.extent[a], s.box.origin[a]);
        }
      }
    }
  }
  ASSERT_EQ(volume, p.extent[0] * p.extent[1] * p.extent[2]);
  for (int a = 0; a < 3; ++a) ASSERT_LE(hi[a] - lo[a], 1) << "axis " << a;
  // Small domains: every cell covered exactly once.
  if (volume <= 200000) {
    std::vector<int> owner(static_cast<std::size_t>(volume), 0);
    for (const Subdomain& s : p.subdomains)
      for (i64 z = 0; z < s.box.extent[2]; ++z)
        for (i64 y = 0; y < s.box.extent[1]; ++y)
          for (i64 x = 0; x < s.box.extent[0]; ++x)
            ++owner[static_cast<std::size_t>(
                (s.box.origin[0] + x) +
                p.extent[0] * ((s.box.origin[1] + y) + p.extent[1] * (s.box.origin[2] + z)))];
    for (int c : owner) ASSERT_EQ(c, 1);
  }
}

TEST(PlaceGrid, Directions) {
  for (int k = 0; k < kDirections; ++k) EXPECT_EQ(direction_index(direction(k)), k);
  EXPECT_EQ(direction(0), (Int3{-1, -1, -1}));
  EXPECT_EQ(direction(12), (Int3{-1, 0, 0}));
  EXPECT_EQ(direction(13), (Int3{1, 0, 0}));
  EXPECT_EQ(direction(25), (Int3{1, 1, 1}));
  EXPECT_EQ(direction_index({0, 0, 0}), -1);
  EXPECT_EQ(direction_index({2, 0, 0}), -1);
  EXPECT_EQ(error_class([] { direction(26); }), MPI_ERR_ARG);
  const Halo star = Halo::star(2);
  EXPECT_EQ(std::count(star.exchange.begin(), star.exchange.end(), true), 6);
  EXPECT_EQ(star.cells(13, {10, 20, 30}), 2 * 20 * 30);
  EXPECT_EQ(star.cells(14, {10, 20, 30}), 0);  // (-1,1,0): an edge, off in a star
  Halo h = Halo::box(1);
  h.minus = {1, 2, 3};
  h.plus = {4, 5, 6};
  EXPECT_EQ(h.cells(direction_index({1, -1, 0}), {10, 20, 30}), 4 * 2 * 30);
  EXPECT_EQ(h.cells(direction_index({-1, 1, 1}), {10, 20, 30}), 1 * 5 * 6);
}

TEST(PlaceGrid, CoversDomainOnceWithPrimeAndRandomSizes) {
  const unsigned seed = 20261125;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  const std::vector<Ext3> fixed{{97, 101, 103}, {7, 11, 13}, {1, 1, 64}, {2, 3, 5}, {31, 1, 17}};
  for (int t = 0; t < 60; ++t) {
    Ext3 e = t < static_cast<int>(fixed.size())
                 ? fixed[t]
                 : Ext3{1 + static_cast<i64>(rng() % 60), 1 + static_cast<i64>(rng() % 60),
                        1 + static_cast<i64>(rng() % 60)};
    const Shape sh{1 + static_cast<int>(rng() % 12), 1 + static_cast<int>(rng() % 8),
                   1 + static_cast<int>(rng() % 3)};
    const std::array<bool, 3> per{rng() % 2 == 0, rng() % 2 == 0, rng() % 2 == 0};
    const Halo h = Halo::box(1 + static_cast<i64>(rng() % 3));
    const std::string what = "case " + std::to_string(t) + ": " + std::to_string(e[0]) + "x" +
                             std::to_string(e[1]) + "x" + std::to_string(e[2]) + " into " +
                             std::to_string(sh.nodes) + "/" + std::to_string(sh.gpus_per_node) +
                             "/" + std::to_string(sh.subdomains_per_gpu);
    Partition p;
    const int rc = error_class([&] { p = partition_grid(e, per, sh, h); });
    if (e[0] * e[1] * e[2] < i64{sh.nodes} * sh.gpus_per_node * sh.subdomains_per_gpu) {
      EXPECT_EQ(rc, MPI_ERR_ARG) << what;  // fewer cells than pieces
      continue;
    }
    if (rc != MPI_SUCCESS) {  // enough cells but no grid fits (e.g. a prime count on a thin axis)
      EXPECT_EQ(rc, MPI_ERR_ARG) << what;
      continue;
    }
    check_partition(p, what);
    const Surface a = surface(p, h), b = explicit_surface(p, h);
    EXPECT_EQ(a.inter_node, b.inter_node) << what;
    EXPECT_EQ(a.inter_gpu, b.inter_gpu) << what;
    EXPECT_EQ(a.same_gpu, b.same_gpu) << what;
    i64 sum = 0;
    for (const Flow& f : halo_flows(p, h, 3)) sum += f.bytes;
    EXPECT_EQ(sum, 3 * a.total()) << what;
  }
}

// Every decomposition the search could choose, costed explicitly: the chosen one is the least.
TEST(PlaceGrid, SurfaceIsMinimalByBruteForce) {
  struct Case {
    Ext3 e;
    std::array<bool, 3> per;
    Shape sh;
    Halo h;
  };
  Halo uneven = Halo::box(1);
  uneven.minus = {1, 2, 1};
  uneven.plus = {3, 1, 2};
  const std::vector<Case> cases{
      {{24, 24, 24}, {false, false, false}, {4, 6, 1}, Halo::box(1)},
      {{64, 32, 16}, {true, true, true}, {4, 2, 2}, Halo::box(2)},
      {{97, 13, 41}, {false, true, false}, {6, 4, 1}, Halo::star(1)},
      {{30, 31, 29}, {true, false, true}, {8, 3, 2}, uneven},
      {{100, 7, 7}, {false, false, false}, {12, 2, 1}, Halo::box(1)},
      {{17, 19, 23}, {true, true, true}, {3, 5, 2}, Halo::star(2)},
  };
  auto factor3 = [](int n) {
    std::vector<Int3> out;
    for (int x = 1; x <= n; ++x)
      for (int y = 1; y <= n / x; ++y)
        if (n % (x * y) == 0) out.push_back({x, y, n / (x * y)});
    return out;
  };
  for (const Case& c : cases) {
    const std::string what =
        std::to_string(c.e[0]) + "x" + std::to_string(c.e[1]) + "x" + std::to_string(c.e[2]);
    const Partition chosen = partition_grid(c.e, c.per, c.sh, c.h);
    const Surface cs = explicit_surface(chosen, c.h);
    using Key = std::tuple<bool, i64, i64, i64>;
    Key best{true, INT64_MAX, 0, 0};
    int candidates = 0;
    for (const Int3& n : factor3(c.sh.nodes))
      for (const Int3& g : factor3(c.sh.gpus_per_node))
        for (const Int3& s : factor3(c.sh.subdomains_per_gpu)) {
          GridOptions o{n, g, s};
          Partition p;
          if (error_class([&] { p = partition_grid(c.e, c.per, c.sh, c.h, o); }) != MPI_SUCCESS)
            continue;
          ++candidates;
          EXPECT_EQ(p.node_grid, n);
          EXPECT_EQ(p.gpu_grid, g);
          bool narrow = false;
          for (int a = 0; a < 3; ++a) {
            const i64 pieces = i64{n[a]} * g[a] * s[a];
            if ((pieces > 1 || c.per[a]) && c.e[a] / pieces < std::max(c.h.minus[a], c.h.plus[a]))
              narrow = true;
          }
          const Surface x = explicit_surface(p, c.h);
          best = std::min(best, Key{narrow, x.inter_node, x.inter_gpu, x.same_gpu});
        }
    ASSERT_GT(candidates, 1) << what;
    EXPECT_EQ(std::get<1>(best), cs.inter_node) << what << " nodes " << str(chosen.node_grid);
    EXPECT_EQ(std::get<2>(best), cs.inter_gpu) << what << " gpus " << str(chosen.gpu_grid);
    EXPECT_EQ(std::get<3>(best), cs.same_gpu) << what;
    std::printf(
        "%s into %d/%d/%d: nodes %s, GPUs %s, subdomains %s; halo cells inter-node %lld, "
        "inter-GPU %lld (%d candidates)\n",
        what.c_str(), c.sh.nodes, c.sh.gpus_per_node, c.sh.subdomains_per_gpu,
        str(chosen.node_grid).c_str(), str(chosen.gpu_grid).c_str(), str(chosen.sub_grid).c_str(),
        static_cast<long long>(cs.inter_node), static_cast<long long>(cs.inter_gpu), candidates);
  }
}

TEST(PlaceGrid, UserDecompositionAndBadInput) {
  const Halo h = Halo::box(1);
  const std::array<bool, 3> np{false, false, false};
  GridOptions o;
  o.nodes = {1, 0, 2};
  o.gpus = {3, 2, 1};
  const Partition p = partition_grid({90, 60, 30}, np, {4, 6, 1}, h, o);
  EXPECT_EQ(p.node_grid, (Int3{1, 2, 2}));
  EXPECT_EQ(p.gpu_grid, (Int3{3, 2, 1}));
  check_partition(p, "user decomposition");
  o.nodes = {3, 0, 0};  // 3 does not divide 4
  EXPECT_EQ(error_class([&] { partition_grid({90, 60, 30}, np, {4, 6, 1}, h, o); }), MPI_ERR_DIMS);
  o = {};
  o.gpus = {-1, 0, 0};
  EXPECT_EQ(error_class([&] { partition_grid({90, 60, 30}, np, {4, 6, 1}, h, o); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { partition_grid({0, 60, 30}, np, {1, 1, 1}, h); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { partition_grid({-5, 60, 30}, np, {1, 1, 1}, h); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { partition_grid({9, 9, 9}, np, {0, 1, 1}, h); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { partition_grid({9, 9, 9}, np, {1, -2, 1}, h); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { partition_grid({2, 2, 2}, np, {27, 1, 1}, h); }), MPI_ERR_ARG);
  Halo neg = h;
  neg.plus[1] = -1;
  EXPECT_EQ(error_class([&] { partition_grid({9, 9, 9}, np, {1, 1, 1}, neg); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { p.id({3, 0, 0}); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { p.neighbour(0, {0, 0, 0}); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { p.neighbour(-1, {1, 0, 0}); }), MPI_ERR_ARG);
  // A halo wider than the pieces would be: the search prefers a split that keeps them wide.
  const Partition wide = partition_grid({8, 64, 64}, {true, true, true}, {8, 1, 1}, Halo::box(3));
  for (const Subdomain& s : wide.subdomains)
    for (int a = 0; a < 3; ++a) EXPECT_GE(s.box.extent[a], 3);
}

// ---- QAP
// -----------------------------------------------------------------------------------------

Matrix random_matrix(int n, std::mt19937& rng, double zero_fraction) {
  Matrix m(n);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      m(i, j) = u(rng) < zero_fraction ? 0.0 : std::floor(1 + 100 * u(rng));
  return m;
}

double brute_force(const Matrix& f, const Matrix& d, const std::vector<int>* fc = nullptr,
                   const std::vector<int>* lc = nullptr) {
  std::vector<int> perm(d.n);
  std::iota(perm.begin(), perm.end(), 0);
  double best = INFINITY;
  do {
    std::vector<int> a(perm.begin(), perm.begin() + f.n);
    bool ok = true;
    for (int i = 0; fc && i < f.n; ++i) ok = ok && (*fc)[i] == (*lc)[a[i]];
    if (ok) best = std::min(best, qap_cost(f, d, a));
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

void check_assignment(const QapResult& r, int n, int m) {
  ASSERT_EQ(static_cast<int>(r.assignment.size()), n);
  std::vector<int> seen(m, 0);
  for (int l : r.assignment) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, m);
    ASSERT_EQ(seen[l]++, 0);
  }
}

TEST(PlaceQap, ExactEqualsBruteForceAndHeuristicIsClose) {
  const unsigned seed = 4242;
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  double worst = 1, sum = 0;
  int count = 0;
  for (int t = 0; t < 48; ++t) {
    const int n = 2 + t % 7;                 // 2..8
    const int m = n + (t % 5 == 0 ? 1 : 0);  // some with a free location
    const Matrix f = random_matrix(n, rng, 0.3);
    Matrix d = random_matrix(m, rng, 0.0);
    if (t % 3 == 0)  // two groups of twins (like Summit's triples): the search's symmetry pruning
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < m; ++j) d(i, j) = i == j ? 0.5 : (i % 2 == j % 2 ? 1.0 : 3.0);
    const double want = brute_force(f, d);
    QapOptions o;
    o.method = QapMethod::exact;
    const QapResult ex = solve_qap(f, d, o);
    check_assignment(ex, n, m);
    EXPECT_TRUE(ex.exact);
    EXPECT_NEAR(ex.cost, want, 1e-9 * want) << "n=" << n << " m=" << m;
    EXPECT_DOUBLE_EQ(ex.cost, qap_cost(f, d, ex.assignment));
    EXPECT_TRUE(solve_qap(f, d).exact);  // automatic: exact up to 8
    o.method = QapMethod::heuristic;
    o.seed = seed + t;
    const QapResult he = solve_qap(f, d, o);
    check_assignment(he, n, m);
    EXPECT_FALSE(he.exact);
    const double ratio = want > 0 ? he.cost / want : 1.0;
    EXPECT_GE(ratio, 1.0 - 1e-12);
    worst = std::max(worst, ratio);
    sum += ratio;
    ++count;
  }
  std::printf("heuristic / exact over %d instances (n = 2..8): mean %.4f, worst %.4f\n", count,
              sum / count, worst);
  // Beyond 8 locations the exact search bounds every node (another code path): 9 of 9, and 7 of 9.
  for (const int n : {9, 7}) {
    const Matrix f = random_matrix(n, rng, 0.2), d = random_matrix(9, rng, 0.0);
    QapOptions o;
    o.method = QapMethod::exact;
    const QapResult ex = solve_qap(f, d, o);
    check_assignment(ex, n, 9);
    EXPECT_NEAR(ex.cost, brute_force(f, d), 1e-9 * ex.cost) << "n=" << n << " m=9";
  }
  EXPECT_LE(sum / count, 1.02);
  EXPECT_LE(worst, 1.10);
}

TEST(PlaceQap, ClassesStartAndBadInput) {
  std::mt19937 rng(7);
  const Matrix f = random_matrix(6, rng, 0.2), d = random_matrix(6, rng, 0.0);
  QapOptions o;
  o.facility_class = {0, 0, 1, 1, 1, 2};
  o.location_class = {1, 0, 1, 2, 0, 1};
  const QapResult r = solve_qap(f, d, o);
  check_assignment(r, 6, 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(o.location_class[r.assignment[i]], o.facility_class[i]);
  EXPECT_NEAR(r.cost, brute_force(f, d, &o.facility_class, &o.location_class), 1e-9 * r.cost);
  // An optimal start is kept: all locations alike, every assignment costs the same.
  const Matrix flat(5, 2.0);
  const std::vector<int> start{4, 2, 0, 1, 3};
  EXPECT_EQ(solve_qap(random_matrix(5, rng, 0.0), flat, {}, &start).assignment, start);
  const Matrix f5 = random_matrix(5, rng, 0.0);
  auto err = [&](auto&& call) { return error_class(call); };
  EXPECT_EQ(err([&] { solve_qap(random_matrix(7, rng, 0), random_matrix(6, rng, 0)); }),
            MPI_ERR_ARG);
  Matrix neg = f5;
  neg(1, 2) = -1;
  EXPECT_EQ(err([&] { solve_qap(neg, flat); }), MPI_ERR_ARG);
  neg(1, 2) = NAN;
  EXPECT_EQ(err([&] { solve_qap(neg, flat); }), MPI_ERR_ARG);
  Matrix broken = f5;
  broken.a.pop_back();
  EXPECT_EQ(err([&] { solve_qap(broken, flat); }), MPI_ERR_ARG);
  const std::vector<int> dup{0, 0, 1, 2, 3}, shortv{0, 1};
  EXPECT_EQ(err([&] { solve_qap(f5, flat, {}, &dup); }), MPI_ERR_ARG);
  EXPECT_EQ(err([&] { solve_qap(f5, flat, {}, &shortv); }), MPI_ERR_ARG);
  QapOptions bad_classes;
  bad_classes.facility_class = {0, 0, 0, 0, 1};
  bad_classes.location_class = {0, 1, 0, 0, 0};
  EXPECT_NO_THROW(solve_qap(f5, flat, bad_classes));
  bad_classes.facility_class = {0, 0, 0, 1, 1};
  bad_classes.location_class = {0, 0, 1, 1, 1};
  EXPECT_EQ(err([&] { solve_qap(f5, flat, bad_classes); }), MPI_ERR_ARG);
  bad_classes.location_class = {0, 0, 1};
  EXPECT_EQ(err([&] { solve_qap(f5, flat, bad_classes); }), MPI_ERR_ARG);
  Matrix bw(2, 10.0);
  bw(0, 1) = 0;
  EXPECT_EQ(err([&] { cost_from_bandwidth(bw); }), MPI_ERR_ARG);
}

// Summit: two triples of GPUs on 2x NVLink2 (100 GB/s), 64 GB/s across the X-bus.
Matrix summit() {
  Matrix bw(6);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) bw(i, j) = i == j ? 0 : (i / 3 == j / 3 ? 100e9 : 64e9);
  return cost_from_bandwidth(bw);
}

i64 slow_bytes(const Traffic& t) {
  return t.intra_node.empty() ? 0 : t.intra_node.back().bytes;
}

// Summit's matrix with the GPUs numbered alternately across the two triples.
Matrix interleaved(const Matrix& c) {
  const int order[6] = {0, 3, 1, 4, 2, 5};
  Matrix x(6);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) x(i, j) = c(order[i], order[j]);
  return x;
}

TEST(PlacePlacement, SummitNodeKeepsRowsOnTriples) {
  // One node of 6 GPUs: the GPU grid is 3 x 2 and the x faces are 4x the y faces, so each row of 3
  // belongs on one NVLink triple.
  const Halo h = Halo::box(3);
  const std::array<bool, 3> np{false, false, false};
  GridOptions go;
  go.gpus = {3, 2, 1};
  const Partition p = partition_grid({192, 512, 256}, np, {1, 6, 1}, h, go);
  const i64 bpc = 8 * 8;  // 8 fp64 fields
  const auto flows = halo_flows(p, h, bpc);
  i64 across_rows = 0;
  for (const Flow& f : flows)
    if (p.subdomains[f.src].coords[1] != p.subdomains[f.dst].coords[1]) across_rows += f.bytes;
  for (const bool inter : {false, true}) {
    const Machine m{1, 6, inter ? interleaved(summit()) : summit()};
    // Brute force over every GPU permutation: the least slow-link traffic and cost.
    std::vector<int> perm(6);
    std::iota(perm.begin(), perm.end(), 0);
    i64 least = INT64_MAX, most = 0;
    double least_cost = INFINITY;
    do {
      std::vector<int> node(6, 0), gpu(6);
      for (int i = 0; i < 6; ++i) gpu[i] = perm[p.subdomains[i].gpu];
      const Traffic t = traffic(flows, node, gpu, m.gpu_cost);
      least = std::min(least, slow_bytes(t));
      most = std::max(most, slow_bytes(t));
      least_cost = std::min(least_cost, t.cost);
    } while (std::next_permutation(perm.begin(), perm.end()));
    EXPECT_EQ(least, across_rows);
    std::printf(
        "Summit node%s, 192x512x256, 8 fp64 fields, radius 3: bytes over the X-bus per "
        "exchange:\n",
        inter ? " (GPUs numbered across triples)" : "");
    i64 node_aware = 0;
    for (Strategy s : {Strategy::trivial, Strategy::random, Strategy::node_aware, Strategy::qap}) {
      PlaceOptions po;
      po.strategy = s;
      po.seed = 3;
      const Placement pl = place(p, h, bpc, m, po);
      const Traffic t = traffic(flows, pl.node, pl.gpu, m.gpu_cost);
      const char* names[] = {"trivial", "random", "node_aware", "qap"};
      std::printf("  %-10s %10lld B slow, %10lld B fast, cost %.3g s\n", names[static_cast<int>(s)],
                  static_cast<long long>(slow_bytes(t)),
                  static_cast<long long>(t.intra_node.front().bytes), t.cost);
      EXPECT_GE(slow_bytes(t), least);
      EXPECT_LE(slow_bytes(t), most);
      EXPECT_EQ(t.inter_node, 0);
      if (s == Strategy::node_aware) node_aware = slow_bytes(t);
      if (s != Strategy::qap) continue;
      EXPECT_EQ(slow_bytes(t), least);
      EXPECT_NEAR(t.cost, least_cost, 1e-9 * least_cost);
      ASSERT_EQ(t.intra_node.size(), 2u);
      EXPECT_EQ(t.intra_node.front().cost, 1.0 / 100e9);
      EXPECT_EQ(t.intra_node.back().cost, 1.0 / 64e9);
    }
    if (inter) EXPECT_GT(node_aware, least);  // the partition's order is wrong for this numbering
  }
}

TEST(PlacePlacement, NodesAndUniformSwitch) {
  // 4 nodes x 8 GPUs on an NVSwitch: all links alike, so QAP keeps the partition's order; node
  // blocks cut inter-node traffic compared with the trivial and random layouts.
  const Halo h = Halo::box(1);
  const std::array<bool, 3> per{true, true, true};
  const Partition p = partition_grid({128, 128, 128}, per, {4, 8, 1}, h);
  Matrix bw(8, 300e9);
  const Machine m{4, 8, cost_from_bandwidth(bw)};
  const auto flows = halo_flows(p, h, 8);
  PlaceOptions o;
  const Placement q = place(p, h, 8, m, o);
  for (int i = 0; i < p.size(); ++i) {
    EXPECT_EQ(q.node[i], p.subdomains[i].node);
    EXPECT_EQ(q.gpu[i], p.subdomains[i].gpu);
  }
  const Traffic tq = traffic(flows, q.node, q.gpu, m.gpu_cost);
  EXPECT_EQ(tq.inter_node, 8 * surface(p, h).inter_node);
  ASSERT_EQ(tq.intra_node.size(), 1u);
  o.strategy = Strategy::trivial;
  const Placement t = place(p, h, 8, m, o);
  o.strategy = Strategy::random;
  const Placement r = place(p, h, 8, m, o);
  const i64 inter_trivial = traffic(flows, t.node, t.gpu, m.gpu_cost).inter_node;
  const i64 inter_random = traffic(flows, r.node, r.gpu, m.gpu_cost).inter_node;
  std::printf(
      "4 nodes x 8 GPUs, 128^3 periodic: inter-node bytes qap %lld, trivial %lld, random %lld\n",
      static_cast<long long>(tq.inter_node), static_cast<long long>(inter_trivial),
      static_cast<long long>(inter_random));
  EXPECT_LE(tq.inter_node, inter_trivial);
  EXPECT_LT(tq.inter_node, inter_random);
  for (int i = 0; i < p.size(); ++i) {  // every layout fills each GPU of each node once
    EXPECT_GE(r.node[i], 0);
    EXPECT_LT(r.node[i], 4);
  }
  EXPECT_EQ(error_class([&] { place(p, h, 8, Machine{2, 8, {}}); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { place(p, h, 8, Machine{4, 8, Matrix(6)}); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { halo_flows(p, h, -1); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([&] { traffic({{0, 99, 1}}, q.node, q.gpu, m.gpu_cost); }), MPI_ERR_ARG);
}

}  // namespace
