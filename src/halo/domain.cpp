// The Domain: who holds which subdomain. Ranks are grouped by node, the grid is partitioned
// (given, or by prime factors: nodes, then the subdomains of a node, §4.3), node blocks go to nodes
// and, within a node, cells to the node's (rank, subdomain) slots (§4.4).
#include "halo/domain.hpp"

#include <ferry/transport.hpp>

#include <algorithm>
#include <numeric>
#include <sstream>

#include "halo/collective.hpp"
#include "halo/placement.hpp"
#include "sys/error.hpp"

namespace ferry::halo {

using ferry::detail::fail;
using detail::agree;
using detail::Slot;

Domain::Impl::~Impl() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

Subdomain Domain::Impl::subdomain(int id) const {
  Subdomain s;
  s.id = id;
  s.coord = coord_of(id);
  for (int a = 0; a < 3; ++a) {
    s.offset[a] = cuts[a][s.coord[a]];
    s.extent[a] = cuts[a][s.coord[a] + 1] - s.offset[a];
  }
  s.device = cells[id].device;
  return s;
}

int Domain::Impl::neighbour(int id, Dir d) const {
  Index3 c = coord_of(id);
  for (int a = 0; a < 3; ++a) {
    c[a] += d[a];
    if (c[a] < 0 || c[a] >= grid[a]) {
      if (!periodic[a]) return -1;
      c[a] = (c[a] + grid[a]) % grid[a];
    }
  }
  return id_of(c);
}

Index3 Domain::Impl::min_extent() const {
  Index3 m{};
  for (int a = 0; a < 3; ++a) {
    m[a] = global[a];
    for (i64 k = 0; k < grid[a]; ++k) m[a] = std::min(m[a], cuts[a][k + 1] - cuts[a][k]);
  }
  return m;
}

namespace detail {

std::vector<i64> even_cuts(i64 n, i64 p) {
  std::vector<i64> c(static_cast<std::size_t>(p + 1));
  for (i64 k = 0; k <= p; ++k) c[k] = k * (n / p) + std::min(k, n % p);
  return c;
}

}  // namespace detail

namespace {

struct RankInfo {
  int node_leader;  // lowest rank of this rank's node
  int subdomains;
};

// Every rank's slots, in rank order, and each rank's node (numbered by lowest member).
void gather_ranks(Domain::Impl& d, const DomainOptions& o, std::vector<Slot>& slots) {
  // Nodes (and a bandwidth matrix) as the transport sees them: FERRY_TOPOLOGY simulates layouts.
  const transport::Topology topo = transport::Topology::discover(d.comm);
  int leader = d.rank;
  for (int r = 0; r < topo.size(); ++r)
    if (topo.place(r).node == topo.place(d.rank).node) leader = std::min(leader, r);
  d.topology_note = topo.describe();
  d.bandwidth = topo.bandwidth();
  d.gpu_index.clear();
  for (int r = 0; r < topo.size(); ++r)
    if (topo.place(r).key != 0) d.gpu_index[{topo.place(r).node, topo.place(r).key}] = topo.place(r).gpu;
  std::string err;
  if (o.subdomains < 1) err = "halo: " + std::to_string(o.subdomains) + " subdomains on a rank";
  else if (!o.devices.empty() && static_cast<int>(o.devices.size()) != o.subdomains)
    err = "halo: " + std::to_string(o.devices.size()) + " devices given for " +
          std::to_string(o.subdomains) + " subdomains";
  agree(d.comm, err, MPI_ERR_ARG);
  const auto info = detail::allgather(d.comm, RankInfo{leader, o.subdomains});
  std::vector<int> leaders;
  for (const auto& r : info) leaders.push_back(r.node_leader);
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  d.nodes = static_cast<int>(leaders.size());
  d.node_of_rank.resize(info.size());
  for (std::size_t r = 0; r < info.size(); ++r)
    d.node_of_rank[r] = static_cast<int>(
        std::lower_bound(leaders.begin(), leaders.end(), info[r].node_leader) - leaders.begin());
  // Devices: each rank's list, gathered with their UUID hashes.
  std::vector<long long> mine;
  for (int i = 0; i < o.subdomains; ++i) {
    const int dev = o.devices.empty() ? gpu::current_device() : o.devices[i];
    mine.push_back(dev);
    mine.push_back(static_cast<long long>(gpu::device_key(dev)));
  }
  std::vector<int> counts(info.size()), displs(info.size());
  for (std::size_t r = 0; r < info.size(); ++r) counts[r] = 2 * info[r].subdomains;
  std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
  std::vector<long long> all(static_cast<std::size_t>(displs.back() + counts.back()));
  MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_LONG_LONG, all.data(), counts.data(),
                 displs.data(), MPI_LONG_LONG, d.comm);
  for (std::size_t r = 0; r < info.size(); ++r)
    for (int i = 0; i < info[r].subdomains; ++i) {
      const auto key = static_cast<std::uint64_t>(all[displs[r] + 2 * i + 1]);
      const transport::Place& pl = topo.place(static_cast<int>(r));
      std::uint64_t unit = key;
      if (unit == 0 && topo.simulated() && pl.gpu >= 0) {
        // A simulated GPU: host ranks take the layout's GPUs, so placement tests run on CI.
        unit = (std::uint64_t{1} << 62) | static_cast<std::uint64_t>(pl.node) << 20 | static_cast<std::uint64_t>(pl.gpu);
        d.gpu_index[{pl.node, unit}] = pl.gpu;
      } else if (unit == 0) {
        unit = (std::uint64_t{1} << 63) | static_cast<std::uint64_t>(r);
      }
      slots.push_back({static_cast<int>(r), i, static_cast<int>(all[displs[r] + 2 * i]), key, unit});
    }
}

void check_grid(const Domain::Impl& d, const DomainOptions& o, int total) {
  std::string err;
  const Index3& g = o.grid;
  for (int a = 0; a < 3 && err.empty(); ++a) {
    if (g[a] < 1 || g[a] > d.global[a])
      err = "halo: grid of " + std::to_string(g[a]) + " subdomains along axis " + std::to_string(a) +
            " for " + std::to_string(d.global[a]) + " points";
    const auto& c = o.cuts[a];
    if (err.empty() && !c.empty()) {
      bool ok = static_cast<i64>(c.size()) == g[a] + 1 && c.front() == 0 && c.back() == d.global[a];
      for (std::size_t k = 1; ok && k < c.size(); ++k) ok = c[k] > c[k - 1];
      if (!ok) err = "halo: the cuts along axis " + std::to_string(a) + " are not " +
                     std::to_string(g[a] + 1) + " increasing values from 0 to " +
                     std::to_string(d.global[a]);
    }
  }
  if (err.empty() && g[0] * g[1] * g[2] != total)
    err = "halo: the grid " + std::to_string(g[0]) + " x " + std::to_string(g[1]) + " x " +
          std::to_string(g[2]) + " does not hold the " + std::to_string(total) + " subdomains";
  if (err.empty() && !o.owner.empty() && static_cast<int>(o.owner.size()) != total)
    err = "halo: " + std::to_string(o.owner.size()) + " owners for " + std::to_string(total) + " cells";
  agree(d.comm, err, MPI_ERR_ARG);
}

// Cell -> slot, for a given grid.
void assign_given(Domain::Impl& d, const DomainOptions& o, const std::vector<Slot>& slots,
                  std::vector<int>& slot_of) {
  const int total = static_cast<int>(slots.size());
  if (!o.owner.empty()) {
    // A rank's slots are contiguous (rank order); its cells fill them in cell order.
    std::vector<int> first(static_cast<std::size_t>(d.size), 0), count(first), next(first);
    for (int s = total - 1; s >= 0; --s) first[slots[s].rank] = s, ++count[slots[s].rank];
    std::string err;
    for (int id = 0; id < total && err.empty(); ++id) {
      const int r = o.owner[id];
      if (r < 0 || r >= d.size) err = "halo: owner " + std::to_string(r) + " of cell " + std::to_string(id);
      else if (next[r] >= count[r]) err = "halo: rank " + std::to_string(r) + " owns more cells than its " + std::to_string(count[r]) + " subdomains";
      else slot_of[id] = first[r] + next[r]++;
    }
    for (int r = 0; r < d.size && err.empty(); ++r)
      if (next[r] != count[r]) err = "halo: rank " + std::to_string(r) + " owns fewer cells than its " + std::to_string(count[r]) + " subdomains";
    agree(d.comm, err, MPI_ERR_ARG);
    d.how = "given grid and owners";
    return;
  }
  std::vector<int> perm(static_cast<std::size_t>(total));
  std::iota(perm.begin(), perm.end(), 0);
  if (o.placement == Placement::random) perm = detail::shuffled(total, o.seed);
  for (int id = 0; id < total; ++id) slot_of[id] = perm[id];
  d.how = std::string("given grid, ") + (o.placement == Placement::random ? "random" : "trivial") +
          " placement";
}

}  // namespace

