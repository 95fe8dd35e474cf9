// Locality-aware aggregation of the persistent neighbourhood collectives (coll_pairs.hpp; issue 16,
// the CUP-ECS poster's three steps). Where many small blocks cross between regions (nodes), each
// ordered pair of regions exchanges one message: (1) the processes of region A send their blocks
// for region B to A's leader for B, (2) that leader sends them all in one message to B's leader for
// A, (3) which hands each process of B its share. Blocks inside a region go directly, as without
// aggregation. The plan is made once, at the persistent init (which every process calls): every
// process learns every block that crosses regions (an allgatherv of (source, destination, tag,
// bytes)), so all of them decide alike whether to aggregate and agree on the layout.
//
// Layout: the leaders' buffer of a region pair holds the blocks ordered by destination, then
// source, then the source's block order, so the receiving leader hands out contiguous slices; the
// sending leader receives each member's blocks scattered into place by an hindexed type. The
// leaders of A for B and of B for A are A's process B mod |A| and B's process A mod |B|, which
// spreads the pairs over the processes of a region. The blocks travel packed in host memory (GPU
// data staged): aggregation pays where messages are small and many, which is where per-message
// cost dominates (FERRY_AGGREGATE=auto: at least two blocks per region pair on average and at most
// 64 KiB each); `on` and `off` force it.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <ferry/pack.hpp>
#include <map>
#include <memory>

#include "mpi/coll_pairs.hpp"
#include "sys/env.hpp"

namespace ferry::mpi_detail::coll::pairs {

namespace env = ferry::detail::env;

namespace {

constexpr int kStep1 = 1 << 13;  // + the destination region; step 3: + regions + the source region
constexpr int kStep2 = (1 << 13) - 1;

std::atomic<long> crossed{0};  // messages to another region sent by Ferry's collectives

// One block that crosses regions: from comm rank s (its k-th block) to d, with the tag it carries.
struct Crossing {
  int s, d, tag, k;
  i64 bytes;
};

// The bytes of a block packed, and back (host or GPU memory).
transport::Route route_of(const Block& b) {
  return transport::route(b.buf, b.count, b.type);
}
void pack_into(const Block& b, char* out) {
  const transport::Route r = route_of(b);
  if (r.bytes == 0) return;
  if (r.device()) {
    transport::stage(r, out);
  } else {
    i64 pos = 0;
    ferry::pack(r.origin, r.count, *r.type, out, r.bytes, &pos);
  }
}
void unpack_from(const char* in, i64 bytes, const Block& b) {
  if (bytes > 0) transport::unstage(in, bytes, transport::target(route_of(b)), 0, true);
}

// A buffer of the pinned pool for the life of the plan.
struct Bytes {
  explicit Bytes(i64 n)
      : size(n), p(static_cast<char*>(n > 0 ? transport::pinned_pool().get(n) : nullptr)) {}
  ~Bytes() {
    if (p) transport::pinned_pool().put(p);
  }
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  i64 size;
  char* p;
};

// A piece of a buffer: a block of this process at an offset.
struct Piece {
  std::size_t block;  // index into the plan's sends or recvs
  i64 at, bytes;
};

}  // namespace

struct Aggregation {
  Plan all;     // the call's blocks
  Plan direct;  // those that go directly: inside regions, and any the aggregation leaves alone
  // Step 1, this process's blocks for a region, to that region pair's leader here.
  struct Gather {
    int to, tag;
    std::unique_ptr<Bytes> buf;
    std::vector<Piece> pieces;
  };
  std::vector<Gather> gathers;
  // Step 2, as a sending leader: the members' blocks scattered into `buf` (own pieces packed), then
  // one message to the receiving leader.
  struct Lead {
    int to;
    std::unique_ptr<Bytes> buf;
    std::vector<Piece> own;
    std::vector<std::pair<int, MPI_Datatype>> from;  // member, its hindexed scatter
    int tag_from;
  };
  std::vector<Lead> leads;
  // Step 3, as a receiving leader: one message from the sending leader, sliced to the members
  // (this process's own slice unpacked).
  struct Hand {
    int from, tag_to;
    std::unique_ptr<Bytes> buf;
    std::vector<std::pair<int, std::pair<i64, i64>>> slices;  // member, (offset, bytes)
    std::vector<Piece> own;
  };
  std::vector<Hand> hands;
  // As a destination: a slice from a receiving leader, unpacked into the receive blocks.
  struct Take {
    int from, tag;
    std::unique_ptr<Bytes> buf;
    std::vector<Piece> pieces;
  };
  std::vector<Take> takes;
  ~Aggregation() {
    int finalized = 0;
    PMPI_Finalized(&finalized);
    for (auto& l : leads)
      for (auto& [m, t] : l.from)
        if (!finalized) PMPI_Type_free(&t);
  }
};

namespace {

// The messages of one start: the direct ones (Ferry's point-to-point) and the steps, advanced as
// their inputs arrive.
class Aggregated : public Flight {
 public:
  Aggregated(MPI_Comm comm, std::shared_ptr<const Aggregation> a)
      : a_(std::move(a)), dup_(private_comm(comm)) {
    direct_ = post(comm, a_->direct);
    const Plan& all = a_->all;
    for (const auto& t : a_->takes) recv(t.buf->p, t.buf->size, t.from, t.tag, &takes_);
    for (const auto& h : a_->hands) recv(h.buf->p, h.buf->size, h.from, kStep2, &hands_);
    for (const auto& l : a_->leads) {
      lead_reqs_.emplace_back();
      for (const auto& [member, type] : l.from) {
        MPI_Request r = MPI_REQUEST_NULL;
        check(PMPI_Irecv(l.buf->p, 1, type, member, l.tag_from, dup_, &r));
        lead_reqs_.back().push_back(r);
      }
      for (const Piece& p : l.own) pack_into(all.sends[p.block], l.buf->p + p.at);
    }
    for (const auto& g : a_->gathers) {
      for (const Piece& p : g.pieces) pack_into(all.sends[p.block], g.buf->p + p.at);
      send(g.buf->p, g.buf->size, g.to, g.tag);
    }
    lead_sent_.assign(a_->leads.size(), false);
    hand_done_.assign(a_->hands.size(), false);
    take_done_.assign(a_->takes.size(), false);
  }
  bool advance(bool wait) override {
    const Plan& all = a_->all;
    bool done = direct_->advance(false);
    for (std::size_t i = 0; i < a_->leads.size(); ++i) {  // step 2 once the members' blocks are in
      if (lead_sent_[i]) continue;
      if (!complete(lead_reqs_[i])) {
        done = false;
        continue;
      }
      lead_sent_[i] = true;
      send(a_->leads[i].buf->p, a_->leads[i].buf->size, a_->leads[i].to, kStep2);
      crossed.fetch_add(1);
    }
    for (std::size_t i = 0; i < a_->hands.size();
         ++i) {  // step 3 once the region pair's message is in
      if (hand_done_[i]) continue;
      if (!complete(hands_, i)) {
        done = false;
        continue;
      }
      hand_done_[i] = true;
      const auto& h = a_->hands[i];
      for (const auto& [member, slice] : h.slices)
        send(h.buf->p + slice.first, slice.second, member, h.tag_to);
      for (const Piece& p : h.own) unpack_from(h.buf->p + p.at, p.bytes, all.recvs[p.block]);
    }
    for (std::size_t i = 0; i < a_->takes.size(); ++i) {
      if (take_done_[i]) continue;
      if (!complete(takes_, i)) {
        done = false;
        continue;
      }
      take_done_[i] = true;
      const auto& t = a_->takes[i];
      for (const Piece& p : t.pieces) unpack_from(t.buf->p + p.at, p.bytes, all.recvs[p.block]);
    }
    if (!complete(sends_)) done = false;
    if (!done && wait) serve_now();
    return done;
  }
  int result() const override { return rc_ != MPI_SUCCESS ? rc_ : direct_->result(); }

