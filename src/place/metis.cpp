// place/metis.cpp — the METIS path of partition_graph (built where FERRY_METIS finds libmetis).
//
// METIS is the default where it is built (the reference partitioner, tuned over decades on
// irregular graphs), but it balances only to a tolerance and counts in idx_t, so the caller
// rebalances to exact sizes and weights are scaled here to keep METIS' sums far from overflow.
#include <metis.h>

#include <algorithm>
#include <cmath>

#include "place/detail.hpp"

namespace ferry::place {

bool metis_available() {
  return true;
}

namespace detail {

bool metis_partition(const WGraph& g, const std::vector<int>& sizes, std::uint64_t seed,
                     std::vector<int>& part) {
  const int k = static_cast<int>(sizes.size());
  i64 total = 0;
  for (i64 w : g.w) total += w;
  // METIS adds edge weights in idx_t (a vertex's degree, the cut): keep the total under 2^29.
  const double limit = double{1 << 29};
  const double scale =
      static_cast<double>(total) > limit ? limit / static_cast<double>(total) : 1.0;
  std::vector<idx_t> xadj{0}, adjncy, adjwgt;
  for (int v = 0; v < g.n; ++v) {
    for (int e = g.xadj[v]; e < g.xadj[v + 1]; ++e) {
      if (g.w[e] <= 0) continue;  // a zero edge is no edge (symmetric, so both halves go)
      adjncy.push_back(g.adj[e]);
      adjwgt.push_back(
          static_cast<idx_t>(std::max(1.0, std::round(static_cast<double>(g.w[e]) * scale))));
    }
    xadj.push_back(static_cast<idx_t>(adjncy.size()));
  }
  std::vector<real_t> tpwgts(k);
  for (int i = 0; i < k; ++i) tpwgts[i] = static_cast<real_t>(sizes[i]) / static_cast<real_t>(g.n);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_OBJTYPE] = METIS_OBJTYPE_CUT;
  options[METIS_OPTION_NUMBERING] = 0;
  options[METIS_OPTION_UFACTOR] = 1;  // 0.1 %, METIS' tightest
  options[METIS_OPTION_SEED] = static_cast<idx_t>(seed & 0x3fffffff);
  idx_t n = g.n, ncon = 1, nparts = k, objval = 0;
  std::vector<idx_t> out(g.n, 0);
  // Recursive bisection, not k-way: METIS' manual prefers k-way beyond 8 parts for its speed on
  // large graphs, but rank graphs are small and their parts many, where k-way is the slower and
  // the worse (3,072 vertices of degree 26 into 512 parts of 6: 285 ms and 2.1e11 cut bytes for
  // k-way, 63 ms and 1.5e11 for recursive; into 48 parts: 62 ms vs 20 ms; METIS 5.1, this VM).
  const int rc = METIS_PartGraphRecursive(&n, &ncon, xadj.data(), adjncy.data(), nullptr, nullptr,
                                          adjwgt.data(), &nparts, tpwgts.data(), nullptr, options,
                                          &objval, out.data());
  if (rc != METIS_OK) return false;
  part.assign(out.begin(), out.end());
  for (int p : part)
    if (p < 0 || p >= k) return false;
  return true;
}

}  // namespace detail
}  // namespace ferry::place
