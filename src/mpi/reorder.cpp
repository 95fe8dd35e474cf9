// Rank reordering, the shared part: the layout of a communicator's processes, the one exchange that
// makes errors collective, the partition (src/place) with its report, and the new communicator.
#include "mpi/reorder.hpp"

#include <ferry/error.hpp>
#include <ferry/transport.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <iomanip>
#include <map>
#include <new>
#include <numeric>
#include <set>
#include <sstream>

#include "mpi/boundary.hpp"
#include "mpi/hot.hpp"
#include "sys/env.hpp"

namespace ferry::mpi_detail::reorder {

namespace env = ferry::detail::env;

bool wanted(MPI_Comm comm, int reorder) {
  if (!reorder || comm == MPI_COMM_NULL || !env::flag(env::Knob::reorder)) return false;
  int inter = 0;
  return PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && !inter;
}

Layout layout(MPI_Comm comm) {
  const int n = comm_size(comm);
  std::vector<transport::Place> places(static_cast<std::size_t>(n));
  transport::Bandwidth bandwidth;
  if (transport::initialized() && transport::world().simulated()) {
    // The world's simulated layout, so a sub-communicator's processes keep their nodes and GPUs.
    const transport::Topology& w = transport::world();
    MPI_Group group, world_group;
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    std::vector<int> ranks(static_cast<std::size_t>(n)), world(static_cast<std::size_t>(n));
    std::iota(ranks.begin(), ranks.end(), 0);
    PMPI_Group_translate_ranks(group, n, ranks.data(), world_group, world.data());
    PMPI_Group_free(&group);
    PMPI_Group_free(&world_group);
    for (int r = 0; r < n; ++r) places[r] = w.place(world[r]);
    bandwidth = w.bandwidth();
  } else {
    const transport::Topology t = transport::Topology::discover(comm);
    for (int r = 0; r < n; ++r) places[r] = t.place(r);
    bandwidth = t.bandwidth();
  }
  Layout L;
  L.slots.resize(places.size());
  std::set<int> nodes;
  std::set<std::pair<int, int>> gpus;  // (node, GPU)
  bool known = true;
  int most = -1;
  for (std::size_t r = 0; r < places.size(); ++r) {
    L.slots[r].node = places[r].node;
    nodes.insert(places[r].node);
    if (places[r].gpu < 0) known = false;
    most = std::max(most, places[r].gpu);
    gpus.insert({places[r].node, places[r].gpu});
  }
  L.nodes = static_cast<int>(nodes.size());
  if (!known) return L;  // some process has no GPU yet: nodes only
  for (std::size_t r = 0; r < places.size(); ++r) L.slots[r].gpu = places[r].gpu;
  for (int node : nodes) {
    int on = 0;
    for (const auto& [m, g] : gpus) on += m == node;
    L.gpus = std::max(L.gpus, on);
  }
  // Seconds per byte over each link; the same GPU costs nothing (a zero bandwidth on the diagonal).
  place::Matrix gbps(most + 1);
  for (int i = 0; i <= most; ++i)
    for (int j = 0; j <= most; ++j) gbps(i, j) = i == j ? 0.0 : bandwidth.at(i, j) * 1e9;
  L.gpu_cost = place::cost_from_bandwidth(gbps);
  return L;
}

namespace {

int first_error(const std::vector<int>& heads, int n, int* who) {
  for (int r = 0; r < n; ++r)
    if (heads[2 * r] != MPI_SUCCESS) return *who = r, heads[2 * r];
  return MPI_SUCCESS;
}

// Rank 0's text, on every rank (all are in the call and know that it failed).
std::string share(const std::string& text, MPI_Comm comm) {
  int len = static_cast<int>(std::min<std::size_t>(text.size(), 4096));
  PMPI_Bcast(&len, 1, MPI_INT, 0, comm);
  std::string s(text.substr(0, static_cast<std::size_t>(len)));
  s.resize(static_cast<std::size_t>(len));
  PMPI_Bcast(s.data(), len, MPI_CHAR, 0, comm);
  return s;
}

}  // namespace

Outcome exchange(const char* call, MPI_Comm comm, const Local& mine, const Decide& decide) {
  const int n = comm_size(comm), me = comm_rank(comm);
  Outcome o;
  // Everyone's verdict on its own arguments, and how much it sends to rank 0.
  int head[2] = {mine.error, static_cast<int>(std::min<std::size_t>(mine.payload.size(), INT_MAX))};
  if (mine.error == MPI_SUCCESS && mine.payload.size() > static_cast<std::size_t>(INT_MAX))
    head[0] = MPI_ERR_ARG;
  std::vector<int> heads(2 * static_cast<std::size_t>(n));
  if (int rc = PMPI_Allgather(head, 2, MPI_INT, heads.data(), 2, MPI_INT, comm); rc != MPI_SUCCESS)
    return o.error = rc, o.why = "PMPI_Allgather failed", o;
  int who = -1;
  if ((o.error = first_error(heads, n, &who)) != MPI_SUCCESS) {
    o.why = who == me ? mine.why
                      : "rank " + std::to_string(who) + " of comm_old passed bad arguments (" + call +
                            " there says which)";
    return o;
  }
  long long total = 0;
  std::vector<int> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    counts[r] = heads[2 * r + 1];
    displs[r] = static_cast<int>(std::min<long long>(total, INT_MAX));
    total += counts[r];
  }
  if (total > INT_MAX)
    return o.error = MPI_ERR_ARG, o.why = "the graph is too large to reorder (over 2^31 entries)", o;
  std::vector<int> all(me == 0 ? static_cast<std::size_t>(total) : 0);
  if (int rc = PMPI_Gatherv(mine.payload.data(), head[1], MPI_INT, all.data(), counts.data(),
                            displs.data(), MPI_INT, 0, comm);
      rc != MPI_SUCCESS)
    return o.error = rc, o.why = "PMPI_Gatherv failed", o;