 private:
  void check(int rc) {
    if (rc != MPI_SUCCESS)
      throw ferry::Error(rc, "a message of an aggregated collective could not start");
  }
  void recv(char* p, i64 n, int from, int tag, std::vector<MPI_Request>* into) {
    MPI_Request r = MPI_REQUEST_NULL;
    check(PMPI_Irecv(p, static_cast<int>(n), MPI_BYTE, from, tag, dup_, &r));
    into->push_back(r);
  }
  void send(const char* p, i64 n, int to, int tag) {
    MPI_Request r = MPI_REQUEST_NULL;
    check(PMPI_Isend(p, static_cast<int>(n), MPI_BYTE, to, tag, dup_, &r));
    sends_.push_back(r);
  }
  // All of them done (completed ones are freed: MPI_REQUEST_NULL).
  bool complete(std::vector<MPI_Request>& rs) {
    int flag = 0;
    const int rc = rs.empty() ? MPI_SUCCESS
                              : PMPI_Testall(static_cast<int>(rs.size()), rs.data(), &flag,
                                             MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS && rc_ == MPI_SUCCESS) rc_ = rc;
    return rs.empty() || flag || rc != MPI_SUCCESS;
  }
  bool complete(std::vector<MPI_Request>& rs, std::size_t i) {
    int flag = 0;
    const int rc = PMPI_Test(&rs[i], &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS && rc_ == MPI_SUCCESS) rc_ = rc;
    return flag || rc != MPI_SUCCESS;
  }

  std::shared_ptr<const Aggregation> a_;
  MPI_Comm dup_;
  std::shared_ptr<Flight> direct_;
  std::vector<std::vector<MPI_Request>> lead_reqs_;
  std::vector<MPI_Request> hands_, takes_, sends_;
  std::vector<bool> lead_sent_, hand_done_, take_done_;
  int rc_ = MPI_SUCCESS;
};

}  // namespace

long crossings() {
  return crossed.load();
}
void count_crossing() {
  crossed.fetch_add(1);
}

std::shared_ptr<const Aggregation> aggregate(MPI_Comm comm, const Plan& plan) {
  const std::string mode = env::text(env::Knob::aggregate);
  if (mode == "off" || !transport::initialized()) return nullptr;
  const MPI_Comm dup = private_comm(comm);
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
    if (!crosses(p.out[i]) || b.count == 0) continue;
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
    if (crosses(p.in[j]) && plan.recvs[j].count > 0) slots[{p.in[j], p.in_tag[j]}].push_back(j);
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

std::shared_ptr<Flight> post(MPI_Comm comm, std::shared_ptr<const Aggregation> a) {
  return std::make_shared<Aggregated>(comm, std::move(a));
}

}  // namespace ferry::mpi_detail::coll::pairs
