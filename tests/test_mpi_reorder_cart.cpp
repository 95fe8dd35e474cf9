// Rank reordering of MPI_Cart_create (reorder = 1) on the simulated topology: 1-, 2- and 3-D grids,
// periodic or not, on MPI_COMM_WORLD and on a scrambled communicator, and grids smaller than the
// communicator. After each call: coordinates, ranks and shifts agree with the row-major layout
// the standard defines, a halo exchange over the reordered grid (faces, edges and corners through
// subarray types) fills every halo cell with its neighbour's values, MPI_Neighbor_alltoall reaches
// the grid neighbours, and no more grid edges cross nodes than before (with Ferry reordering, no
// more than the best §4.3 node blocks).
#include <ferry/place.hpp>

#include <cstdio>

#include "reorder_util.hpp"

namespace {

using namespace reorder_test;

std::vector<int> coords_of(int r, const std::vector<int>& dims) {
  std::vector<int> c(dims.size());
  for (std::size_t i = dims.size(); i-- > 0;) c[i] = r % dims[i], r /= dims[i];
  return c;
}
int rank_at(const std::vector<int>& c, const std::vector<int>& dims) {
  int r = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) r = r * dims[i] + c[i];
  return r;
}
// The rank `disp` steps along dimension d from coords c, MPI_PROC_NULL off a non-periodic edge.
int step(std::vector<int> c, int d, int disp, const std::vector<int>& dims, const std::vector<int>& periods) {
  c[d] += disp;
  if (c[d] < 0 || c[d] >= dims[d]) {
    if (!periods[d]) return MPI_PROC_NULL;
    c[d] = ((c[d] % dims[d]) + dims[d]) % dims[d];
  }
  return rank_at(c, dims);
}

void check_queries(MPI_Comm c, const std::vector<int>& dims, const std::vector<int>& periods) {
  const int q = rank_of(c), nd = static_cast<int>(dims.size()), n = size_of(c);
  int status = 0, k = -1;
  MPI_Topo_test(c, &status);
  EXPECT_EQ(status, MPI_CART);
  MPI_Cartdim_get(c, &k);
  ASSERT_EQ(k, nd);
  std::vector<int> d(nd + 1), p(nd + 1), co(nd + 1);
  MPI_Cart_get(c, nd, d.data(), p.data(), co.data());
  d.resize(nd), p.resize(nd), co.resize(nd);
  EXPECT_EQ(d, dims);
  for (int& x : p) x = x != 0;
  EXPECT_EQ(p, periods);
  EXPECT_EQ(co, coords_of(q, dims)) << "rank " << q;
  for (int r = 0; r < n; ++r) {
    std::vector<int> cr(nd + 1);
    MPI_Cart_coords(c, r, nd, cr.data());
    cr.resize(nd);
    EXPECT_EQ(cr, coords_of(r, dims));
    int back = -1;
    MPI_Cart_rank(c, cr.data(), &back);
    EXPECT_EQ(back, r);
  }
  for (int dim = 0; dim < nd; ++dim)
    for (int disp : {1, -1, 2}) {
      int src = -5, dst = -5;
      MPI_Cart_shift(c, dim, disp, &src, &dst);
      EXPECT_EQ(dst, step(co, dim, disp, dims, periods)) << "dim " << dim << " disp " << disp;
      EXPECT_EQ(src, step(co, dim, -disp, dims, periods)) << "dim " << dim << " disp " << disp;
    }
}

