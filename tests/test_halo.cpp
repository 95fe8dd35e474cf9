// The halo library on the host backend, under mpiexec -n 1, 2, 4 and 8 (oversubscribed): random
// grids (prime extents too), widths (axis form, 26-value overrides, star), periodicity, element
// sizes, layouts (axis orders, padding, interleaved fields), several subdomains per rank, every
// method that can be forced; every allocated point checked by tests/halo_grid.hpp, and the
// library's own verify() run on the same plans.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "halo_grid.hpp"

namespace {

using namespace halo_test;

int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int size_of() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// FERRY_SEED=n repeats a run; otherwise the clock picks (printed, so a failure can be repeated).
std::uint64_t shared_seed() {
  unsigned long long s = static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (const char* e = std::getenv("FERRY_SEED")) s = std::strtoull(e, nullptr, 10);
  MPI_Bcast(&s, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  if (rank_of() == 0) std::printf("seed %llu\n", s);
  return s;
}

// Every rank's verdict: a failure on one rank stops all of them at the same point, so none is left
// waiting in an exchange for a rank that gave up.
bool all_ok(const std::string& err) {
  int bad = err.empty() ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return bad == 0;
}

const int kPrimes[] = {5, 7, 11, 13, 17, 19, 23, 29, 31};

// Exchanges `rounds` times (swapping when asked) and checks every point after each. `mixed`: each
// subdomain's arrays get their own axis order (the plan packs in one order for all).
void run(const fh::Domain& dom, const Layout& L, const fh::Options& opt, int rounds, bool use_verify,
         const std::string& what, bool mixed = false) {
  std::vector<Arrays> arrays;
  std::vector<std::vector<fh::Field>> fields;
  for (const auto& sub : dom.local()) {
    Layout mine = L;
    if (mixed) mine.order = (rank_of() + static_cast<int>(fields.size())) % 3;  // layouts differ
    arrays.push_back(make_arrays(mine, sub.extent));
    fields.push_back(arrays.back().fields);
  }
  fh::Plan plan = fh::plan(dom, fields, opt);
  int parity = 0;
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t s = 0; s < fields.size(); ++s)
      for (std::size_t f = 0; f < fields[s].size(); ++f)
        fill(fields[s][f], static_cast<unsigned char*>(parity ? fields[s][f].data_next : fields[s][f].data),
             static_cast<int>(f), dom.local()[s], round);
    if (round % 2) {
      plan.start();
      while (!plan.test()) std::this_thread::yield();
      plan.finish();
    } else {
      plan.exchange();
    }
    std::string err;
    for (std::size_t s = 0; s < fields.size(); ++s)
      for (std::size_t f = 0; f < fields[s].size(); ++f)
        err += check(fields[s][f], static_cast<const unsigned char*>(parity ? fields[s][f].data_next : fields[s][f].data),
                     static_cast<int>(f), dom.local()[s], round, dom.global(), dom.periodic());
    ASSERT_TRUE(all_ok(err)) << what << " round " << round << "\n" << err << plan.describe();
    if (L.second) {
      plan.swap();
      parity ^= 1;
    }
  }
  if (use_verify) {
    const auto r = plan.verify();
    EXPECT_TRUE(r.ok()) << what << ": " << r.first_errors;
    EXPECT_GT(r.cells_checked, 0);
  }
}

fh::Widths random_widths(std::mt19937_64& g, const Index3& thinnest, const fh::Domain& dom) {
  auto cap = [&](int a) {  // a width along a is capped by the thinnest subdomain where neighbours exist
    const bool any = dom.grid()[a] > 1 || dom.periodic()[a];
    return static_cast<int>(any ? std::min<i64>(3, thinnest[a]) : 3);
  };
  std::array<int, 3> minus{}, plus{};
  for (int a = 0; a < 3; ++a) {
    minus[a] = static_cast<int>(g() % (cap(a) + 1));
    plus[a] = static_cast<int>(g() % (cap(a) + 1));
  }
  fh::Widths w = fh::Widths::axes(minus, plus);
  switch (g() % 4) {
    case 0: break;
    case 1: w.faces_only(); break;
    case 2: w.no_corners(); break;
    case 3:  // 26-value overrides on a few directions
      for (int k = 0; k < 4; ++k) {
        const int d = static_cast<int>(g() % 27);
        if (d == 13) continue;
        const fh::Dir dir = fh::dir_of(d);
        int m = 3;
        for (int a = 0; a < 3; ++a)
          if (dir[a] != 0) m = std::min(m, cap(a));
        w.set(dir, static_cast<int>(g() % (m + 1)));
      }
  }
  return w;
}

