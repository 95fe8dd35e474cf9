// One message per ordered pair of processes for Ferry's collectives (coll_pairs.hpp, Legs): the
// blocks a process sends to one peer travel together as one element of a struct type of their
// absolute addresses: the Astaroth exchange's 26 blocks to a few peers are a few messages, and
// on the GPU as many packs or typed moves instead of 26.
#include <ferry/registry.hpp>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <tuple>

#include "mpi/coll_pairs.hpp"

namespace ferry::mpi_detail::coll::pairs {

namespace {

// A struct type made for merged blocks, freed with its last user (MPI lets a type that messages
// under way use be freed; not after MPI_Finalize).
struct Made {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::vector<std::shared_ptr<const Type>> parts;  // keeps each object (and its address) alive
  Made() = default;
  Made(const Made&) = delete;
  Made& operator=(const Made&) = delete;
  ~Made() {
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (!finalized && type != MPI_DATATYPE_NULL) MPI_Type_free(&type);
  }
};

// The merged types of the calls so far, by their blocks (address, count, Ferry's type object: a
// handle the application freed and got back for another type has another object; the handle), for
// later calls with the same blocks. A full table is emptied at once (its types go with their last
// user).
class Merges {
 public:
  using Key = std::vector<std::tuple<const void*, int, const Type*, MPI_Datatype>>;
  std::shared_ptr<Made> find(const Key& k) {
    std::lock_guard lock(mutex_);
    auto it = made_.find(k);
    return it == made_.end() ? nullptr : it->second;
  }
  void put(Key k, std::shared_ptr<Made> m) {
    std::lock_guard lock(mutex_);
    if (made_.size() >= kMost) made_.clear();
    made_[std::move(k)] = std::move(m);
  }

 private:
  static constexpr std::size_t kMost = 256;
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<Made>> made_;
};
Merges& merges() {
  static auto* m = new Merges();  // never destroyed: its types may outlive MPI_Finalize
  return *m;
}

// The struct type of blocks `which` at their absolute addresses, committed through Ferry's own
// entry (its registry must read it: GPU blocks would otherwise reach the MPI as host memory).
std::shared_ptr<Made> make(const std::vector<Block>& blocks, const std::vector<std::size_t>& which) {
  std::vector<int> counts;
  std::vector<MPI_Aint> where(which.size());
  std::vector<MPI_Datatype> types;
  for (std::size_t k = 0; k < which.size(); ++k) {
    const Block& b = blocks[which[k]];
    counts.push_back(b.count);
    PMPI_Get_address(b.buf, &where[k]);
    types.push_back(b.type);
  }
  auto m = std::make_shared<Made>();
  if (PMPI_Type_create_struct(static_cast<int>(which.size()), counts.data(), where.data(), types.data(),
                              &m->type) != MPI_SUCCESS) {
    m->type = MPI_DATATYPE_NULL;
    throw ferry::Error(MPI_ERR_TYPE, "the merged blocks of a collective");
  }
  if (MPI_Type_commit(&m->type) != MPI_SUCCESS) throw ferry::Error(MPI_ERR_TYPE, "the merged blocks of a collective");
  return m;
}

// Ferry's object for a type, or null where Ferry never saw it committed (the MPI takes such a
// type on host memory).
std::shared_ptr<const Type> object_of(MPI_Datatype t) {
  try {
    return ferry::lookup(t);
  } catch (const ferry::Error&) {
    return nullptr;
  }
}

// One side's legs: the blocks to (from) each peer, in the order of their tags and then of the
// blocks, which is the same order at both ends (the block that goes down a cartesian dimension
// arrives in the slot from above, and both carry the tag of going down).
void side(const std::vector<Block>& blocks, const std::vector<int>& peer, const std::vector<int>& tag,
          std::size_t first, bool neighbourhood, bool cached, std::vector<Leg>* out, Legs* owner) {
  const std::size_t n = blocks.size();
  out->reserve(n);
  std::vector<std::size_t> live;  // the blocks with data, in turn from block `first` on
  live.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    if (peer[i] != MPI_PROC_NULL && !empty(blocks[i])) live.push_back(i);
  }
  bool repeats = false;  // only a neighbourhood's peers may
  if (neighbourhood) {
    std::vector<int> seen;
    seen.reserve(live.size());
    for (std::size_t i : live) seen.push_back(peer[i]);
    std::sort(seen.begin(), seen.end());
    repeats = std::adjacent_find(seen.begin(), seen.end()) != seen.end();
  }
  if (!repeats) {  // every block to its own peer (MPI_Alltoall(v/w), most rings): as they are
    for (std::size_t i : live) out->push_back({peer[i], tag[i], blocks[i], {}});
    return;
  }
  std::map<int, std::vector<std::size_t>> by_peer;
  std::vector<int> order;  // peers in turn
  for (std::size_t i : live) {
    auto& v = by_peer[peer[i]];
    if (v.empty()) order.push_back(peer[i]);
    v.push_back(i);
  }
  for (int p : order) {
    std::vector<std::size_t>& v = by_peer[p];
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return tag[a] != tag[b] ? tag[a] < tag[b] : a < b;
    });
    // The pair's bytes, from 64-bit sizes (a type over 2 GiB has no int size), equal at both ends.
    i64 bytes = 0;
    for (std::size_t i : v) {
      MPI_Count size = 0;
      if (PMPI_Type_size_x(blocks[i].type, &size) != MPI_SUCCESS || size < 0) bytes = i64{INT_MAX} + 1;
      else bytes += i64{blocks[i].count} * static_cast<i64>(size);
    }
    if (v.size() == 1 || bytes > INT_MAX) {  // as they are (one message each, each its own tag)
      for (std::size_t i : v) out->push_back({p, tag[i], blocks[i], {}});
      continue;
    }
    Merges::Key key;
    std::vector<std::shared_ptr<const Type>> objects;
    Leg merged{p, kMergedTag, {}, {}};
    bool keep = cached;
    for (std::size_t i : v) {
      const Block& b = blocks[i];
      objects.push_back(object_of(b.type));
      // A type Ferry never translated has only its handle, which the MPI may hand out again for
      // another type: such blocks are merged anew at each call.
      if (!objects.back()) keep = false;
      key.emplace_back(b.buf, b.count, objects.back().get(), b.type);
      merged.parts.push_back(b.type);
    }
    std::shared_ptr<Made> m = keep ? merges().find(key) : nullptr;
    if (!m) {
      m = make(blocks, v);
      m->parts = std::move(objects);
      if (keep) merges().put(std::move(key), m);
    }
    merged.block = Block{MPI_BOTTOM, 1, m->type};
    out->push_back(std::move(merged));
    owner->owned.push_back(std::move(m));
  }
}

}  // namespace

std::shared_ptr<const Legs> legs(const Plan& plan, bool cached) {
  const Peers& p = plan.peers;
  auto l = std::make_shared<Legs>();
  side(plan.recvs, p.in, p.in_tag, 0, p.neighbourhood, cached, &l->recvs, l.get());
  side(plan.sends, p.out, p.out_tag, p.first, p.neighbourhood, cached, &l->sends, l.get());
  return l;
}

}  // namespace ferry::mpi_detail::coll::pairs
