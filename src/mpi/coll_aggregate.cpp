// The messages of an aggregated start (coll_aggregate.hpp says what aggregation is).
#include <atomic>

#include <ferry/pack.hpp>

#include "mpi/coll_aggregate.hpp"

namespace ferry::mpi_detail::coll::pairs {

namespace {

std::atomic<long> crossed{0};  // messages to another region sent by Ferry's collectives
std::atomic<long> crossed_bytes{0};  // and their bytes

void pack_into(const Block& b, char* out) {
  const transport::Route r = route_of(b);
  if (!r.type && b.count > 0) throw ferry::Error(MPI_ERR_TYPE, "aggregation: a block of a type Ferry cannot read");
  if (r.bytes == 0) return;
  if (r.device()) {
    transport::stage(r, out);
  } else {
    i64 pos = 0;
    ferry::pack(r.origin, r.count, *r.type, out, r.bytes, &pos);
  }
}
// MPI_ERR_TRUNCATE (nothing written) where the block sent is longer than the receive block.
int unpack_from(const char* in, i64 bytes, const Block& b) {
  if (bytes == 0) return MPI_SUCCESS;
  const transport::Route r = route_of(b);
  if (bytes > r.bytes) return MPI_ERR_TRUNCATE;
  transport::unstage(in, bytes, transport::target(r), 0, true);
  return MPI_SUCCESS;
}

// The messages of one start: the direct ones (Ferry's point-to-point) and the steps, advanced as
// their inputs arrive.
class Aggregated : public Flight {
 public:
  Aggregated(MPI_Comm comm, std::shared_ptr<const Aggregation> a)
      : a_(std::move(a)), dup_(channel_of(comm, a_->all)) {
    direct_ = post(comm, a_->direct);
    for (const auto& t : a_->takes) recv(t.buf->p, t.buf->size, t.from, t.tag, &takes_);
    for (const auto& h : a_->hands) recv(h.buf->p, h.buf->size, h.from, kStep2, &hands_);
    for (const auto& l : a_->leads) {
      lead_reqs_.emplace_back();
      for (const auto& [member, type] : l.from) {
        MPI_Request r = MPI_REQUEST_NULL;
        check(PMPI_Irecv(l.buf->p, 1, type, member, l.tag_from, dup_, &r));
        lead_reqs_.back().push_back(r);
      }
      for (const Piece& p : l.own) pack_into(a_->packs[p.block], l.buf->p + p.at);
    }
    for (const auto& g : a_->gathers) {
      for (const Piece& p : g.pieces) pack_into(a_->packs[p.block], g.buf->p + p.at);
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
      count_crossing(a_->leads[i].buf->size);
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
      for (const auto& [member, type] : h.typed) {
        MPI_Request r = MPI_REQUEST_NULL;
        check(PMPI_Isend(h.buf->p, 1, type, member, h.tag_to, dup_, &r));
        sends_.push_back(r);
      }
      for (const Piece& p : h.own) failed(unpack_from(h.buf->p + p.at, p.bytes, all.recvs[p.block]));
    }
    for (std::size_t i = 0; i < a_->takes.size(); ++i) {
      if (take_done_[i]) continue;
      if (!complete(takes_, i)) {
        done = false;
        continue;
      }
      take_done_[i] = true;
      const auto& t = a_->takes[i];
      for (const Piece& p : t.pieces) failed(unpack_from(t.buf->p + p.at, p.bytes, all.recvs[p.block]));
    }
    if (!complete(sends_)) done = false;
    if (!done && wait) serve_now();
    return done;
  }
  int result() const override { return rc_ != MPI_SUCCESS ? rc_ : direct_->result(); }

 private:
  void failed(int rc) {
    if (rc != MPI_SUCCESS && rc_ == MPI_SUCCESS) rc_ = rc;
  }
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
long crossing_bytes() {
  return crossed_bytes.load();
}
void count_crossing(i64 bytes) {
  crossed.fetch_add(1);
  crossed_bytes.fetch_add(static_cast<long>(bytes));
}

std::shared_ptr<Flight> post(MPI_Comm comm, std::shared_ptr<const Aggregation> a) {
  return std::make_shared<Aggregated>(comm, std::move(a));
}

}  // namespace ferry::mpi_detail::coll::pairs