TEST(Halo, RandomGridsAllMethods) {
  auto seed = shared_seed();
  std::mt19937_64 g(seed);
  const int nranks = size_of();
  int cases = nranks >= 8 ? 14 : 24;
  if (const char* e = std::getenv("FERRY_HALO_CASES")) cases = std::atoi(e);  // longer runs by hand
  const fh::Method forced[] = {fh::Method::local, fh::Method::peer, fh::Method::ipc, fh::Method::staged,
                               fh::Method::pipelined, fh::Method::mpi};
  for (int c = 0; c < cases; ++c) {
    fh::DomainOptions o;
    o.subdomains = 1 + static_cast<int>(g() % 3);
    for (int a = 0; a < 3; ++a) o.periodic[a] = g() % 2;
    const int total = nranks * o.subdomains;
    Index3 global{};
    for (int a = 0; a < 3; ++a) global[a] = g() % 3 == 0 ? kPrimes[g() % 9] : 4 + static_cast<i64>(g() % 20);
    // Enough points for the prime-factor split of every subdomain count used here.
    for (int a = 0; a < 3; ++a) global[a] = std::max<i64>(global[a], total);
    o.placement = static_cast<fh::Placement>(g() % 3);
    o.seed = g();
    fh::Domain dom = fh::Domain::create(MPI_COMM_WORLD, global, o);
    Index3 thinnest = global;
    for (i64 z = 0; z < dom.grid()[2]; ++z)
      for (i64 y = 0; y < dom.grid()[1]; ++y)
        for (i64 x = 0; x < dom.grid()[0]; ++x)
          for (int a = 0; a < 3; ++a) thinnest[a] = std::min(thinnest[a], dom.at({x, y, z}).extent[a]);
    Layout L;
    const int nf = 1 + static_cast<int>(g() % 3);
    const i64 sizes[] = {1, 2, 4, 8, 12, 16, 24};
    L.interleave = g() % 4 == 0;
    const fh::Widths w = random_widths(g, thinnest, dom);
    for (int f = 0; f < nf; ++f) {
      L.elem.push_back(sizes[g() % 7]);
      L.widths.push_back(w);  // the plan wants every field's kind equal on every subdomain
    }
    L.order = static_cast<int>(g() % 3);
    L.pad = static_cast<int>(g() % 2);
    L.second = g() % 2;
    fh::Options opt;
    if (g() % 3 != 0) opt.method = forced[g() % 6];
    if (g() % 3 == 0) opt.split_bytes = 64 + static_cast<i64>(g() % 512);
    std::ostringstream what;
    what << "case " << c << ": global " << global[0] << "x" << global[1] << "x" << global[2] << " periodic "
         << o.periodic[0] << o.periodic[1] << o.periodic[2] << " subdomains/rank " << o.subdomains << " fields " << nf
         << " order " << L.order << " pad " << L.pad << " interleave " << L.interleave << " method "
         << (opt.method ? fh::name(*opt.method) : "model") << " split " << opt.split_bytes << "\n"
         << dom.describe();
    run(dom, L, opt, 3, c % 4 == 0, what.str(), c % 5 == 1);
    if (HasFatalFailure()) return;
  }
}