// A field of L^nd cells per process, halo 1, valued by global cell; faces exchanged one dimension
// after the other with MPI_Sendrecv over MPI_Cart_shift (corners travel along).
void check_halo(MPI_Comm c, const std::vector<int>& dims, const std::vector<int>& periods) {
  const int nd = static_cast<int>(dims.size()), L = 3, E = L + 2;
  std::vector<int> co(nd);
  MPI_Cart_coords(c, rank_of(c), nd, co.data());
  int total = 1;
  for (int i = 0; i < nd; ++i) total *= E;
  auto local = [&](int idx) {
    std::vector<int> l(nd);
    for (int i = nd; i-- > 0;) l[i] = idx % E, idx /= E;
    return l;
  };
  // The global cell of local cell l, wrapped; false off a non-periodic edge.
  auto global = [&](const std::vector<int>& l, long long* code) {
    long long v = 0;
    for (int i = 0; i < nd; ++i) {
      int g = co[i] * L + l[i] - 1;
      const int ext = dims[i] * L;
      if (g < 0 || g >= ext) {
        if (!periods[i]) return false;
        g = (g + ext) % ext;
      }
      v = v * 1000 + g + 1;
    }
    *code = v;
    return true;
  };
  std::vector<long long> f(total, -1);
  for (int idx = 0; idx < total; ++idx) {
    const std::vector<int> l = local(idx);
    if (std::all_of(l.begin(), l.end(), [&](int x) { return x >= 1 && x <= L; })) global(l, &f[idx]);
  }
  auto face = [&](int d, int at) {
    std::vector<int> sizes(nd, E), sub(nd, E), start(nd, 0);
    sub[d] = 1, start[d] = at;
    MPI_Datatype t;
    MPI_Type_create_subarray(nd, sizes.data(), sub.data(), start.data(), MPI_ORDER_C, MPI_LONG_LONG, &t);
    MPI_Type_commit(&t);
    return t;
  };
  for (int d = 0; d < nd; ++d) {
    int src, dst;
    MPI_Cart_shift(c, d, 1, &src, &dst);
    MPI_Datatype send_hi = face(d, L), recv_lo = face(d, 0), send_lo = face(d, 1), recv_hi = face(d, L + 1);
    MPI_Sendrecv(f.data(), 1, send_hi, dst, 2 * d, f.data(), 1, recv_lo, src, 2 * d, c, MPI_STATUS_IGNORE);
    MPI_Sendrecv(f.data(), 1, send_lo, src, 2 * d + 1, f.data(), 1, recv_hi, dst, 2 * d + 1, c,
                 MPI_STATUS_IGNORE);
    for (MPI_Datatype* t : {&send_hi, &recv_lo, &send_lo, &recv_hi}) MPI_Type_free(t);
  }
  std::vector<long long> want(total, -1);
  for (int idx = 0; idx < total; ++idx) global(local(idx), &want[idx]);
  EXPECT_EQ(f, want) << "halo of rank " << rank_of(c);
}

// Block 2d+1 goes to the positive neighbour of dimension d and arrives in its block 2d.
void check_neighbor_alltoall(MPI_Comm c, const std::vector<int>& dims, const std::vector<int>& periods) {
  for (std::size_t d = 0; d < dims.size(); ++d)  // a periodic ring of 1 or 2: blocks pair ambiguously in MPIs
    if (periods[d] && dims[d] <= 2) return;
  const int nd = static_cast<int>(dims.size()), q = rank_of(c), m = 2 * nd;
  std::vector<int> send(m), recv(m, -1), want(m, -1);
  for (int b = 0; b < m; ++b) send[b] = q * m + b;
  for (int d = 0; d < nd; ++d) {
    int src, dst;
    MPI_Cart_shift(c, d, 1, &src, &dst);
    if (src != MPI_PROC_NULL) want[2 * d] = src * m + 2 * d + 1;
    if (dst != MPI_PROC_NULL) want[2 * d + 1] = dst * m + 2 * d;
  }
  ASSERT_EQ(MPI_Neighbor_alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, c), MPI_SUCCESS);
  EXPECT_EQ(recv, want) << "rank " << q;
}

// The grid's face edges, both ways, weight 1.
std::vector<Edge> grid_edges(const std::vector<int>& dims, const std::vector<int>& periods) {
  int cells = 1;
  for (int d : dims) cells *= d;
  std::vector<Edge> e;
  for (int r = 0; r < cells; ++r)
    for (std::size_t d = 0; d < dims.size(); ++d)
      for (int disp : {1, -1}) {
        const int s = step(coords_of(r, dims), static_cast<int>(d), disp, dims, periods);
        if (s != MPI_PROC_NULL && s != r) e.push_back({r, s, 1});
      }
  return e;
}

