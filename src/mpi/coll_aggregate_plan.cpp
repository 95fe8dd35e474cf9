// The plan of an aggregated persistent neighbourhood collective (coll_aggregate.hpp), made once at
// its init, collectively.
#include <algorithm>
#include <climits>
#include <map>
#include <string>

#include "mpi/coll_aggregate.hpp"
#include "sys/env.hpp"

namespace ferry::mpi_detail::coll::pairs {

namespace env = ferry::detail::env;

namespace {

// One block that crosses regions: from comm rank s (its k-th block) to d, with the tag it carries.
struct Crossing {
  int s, d, tag, k;
  i64 bytes;
};

}  // namespace

std::shared_ptr<const Aggregation> aggregate(MPI_Comm comm, const Plan& plan) {
  const std::string mode = env::text(env::Knob::aggregate);
  if (mode == "off" || !transport::initialized()) return nullptr;
  const MPI_Comm dup = channel_of(comm, plan);
  const int n = comm_size(comm), me = comm_rank(comm);
  const transport::Topology& topo = transport::world();
  std::vector<int> region(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    region[static_cast<std::size_t>(r)] = topo.place(transport::world_rank(comm, r)).node;
  const int regions = topo.nodes();
  const Peers& p = plan.peers;
  auto crosses = [&](int peer) {
    return peer != MPI_PROC_NULL &&
           region[static_cast<std::size_t>(peer)] != region[static_cast<std::size_t>(me)];
  };

  // Every process's crossing blocks: (d, tag, bytes) each, gathered everywhere.
  std::vector<long long> mine;
  for (std::size_t i = 0; i < plan.sends.size(); ++i) {
    const Block& b = plan.sends[i];
    if (!crosses(p.out[i]) || empty(b)) continue;
    mine.insert(mine.end(), {p.out[i], p.out_tag[i], static_cast<long long>(i), route_of(b).bytes});
  }
  std::vector<int> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  const int count = static_cast<int>(mine.size());
  if (PMPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, dup) != MPI_SUCCESS)
    throw ferry::Error(MPI_ERR_INTERN, "aggregation: allgather failed");
  int total = 0;
  for (int r = 0; r < n; ++r) {
    displs[static_cast<std::size_t>(r)] = total;
    total += counts[static_cast<std::size_t>(r)];
  }
  std::vector<long long> every(static_cast<std::size_t>(total));
  if (PMPI_Allgatherv(mine.data(), count, MPI_LONG_LONG, every.data(), counts.data(), displs.data(),
                      MPI_LONG_LONG, dup) != MPI_SUCCESS)
    throw ferry::Error(MPI_ERR_INTERN, "aggregation: allgatherv failed");
  std::vector<Crossing> c;
  for (int r = 0; r < n; ++r)
    for (int q = displs[static_cast<std::size_t>(r)];
         q < displs[static_cast<std::size_t>(r)] + counts[static_cast<std::size_t>(r)]; q += 4) {
      const auto* e = &every[static_cast<std::size_t>(q)];
      c.push_back(
          {r, static_cast<int>(e[0]), static_cast<int>(e[1]), static_cast<int>(e[2]), e[3]});
    }

  // The same decision everywhere, from the same list.
  std::map<std::pair<int, int>, std::vector<Crossing>> pairs_of;
  i64 bytes = 0;
  for (const Crossing& x : c) {
    pairs_of[{region[static_cast<std::size_t>(x.s)], region[static_cast<std::size_t>(x.d)]}]
        .push_back(x);
    bytes += x.bytes;
  }
  if (c.empty() || kStep1 + 2 * regions > 32767) return nullptr;
  for (const auto& [rp, list] : pairs_of) {  // one message per pair: its count is an int
    i64 size = 0;
    for (const Crossing& x : list) size += x.bytes;
    if (size > INT_MAX) return nullptr;
  }
  const bool pays =
      c.size() >= 2 * pairs_of.size() && bytes / static_cast<i64>(c.size()) <= 64 * 1024;
  if (mode != "on" && !pays) return nullptr;

  auto a = std::make_shared<Aggregation>();
  a->all = plan;
  // Which receive block takes the k-th block from s with tag t: the k-th such slot here.
  std::map<std::pair<int, int>, std::vector<std::size_t>> slots;
  std::vector<bool> recv_aggregated(plan.recvs.size(), false),
      send_aggregated(plan.sends.size(), false);
  for (std::size_t j = 0; j < plan.recvs.size(); ++j)
    if (crosses(p.in[j]) && !empty(plan.recvs[j])) slots[{p.in[j], p.in_tag[j]}].push_back(j);
  std::map<std::pair<int, int>, std::size_t> seen;

  auto members = [&](int reg) {
    std::vector<int> m;
    for (int r = 0; r < n; ++r)
      if (region[static_cast<std::size_t>(r)] == reg) m.push_back(r);
    return m;
  };
  for (auto& [rp, list] : pairs_of) {
    const auto [ra, rb] = rp;
    const std::vector<int> ma = members(ra), mb = members(rb);
    const int lead_a = ma[static_cast<std::size_t>(rb) % ma.size()],
              lead_b = mb[static_cast<std::size_t>(ra) % mb.size()];
    // The pair's layout: by destination, source, block order (the list is in source order).
    std::stable_sort(list.begin(), list.end(),
                     [](const Crossing& x, const Crossing& y) { return x.d < y.d; });
    std::vector<i64> at(list.size());
    i64 size = 0;
    for (std::size_t q = 0; q < list.size(); ++q) {
      at[q] = size;
      size += list[q].bytes;
    }
    const int tag1 = kStep1 + rb, tag3 = kStep1 + regions + ra;
    // Step 1 and 2 at the sending side.
    if (region[static_cast<std::size_t>(me)] == ra) {
      // This process's pieces in its own block order (how it packs them for the leader).
      std::vector<std::size_t> own;
      for (std::size_t q = 0; q < list.size(); ++q)
        if (list[q].s == me) {
          own.push_back(q);
          send_aggregated[static_cast<std::size_t>(list[q].k)] = true;
        }
      std::sort(own.begin(), own.end(),
                [&](std::size_t x, std::size_t y) { return list[x].k < list[y].k; });
      if (me != lead_a && !own.empty()) {
        Aggregation::Gather g{lead_a, tag1, nullptr, {}};
        i64 mine_bytes = 0;
        for (std::size_t q : own) {
          g.pieces.push_back({static_cast<std::size_t>(list[q].k), mine_bytes, list[q].bytes});
          mine_bytes += list[q].bytes;
        }
        g.buf = std::make_unique<Bytes>(mine_bytes);
        a->gathers.push_back(std::move(g));
      }
      if (me == lead_a) {
        Aggregation::Lead l{lead_b, std::make_unique<Bytes>(size), {}, {}, tag1};
        for (std::size_t q : own)
          l.own.push_back({static_cast<std::size_t>(list[q].k), at[q], list[q].bytes});
        for (int m : ma) {
          if (m == me) continue;
          std::vector<std::size_t> theirs;
          for (std::size_t q = 0; q < list.size(); ++q)
            if (list[q].s == m) theirs.push_back(q);
          if (theirs.empty()) continue;
          std::sort(theirs.begin(), theirs.end(),
                    [&](std::size_t x, std::size_t y) { return list[x].k < list[y].k; });
          std::vector<int> lengths;
          std::vector<MPI_Aint> where;
          for (std::size_t q : theirs) {
            if (list[q].bytes > INT_MAX)
              throw ferry::Error(MPI_ERR_COUNT, "aggregation: a block over 2 GiB");
            lengths.push_back(static_cast<int>(list[q].bytes));
            where.push_back(static_cast<MPI_Aint>(at[q]));
          }
          MPI_Datatype t = MPI_DATATYPE_NULL;
          PMPI_Type_create_hindexed(static_cast<int>(theirs.size()), lengths.data(), where.data(),
                                    MPI_BYTE, &t);
          PMPI_Type_commit(&t);
          l.from.emplace_back(m, t);
        }
        a->leads.push_back(std::move(l));
      }
    }
    // Step 3 at the receiving side.
    if (region[static_cast<std::size_t>(me)] == rb) {
      std::vector<Piece> pieces;  // mine, at their offsets in the pair's buffer
      i64 first = -1, last = 0;
      for (std::size_t q = 0; q < list.size(); ++q) {
        if (list[q].d != me) continue;
        auto& v = slots[{list[q].s, list[q].tag}];
        std::size_t& k = seen[{list[q].s, list[q].tag}];
        if (k >= v.size())
          throw ferry::Error(MPI_ERR_TRUNCATE, "aggregation: more blocks than receive slots");
        const std::size_t j = v[k++];
        recv_aggregated[j] = true;
        pieces.push_back({j, at[q], list[q].bytes});
        if (first < 0) first = at[q];
        last = at[q] + list[q].bytes;
      }
      if (me == lead_b) {
        Aggregation::Hand h{lead_a, tag3, std::make_unique<Bytes>(size), {}, pieces};
        for (int m : mb) {
          if (m == me) continue;
          i64 lo = -1, hi = 0;
          for (std::size_t q = 0; q < list.size(); ++q)
            if (list[q].d == m) {
              if (lo < 0) lo = at[q];
              hi = at[q] + list[q].bytes;
            }
          if (lo >= 0) h.slices.push_back({m, {lo, hi - lo}});
        }
        a->hands.push_back(std::move(h));
      } else if (first >= 0) {
        for (Piece& pc : pieces) pc.at -= first;
        a->takes.push_back(
            {lead_b, tag3, std::make_unique<Bytes>(last - first), std::move(pieces)});
      }
    }
  }
  // What still goes directly.
  a->direct.peers = p;
  a->direct.sends = plan.sends;
  a->direct.recvs = plan.recvs;
  for (std::size_t i = 0; i < plan.sends.size(); ++i)
    if (send_aggregated[i]) a->direct.sends[i].count = 0;
  for (std::size_t j = 0; j < plan.recvs.size(); ++j)
    if (recv_aggregated[j]) a->direct.recvs[j].count = 0;
  return a;
}

}  // namespace ferry::mpi_detail::coll::pairs