// Many exchanges back to back with ranks that sleep at random: a sender that ran ahead would
// overwrite a receiver's IPC buffer before it unpacked (the "buffer free" flag prevents it), and a
// receiver would unpack before the data is there (the "data ready" flag). Each round has new values.
TEST(Halo, HandshakeUnderSkew) {
  const int nranks = size_of();
  fh::DomainOptions o;
  o.periodic = {true, true, true};
  o.subdomains = nranks <= 2 ? 2 : 1;
  fh::Domain dom = fh::Domain::create(MPI_COMM_WORLD, {12, 10, 9}, o);
  Layout L;
  L.elem = {8, 4};
  L.widths = {fh::Widths::uniform(1), fh::Widths::uniform(1)};
  for (fh::Method m : {fh::Method::ipc, fh::Method::staged}) {
    fh::Options opt;
    opt.method = m;
    std::vector<Arrays> arrays;
    std::vector<std::vector<fh::Field>> fields;
    for (const auto& sub : dom.local()) {
      arrays.push_back(make_arrays(L, sub.extent));
      fields.push_back(arrays.back().fields);
    }
    fh::Plan plan = fh::plan(dom, fields, opt);
    std::mt19937 g(static_cast<unsigned>(rank_of() * 7 + 1));
    std::string first;
    for (int round = 0; round < 60; ++round) {
      for (std::size_t s = 0; s < fields.size(); ++s)
        for (std::size_t f = 0; f < fields[s].size(); ++f)
          fill(fields[s][f], static_cast<unsigned char*>(fields[s][f].data), static_cast<int>(f), dom.local()[s], round);
      // Sleeping between start and finish leaves this rank's incoming data unread while faster
      // neighbours finish and start the next round.
      if (g() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(g() % 2000));
      try {
        plan.start();
        if (g() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(g() % 2000));
        plan.finish();
      } catch (const ferry::Error& e) {  // a lost flag ends in FERRY_HALO_TIMEOUT: report, stop
        first = std::string(fh::name(m)) + " round " + std::to_string(round) + ": " + e.what();
        break;
      }
      // Checked here, agreed on after the last round: a collective per round would keep the ranks
      // in step and hide the race.
      for (std::size_t s = 0; s < fields.size() && first.empty(); ++s)
        for (std::size_t f = 0; f < fields[s].size() && first.empty(); ++f) {
          const std::string e = check(fields[s][f], static_cast<const unsigned char*>(fields[s][f].data),
                                      static_cast<int>(f), dom.local()[s], round, dom.global(), dom.periodic());
          if (!e.empty()) first = std::string(fh::name(m)) + " round " + std::to_string(round) + "\n" + e;
        }
    }
    ASSERT_TRUE(all_ok(first)) << first;
  }
}

TEST(Halo, ProgressThread) {
  fh::DomainOptions o;
  o.periodic = {true, false, true};
  fh::Domain dom = fh::Domain::create(MPI_COMM_WORLD, {16, 11, 7}, o);
  Layout L;
  L.elem = {8};
  L.widths = {fh::Widths::axes({1, 2, 1}, {2, 1, 0})};
  fh::Options opt;
  opt.progress_thread = true;
  opt.method = fh::Method::staged;
  run(dom, L, opt, 4, true, "progress thread");
}

TEST(Halo, InteriorAndExteriorTileTheSubdomain) {
  fh::DomainOptions o;
  o.subdomains = 2;
  fh::Domain dom = fh::Domain::create(MPI_COMM_WORLD, {64, 26, 18}, o);
  Layout L;
  L.elem = {4, 8};
  L.widths = {fh::Widths::axes({1, 0, 2}, {3, 1, 0}), fh::Widths::axes({1, 0, 2}, {3, 1, 0})};
  std::vector<Arrays> arrays;
  std::vector<std::vector<fh::Field>> fields;
  for (const auto& sub : dom.local()) {
    arrays.push_back(make_arrays(L, sub.extent));
    fields.push_back(arrays.back().fields);
  }
  fh::Plan plan = fh::plan(dom, fields, {});
  for (int s = 0; s < 2; ++s) {
    const Index3 n = dom.local()[s].extent;
    std::vector<int> hits(static_cast<std::size_t>(n[0] * n[1] * n[2]), 0);
    auto mark = [&](const fh::Box& b) {
      for (i64 z = b.lo[2]; z < b.lo[2] + b.extent[2]; ++z)
        for (i64 y = b.lo[1]; y < b.lo[1] + b.extent[1]; ++y)
          for (i64 x = b.lo[0]; x < b.lo[0] + b.extent[0]; ++x) ++hits[x + n[0] * (y + n[1] * z)];
    };
    const fh::Box in = plan.interior(s);
    mark(in);
    for (const auto& b : plan.exterior(s)) mark(b);
    for (int h : hits) ASSERT_EQ(h, 1);
    // The interior keeps the widths away from each side.
    EXPECT_EQ(in.lo[0], 1);
    EXPECT_EQ(in.lo[2], 2);
    EXPECT_EQ(in.extent[0], n[0] - 4);
    EXPECT_EQ(in.extent[1], n[1] - 1);
  }
}