  Decision d;
  std::vector<int> answers(me == 0 ? 3 * static_cast<std::size_t>(n) : 0);
  if (me == 0) {
    try {
      std::vector<std::vector<int>> payloads(static_cast<std::size_t>(n));
      for (int r = 0; r < n; ++r)
        payloads[r].assign(all.begin() + displs[r], all.begin() + displs[r] + counts[r]);
      all = {};
      d = decide(payloads);
      if (d.error == MPI_SUCCESS && d.new_of_old.size() != static_cast<std::size_t>(n))
        d.error = MPI_ERR_INTERN, d.why = "the reordering has the wrong size";
    } catch (const ferry::Error& e) {
      d.error = e.mpi_error_class(), d.why = e.what();
    } catch (const std::bad_alloc&) {
      d.error = MPI_ERR_NO_MEM, d.why = "out of memory while reordering";
    } catch (const std::exception& e) {
      d.error = MPI_ERR_INTERN, d.why = e.what();
    }
    if (d.error == MPI_SUCCESS && verbose() && !d.report.empty())
      std::fprintf(stderr, "ferry-mpi: %s: %s\n", call, d.report.c_str());
    for (int r = 0; r < n; ++r) {
      answers[3 * r] = d.error;
      answers[3 * r + 1] = d.error == MPI_SUCCESS ? d.new_of_old[r] : -1;
      answers[3 * r + 2] = d.error == MPI_SUCCESS && !d.extra.empty()
                               ? static_cast<int>(d.extra[r].size())
                               : 0;
    }
  }
  int answer[3];
  if (int rc = PMPI_Scatter(answers.data(), 3, MPI_INT, answer, 3, MPI_INT, 0, comm);
      rc != MPI_SUCCESS)
    return o.error = rc, o.why = "PMPI_Scatter failed", o;
  if ((o.error = answer[0]) != MPI_SUCCESS) return o.why = share(d.why, comm), o;
  o.new_rank = answer[1];

  // What each process needs besides its rank (its vertex's edges): everyone takes part or no one.
  const bool any = me == 0 ? !d.extra.empty() : false;
  int flag = any ? 1 : 0;
  PMPI_Bcast(&flag, 1, MPI_INT, 0, comm);
  if (!flag) return o;
  std::vector<int> flat;
  if (me == 0) {
    long long at = 0;
    for (int r = 0; r < n; ++r) {
      counts[r] = static_cast<int>(d.extra[r].size());
      displs[r] = static_cast<int>(at);
      at += counts[r];
    }
    flat.reserve(static_cast<std::size_t>(at));
    for (const auto& e : d.extra) flat.insert(flat.end(), e.begin(), e.end());
  }
  o.extra.resize(static_cast<std::size_t>(answer[2]));
  if (int rc = PMPI_Scatterv(flat.data(), counts.data(), displs.data(), MPI_INT, o.extra.data(),
                             answer[2], MPI_INT, 0, comm);
      rc != MPI_SUCCESS)
    return o.error = rc, o.why = "PMPI_Scatterv failed", o;
  return o;
}

