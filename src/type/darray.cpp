// MPI_Type_create_darray in the IR (MPI-4 §5.1.4). The type map of a distributed array lists this
// process's elements dimension by dimension, slowest dimension outermost, each dimension's local
// global indices in increasing order. Per dimension the local indices are:
//   MPI_DISTRIBUTE_NONE    all of them
//   MPI_DISTRIBUTE_BLOCK   one run [c*b, min((c+1)*b, g)), b = darg or ceil(g/p)
//   MPI_DISTRIBUTE_CYCLIC  runs of darg (default 1) starting at c*darg, every p*darg; the last may
//                          be cut short by g
// Each becomes a Stream (or Blocks of Streams) over the faster dimensions; canonicalization then
// folds dense dimensions away.
#include "sys/error.hpp"
#include "type/translate.hpp"

namespace ferry::detail {

namespace {

NodePtr dimension(int distrib, int darg, int g, int p, int coord, i64 stride, const NodePtr& inner) {
  if (g < 0 || p <= 0 || coord < 0 || coord >= p) fail(MPI_ERR_TYPE, "invalid darray arguments");
  if (distrib == MPI_DISTRIBUTE_NONE) return make_stream(0, g, stride, inner);
  if (distrib == MPI_DISTRIBUTE_BLOCK) {
    i64 b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (static_cast<i64>(g) + p - 1) / p : darg;
    if (b <= 0) fail(MPI_ERR_TYPE, "invalid darray block size");
    i64 first = coord * b;
    i64 len = std::max<i64>(0, std::min<i64>(b, g - first));
    return make_stream(checked_mul(first, stride, MPI_ERR_TYPE, "darray offset"), len, stride,
                       inner);
  }
  if (distrib == MPI_DISTRIBUTE_CYCLIC) {
    i64 c = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
    if (c <= 0) fail(MPI_ERR_TYPE, "invalid darray cyclic block size");
    i64 first = coord * c;
    i64 period = checked_mul(p, c, MPI_ERR_TYPE, "darray period");
    if (first >= g) return make_dense(0, 0);
    i64 nruns = (g - first + period - 1) / period;  // runs that start before g
    i64 last_start = first + (nruns - 1) * period;
    i64 last_len = std::min<i64>(c, g - last_start);
    NodePtr block = make_stream(0, c, stride, inner);
    i64 full = last_len == c ? nruns : nruns - 1;
    std::vector<Entry> entries;
    if (full > 0)
      entries.push_back({checked_mul(first, stride, MPI_ERR_TYPE, "darray offset"),
                         make_stream(0, full, checked_mul(period, stride, MPI_ERR_TYPE,
                                                          "darray stride"),
                                     block)});
    if (full < nruns)
      entries.push_back({checked_mul(last_start, stride, MPI_ERR_TYPE, "darray offset"),
                         make_stream(0, last_len, stride, inner)});
    return make_blocks(std::move(entries));
  }
  fail(MPI_ERR_TYPE, "unknown darray distribution " + std::to_string(distrib));
}

}  // namespace

NodePtr darray_node(int size, int rank, int ndims, const int* gsizes, const int* distribs,
                    const int* dargs, const int* psizes, int order, NodePtr old, i64 old_extent) {
  if (ndims <= 0 || size <= 0 || rank < 0 || rank >= size)
    fail(MPI_ERR_TYPE, "invalid darray arguments");
  // Row-major process coordinates.
  std::vector<int> coords(static_cast<std::size_t>(ndims));
  int rest = rank;
  for (int d = ndims - 1; d >= 0; --d) {
    coords[static_cast<std::size_t>(d)] = rest % psizes[d];
    rest /= psizes[d];
  }
  NodePtr node = std::move(old);
  i64 stride = old_extent;
  for (int k = 0; k < ndims; ++k) {
    int d = order == MPI_ORDER_C ? ndims - 1 - k : k;
    node = dimension(distribs[d], dargs[d], gsizes[d], psizes[d],
                     coords[static_cast<std::size_t>(d)], stride, node);
    stride = checked_mul(stride, gsizes[d], MPI_ERR_TYPE, "darray size");
  }
  return node;
}

}  // namespace ferry::detail