void grid_case(MPI_Comm old, const std::vector<int>& dims, const std::vector<int>& periods) {
  const int n = size_of(old);
  int cells = 1;
  for (int d : dims) cells *= d;
  MPI_Comm c = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Cart_create(old, static_cast<int>(dims.size()), dims.data(), periods.data(), 1, &c),
            MPI_SUCCESS);
  const int q = c == MPI_COMM_NULL ? -1 : rank_of(c);
  if (c != MPI_COMM_NULL) {
    check_queries(c, dims, periods);
    check_halo(c, dims, periods);
    check_neighbor_alltoall(c, dims, periods);
  }
  std::vector<int> role_of(n);
  MPI_Allgather(&q, 1, MPI_INT, role_of.data(), 1, MPI_INT, old);
  const std::vector<int> old_world = world_ranks(old);
  std::vector<int> before(cells), after(cells, -1);
  for (int v = 0; v < cells; ++v) before[v] = old_world[v];
  for (int r = 0; r < n; ++r)
    if (role_of[r] >= 0) after[role_of[r]] = old_world[r];
  EXPECT_EQ(std::count(after.begin(), after.end(), -1), 0);
  const std::vector<Edge> edges = grid_edges(dims, periods);
  const Cost b = cost(edges, before), a = cost(edges, after);
  // The best §4.3 node blocks, where the grid fills nodes of equal size.
  const int nodes = topology().nodes(), gpus = std::max(1, most_gpus());
  long long blocks = -1;
  if (cells == n && n % nodes == 0 && (n / nodes) % gpus == 0) {
    const auto cb = ferry::place::cart_blocks(dims, periods, nodes, gpus);
    blocks = 0;
    for (const Edge& e : edges) blocks += cb.node[e.src] != cb.node[e.dst];
  }
  if (rank_of(old) == 0)
    std::printf("  grid %s periods %s: inter-node edges %lld -> %lld (node blocks %lld)\n",
                testing::PrintToString(dims).c_str(), testing::PrintToString(periods).c_str(),
                b.inter_node, a.inter_node, blocks);
  if (!ferry_reorders()) {
    EXPECT_EQ(after, before) << "the MPI reordered itself";
  } else {
    EXPECT_LE(a.inter_node, b.inter_node);
    if (a.inter_node == b.inter_node) EXPECT_LE(a.gpu_seconds, b.gpu_seconds * (1 + 1e-9));
    if (blocks >= 0) EXPECT_LE(a.inter_node, blocks);
  }
  if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

TEST(ReorderCart, GridsQueriesHaloAndNeighbours) {
  const int n = size_of(MPI_COMM_WORLD);
  for (int nd : {1, 2, 3})
    for (int pattern : {0, 1, 2})  // none, all, alternate dimensions periodic
      for (bool scramble : {false, true}) {
        std::vector<int> dims(nd, 0), periods(nd);
        MPI_Dims_create(n, nd, dims.data());
        for (int i = 0; i < nd; ++i) periods[i] = pattern == 1 || (pattern == 2 && i % 2 == 0);
        SCOPED_TRACE(testing::PrintToString(dims) + " periods " + testing::PrintToString(periods) +
                     (scramble ? " scrambled" : ""));
        MPI_Comm old = scramble ? scrambled(MPI_COMM_WORLD, 31u + nd * 3 + pattern) : MPI_COMM_WORLD;
        grid_case(old, dims, periods);
        if (scramble) MPI_Comm_free(&old);
      }
}

// Grids smaller than the communicator: the processes left over get MPI_COMM_NULL.
TEST(ReorderCart, SmallerGrids) {
  const int n = size_of(MPI_COMM_WORLD);
  if (n < 3) GTEST_SKIP() << "needs 3 ranks";
  MPI_Comm old = scrambled(MPI_COMM_WORLD, 77);
  grid_case(old, {n - 1}, {1});
  grid_case(old, {2, (n - 1) / 2}, {0, 1});
  MPI_Comm_free(&old);
}

}  // namespace