namespace {

// "same GPU 0 -> 3, 100 GB/s links 1660 -> 520, 10 GB/s links 80 -> 0": intra-node weight by link.
std::string by_link(const place::Traffic& before, const place::Traffic& after) {
  std::map<double, std::pair<long long, long long>> links;  // cost -> (before, after)
  for (const place::LinkClass& c : before.intra_node) links[c.cost].first += c.bytes;
  for (const place::LinkClass& c : after.intra_node) links[c.cost].second += c.bytes;
  std::ostringstream s;
  s << "same GPU " << before.same_gpu << " -> " << after.same_gpu;
  for (const auto& [cost, ba] : links) {
    s << ", ";
    if (cost > 0)
      s << std::setprecision(3) << 1e-9 / cost << " GB/s";
    else
      s << "other-GPU";
    s << " links " << ba.first << " -> " << ba.second;
  }
  return s.str();
}

}  // namespace

Decision decide(const Layout& L, const std::vector<place::Flow>& flows,
                const std::vector<int>& dims, const std::vector<int>& periods) {
  const int n = static_cast<int>(L.slots.size());
  long long cells = 1;
  for (int d : dims) cells *= d;
  const auto t0 = std::chrono::steady_clock::now();
  place::Reordering r;
  if (!dims.empty() && cells == n)
    r = place::reorder_cart(dims, periods, L.slots, L.gpu_cost);
  else
    r = place::reorder(place::graph_from_flows(n, flows), L.slots, L.gpu_cost);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Decision d;
  d.new_of_old = r.new_of_old;
  if (!verbose()) return d;
  // Bytes (the application's weights) by the link they cross, before and after.
  std::vector<int> node(n), gpu(n), node_after(n), gpu_after(n);
  for (int v = 0; v < n; ++v) {
    node[v] = L.slots[v].node, gpu[v] = L.gpu_cost.empty() ? 0 : L.slots[v].gpu;
    const place::Slot& s = L.slots[r.old_of_new[v]];
    node_after[v] = s.node, gpu_after[v] = L.gpu_cost.empty() ? 0 : s.gpu;
  }
  const place::Traffic before = place::traffic(flows, node, gpu, L.gpu_cost);
  const place::Traffic after = place::traffic(flows, node_after, gpu_after, L.gpu_cost);
  std::ostringstream s;
  s << n << " ranks on " << L.nodes << " nodes";
  if (L.gpus > 0) s << " x " << L.gpus << " GPUs";
  s << ", " << r.method << " in " << std::fixed << std::setprecision(2) << ms
    << " ms: inter-node weight " << before.inter_node << " -> " << after.inter_node;
  if (after.inter_node > 0 && after.inter_node < before.inter_node)
    s << " (" << std::setprecision(2) << double(before.inter_node) / double(after.inter_node)
      << "x less)";
  s << std::defaultfloat << "; inside nodes: " << by_link(before, after);
  d.report = s.str();
  return d;
}

int split_and_create(MPI_Comm comm, const Outcome& o, bool member,
                     const std::function<int(MPI_Comm)>& create, MPI_Comm* out) {
  MPI_Comm part = MPI_COMM_NULL;
  int rc = PMPI_Comm_split(comm, member ? 0 : MPI_UNDEFINED, o.new_rank, &part);
  if (rc != MPI_SUCCESS) return rc;
  if (!member) {
    *out = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  rc = create(part);
  PMPI_Comm_free(&part);
  return rc;
}

int fail(MPI_Comm comm, const char* call, int error, const std::string& why, MPI_Comm* out) {
  if (out) *out = MPI_COMM_NULL;
  return report(comm, ferry::Error(error, std::string(call) + ": " + why));
}

int fail(MPI_Comm comm, const char* call, const std::exception& e, MPI_Comm* out) {
  if (const auto* f = dynamic_cast<const ferry::Error*>(&e))
    return fail(comm, call, f->mpi_error_class(), f->what(), out);
  return fail(comm, call, MPI_ERR_INTERN, e.what(), out);
}

std::uint64_t hash(const std::vector<int>& v) {
  std::uint64_t h = 1469598103934665603ull;
  for (int x : v) {
    auto u = static_cast<std::uint32_t>(x);
    for (int b = 0; b < 4; ++b) h = (h ^ ((u >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return h;
}

}  // namespace ferry::mpi_detail::reorder
