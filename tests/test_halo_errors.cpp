// Bad descriptions give every rank the same clear ferry::Error (or MPI error class from the C API),
// even when only one rank got it wrong, and never a hang: the checks are collective.
#include <ferry/ferry.h>
#include <ferry/halo.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>

#include "halo_grid.hpp"

extern "C" long long halo_c_smoke(MPI_Comm comm);  // halo_capi_c.c

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

// Runs fn on every rank; each must throw ferry::Error of class `cls` whose message has `words`.
void expect_error(const std::function<void()>& fn, int cls, const std::string& words) {
  std::string got = "no error";
  int got_cls = MPI_SUCCESS;
  try {
    fn();
  } catch (const ferry::Error& e) {
    got = e.what();
    got_cls = e.mpi_error_class();
  }
  EXPECT_EQ(got_cls, cls) << got;
  EXPECT_NE(got.find(words), std::string::npos) << "message: " << got << "\nexpected words: " << words;
}

struct Grid {
  fh::Domain dom;
  std::vector<Arrays> arrays;
  std::vector<std::vector<fh::Field>> fields;
};

Grid setup(int width = 1, bool periodic = true) {
  Grid s;
  fh::DomainOptions o;
  o.periodic = {periodic, periodic, periodic};
  s.dom = fh::Domain::create(MPI_COMM_WORLD, {12, 10, 8}, o);
  Layout L;
  L.elem = {8, 4};
  L.widths = {fh::Widths::uniform(width), fh::Widths::uniform(width)};
  for (const auto& sub : s.dom.local()) {
    s.arrays.push_back(make_arrays(L, sub.extent));
    s.fields.push_back(s.arrays.back().fields);
  }
  return s;
}

bool last_rank() { return rank_of() == size_of() - 1; }

TEST(HaloErrors, NullPointerOnOneRank) {
  Grid s = setup();
  if (last_rank()) s.fields[0][1].data = nullptr;
  expect_error([&] { fh::plan(s.dom, s.fields); }, MPI_ERR_ARG, "null pointer");
}

TEST(HaloErrors, NegativeWidthOnOneRank) {
  Grid s = setup();
  if (last_rank()) s.fields[0][0].widths.t_[4][0] = -2;  // (0, 0, -1)... raw entry, as C could
  expect_error([&] { fh::plan(s.dom, s.fields); }, MPI_ERR_ARG, "negative width");
}

TEST(HaloErrors, WidthLargerThanTheSubdomain) {
  Grid s = setup();
  const i64 thinnest = s.dom.local()[0].extent[2];
  fh::Widths w = fh::Widths::uniform(1);
  w.set({0, 0, 1}, static_cast<int>(12));
  Layout L;
  L.elem = {8};
  L.widths = {w};
  std::vector<Arrays> arrays;
  std::vector<std::vector<fh::Field>> fields;
  for (const auto& sub : s.dom.local()) {
    arrays.push_back(make_arrays(L, sub.extent));
    fields.push_back(arrays.back().fields);
  }
  (void)thinnest;
  expect_error([&] { fh::plan(s.dom, fields); }, MPI_ERR_ARG, "larger than the thinnest subdomain");
}

TEST(HaloErrors, FieldsDifferAcrossRanks) {
  if (size_of() < 2) GTEST_SKIP() << "needs two ranks";
  Grid s = setup();
  if (last_rank()) {
    s.fields[0][1].elem_bytes = 2;  // still fits its allocation, but differs from the other ranks
  }
  expect_error([&] { fh::plan(s.dom, s.fields); }, MPI_ERR_ARG, "differ between ranks");
}

TEST(HaloErrors, HaloDoesNotFitTheAllocation) {
  Grid s = setup(2);
  if (last_rank()) s.fields[0][0].origin[1] = 1;
  expect_error([&] { fh::plan(s.dom, s.fields); }, MPI_ERR_ARG, "does not fit");
  Grid t = setup(2);
  if (last_rank()) t.fields[0][0].alloc[0] -= 1;
  expect_error([&] { fh::plan(t.dom, t.fields); }, MPI_ERR_ARG, "exceeds the allocated");
}

TEST(HaloErrors, OverlappingStrides) {
  Grid s = setup();
  if (last_rank()) s.fields[0][0].strides[1] = 8;
  expect_error([&] { fh::plan(s.dom, s.fields); }, MPI_ERR_ARG, "overlap");
}

TEST(HaloErrors, WrongNumberOfSubdomainsOrFields) {
  Grid s = setup();
  auto two = s.fields;
  if (last_rank()) two.push_back(two[0]);
  expect_error([&] { fh::plan(s.dom, two); }, MPI_ERR_ARG, "fields for 2 subdomains");
  auto none = s.fields;
  if (last_rank()) none[0].clear();
  expect_error([&] { fh::plan(s.dom, none); }, MPI_ERR_ARG, "no fields");
}

