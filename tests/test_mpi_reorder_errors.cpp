// Bad input to the topology constructors with reorder = 1 while Ferry reorders: every rank returns
// the same error class and MPI_COMM_NULL, however few ranks passed the bad arguments (here the last
// one, or ranks that disagree), and the communicator works afterwards: no rank is left waiting.
// (Run only where Ferry reorders: with reorder handed to the MPI, these calls crash or hang some
// MPIs.)
#include "reorder_util.hpp"

namespace {

using namespace reorder_test;

void expect_everywhere(int rc, MPI_Comm out, int want) {
  const int got = error_class(rc);
  EXPECT_EQ(got, want);
  EXPECT_EQ(out, MPI_COMM_NULL);
  int lo = 0, hi = 0;
  MPI_Allreduce(&got, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&got, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(lo, hi) << "ranks returned different classes";
  EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
}

// A ring (p-1 -> p -> p+1) as each rank describes it to MPI_Dist_graph_create_adjacent, which a
// case then spoils on some rank.
struct Ring {
  int n = size_of(MPI_COMM_WORLD), p = rank_of(MPI_COMM_WORLD), last = n - 1;
  std::vector<int> src{(p + n - 1) % n}, sw{1}, dst{(p + 1) % n}, dw{1};
  const int* sweights = sw.data();
  const int* dweights = dw.data();
  int indeg = 1, outdeg = 1;
  const int* dsts = dst.data();
  int call() {
    MPI_Comm out = MPI_COMM_WORLD;
    const int rc = MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, indeg, src.data(), sweights, outdeg,
                                                  dsts, dweights, MPI_INFO_NULL, 1, &out);
    result = out;
    return rc;
  }
  MPI_Comm result = MPI_COMM_WORLD;
};

TEST(ReorderBadInput, AdjacentEdgeListedAtOneEndOnly) {
  Ring r;
  if (r.p == r.last) r.dst.push_back((r.p + 2) % r.n), r.dw.push_back(1), r.outdeg = 2;
  r.dsts = r.dst.data(), r.dweights = r.dw.data();
  const int rc = r.call();
  expect_everywhere(rc, r.result, MPI_ERR_TOPOLOGY);
}

TEST(ReorderBadInput, AdjacentWeightsDifferAtTheTwoEnds) {
  Ring r;
  if (r.p == r.last) r.dw[0] = 5;
  const int rc = r.call();
  expect_everywhere(rc, r.result, MPI_ERR_TOPOLOGY);
}

TEST(ReorderBadInput, AdjacentNegativeDegree) {
  Ring r;
  if (r.p == r.last) r.indeg = -1;
  const int rc = r.call();
  expect_everywhere(rc, r.result, MPI_ERR_ARG);
}

TEST(ReorderBadInput, AdjacentNegativeWeight) {
  Ring r;  // both ends agree on the weight: it is the sign that is wrong
  if (r.p == r.last) r.dw[0] = -3;
  if (r.p == 0) r.sw[0] = -3;
  const int rc = r.call();
  expect_everywhere(rc, r.result, MPI_ERR_ARG);
}

TEST(ReorderBadInput, AdjacentRankOutOfRange) {
  Ring r;
  if (r.p == r.last) r.dst[0] = r.n;
  const int rc = r.call();
  expect_everywhere(rc, r.result, MPI_ERR_RANK);
}

TEST(ReorderBadInput, AdjacentUnweightedOnSomeRanks) {
  Ring r;
  if (r.p == 0) r.sweights = MPI_UNWEIGHTED, r.dweights = MPI_UNWEIGHTED;
  const int rc = r.call();
  expect_everywhere(rc, r.result, MPI_ERR_TOPOLOGY);
}

TEST(ReorderBadInput, AdjacentMissingArray) {
  Ring r;
  if (r.p == r.last) r.dsts = nullptr;
  const int rc = r.call();
  expect_everywhere(rc, r.result, MPI_ERR_ARG);
}

// MPI_Dist_graph_create: each rank names the edge p -> p+1.
int general(int n_sources, int source, int degree, int dest, const int* weights, MPI_Comm* out) {
  return MPI_Dist_graph_create(MPI_COMM_WORLD, n_sources, &source, &degree, &dest, weights,
                               MPI_INFO_NULL, 1, out);
}

TEST(ReorderBadInput, GeneralArguments) {
  const int n = size_of(MPI_COMM_WORLD), p = rank_of(MPI_COMM_WORLD);
  const bool last = p == n - 1;
  const int one = 1, negative = -2;
  MPI_Comm out = MPI_COMM_WORLD;
  int rc = general(last ? -1 : 1, p, 1, (p + 1) % n, &one, &out);
  expect_everywhere(rc, out, MPI_ERR_ARG);
  rc = general(1, p, last ? -1 : 1, (p + 1) % n, &one, &out);
  expect_everywhere(rc, out, MPI_ERR_ARG);
  rc = general(1, p, 1, last ? n : (p + 1) % n, &one, &out);
  expect_everywhere(rc, out, MPI_ERR_RANK);
  rc = general(1, last ? -5 : p, 1, (p + 1) % n, &one, &out);
  expect_everywhere(rc, out, MPI_ERR_RANK);
  rc = general(1, p, 1, (p + 1) % n, last ? &negative : &one, &out);
  expect_everywhere(rc, out, MPI_ERR_ARG);
  rc = general(1, p, 1, (p + 1) % n, p == 0 ? MPI_UNWEIGHTED : &one, &out);
  expect_everywhere(rc, out, MPI_ERR_TOPOLOGY);
}

TEST(ReorderBadInput, GraphArguments) {
  const int n = size_of(MPI_COMM_WORLD), p = rank_of(MPI_COMM_WORLD);
  const bool last = p == n - 1;
  // A ring: node v's neighbours v-1 and v+1.
  std::vector<int> index, edges;
  for (int v = 0; v < n; ++v) {
    edges.push_back((v + n - 1) % n), edges.push_back((v + 1) % n);
    index.push_back(static_cast<int>(edges.size()));
  }
  MPI_Comm out = MPI_COMM_WORLD;
  std::vector<int> big_index = index;
  big_index.push_back(index.back());
  int rc = MPI_Graph_create(MPI_COMM_WORLD, n + 1, big_index.data(), edges.data(), 1, &out);
  expect_everywhere(rc, out, MPI_ERR_ARG);
  std::vector<int> e = edges;
  if (last) e[3] = n;
  rc = MPI_Graph_create(MPI_COMM_WORLD, n, index.data(), e.data(), 1, &out);
  expect_everywhere(rc, out, MPI_ERR_RANK);
  e = edges;
  if (last) std::swap(e[0], e[1]);  // a valid graph, but not the one the others describe
  rc = MPI_Graph_create(MPI_COMM_WORLD, n, index.data(), e.data(), 1, &out);
  expect_everywhere(rc, out, MPI_ERR_TOPOLOGY);
  std::vector<int> bad_index = index;
  if (last) bad_index[1] = 1;  // decreases after node 0's 2
  rc = MPI_Graph_create(MPI_COMM_WORLD, n, bad_index.data(), edges.data(), 1, &out);
  expect_everywhere(rc, out, MPI_ERR_ARG);
}

TEST(ReorderBadInput, CartArguments) {
  const int n = size_of(MPI_COMM_WORLD), p = rank_of(MPI_COMM_WORLD);
  const bool last = p == n - 1;
  const int periods[2] = {0, 1};
  MPI_Comm out = MPI_COMM_WORLD;
  const int zero[2] = {last ? 0 : 2, n / 2};
  int rc = MPI_Cart_create(MPI_COMM_WORLD, 2, zero, periods, 1, &out);
  expect_everywhere(rc, out, MPI_ERR_DIMS);
  const int big[2] = {n, 2};
  rc = MPI_Cart_create(MPI_COMM_WORLD, 2, big, periods, 1, &out);
  expect_everywhere(rc, out, MPI_ERR_DIMS);
  const int fine[2] = {2, n / 2}, other_periods[2] = {1, 1};  // the last rank's grid wraps
  rc = MPI_Cart_create(MPI_COMM_WORLD, 2, fine, last ? other_periods : periods, 1, &out);
  expect_everywhere(rc, out, MPI_ERR_TOPOLOGY);
  rc = MPI_Cart_create(MPI_COMM_WORLD, last ? -1 : 2, fine, periods, 1, &out);
  expect_everywhere(rc, out, MPI_ERR_ARG);
}

}  // namespace
