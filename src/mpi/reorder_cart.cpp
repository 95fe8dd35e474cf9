// MPI_Cart_create and MPI_Graph_create with reorder = 1 (reorder.hpp says how). Node i of the grid
// or graph is the process of new rank i, as the standard defines both; a grid that fills comm_old
// is split by the §4.3 blocks (place::reorder_cart), a smaller one, or a graph, by the partitioner
// over its edges, the processes beyond the grid or graph (MPI_COMM_NULL) chosen by it too. Bad
// input fails the call on every rank: a negative count or a missing array, a graph larger than
// comm_old, index not increasing (MPI_ERR_ARG); a dimension below 1 or a grid larger than comm_old
// (MPI_ERR_DIMS); an edge to a node outside the graph (MPI_ERR_RANK); ranks that passed different
// grids or graphs (MPI_ERR_TOPOLOGY).
#include <algorithm>
#include <string>
#include <vector>

#include "mpi/boundary.hpp"
#include "mpi/hot.hpp"
#include "mpi/reorder.hpp"
#include "sys/error.hpp"

using namespace ferry::mpi_detail;
namespace ro = ferry::mpi_detail::reorder;

namespace {

// A hash of the global arguments, as two ints, for rank 0 to compare.
std::vector<int> fingerprint(const std::vector<int>& args) {
  const std::uint64_t h = ro::hash(args);
  return {static_cast<int>(h & 0xffffffffu), static_cast<int>(h >> 32)};
}

void same_everywhere(const std::vector<std::vector<int>>& payloads, const char* what) {
  for (std::size_t r = 1; r < payloads.size(); ++r)
    if (payloads[r] != payloads[0])
      ferry::detail::fail(MPI_ERR_TOPOLOGY, "ranks 0 and " + std::to_string(r) +
                                                " of comm_old passed different " + what);
}


}  // namespace

extern "C" {

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm* comm_cart) {
  static const char* call = "MPI_Cart_create";
  if (!ro::wanted(comm_old, reorder))
    return PMPI_Cart_create(comm_old, ndims, dims, periods, reorder, comm_cart);
  try {
    const ro::Layout layout = ro::layout(comm_old);
    if (layout.trivial()) return PMPI_Cart_create(comm_old, ndims, dims, periods, reorder, comm_cart);
    const int size = comm_size(comm_old);
    ro::Local mine;
    std::vector<int> d, per;
    long long cells = 1;
    if (ndims < 0) {
      mine.error = MPI_ERR_ARG, mine.why = "negative ndims " + std::to_string(ndims);
    } else if (ndims > 0 && (!dims || !periods)) {
      mine.error = MPI_ERR_ARG, mine.why = "no array of dimensions or of periods";
    } else {
      for (int i = 0; i < ndims; ++i) {
        d.push_back(dims[i]);
        per.push_back(periods[i] != 0);
        if (dims[i] < 1) {
          mine.error = MPI_ERR_DIMS, mine.why = "dimension " + std::to_string(dims[i]) + " < 1";
          break;
        }
        cells = std::min<long long>(cells * dims[i], 1ll << 40);
      }
      if (mine.error == MPI_SUCCESS && cells > size)
        mine.error = MPI_ERR_DIMS, mine.why = "a grid of " + std::to_string(cells) +
                                              " processes in a communicator of " +
                                              std::to_string(size);
    }
    if (mine.error == MPI_SUCCESS) {
      std::vector<int> args{ndims};
      args.insert(args.end(), d.begin(), d.end());
      args.insert(args.end(), per.begin(), per.end());
      mine.payload = fingerprint(args);
    }
    const ro::Outcome o = ro::exchange(call, comm_old, mine, [&](const auto& payloads) {
      same_everywhere(payloads, "grids");
      // The grid's edges (for the report, and for the partitioner when the grid is smaller).
      const ferry::place::Graph g = ferry::place::cart_graph(d, per);
      std::vector<ferry::place::Flow> flows;
      for (int v = 0; v < g.vertices(); ++v)
        for (ferry::place::i64 e = g.xadj[v]; e < g.xadj[v + 1]; ++e)
          if (v < g.adjncy[e]) flows.push_back({v, g.adjncy[e], g.weight[e]});
      return ro::decide(layout, flows, d, per);
    });
    if (o.error != MPI_SUCCESS) return ro::fail(comm_old, call, o.error, o.why, comm_cart);
    return ro::split_and_create(
        comm_old, o, o.new_rank < cells,
        [&](MPI_Comm part) { return PMPI_Cart_create(part, ndims, dims, periods, 0, comm_cart); },
        comm_cart);
  } catch (const std::exception& e) {
    return ro::fail(comm_old, call, e, comm_cart);
  }
}

int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[],
                     int reorder, MPI_Comm* comm_graph) {
  static const char* call = "MPI_Graph_create";
  if (!ro::wanted(comm_old, reorder))
    return PMPI_Graph_create(comm_old, nnodes, index, edges, reorder, comm_graph);
  try {
    const ro::Layout layout = ro::layout(comm_old);
    if (layout.trivial()) return PMPI_Graph_create(comm_old, nnodes, index, edges, reorder, comm_graph);
    const int size = comm_size(comm_old);
    ro::Local mine;
    auto bad = [&](int error, const std::string& why) {
      if (mine.error == MPI_SUCCESS) mine.error = error, mine.why = why;
    };
    if (nnodes < 0 || nnodes > size)
      bad(MPI_ERR_ARG, "a graph of " + std::to_string(nnodes) + " nodes in a communicator of " +
                           std::to_string(size));
    else if (nnodes > 0 && !index)
      bad(MPI_ERR_ARG, "no index array");
    for (int i = 0; mine.error == MPI_SUCCESS && i < nnodes; ++i)
      if (index[i] < (i ? index[i - 1] : 0)) bad(MPI_ERR_ARG, "index decreases at node " + std::to_string(i));
    const int nedges = mine.error == MPI_SUCCESS && nnodes > 0 ? index[nnodes - 1] : 0;
    if (nedges > 0 && !edges) bad(MPI_ERR_ARG, "no edges array");
    for (int e = 0; mine.error == MPI_SUCCESS && e < nedges; ++e)
      if (edges[e] < 0 || edges[e] >= nnodes)
        bad(MPI_ERR_RANK, "edge to node " + std::to_string(edges[e]) + " outside the graph's " +
                              std::to_string(nnodes));
    if (mine.error == MPI_SUCCESS) {
      std::vector<int> args{nnodes};
      args.insert(args.end(), index, index + nnodes);
      args.insert(args.end(), edges, edges + nedges);
      mine.payload = fingerprint(args);
    }
    const ro::Outcome o = ro::exchange(call, comm_old, mine, [&](const auto& payloads) {
      same_everywhere(payloads, "graphs");
      std::vector<ferry::place::Flow> flows;
      for (int v = 0, e = 0; v < nnodes; ++v)
        for (; e < index[v]; ++e) flows.push_back({v, edges[e], 1});
      return ro::decide(layout, flows);
    });
    if (o.error != MPI_SUCCESS) return ro::fail(comm_old, call, o.error, o.why, comm_graph);
    return ro::split_and_create(
        comm_old, o, o.new_rank < nnodes,
        [&](MPI_Comm part) { return PMPI_Graph_create(part, nnodes, index, edges, 0, comm_graph); },
        comm_graph);
  } catch (const std::exception& e) {
    return ro::fail(comm_old, call, e, comm_graph);
  }
}

}  // extern "C"