TEST(HaloErrors, DomainArguments) {
  expect_error([&] { fh::Domain::create(MPI_COMM_WORLD, {0, 4, 4}); }, MPI_ERR_ARG, "global extent 0");
  const i64 n = last_rank() ? 9 : 8;
  if (size_of() > 1) expect_error([&] { fh::Domain::create(MPI_COMM_WORLD, {n, 4, 4}); }, MPI_ERR_ARG, "different arguments");
  fh::DomainOptions o;
  o.grid = {3, 1, 1};
  o.subdomains = 1;
  if (size_of() != 3) expect_error([&] { fh::Domain::create(MPI_COMM_WORLD, {9, 4, 4}, o); }, MPI_ERR_ARG, "does not hold");
  o.grid = {size_of(), 1, 1};
  o.cuts[0] = {0, 5};
  expect_error([&] { fh::Domain::create(MPI_COMM_WORLD, {9, 4, 4}, o); }, MPI_ERR_ARG, "cuts");
  o.cuts[0].clear();
  o.owner.assign(static_cast<std::size_t>(size_of()), 0);
  if (size_of() > 1) expect_error([&] { fh::Domain::create(MPI_COMM_WORLD, {9, 4, 4}, o); }, MPI_ERR_ARG, "owns more cells");
  fh::DomainOptions many;
  many.subdomains = 30;
  expect_error([&] { fh::Domain::create(MPI_COMM_WORLD, {2, 2, 2}, many); }, MPI_ERR_ARG, "ferry::place");
  fh::DomainOptions bad;
  bad.subdomains = last_rank() ? 0 : 1;
  expect_error([&] { fh::Domain::create(MPI_COMM_WORLD, {8, 8, 8}, bad); }, MPI_ERR_ARG, "0 subdomains");
}

TEST(HaloErrors, CallsOutOfOrder) {
  Grid s = setup();
  fh::Plan p = fh::plan(s.dom, s.fields);
  expect_error([&] { p.finish(); }, MPI_ERR_OTHER, "without start");
  p.start();
  expect_error([&] { p.start(); }, MPI_ERR_OTHER, "in flight");
  expect_error([&] { p.swap(); }, MPI_ERR_OTHER, "in flight");
  p.finish();
  expect_error([&] { p.swap(); }, MPI_ERR_ARG, "second array");
  expect_error([&] { p.interior(5); }, MPI_ERR_ARG, "no subdomain");
  fh::Plan empty;
  expect_error([&] { empty.exchange(); }, MPI_ERR_ARG, "empty");
}

TEST(HaloErrors, CApi) {
  const long long global[3] = {10, 9, 8};
  ferry_halo_domain_options o;
  ferry_halo_domain_options_init(&o);
  o.periodic[0] = o.periodic[1] = o.periodic[2] = 1;
  ferry_halo_domain dom = nullptr;
  ASSERT_EQ(ferry_halo_domain_create(MPI_COMM_WORLD, global, &o, &dom), MPI_SUCCESS) << ferry_error_string();
  int n = 0;
  ASSERT_EQ(ferry_halo_domain_subdomains(dom, &n), MPI_SUCCESS);
  ASSERT_EQ(n, 1);
  long long off[3], ext[3];
  int dev = 0;
  ASSERT_EQ(ferry_halo_domain_subdomain(dom, 0, off, ext, &dev), MPI_SUCCESS);
  EXPECT_EQ(ferry_halo_domain_subdomain(dom, 3, off, ext, &dev), MPI_ERR_ARG);
  ferry_halo_field f;
  std::vector<double> a(static_cast<std::size_t>((ext[0] + 4) * (ext[1] + 4) * (ext[2] + 4)));
  ASSERT_EQ(ferry_halo_field_dense(&f, a.data(), 8, ext, 2, FERRY_HALO_Z_FASTEST), MPI_SUCCESS);
  f.dir_width[0] = 0;  // no (-1,-1,-1) corner
  ferry_halo_options po;
  ferry_halo_options_init(&po);
  ferry_halo_plan plan = nullptr;
  ASSERT_EQ(ferry_halo_plan_create(dom, 1, 1, &f, &po, &plan), MPI_SUCCESS) << ferry_error_string();
  long long bad = -1;
  EXPECT_EQ(ferry_halo_verify(plan, &bad), MPI_SUCCESS);
  EXPECT_EQ(bad, 0) << ferry_error_string();
  EXPECT_EQ(ferry_halo_exchange(plan), MPI_SUCCESS);
  char text[512];
  EXPECT_EQ(ferry_halo_describe(plan, text, sizeof text), MPI_SUCCESS);
  EXPECT_NE(std::string(text).find("method"), std::string::npos);
  EXPECT_EQ(ferry_halo_swap(plan), MPI_ERR_ARG);
  EXPECT_NE(std::string(ferry_error_string()).find("second array"), std::string::npos);
  EXPECT_EQ(ferry_halo_exchange(nullptr), MPI_ERR_ARG);
  EXPECT_EQ(ferry_halo_plan_free(&plan), MPI_SUCCESS);
  EXPECT_EQ(plan, nullptr);
  // A bad field on one rank: every rank gets the error class back.
  if (last_rank()) f.data = nullptr;
  EXPECT_EQ(ferry_halo_plan_create(dom, 1, 1, &f, &po, &plan), MPI_ERR_ARG);
  EXPECT_NE(std::string(ferry_error_string()).find("null pointer"), std::string::npos) << ferry_error_string();
  po.method = 42;
  EXPECT_EQ(ferry_halo_plan_create(dom, 1, 1, &f, &po, &plan), MPI_ERR_ARG);
  EXPECT_EQ(ferry_halo_field_dense(&f, a.data(), 8, ext, -1, 0), MPI_ERR_ARG);
  EXPECT_EQ(ferry_halo_domain_free(&dom), MPI_SUCCESS);
  EXPECT_EQ(dom, nullptr);
}

TEST(HaloErrors, CApiFromC) { EXPECT_EQ(halo_c_smoke(MPI_COMM_WORLD), 0) << ferry_error_string(); }

}  // namespace
