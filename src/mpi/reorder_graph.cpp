// MPI_Dist_graph_create_adjacent and MPI_Dist_graph_create with reorder = 1 (reorder.hpp says what
// reordering means and how the call runs). Bad input, found on any rank, fails the call on every
// rank: a negative degree or weight, a missing array (MPI_ERR_ARG); a neighbour outside comm_old
// (MPI_ERR_RANK; MPI_PROC_NULL is allowed and stays as it is); an edge listed by its source but not
// by its destination, or with other weights there, and MPI_UNWEIGHTED on some ranks' edges but not
// on others' (MPI_ERR_TOPOLOGY).
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "mpi/boundary.hpp"
#include "mpi/hot.hpp"
#include "mpi/reorder.hpp"
#include "sys/error.hpp"

using namespace ferry::mpi_detail;
namespace ro = ferry::mpi_detail::reorder;

namespace {

// Weights on a process's edges: none of its edges, all MPI_UNWEIGHTED, all weighted.
enum Weighting { kNoEdges = 0, kUnweighted = 1, kWeighted = 2 };

struct Bad {
  int error;
  std::string why;
};

// A neighbour list: entries in comm_old or MPI_PROC_NULL, weights >= 0.
void check_list(const char* what, int degree, const int* ranks, const int* weights, bool unweighted,
                int n, Bad* bad) {
  if (degree < 0) {
    *bad = {MPI_ERR_ARG, std::string("negative ") + what + "degree " + std::to_string(degree)};
    return;
  }
  if (degree == 0) return;
  if (!ranks || (!unweighted && (!weights || weights == MPI_WEIGHTS_EMPTY))) {
    *bad = {MPI_ERR_ARG, std::string(what) + "degree " + std::to_string(degree) +
                             " with no array of neighbours or of weights"};
    return;
  }
  for (int i = 0; i < degree; ++i) {
    if ((ranks[i] < 0 && ranks[i] != MPI_PROC_NULL) || ranks[i] >= n) {
      *bad = {MPI_ERR_RANK, std::string(what) + "neighbour " + std::to_string(ranks[i]) +
                                " is not a rank of comm_old (size " + std::to_string(n) + ")"};
      return;
    }
    if (!unweighted && weights[i] < 0) {
      *bad = {MPI_ERR_ARG, "negative weight " + std::to_string(weights[i])};
      return;
    }
  }
}

Weighting weighting(bool any_unweighted, bool any_weighted) {
  return any_unweighted ? kUnweighted : any_weighted ? kWeighted : kNoEdges;
}

// A process's graph description as it travels: [source weighting, destination weighting, indegree,
// outdegree, sources, source weights (if weighted), destinations, destination weights (if weighted)].
struct Adjacency {
  bool src_unweighted = false, dst_unweighted = false;
  std::vector<int> sources, source_weights, destinations, dest_weights;

