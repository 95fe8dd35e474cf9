// Locality-aware aggregation of the persistent neighbourhood collectives (coll_pairs.hpp; issue 16,
// the CUP-ECS poster's three steps): the plan (coll_aggregate_plan.cpp) and what each start sends
// (coll_aggregate.cpp). Where many small blocks cross between regions (nodes), each
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
//
// De-duplication (ids given: ferry_mpi_neighbor_alltoallv_init_ids). An element that a process
// sends under one id to several processes of region B crosses once: the process packs its unique
// elements for B (first occurrences, in block order) with one indexed type over its send buffer and
// sends them to A's leader for B; the pair's buffer holds each member's unique elements in member
// order; at init each process tells B's leader for A, for every element of its blocks to B, which
// of its unique elements it is, and that leader hands each process of B its blocks (in the order
// without de-duplication) through an hindexed type whose pieces may repeat. With ids every
// process's own share goes as a message to itself; `auto` aggregates where the ids save bytes too.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "mpi/coll_pairs.hpp"

namespace ferry::mpi_detail::coll::pairs {

// Tags of the steps on the private communicator: step 1 kStep1 + the destination region, step 3
// kStep1 + regions + the source region, step 2 kStep2.
constexpr int kStep1 = 1 << 13;
constexpr int kStep2 = (1 << 13) - 1;

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

// The route of a block's elements.
inline transport::Route route_of(const Block& b) {
  return transport::route(b.buf, b.count, b.type);
}

struct Aggregation {
  Plan all;     // the call's blocks
  Plan direct;  // those that go directly: inside regions, and any the aggregation leaves alone
  // What step 1 packs (pieces index these): the send blocks, or with ids one block of this
  // process's unique elements per region.
  std::vector<Block> packs;
  std::vector<MPI_Datatype> types;  // made here (freed with the plan)
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
    std::vector<std::pair<int, MPI_Datatype>> typed;  // with ids: member, its hindexed gather
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
    if (finalized) return;
    for (MPI_Datatype& t : types) MPI_Type_free(&t);  // Ferry's entry: its translation goes too
  }
};

}  // namespace ferry::mpi_detail::coll::pairs