Domain Domain::create(MPI_Comm comm, Index3 global, const DomainOptions& o) {
  auto d = std::make_shared<Impl>();
  if (comm == MPI_COMM_NULL) fail(MPI_ERR_COMM, "halo: MPI_COMM_NULL");
  MPI_Comm_dup(comm, &d->comm);
  MPI_Comm_rank(d->comm, &d->rank);
  MPI_Comm_size(d->comm, &d->size);
  d->global = global;
  d->periodic = o.periodic;
  std::string err;
  for (int a = 0; a < 3; ++a)
    if (global[a] < 1) err = "halo: global extent " + std::to_string(global[a]) + " along axis " + std::to_string(a);
  agree(d->comm, err, MPI_ERR_ARG);
  detail::Hasher h;
  for (int a = 0; a < 3; ++a) h.add(global[a]).add(o.periodic[a]).add(o.grid[a]).add(o.cuts[a].size());
  for (int a = 0; a < 3; ++a)
    for (i64 c : o.cuts[a]) h.add(c);
  for (int r : o.owner) h.add(r);
  h.add(static_cast<int>(o.placement)).add(o.seed);
  for (const auto& t : o.halo_hint.t_)
    for (int w : t) h.add(w);
  agree(d->comm, detail::same_everywhere(d->comm, h.h) ? "" : "halo: Domain::create called with different arguments on different ranks", MPI_ERR_ARG);

  std::vector<Slot> slots;
  gather_ranks(*d, o, slots);
  const int total = static_cast<int>(slots.size());
  std::vector<int> slot_of(static_cast<std::size_t>(total));
  const bool given = o.grid[0] > 0 || o.grid[1] > 0 || o.grid[2] > 0;
  if (given) {
    check_grid(*d, o, total);
    d->grid = o.grid;
    for (int a = 0; a < 3; ++a) d->cuts[a] = o.cuts[a].empty() ? detail::even_cuts(global[a], o.grid[a]) : o.cuts[a];
    assign_given(*d, o, slots, slot_of);
  } else {
    std::string why;
    try {
      detail::place_default(*d, o, slots, slot_of);
    } catch (const Error& e) {
      why = e.what();
    }
    agree(d->comm, why, MPI_ERR_ARG);
  }
  d->cells.resize(static_cast<std::size_t>(total));
  for (int id = 0; id < total; ++id) {
    const Slot& s = slots[slot_of[id]];
    d->cells[id] = {s.rank, s.local, s.device, s.gpu, d->node_of_rank[s.rank]};
  }
  d->local.resize(static_cast<std::size_t>(o.subdomains));
  for (int id = 0; id < total; ++id)
    if (d->cells[id].rank == d->rank) d->local[d->cells[id].local] = d->subdomain(id);
  Domain dom;
  dom.impl_ = std::move(d);
  return dom;
}