  std::vector<int> pack() const {
    std::vector<int> p{src_unweighted, dst_unweighted, static_cast<int>(sources.size()),
                       static_cast<int>(destinations.size())};
    p.insert(p.end(), sources.begin(), sources.end());
    p.insert(p.end(), source_weights.begin(), source_weights.end());
    p.insert(p.end(), destinations.begin(), destinations.end());
    p.insert(p.end(), dest_weights.begin(), dest_weights.end());
    return p;
  }
  static Adjacency unpack(const std::vector<int>& p) {
    Adjacency a;
    if (p.size() < 4) ferry::detail::fail(MPI_ERR_INTERN, "short adjacency");
    a.src_unweighted = p[0] != 0, a.dst_unweighted = p[1] != 0;
    const std::size_t in = static_cast<std::size_t>(p[2]), out = static_cast<std::size_t>(p[3]);
    const std::size_t need = 4 + in * (a.src_unweighted ? 1 : 2) + out * (a.dst_unweighted ? 1 : 2);
    if (p.size() != need) ferry::detail::fail(MPI_ERR_INTERN, "adjacency of the wrong length");
    auto at = p.begin() + 4;
    auto take = [&](std::vector<int>& v, std::size_t k) {
      v.assign(at, at + static_cast<std::ptrdiff_t>(k));
      at += static_cast<std::ptrdiff_t>(k);
    };
    take(a.sources, in);
    take(a.source_weights, a.src_unweighted ? 0 : in);
    take(a.destinations, out);
    take(a.dest_weights, a.dst_unweighted ? 0 : out);
    return a;
  }
  int weight_in(std::size_t i) const { return src_unweighted ? 1 : source_weights[i]; }
  int weight_out(std::size_t i) const { return dst_unweighted ? 1 : dest_weights[i]; }
  Weighting kind() const {
    return weighting((src_unweighted && !sources.empty()) || (dst_unweighted && !destinations.empty()),
                     (!src_unweighted && !sources.empty()) || (!dst_unweighted && !destinations.empty()));
  }
};

// Rank 0: the edges must be described at both ends, with the same weights, and weighted alike.
ro::Decision decide_adjacent(const ro::Layout& layout,
                             const std::vector<std::vector<int>>& payloads) {
  const int n = static_cast<int>(payloads.size());
  std::vector<Adjacency> a(static_cast<std::size_t>(n));
  bool unweighted = false, weighted = false;
  for (int p = 0; p < n; ++p) {
    a[p] = Adjacency::unpack(payloads[p]);
    unweighted = unweighted || a[p].kind() == kUnweighted;
    weighted = weighted || a[p].kind() == kWeighted;
  }
  if (unweighted && weighted)
    ferry::detail::fail(MPI_ERR_TOPOLOGY,
                        "MPI_UNWEIGHTED on some ranks' edges, weights on others'");
  using Edge = std::tuple<int, int, int>;  // source, destination, weight
  std::vector<Edge> out, in;
  std::vector<ferry::place::Flow> flows;
  for (int p = 0; p < n; ++p) {
    for (std::size_t i = 0; i < a[p].destinations.size(); ++i)
      if (a[p].destinations[i] != MPI_PROC_NULL) {
        out.emplace_back(p, a[p].destinations[i], a[p].weight_out(i));
        flows.push_back({p, a[p].destinations[i], a[p].weight_out(i)});
      }
    for (std::size_t i = 0; i < a[p].sources.size(); ++i)
      if (a[p].sources[i] != MPI_PROC_NULL) in.emplace_back(a[p].sources[i], p, a[p].weight_in(i));
  }
  std::sort(out.begin(), out.end());
  std::sort(in.begin(), in.end());
  if (out != in) {
    std::vector<Edge> only_out, only_in;
    std::set_difference(out.begin(), out.end(), in.begin(), in.end(), std::back_inserter(only_out));
    std::set_difference(in.begin(), in.end(), out.begin(), out.end(), std::back_inserter(only_in));
    const bool listed_by_source = !only_out.empty();
    const auto [s, d, w] = listed_by_source ? only_out.front() : only_in.front();
    ferry::detail::fail(
        MPI_ERR_TOPOLOGY,
        "edge " + std::to_string(s) + " -> " + std::to_string(d) + " (weight " + std::to_string(w) +
            ") is listed by rank " + std::to_string(listed_by_source ? s : d) + " but not by rank " +
            std::to_string(listed_by_source ? d : s) + " with that weight");
  }
  ro::Decision dec = ro::decide(layout, flows);
  // The process that becomes new rank q runs vertex q: it gets the edges old rank q described.
  dec.extra.resize(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) dec.extra[p] = payloads[dec.new_of_old[p]];
  return dec;
}

// Rank 0: one mode of weights; each process's edges as (source, destination, weight) triples.
ro::Decision decide_general(const ro::Layout& layout,
                            const std::vector<std::vector<int>>& payloads) {
  bool unweighted = false, weighted = false;
  std::vector<ferry::place::Flow> flows;
  for (const std::vector<int>& p : payloads) {
    unweighted = unweighted || p[0] == kUnweighted;
    weighted = weighted || p[0] == kWeighted;
    for (std::size_t i = 1; i + 2 < p.size(); i += 3)
      if (p[i] != MPI_PROC_NULL && p[i + 1] != MPI_PROC_NULL) flows.push_back({p[i], p[i + 1], p[i + 2]});
  }
  if (unweighted && weighted)
    ferry::detail::fail(MPI_ERR_TOPOLOGY,
                        "MPI_UNWEIGHTED on some ranks' edges, weights on others'");
  return ro::decide(layout, flows);
}


}  // namespace

extern "C" {

int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[],
                                   MPI_Info info, int reorder, MPI_Comm* comm_dist_graph) {
  static const char* call = "MPI_Dist_graph_create_adjacent";
  if (!ro::wanted(comm_old, reorder))
    return PMPI_Dist_graph_create_adjacent(comm_old, indegree, sources, sourceweights, outdegree,
                                           destinations, destweights, info, reorder,
                                           comm_dist_graph);
  try {
    const ro::Layout layout = ro::layout(comm_old);
    if (layout.trivial())
      return PMPI_Dist_graph_create_adjacent(comm_old, indegree, sources, sourceweights, outdegree,
                                             destinations, destweights, info, reorder,
                                             comm_dist_graph);
    const int n = comm_size(comm_old);
    ro::Local mine;
    Bad bad{MPI_SUCCESS, ""};
    const bool src_u = sourceweights == MPI_UNWEIGHTED, dst_u = destweights == MPI_UNWEIGHTED;
    check_list("in", indegree, sources, sourceweights, src_u, n, &bad);
    if (bad.error == MPI_SUCCESS) check_list("out", outdegree, destinations, destweights, dst_u, n, &bad);
    if (bad.error == MPI_SUCCESS && ((src_u && indegree > 0) || (dst_u && outdegree > 0)) &&
        ((!src_u && indegree > 0) || (!dst_u && outdegree > 0)))
      bad = {MPI_ERR_TOPOLOGY, "MPI_UNWEIGHTED for the edges of one side only"};
    if (bad.error != MPI_SUCCESS) {
      mine.error = bad.error, mine.why = bad.why;
    } else {
      Adjacency a;
      a.src_unweighted = src_u, a.dst_unweighted = dst_u;
      a.sources.assign(sources, sources + indegree);
      if (!src_u) a.source_weights.assign(sourceweights, sourceweights + indegree);
      a.destinations.assign(destinations, destinations + outdegree);
      if (!dst_u) a.dest_weights.assign(destweights, destweights + outdegree);
      mine.payload = a.pack();
    }
    const ro::Outcome o = ro::exchange(call, comm_old, mine, [&](const auto& payloads) {
      return decide_adjacent(layout, payloads);
    });
    if (o.error != MPI_SUCCESS) return ro::fail(comm_old, call, o.error, o.why, comm_dist_graph);
    const Adjacency v = Adjacency::unpack(o.extra);  // the vertex this process now runs
    auto weights = [](bool unweighted, const std::vector<int>& w) {
      return unweighted ? MPI_UNWEIGHTED : w.empty() ? MPI_WEIGHTS_EMPTY : w.data();
    };
    const int rc = ro::split_and_create(
        comm_old, o, true,
        [&](MPI_Comm part) {
          return PMPI_Dist_graph_create_adjacent(
              part, static_cast<int>(v.sources.size()), v.sources.data(),
              weights(v.src_unweighted, v.source_weights), static_cast<int>(v.destinations.size()),
              v.destinations.data(), weights(v.dst_unweighted, v.dest_weights), info, 0,
              comm_dist_graph);
        },
        comm_dist_graph);
    return rc;
  } catch (const std::exception& e) {
    return ro::fail(comm_old, call, e, comm_dist_graph);
  }
}