TEST(Halo, GivenGridCutsAndOwners) {
  const int nranks = size_of();
  fh::DomainOptions o;
  o.periodic = {true, true, false};
  o.subdomains = 2;
  o.grid = {2 * nranks, 1, 1};
  // Uneven cuts, and cells dealt out backwards.
  o.cuts[0].push_back(0);
  for (int k = 1; k <= 2 * nranks; ++k) o.cuts[0].push_back(o.cuts[0].back() + 3 + k % 3);
  const i64 nx = o.cuts[0].back();
  for (int id = 0; id < 2 * nranks; ++id) o.owner.push_back(nranks - 1 - id / 2);
  fh::Domain dom = fh::Domain::create(MPI_COMM_WORLD, {nx, 6, 5}, o);
  for (const auto& sub : dom.local()) EXPECT_EQ(dom.owner(sub.id), rank_of());
  Layout L;
  L.elem = {8};
  L.widths = {fh::Widths::uniform(2)};
  run(dom, L, {}, 2, true, "given grid");
}

TEST(Halo, WidthsMeaning) {
  fh::Widths w = fh::Widths::axes({1, 2, 3}, {4, 5, 6});
  EXPECT_EQ(w.thickness({-1, -1, 0}, 0), 1);
  EXPECT_EQ(w.thickness({-1, -1, 0}, 1), 2);
  EXPECT_EQ(w.thickness({-1, -1, 0}, 2), 0);
  EXPECT_EQ(w.thickness({1, 1, 1}, 2), 6);
  w.set({1, 1, 0}, 2);
  EXPECT_EQ(w.thickness({1, 1, 0}, 0), 2);
  EXPECT_EQ(w.thickness({1, 1, 0}, 1), 2);
  EXPECT_EQ(w.side(0, +1), 4);
  w.faces_only();
  EXPECT_FALSE(w.sends({1, 1, 0}));
  EXPECT_TRUE(w.sends({0, 0, -1}));
  EXPECT_FALSE(fh::Widths::axes({0, 1, 1}, {1, 1, 1}).sends({-1, 1, 0}));
  EXPECT_THROW(fh::Widths::uniform(-1), ferry::Error);
  EXPECT_THROW(fh::Widths().set({0, 0, 0}, 1), ferry::Error);
}

// Placement on a Summit-like node (dissertation §4.4): 6 GPUs in two triplets, 100 GB/s inside a
// triplet, 64 GB/s across the X-bus, simulated (FERRY_TOPOLOGY=1x6, FERRY_BANDWIDTH) on 6 host
// ranks. The node-aware placement (the QAP) must move no more halo over the slow links, and cost no
// more in bytes / bandwidth, than the trivial or random ones; the report is printed.
TEST(Halo, PlacementOnSummitLikeLinks) {
  if (size_of() != 6) GTEST_SKIP() << "needs 6 ranks";
  const std::string path = "/tmp/ferry_halo_summit_" + std::to_string(rank_of()) + ".txt";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    for (int i = 0; i < 6; ++i) {
      for (int j = 0; j < 6; ++j) std::fprintf(f, "%s ", i == j ? "900" : (i / 3 == j / 3 ? "100" : "64"));
      std::fprintf(f, "\n");
    }
    std::fclose(f);
  }
  setenv("FERRY_TOPOLOGY", "1x6", 1);
  setenv("FERRY_BANDWIDTH", path.c_str(), 1);
  auto slow_and_cost = [&](fh::Placement pl, std::uint64_t seed) {
    fh::DomainOptions o;
    o.periodic = {true, true, false};
    o.placement = pl;
    o.seed = seed;
    o.halo_hint = fh::Widths::uniform(2);
    fh::Domain dom = fh::Domain::create(MPI_COMM_WORLD, {96, 60, 40}, o);
    i64 slow = 0;
    double cost = 0;
    for (const auto& [gbps, points] : dom.placement_report().links) {
      if (gbps > 0 && gbps < 80) slow += points;
      if (gbps > 0) cost += static_cast<double>(points) / gbps;
    }
    if (rank_of() == 0) std::printf("%s\n", dom.describe().c_str());
    return std::make_pair(slow, cost);
  };
  const auto qap = slow_and_cost(fh::Placement::node_aware, 1);
  const auto trivial = slow_and_cost(fh::Placement::trivial, 1);
  EXPECT_LE(qap.second, trivial.second + 1e-9);
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const auto random = slow_and_cost(fh::Placement::random, seed);
    EXPECT_LE(qap.second, random.second + 1e-9) << "seed " << seed;
  }
  if (rank_of() == 0)
    std::printf("halo points over the 64 GB/s links: node-aware %lld, trivial %lld\n",
                static_cast<long long>(qap.first), static_cast<long long>(trivial.first));
  unsetenv("FERRY_TOPOLOGY");
  unsetenv("FERRY_BANDWIDTH");
  std::remove(path.c_str());
}

}  // namespace