const std::vector<Subdomain>& Domain::local() const { return impl_->local; }
Index3 Domain::global() const { return impl_->global; }
Index3 Domain::grid() const { return impl_->grid; }
std::array<bool, 3> Domain::periodic() const { return impl_->periodic; }
int Domain::owner(int id) const {
  if (id < 0 || id >= static_cast<int>(impl_->cells.size()))
    fail(MPI_ERR_ARG, "halo: no cell " + std::to_string(id));
  return impl_->cells[id].rank;
}
Subdomain Domain::at(Index3 c) const {
  for (int a = 0; a < 3; ++a)
    if (c[a] < 0 || c[a] >= impl_->grid[a]) fail(MPI_ERR_ARG, "halo: grid coordinate out of range");
  return impl_->subdomain(impl_->id_of(c));
}

PlacementReport Domain::placement_report() const { return impl_->report; }

std::string Domain::describe() const {
  const Impl& d = *impl_;
  std::ostringstream os;
  os << "halo domain " << d.global[0] << " x " << d.global[1] << " x " << d.global[2] << ", grid "
     << d.grid[0] << " x " << d.grid[1] << " x " << d.grid[2] << " on " << d.size << " ranks, "
     << d.nodes << " node(s): " << d.how << "\n  topology: " << d.topology_note;
  return os.str();
}

}  // namespace ferry::halo
