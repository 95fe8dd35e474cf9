// The plan of an aggregated persistent neighbourhood collective (coll_aggregate.hpp), made once at
// its init, collectively.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "mpi/coll_aggregate.hpp"
#include "sys/env.hpp"

namespace ferry::mpi_detail::coll::pairs {

namespace env = ferry::detail::env;

namespace {

// One block that crosses regions: from comm rank s (its k-th block) to d, with the tag it carries;
// with ids, `unique` bytes cross from s to d's region in all (the same in each of s's blocks
// there) and `elem` is the bytes of one element.
struct Crossing {
  int s, d, tag, k;
  i64 bytes, unique, elem;
};
constexpr int kFields = 6;  // what each process tells of a block
constexpr int kIdsTag = kStep2 - 1;  // at init: a source's unique-element indices, to a leader

// This process's unique elements per region (ids given): for each region its first occurrences
// (block, element) in block order, and for each crossing block the unique index of each element.
struct Uniques {
  std::map<int, std::vector<std::pair<std::size_t, int>>> first;
  std::map<std::size_t, std::vector<int>> index;
};

Uniques uniques(const Plan& plan, const Ids& ids, const std::vector<int>& region,
                const std::vector<bool>& crossing) {
  Uniques u;
  std::map<int, std::unordered_map<long long, int>> seen;
  for (std::size_t i = 0; i < plan.sends.size(); ++i) {
    if (!crossing[i]) continue;
    const int r = region[static_cast<std::size_t>(plan.peers.out[i])];
    auto& firsts = u.first[r];
    auto& known = seen[r];
    std::vector<int>& idx = u.index[i];
    for (int e = 0; e < plan.sends[i].count; ++e) {
      const auto [it, fresh] = known.emplace(ids[i][static_cast<std::size_t>(e)], static_cast<int>(firsts.size()));
      if (fresh) firsts.emplace_back(i, e);
      idx.push_back(it->second);
    }
  }
  return u;
}

// An hindexed type of bytes over (offset, length) pieces, runs that meet merged; committed and
// kept in `a` to be freed with it.
MPI_Datatype pieces_type(Aggregation& a, const std::vector<std::pair<i64, i64>>& pieces) {
  std::vector<int> lengths;
  std::vector<MPI_Aint> where;
  for (const auto& [at, n] : pieces) {
    if (!where.empty() && where.back() + lengths.back() == at && lengths.back() + n <= INT_MAX) {
      lengths.back() += static_cast<int>(n);
      continue;
    }
    if (n > INT_MAX) throw ferry::Error(MPI_ERR_COUNT, "aggregation: a block over 2 GiB");
    lengths.push_back(static_cast<int>(n));
    where.push_back(static_cast<MPI_Aint>(at));
  }
  MPI_Datatype t = MPI_DATATYPE_NULL;
  if (PMPI_Type_create_hindexed(static_cast<int>(where.size()), lengths.data(), where.data(), MPI_BYTE, &t) !=
          MPI_SUCCESS ||
      PMPI_Type_commit(&t) != MPI_SUCCESS)
    throw ferry::Error(MPI_ERR_INTERN, "aggregation: no type for a leader's buffer");
  a.types.push_back(t);
  return t;
}

// The block of this process's unique elements for one region: one element each, at their
// addresses (an hindexed_block of the send type from the lowest block's address).
Block unique_block(Aggregation& a, const Plan& plan, const std::vector<std::pair<std::size_t, int>>& firsts) {
  const MPI_Datatype type = plan.sends[firsts.front().first].type;
  const i64 ext = extent(type);
  char* base = static_cast<char*>(plan.sends[firsts.front().first].buf);
  for (const auto& f : firsts) base = std::min(base, static_cast<char*>(plan.sends[f.first].buf));
  std::vector<MPI_Aint> where;
  for (const auto& [i, e] : firsts)
    where.push_back(static_cast<MPI_Aint>(static_cast<char*>(plan.sends[i].buf) - base + e * ext));
  MPI_Datatype t = MPI_DATATYPE_NULL;
  if (PMPI_Type_create_hindexed_block(static_cast<int>(where.size()), 1, where.data(), type, &t) != MPI_SUCCESS ||
      MPI_Type_commit(&t) != MPI_SUCCESS)  // Ferry's entry: the pack engine reads it
    throw ferry::Error(MPI_ERR_INTERN, "aggregation: no type for the unique elements");
  a.types.push_back(t);
  return {base, 1, t};
}

}  // namespace

std::shared_ptr<const Aggregation> aggregate(MPI_Comm comm, const Plan& plan, const Ids* ids) {
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

  // Every process's crossing blocks: (d, tag, k, bytes, unique, elem) each, gathered everywhere,
  // and whether it has a crossing block of a type Ferry cannot pack (then nobody aggregates).
  std::vector<bool> crossing(plan.sends.size());
  int unreadable = 0;
  for (std::size_t i = 0; i < plan.sends.size(); ++i) {
    crossing[i] = crosses(p.out[i]) && !empty(plan.sends[i]);
    if (crossing[i] && !route_of(plan.sends[i]).type) unreadable = 1;
  }
  for (std::size_t j = 0; j < plan.recvs.size(); ++j)
    if (crosses(p.in[j]) && !empty(plan.recvs[j]) && !route_of(plan.recvs[j]).type) unreadable = 1;
  const Uniques u = ids && !unreadable ? uniques(plan, *ids, region, crossing) : Uniques{};
  std::vector<long long> mine;
  for (std::size_t i = 0; i < plan.sends.size() && !unreadable; ++i) {
    if (!crossing[i]) continue;
    const i64 bytes = route_of(plan.sends[i]).bytes, elem = bytes / plan.sends[i].count;
    const i64 unique = ids ? elem * static_cast<i64>(u.first.at(region[static_cast<std::size_t>(p.out[i])]).size()) : 0;
    mine.insert(mine.end(), {p.out[i], p.out_tag[i], static_cast<long long>(i), bytes, unique, elem});
  }
  std::vector<int> counts(static_cast<std::size_t>(3 * n)), displs(static_cast<std::size_t>(n)),
      sizes(static_cast<std::size_t>(n));
  const int count[3] = {static_cast<int>(mine.size()), ids ? 1 : 0, unreadable};
  if (PMPI_Allgather(count, 3, MPI_INT, counts.data(), 3, MPI_INT, dup) != MPI_SUCCESS)
    throw ferry::Error(MPI_ERR_INTERN, "aggregation: allgather failed");
  int total = 0;
  bool with_ids = true;  // every process named its values (the same entry everywhere)
  for (int r = 0; r < n; ++r) {
    displs[static_cast<std::size_t>(r)] = total;
    sizes[static_cast<std::size_t>(r)] = counts[static_cast<std::size_t>(3 * r)];
    total += sizes[static_cast<std::size_t>(r)];
    with_ids = with_ids && counts[static_cast<std::size_t>(3 * r + 1)] != 0;
    unreadable = unreadable || counts[static_cast<std::size_t>(3 * r + 2)] != 0;
  }
  std::vector<long long> every(static_cast<std::size_t>(total));
  if (PMPI_Allgatherv(mine.data(), count[0], MPI_LONG_LONG, every.data(), sizes.data(), displs.data(),
                      MPI_LONG_LONG, dup) != MPI_SUCCESS)
    throw ferry::Error(MPI_ERR_INTERN, "aggregation: allgatherv failed");
  std::vector<Crossing> c;
  for (int r = 0; r < n; ++r)
    for (int q = displs[static_cast<std::size_t>(r)];
         q < displs[static_cast<std::size_t>(r)] + sizes[static_cast<std::size_t>(r)]; q += kFields) {
      const auto* e = &every[static_cast<std::size_t>(q)];
      c.push_back({r, static_cast<int>(e[0]), static_cast<int>(e[1]), static_cast<int>(e[2]), e[3], e[4], e[5]});
    }

  // The same decision everywhere, from the same list.
  std::map<std::pair<int, int>, std::vector<Crossing>> pairs_of;
  std::set<std::pair<int, int>> counted;  // (source, destination region): its distinct bytes
  i64 bytes = 0, unique = 0;
  for (const Crossing& x : c) {
    const int ra = region[static_cast<std::size_t>(x.s)], rb = region[static_cast<std::size_t>(x.d)];
    if (counted.insert({x.s, rb}).second) unique += x.unique;
    pairs_of[{ra, rb}].push_back(x);
    bytes += x.bytes;
  }
  if (c.empty() || unreadable || kStep1 + 2 * regions > 32767) return nullptr;
  for (const auto& [rp, list] : pairs_of) {  // one message per pair: its count is an int
    i64 size = 0;
    for (const Crossing& x : list) size += x.bytes;
    if (size > INT_MAX) return nullptr;
  }
  const bool pays = bytes / static_cast<i64>(c.size()) <= 64 * 1024 &&
                    (c.size() >= 2 * pairs_of.size() || (with_ids && unique < bytes));
  if (mode != "on" && !pays) return nullptr;

  auto a = std::make_shared<Aggregation>();
  a->all = plan;
  if (!with_ids) a->packs = plan.sends;
  // Which receive block takes the k-th block from s with tag t: the k-th such slot here.
  std::map<std::pair<int, int>, std::vector<std::size_t>> slots;
  std::vector<bool> recv_aggregated(plan.recvs.size(), false),
      send_aggregated(plan.sends.size(), false);
  for (std::size_t j = 0; j < plan.recvs.size(); ++j)
    if (crosses(p.in[j]) && !empty(plan.recvs[j])) slots[{p.in[j], p.in_tag[j]}].push_back(j);
  std::map<std::pair<int, int>, std::size_t> seen;
  int refused = MPI_SUCCESS;
  // With ids: the indices this process sends to leaders (to whom), and those it receives as one.
  std::vector<std::pair<int, std::vector<int>>> sent_indices;
  std::vector<MPI_Request> index_requests;
  struct Told {
    std::size_t hand;
    std::vector<Crossing> list;
    std::map<int, i64> base;
    std::map<int, std::vector<int>> indices;  // per source
  };
  std::vector<Told> told;

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
    // The pair's layout: by destination, source, block order (the list is in source order); with
    // ids the leaders' buffer holds each source's unique elements instead, in source order.
    std::stable_sort(list.begin(), list.end(),
                     [](const Crossing& x, const Crossing& y) { return x.d < y.d; });
    std::vector<i64> at(list.size());
    std::map<int, i64> base, unique_of;
    i64 size = 0;
    for (std::size_t q = 0; q < list.size(); ++q) {
      at[q] = size;
      size += list[q].bytes;
      unique_of[list[q].s] = list[q].unique;
    }
    if (with_ids) {
      size = 0;
      for (const auto& [s, ub] : unique_of) base[s] = size, size += ub;
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
      std::vector<Piece> pieces;  // what this process packs, at its place in its own message
      if (with_ids && !own.empty()) {
        a->packs.push_back(unique_block(*a, plan, u.first.at(rb)));
        pieces.push_back({a->packs.size() - 1, 0, unique_of.at(me)});
        auto& [to, idx] = sent_indices.emplace_back(lead_b, std::vector<int>{});  // in list order
        for (std::size_t q : own) {
          const auto& v = u.index.at(static_cast<std::size_t>(list[q].k));
          idx.insert(idx.end(), v.begin(), v.end());
        }
      } else {
        std::sort(own.begin(), own.end(), [&](std::size_t x, std::size_t y) { return list[x].k < list[y].k; });
        i64 packed = 0;
        for (std::size_t q : own) {
          pieces.push_back({static_cast<std::size_t>(list[q].k), packed, list[q].bytes});
          packed += list[q].bytes;
        }
      }
      i64 mine_bytes = 0;
      for (const Piece& pc : pieces) mine_bytes += pc.bytes;
      if (me != lead_a && !own.empty()) {
        a->gathers.push_back({lead_a, tag1, std::make_unique<Bytes>(mine_bytes), std::move(pieces)});
      } else if (me == lead_a) {
        Aggregation::Lead l{lead_b, std::make_unique<Bytes>(size), {}, {}, tag1};
        const i64 shift = with_ids ? (own.empty() ? 0 : base.at(me)) : 0;
        for (std::size_t x = 0; x < pieces.size(); ++x)  // own pieces at their places in the pair's buffer
          l.own.push_back({pieces[x].block, with_ids ? shift : at[own[x]], pieces[x].bytes});
        for (int m : ma) {
          if (m == me) continue;
          std::vector<std::size_t> theirs;
          for (std::size_t q = 0; q < list.size(); ++q)
            if (list[q].s == m) theirs.push_back(q);
          if (theirs.empty()) continue;
          std::sort(theirs.begin(), theirs.end(), [&](std::size_t x, std::size_t y) { return list[x].k < list[y].k; });
          std::vector<std::pair<i64, i64>> where;
          if (with_ids) {
            where.push_back({base.at(m), unique_of.at(m)});
          } else {
            for (std::size_t q : theirs) where.push_back({at[q], list[q].bytes});
          }
          l.from.emplace_back(m, pieces_type(*a, where));
        }
        a->leads.push_back(std::move(l));
      }
    }
    // Step 3 at the receiving side.
    if (region[static_cast<std::size_t>(me)] == rb) {
      std::vector<Piece> pieces;  // mine, at their offsets in the pair's buffer (with ids: in my slice)
      i64 first = -1, last = 0, taken = 0;
      for (std::size_t q = 0; q < list.size(); ++q) {
        if (list[q].d != me) continue;
        auto& v = slots[{list[q].s, list[q].tag}];
        std::size_t& k = seen[{list[q].s, list[q].tag}];
        if (k >= v.size()) {  // an erroneous call: every process is told below
          refused = MPI_ERR_TRUNCATE;
          continue;
        }
        const std::size_t j = v[k++];
        recv_aggregated[j] = true;
        pieces.push_back({j, with_ids ? taken : at[q], list[q].bytes});
        taken += list[q].bytes;
        if (first < 0) first = at[q];
        last = at[q] + list[q].bytes;
      }
      if (with_ids) {
        if (me == lead_b) {
          Told t{a->hands.size(), list, base, {}};
          for (std::size_t q = 0; q < list.size(); ++q) t.indices[list[q].s].resize(t.indices[list[q].s].size() +
                                                                                     static_cast<std::size_t>(list[q].bytes / list[q].elem));
          a->hands.push_back({lead_a, tag3, std::make_unique<Bytes>(size), {}, {}, {}});
          told.push_back(std::move(t));
        }
        if (!pieces.empty())
          a->takes.push_back({lead_b, tag3, std::make_unique<Bytes>(taken), std::move(pieces)});
      } else if (me == lead_b) {
        Aggregation::Hand h{lead_a, tag3, std::make_unique<Bytes>(size), {}, pieces, {}};
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
  // Any process that found more blocks than receive slots fails the init at every process, before
  // any message of the plan is posted.
  int any = MPI_SUCCESS;
  {
    ServeWhileBlocked serving;
    if (PMPI_Allreduce(&refused, &any, 1, MPI_INT, MPI_MAX, dup) != MPI_SUCCESS)
      throw ferry::Error(MPI_ERR_INTERN, "aggregation: allreduce failed");
  }
  if (refused != MPI_SUCCESS) throw ferry::Error(refused, "aggregation: more blocks than receive slots");
  if (any != MPI_SUCCESS) throw ferry::Error(MPI_ERR_OTHER, "aggregation: another process's blocks do not match");
  if (with_ids) {  // each leader of B learns which unique element each element is, then its gathers
    int rc = MPI_SUCCESS;  // a message that cannot start: those posted complete first
    for (auto& [to, idx] : sent_indices) {
      MPI_Request r = MPI_REQUEST_NULL;
      if (rc == MPI_SUCCESS) rc = PMPI_Isend(idx.data(), static_cast<int>(idx.size()), MPI_INT, to, kIdsTag, dup, &r);
      index_requests.push_back(r);
    }
    for (Told& t : told)
      for (auto& [src, idx] : t.indices) {
        MPI_Request r = MPI_REQUEST_NULL;
        if (rc == MPI_SUCCESS) rc = PMPI_Irecv(idx.data(), static_cast<int>(idx.size()), MPI_INT, src, kIdsTag, dup, &r);
        index_requests.push_back(r);
      }
    if (!index_requests.empty()) {
      ServeWhileBlocked serving;
      const int waited =
          PMPI_Waitall(static_cast<int>(index_requests.size()), index_requests.data(), MPI_STATUSES_IGNORE);
      if (rc == MPI_SUCCESS) rc = waited;
    }
    if (rc != MPI_SUCCESS) throw ferry::Error(rc, "aggregation: the unique elements did not arrive");
    for (Told& t : told) {
      std::map<int, std::vector<std::pair<i64, i64>>> to;  // per destination, its pieces in order
      std::map<int, std::size_t> read;                     // per source, indices used so far
      for (const Crossing& x : t.list) {
        const std::vector<int>& idx = t.indices.at(x.s);
        std::size_t& r = read[x.s];
        for (i64 e = 0; e < x.bytes / x.elem; ++e, ++r) {
          const i64 k = idx.at(r);
          if (k < 0 || k * x.elem >= x.unique)
            throw ferry::Error(MPI_ERR_INTERN, "aggregation: a unique element out of range");
          to[x.d].push_back({t.base.at(x.s) + k * x.elem, x.elem});
        }
      }
      for (const auto& [d, where] : to) a->hands[t.hand].typed.emplace_back(d, pieces_type(*a, where));
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
