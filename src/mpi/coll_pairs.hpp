// Collectives made of point-to-point messages (issue 16): MPI_Alltoall(v/w) and the neighbourhood
// alltoall(v/w) and allgather(v) on GPU buffers, each block one message of Ferry's own point-to-
// point path, so each block takes its route's method (IPC straight into the receiver's layout on
// the node, staged or pipelined beyond it) and no whole buffer is copied to the host (the mirrors
// of coll.hpp cost 5,832x the halo library on the Astaroth exchange). The messages travel on
// Ferry's private duplicate of the communicator (coll::private_comm), tagged by the direction
// they travel in a cartesian topology: a periodic dimension of one or two processes has the same
// neighbour on both sides, and MPI says the block sent down arrives in the slot from above. In a
// graph the same neighbour may appear several times; MPI's non-overtaking order matches them, as
// in the MPI's own neighbourhood collectives.
//
// A non-blocking form returns a generalized request that Ferry's progress completes once every
// message has (Pending::drive); any wait or test drives it. In place, or with input the MPI would
// refuse (a negative count, a null type or communicator, no topology), the call goes to the host
// mirrors instead, where the MPI itself answers. FERRY_NATIVE_COLLECTIVES=0 sends every call
// there.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "mpi/coll.hpp"

namespace ferry::mpi_detail::coll::pairs {

// One block of a collective: `count` elements of `type` at `buf`.
struct Block {
  void* buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
};

// The processes a collective's blocks go to and come from, in block order, with the tag each
// message carries (MPI_PROC_NULL: a cartesian border, no message).
struct Peers {
  std::vector<int> out, in, out_tag, in_tag;
  std::size_t first = 0;       // the send block to start from (this process's own in MPI_Alltoall)
  bool neighbourhood = false;  // of a process topology
  bool inter = false;          // of an intercommunicator (peers: the remote group)
};

// The peers of MPI_Alltoall(v/w) (`neighbourhood` false: every process of the group, or of the
// remote group) or of a neighbourhood collective; false when the call is not Ferry's to make
// (no valid communicator or topology: the MPI reports it).
bool peers(MPI_Comm comm, bool neighbourhood, Peers* p);

// A block with no bytes (no elements, or elements of no data): no message.
inline bool empty(const Block& b) { return b.count == 0 || type_size(b.type) == 0; }

// Whether a call with these first non-empty send and receive blocks (empty where a side has none:
// then its buffer argument tells) goes through Ferry's messages: the knob is on, it is not in
// place, and GPU memory is involved (or FERRY_PROTOCOL_TEST, the CPU tests). Each process decides
// alone (its buffers), so the processes of a call agree where all pass GPU buffers, or all host
// ones, as GPU codes do; a process with no data must still pass its GPU buffer, not null. The
// persistent inits agree explicitly (coll_all.hpp, by_pairs).
bool wanted(const void* sendbuf, const void* recvbuf, const Block& first_send, const Block& first_recv);

// Whether any process of `comm` has `mine` set (false also when the MPI fails to say), serving
// meanwhile; across an intercommunicator, where an allreduce gives each group the other's answer,
// a second round gives both the whole one.
bool any_process(MPI_Comm comm, bool mine);

// The calls Ferry's messages may take.
enum class Call { alltoall, alltoallv, alltoallw, neighbor_alltoall, neighbor_alltoallv, neighbor_alltoallw,
                  neighbor_allgather, neighbor_allgatherv };
// Whether `call` on `comm` goes as Ferry's messages at every process. Processes may pass GPU
// memory at some and host memory at others (MPICH's test suite does: even ranks host, odd ranks
// device), and the two paths do not meet: so the first call of each kind on a communicator (not in
// place) agrees, every process taking part, whether any process wants Ferry's messages (`mine`),
// and later calls of that kind follow the agreement (host buffers then travel as Ferry's messages
// too; GPU buffers after an agreement against them take the host mirrors). Without a GPU, under
// FERRY_PROTOCOL_TEST, FERRY_NATIVE_COLLECTIVES=0 or a forced choice no agreement is needed.
// A thread's last answer is kept: a host call pays a comparison once the kind is agreed.
bool agreed(MPI_Comm comm, Call call, bool mine);
// What agreed() would answer without agreeing: 0 the MPI's collective, 1 Ferry's messages, -1 not
// agreed yet. Never throws.
int choice(MPI_Comm comm, Call call) noexcept;
// The host fast path of an entry: true where the MPI's own call takes it at every process. A call
// of a kind not agreed yet on the communicator goes on to the entry's boundary, which agrees.
inline bool mpi_takes(MPI_Comm comm, const void* sendbuf, Call call) {
  return sendbuf == MPI_IN_PLACE || choice(comm, call) == 0;
}
// MPI_Comm_free: the communicator's agreements go.
void forget(MPI_Comm comm);
// Tests (ferry_mpi_collective_wish): this process's part in the next agreements, as if its buffers
// were (1) or were not (0) GPU memory; -1: its buffers say.
void set_wish(int wish);

// The messages of a call (coll_merge.cpp): one per ordered pair of processes. A peer's blocks go
// as they are where there is one; several go as ONE message, one element of a struct type of
// their absolute addresses (from MPI_BOTTOM) tagged kMergedTag, their bytes in the order of the
// blocks' tags, then of the blocks: the same order at both ends, since a block's tag names the
// direction it travels in. Both ends merge alike, as MPI makes each pair's blocks agree (empty or
// not, the same bytes). A merge of more than INT_MAX bytes stays apart.
constexpr int kTagBase = 1 << 12;  // above the rounds of Ferry's barrier, on the same communicator
constexpr int kMergedTag = kTagBase + 1024;  // above the cartesian direction tags
struct Leg {
  int peer;
  int tag;
  Block block;
  std::vector<MPI_Datatype> parts;  // a merged send's block types (their producer streams: post())
};
struct Legs {
  std::vector<Leg> sends, recvs;  // sends in turn from this process's own position
  std::vector<std::shared_ptr<void>> owned;  // the merged types (freed with their last user)
};
struct Plan;
// The legs of `plan`. `cached`: merged types are also kept in a table for later calls with the
// same blocks (a call's own; a persistent plan makes its own once).
std::shared_ptr<const Legs> legs(const Plan& plan, bool cached);

// A call's peers and blocks. A persistent one has its own duplicate of the communicator for its
// messages (`channel`: MPI lets persistent collectives start in different orders on different
// processes, so they must not share tags) and its own duplicates of the application's derived
// types (it may free them after the init); `owned` frees both with the last copy of the plan.
struct Plan {
  Peers peers;
  std::vector<Block> sends, recvs;
  bool wanted = false;  // Ferry's messages would take it here (see wanted())
  MPI_Comm channel = MPI_COMM_NULL;
  std::shared_ptr<void> owned;
  std::shared_ptr<const Legs> legs;  // a persistent plan's, made once
};
// The communicator a plan's messages travel on.
MPI_Comm channel_of(MPI_Comm comm, const Plan& plan);

// The plan of a call with these blocks (`send_at(i)`, `recv_at(j)`: to the i-th and from the j-th
// peer); false when Ferry's messages cannot take it (in place; arguments the MPI would refuse, for
// it to say so). Whether they should is out->wanted.
template <class SendAt, class RecvAt>
bool plan(MPI_Comm comm, bool neighbourhood, const void* sendbuf, const void* recvbuf, SendAt send_at,
          RecvAt recv_at, Plan* out) {
  if (sendbuf == MPI_IN_PLACE || !peers(comm, neighbourhood, &out->peers)) return false;
  Block fs, fr;  // the first non-empty ones
  auto add = [](std::vector<Block>& v, Block b, Block& first) {
    if (b.count < 0 || (b.count > 0 && b.type == MPI_DATATYPE_NULL))
      return false;  // the MPI says what
    if (first.count == 0 && !empty(b)) first = b;
    v.push_back(b);
    return true;
  };
  for (std::size_t i = 0; i < out->peers.out.size(); ++i)
    if (!add(out->sends, send_at(i), fs)) return false;
  for (std::size_t j = 0; j < out->peers.in.size(); ++j)
    if (!add(out->recvs, recv_at(j), fr)) return false;
  out->wanted = wanted(sendbuf, recvbuf, fs, fr);
  return true;
}

// Every block moved (receives posted first, then the sends, in turn from this process's own
// position), to completion when `request` is null, else under a new generalized request. A
// blocking call on one node is first offered to pulled(). Throws ferry::Error; the caller's guard
// reports it.
int run(MPI_Comm comm, const Plan& plan, MPI_Request* request);

// A blocking call (not persistent) of an intracommunicator whose processes share one node, every
// block contiguous device memory and no neighbour named twice, read in place (coll_pull.cpp,
// FERRY_PULL): true when it took the call (*rc its result), false when the messages must (every
// process answers alike). Collective.
bool pulled(MPI_Comm comm, const Plan& plan, int* rc);
long pulls();  // calls pulled() took (ferry_mpi_collective_pulls)
void forget_pulls(MPI_Comm comm);

// A collective's messages under way.
class Flight {
 public:
  virtual ~Flight() = default;
  // Completes what has completed (`wait`: blocks, or serves, until something has); true when all
  // is done.
  virtual bool advance(bool wait) = 0;
  // The first error among them, else MPI_SUCCESS.
  virtual int result() const = 0;
};
// Posts a plan's messages (run() is post, then finish).
std::shared_ptr<Flight> post(MPI_Comm comm, const Plan& plan);
// Completes `f` (request null), or hands it to a new generalized request that progress completes.
int finish(std::shared_ptr<Flight> f, MPI_Request* request);

// Locality-aware aggregation (coll_aggregate.cpp) of a persistent neighbourhood collective: the
// plan's blocks between nodes gathered into one message per ordered pair of nodes, where that pays
// (FERRY_AGGREGATE). Collective over `comm`; null where the blocks go directly.
// `ids` (ferry_mpi_neighbor_alltoallv_init_ids), where given: per send block the id of each of its
// elements; the elements one process sends with one id hold one value, so each crosses to a node
// once however many of its processes take it (de-duplication).
struct Aggregation;
using Ids = std::vector<std::vector<long long>>;
std::shared_ptr<const Aggregation> aggregate(MPI_Comm comm, const Plan& plan, const Ids* ids);
std::shared_ptr<Flight> post(MPI_Comm comm, std::shared_ptr<const Aggregation> a);
// Messages of Ferry's collectives to a process on another node, and their bytes
// (ferry_mpi_collective_crossings, ferry_mpi_collective_crossing_bytes).
long crossings();
long crossing_bytes();
void count_crossing(i64 bytes);

// A persistent collective's init call (MPI-4's MPI_*_init, Open MPI's MPIX_*_init): its info and
// where the request goes.
struct Persist {
  MPI_Info info;
  MPI_Request* request;
};
// Makes `*request` a persistent request whose every start runs `plan` (persistent.hpp); `ids` as
// aggregate()'s.
int init(MPI_Comm comm, Plan plan, MPI_Request* request, const Ids* ids = nullptr);

// `count` elements of `type` at `at(buf, bytes)`.
inline Block block(const void* buf, i64 bytes, int count, MPI_Datatype type) {
  return {const_cast<void*>(at(buf, bytes)), count, type};
}
// Collective calls made of Ferry's messages so far (ferry_mpi_collective_messages).
long calls();
// Forces the calls that may go either way (ferry_mpi_force_collectives): 1 Ferry's (read in place
// where pulled() can), 2 Ferry's messages only, 0 the mirrors, -1 back to wanted()'s choice.
void force(int native);

// MPI_Alltoall whose send and receive blocks (`scount` of `stype`, 0 in place; `rcount` of `rtype`)
// hold at most FERRY_MIRROR_MAX bytes: the MPI's own on host mirrors, where one copy each way costs
// less than a message per peer (2 ranks on one H200: 8 B, 18 against 43 us), except for a
// `blocking` call on more than 2 processes of one node (pull_suits()), where reading in place costs
// less (4 ranks: 24 against 35-48 us; the non-blocking and persistent forms are not read in place).
// Every process decides alike without agreeing: the larger of its two blocks is the same at all of
// them (the type signatures match; across an intercommunicator each group's send block is the
// other's receive block) and all call the same form. Not while forced, nor in the protocol test.
bool mirrored(MPI_Comm comm, int scount, MPI_Datatype stype, int rcount, MPI_Datatype rtype, bool blocking);
// More than 2 processes of `comm`, all on one node, with FERRY_PULL: alike at every process.
bool pull_suits(MPI_Comm comm);

// The extent of `type` (0 for a type the MPI refuses: the call goes to the MPI, which says so).
i64 extent(MPI_Datatype type);

}  // namespace ferry::mpi_detail::coll::pairs