int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info,
                          int reorder, MPI_Comm* comm_dist_graph) {
  static const char* call = "MPI_Dist_graph_create";
  if (!ro::wanted(comm_old, reorder))
    return PMPI_Dist_graph_create(comm_old, n, sources, degrees, destinations, weights, info,
                                  reorder, comm_dist_graph);
  try {
    const ro::Layout layout = ro::layout(comm_old);
    if (layout.trivial())
      return PMPI_Dist_graph_create(comm_old, n, sources, degrees, destinations, weights, info,
                                    reorder, comm_dist_graph);
    const int size = comm_size(comm_old);
    ro::Local mine;
    Bad bad{MPI_SUCCESS, ""};
    const bool unweighted = weights == MPI_UNWEIGHTED;
    long long edges = 0;
    if (n < 0)
      bad = {MPI_ERR_ARG, "negative number of sources " + std::to_string(n)};
    else if (n > 0 && (!sources || !degrees))
      bad = {MPI_ERR_ARG, "no array of sources or of degrees"};
    for (int i = 0; bad.error == MPI_SUCCESS && i < n; ++i) {
      if (degrees[i] < 0) bad = {MPI_ERR_ARG, "negative degree " + std::to_string(degrees[i])};
      edges += degrees[i];
    }
    if (bad.error == MPI_SUCCESS && edges > (1 << 28))
      bad = {MPI_ERR_ARG, "too many edges on one rank (" + std::to_string(edges) + ")"};
    if (bad.error == MPI_SUCCESS && edges > 0 &&
        (!destinations || (!unweighted && (!weights || weights == MPI_WEIGHTS_EMPTY))))
      bad = {MPI_ERR_ARG, "no array of destinations or of weights"};
    std::vector<int>& p = mine.payload;
    p.push_back(edges == 0 ? kNoEdges : unweighted ? kUnweighted : kWeighted);
    for (int i = 0, k = 0; bad.error == MPI_SUCCESS && i < n; ++i) {
      const int s = sources[i];
      for (int j = 0; bad.error == MPI_SUCCESS && j < degrees[i]; ++j, ++k) {
        const int d = destinations[k], w = unweighted ? 1 : weights[k];
        for (int r : {s, d})
          if ((r < 0 && r != MPI_PROC_NULL) || r >= size)
            bad = {MPI_ERR_RANK, "rank " + std::to_string(r) + " is not in comm_old (size " +
                                     std::to_string(size) + ")"};
        if (w < 0) bad = {MPI_ERR_ARG, "negative weight " + std::to_string(w)};
        p.insert(p.end(), {s, d, w});
      }
    }
    if (bad.error != MPI_SUCCESS) mine.error = bad.error, mine.why = bad.why, p.clear();
    const ro::Outcome o = ro::exchange(call, comm_old, mine, [&](const auto& payloads) {
      return decide_general(layout, payloads);
    });
    if (o.error != MPI_SUCCESS) return ro::fail(comm_old, call, o.error, o.why, comm_dist_graph);
    // Vertex v is new rank v: every process describes the same edges as before.
    return ro::split_and_create(
        comm_old, o, true,
        [&](MPI_Comm part) {
          return PMPI_Dist_graph_create(part, n, sources, degrees, destinations, weights, info, 0,
                                        comm_dist_graph);
        },
        comm_dist_graph);
  } catch (const std::exception& e) {
    return ro::fail(comm_old, call, e, comm_dist_graph);
  }
}

}  // extern "C"
