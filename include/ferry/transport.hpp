// ferry/transport.hpp — how bytes move between ranks: the layer under the MPI interposer and the
// halo-exchange library (both are its clients; neither reaches around it to CUDA or to the other).
//
// Its parts: the topology (node and GPU of each rank, pair locality, a node's GPU-to-GPU bandwidth,
// simulated layouts for tests), the pools (pinned host, per device), CUDA IPC (handles exported;
// peers' allocations mapped, cached), and messages: the Route of one message (memory, method) and
// the methods that move it (local, IPC, staged, pipelined, pass-through), sender/receiver pairs of
// the stub protocol the MPI interposer runs (docs/design.md, "The route of one message"). One
// transport per process: libferry is a shared library that the interposer and applications link
// (one set of pools, one IPC cache under LD_PRELOAD too). The transport calls only PMPI_*.
// Errors: ferry::Error with an MPI error class (bad arguments MPI_ERR_ARG, a rank outside the
// layout MPI_ERR_RANK, CUDA failures MPI_ERR_OTHER, out of memory MPI_ERR_NO_MEM). All functions
// are thread-safe unless they say otherwise.
#pragma once

#include <ferry/gpu.hpp>
#include <ferry/model.hpp>
#include <ferry/type.hpp>
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ferry::transport {

// ============================================================================ topology

// Where a rank runs.
struct Place {
  int node = 0;  // its node, 0..nodes()-1, numbered in the order of each node's lowest rank
  int gpu = -1;  // its GPU among its node's, 0..gpus_on(node)-1; -1: none known (no GPU chosen)
  std::uint64_t key = 0;  // that GPU's ferry::gpu::device_key (its UUID's hash); 0: none or simulated
};

// A node's GPU-to-GPU bandwidth in GB/s: row i, column j is GPU i to GPU j (indices as Place::gpu).
// Nodes are assumed alike: one matrix serves every node.
class Bandwidth {
 public:
  Bandwidth() = default;  // no GPUs: every pair at the uniform default
  // Every pair of `gpus` GPUs at `gbps` (links a placement cannot tell apart).
  static Bandwidth uniform(int gpus, double gbps = kUniformGbps);
  // The text format: one row of numbers per GPU, whitespace separated, `#` starts a comment; the
  // matrix must be square with positive entries (the diagonal is read but not used). `origin`
  // names the text in errors and in source(). MPI_ERR_ARG on anything else.
  static Bandwidth parse(const std::string& text, const std::string& origin = "text");
  // parse() of a file; MPI_ERR_FILE when it cannot be read.
  static Bandwidth load(const std::string& path);
  // Times a 64 MiB peer copy each way between every pair of GPUs this process sees (enabling peer
  // access); to_text() is a FERRY_BANDWIDTH file. MPI_ERR_OTHER without CUDA or a GPU.
  static Bandwidth measure();
  int gpus() const { return n_; }
  // GB/s from GPU `from` to GPU `to`; the uniform default for indices outside the matrix (GPUs
  // not known, or a matrix smaller than the layout).
  double at(int from, int to) const;
  // "uniform", "measured", or the origin given to parse/load.
  const std::string& source() const { return source_; }
  // The text format, which parse() reads back.
  std::string to_text() const;

  static constexpr double kUniformGbps = 1.0;

 private:
  int n_ = 0;
  std::vector<double> gbps_;
  std::string source_ = "uniform";
};

// The nodes and GPUs of a set of ranks, as a plain value: built by discover() for the processes
// of a communicator, or from a list of places (partition and placement tests build layouts that
// way, in one process).
class Topology {
 public:
  // Rank r is at places[r]; `self` is this process's rank. Nodes must be numbered 0..N-1 with
  // every number used and GPUs -1 or 0..G-1 per node (MPI_ERR_ARG otherwise).
  explicit Topology(std::vector<Place> places, int self = 0, Bandwidth bandwidth = {});
  // The simulated layout "NxG": `ranks` ranks over `nodes` nodes in blocks (node of rank r:
  // r * nodes / ranks, so blocks differ by at most one), and within a node over `gpus` GPUs in
  // blocks the same way. MPI_ERR_ARG for ranks < nodes or a count below 1.
  static Topology simulated(int nodes, int gpus, int ranks, int self = 0, Bandwidth bandwidth = {});
  // "4x2" → {4, 2}: nodes, GPUs per node (MPI_ERR_ARG otherwise).
  static std::pair<int, int> parse_layout(const std::string& text);
  // Collective over `comm` (PMPI; two allgathers and a split). FERRY_TOPOLOGY=NxG: simulated;
  // else nodes from MPI_Comm_split_type(SHARED), GPUs from each process's current device's UUID
  // (-1 without a CUDA context yet), bandwidth from FERRY_BANDWIDTH's file (unreadable: reported,
  // uniform used) or uniform; NVML is not consulted.
  static Topology discover(MPI_Comm comm);

  int size() const { return static_cast<int>(places_.size()); }
  int self() const { return self_; }
  int nodes() const { return nodes_; }
  bool simulated() const { return simulated_; }
  // MPI_ERR_RANK for a rank outside 0..size()-1.
  const Place& place(int rank) const;
  // Distinct GPUs with ranks on `node`; the ranks of `node` in increasing order.
  int gpus_on(int node) const;
  std::vector<int> ranks_on(int node) const;
  bool same_node(int a, int b) const { return place(a).node == place(b).node; }
  // same_gpu: one node, one known GPU; other_gpu: one node otherwise (a GPU not known counts as
  // another); other_node.
  model::Locality locality(int a, int b) const;
  const Bandwidth& bandwidth() const { return bandwidth_; }
  // GB/s between the GPUs of ranks a and b (on one node; the uniform default otherwise).
  double bandwidth(int a, int b) const;
  // One line: "2 nodes (simulated), 4 ranks: node 0 ranks 0-1 on 2 GPUs; node 1 ranks 2-3 on 2
  // GPUs; bandwidth uniform".
  std::string describe() const;

 private:
  std::vector<Place> places_;
  int self_ = 0;
  int nodes_ = 0;
  std::vector<int> gpus_;  // per node
  Bandwidth bandwidth_;
  bool simulated_ = false;
};

// ---- The process's transport: its world, set up once.
// Collective over MPI_COMM_WORLD (every rank calls it; later calls return at once): discovers the
// topology and splits the node communicator. MPI must be initialized.
void init();
// Releases the pools' memory, closes IPC mappings, frees the node communicator; before MPI_Finalize.
void finalize();
bool initialized();
// The topology of MPI_COMM_WORLD (MPI_ERR_OTHER before init()).
const Topology& world();
// The processes of this rank's node, as the topology has them (simulated nodes included), ordered
// by world rank; MPI_COMM_NULL before init().
MPI_Comm node_comm();
// The GPU world rank `rank` works on as messages tell (its header names the sender's GPU): a
// device_key, 0 when not known. At init(), each process's current device, where it had one.
void learn_gpu(int rank, std::uint64_t key) noexcept;
std::uint64_t gpu_of(int rank) noexcept;
// Where world rank `peer` receives, seen from this process's data on CUDA device `device`:
// other_node per the topology; same_gpu when the peer's GPU (gpu_of) is that device; else (another
// GPU, or not known yet) other_gpu. MPI_ERR_RANK for a rank outside the world.
model::Locality locality(int peer, int device);

// ============================================================================ pools

// Buffers in power-of-two size classes from 4 KiB, kept when given back and reused (dissertation
// §5.8.2): after the first messages of each size, getting a buffer is a lock and a map lookup.
class Pool {
 public:
  using Alloc = std::function<void*(i64 bytes)>;  // throws ferry::Error on failure
  using Free = std::function<void(void*)>;
  Pool(Alloc alloc, Free free);
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  // A buffer of at least `bytes` (its class's size); MPI_ERR_ARG for a negative size.
  void* get(i64 bytes);
  // Gives a buffer back for reuse; null does nothing; false for a pointer this pool did not give.
  bool put(void* p) noexcept;
  // Frees every buffer, in use or not (at finalize: nothing may use them after).
  void release_all() noexcept;
  // Bytes allocated (in use and kept).
  i64 held() const;
  static i64 size_class(i64 bytes);

 private:
  Alloc alloc_;
  Free free_;
  mutable std::mutex mutex_;
  std::multimap<i64, void*> free_list_;
  std::map<void*, i64> sizes_;
};
// Pinned, mapped host memory, for staging (plain host memory where there is no GPU, as in the
// host protocol test).
Pool& pinned_pool();
// Device memory of CUDA device `device`, allocated there whatever the caller's current device
// (MPI_ERR_OTHER without a GPU or for a device that does not exist).
Pool& device_pool(int device);
// A pool buffer for one scope, or until release() hands it to someone who puts it back.
class Buffer {
 public:
  Buffer(Pool& pool, i64 bytes) : pool_(&pool), p_(pool.get(bytes)) {}
  ~Buffer() { pool_->put(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return p_; }
  void* release() { return std::exchange(p_, nullptr); }

 private:
  Pool* pool_;
  void* p_;
};

// ============================================================================ CUDA IPC

struct IpcHandle {  // cudaIpcMemHandle_t: 64 bytes another process on the node can open
  char bytes[64];
};

// ---- Export: what a peer needs to reach a device pointer of this process.
struct Export {
  IpcHandle handle;
  std::uint64_t base = 0;     // the allocation's address here: with `id`, it names the allocation
  unsigned long long id = 0;  // the allocation's id (another allocation at the same address has another)
  i64 offset = 0;             // of the pointer in the allocation
  int device = -1;            // the allocation's CUDA device
};
// Handles by allocation: the first export of an allocation asks CUDA for its handle, later ones
// are a lookup; an allocation that has none (VMM or stream-ordered pool memory) is remembered too.
class Exports {
 public:
  using GetHandle = std::function<bool(void* base, IpcHandle* out)>;  // CUDA's, or a test's fake
  explicit Exports(GetHandle get);
  // The export of `p`, in allocation `a` (gpu::allocation_of); false unless device memory with a handle.
  bool of(const gpu::Allocation& a, const void* p, Export* out);
  void clear();
  std::size_t size() const;

 private:
  GetHandle get_;
  mutable std::mutex mutex_;
  struct Entry {
    unsigned long long id;
    bool ok;
    IpcHandle handle;
  };
  std::map<std::uint64_t, Entry> by_base_;
};
Exports& exports();  // the process's (CUDA's handles)
// The export of device pointer `p` (asks the driver for its allocation: a few µs); false as above.
bool export_pointer(const void* p, Export* out);

// ---- Import: peers' allocations mapped here, kept for reuse (an open costs far more than a
// message), keyed by (peer, the allocation's address there); a new allocation id at that address
// closes the old mapping once unused. At most `capacity` mappings, least recently used closed
// first, never one in use. Coexists with the program's or the MPI's own opens of the same handle
// (ucx#3192; docs/design.md): a handle the driver refuses as "already mapped", even after the
// peer's unused mappings were closed, answers `already_mapped` (remembered per allocation) and the
// message moves another way. FERRY_IPC_CACHE=0 closes each mapping once its message is done.
class IpcCache {
  struct Mapping;

 public:
  enum class Status { ok, already_mapped, failed };
  using Open = std::function<Status(const IpcHandle& handle, void** mapped)>;
  using Close = std::function<void(void* mapped)>;
  IpcCache(Open open, Close close, std::size_t capacity);
  ~IpcCache();  // closes nothing (the process's cache lives until exit; finalize closes)
  IpcCache(const IpcCache&) = delete;
  IpcCache& operator=(const IpcCache&) = delete;
  class Lease {  // a mapping in use: valid until the Lease goes
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept;
    Lease& operator=(Lease&& o) noexcept;
    ~Lease();
    void* get() const { return ptr_; }
    explicit operator bool() const { return ptr_ != nullptr; }
    Status status() const { return status_; }

   private:
    friend class IpcCache;
    IpcCache* cache_ = nullptr;
    Mapping* mapping_ = nullptr;
    void* ptr_ = nullptr;
    Status status_ = Status::failed;
  };
  // Peer `peer`'s allocation `id` at address `base` there, mapped here through `handle`. An empty
  // lease (status() says why) when it cannot be mapped.
  Lease open(int peer, std::uint64_t base, unsigned long long id, const IpcHandle& handle);
  // Closes every mapping (those in use when their lease goes) and forgets what it knew.
  void close_all();

  std::size_t mapped() const;  // mappings open now
  struct Stats {
    long opens = 0, hits = 0, closes = 0, already_mapped = 0, failures = 0;
  };
  Stats stats() const;

 private:
  friend class Lease;
  void release(Mapping* m) noexcept;
  void evict_locked();
  bool forget_unused_locked(int peer);
  Open open_;
  Close close_;
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::map<std::pair<int, std::uint64_t>, std::unique_ptr<Mapping>> live_;
  std::vector<std::unique_ptr<Mapping>> retired_;  // replaced or closed while in use
  std::uint64_t clock_ = 0;
  Stats stats_;
};
// The process's cache: CUDA's open and close, FERRY_IPC_CACHE mappings.
IpcCache& ipc_cache();

// ---- Reading peers' GPU memory in place (collectives on one node: mpi/coll_pull.cpp). A process
// offers contiguous device bytes, readable once the work its legacy stream held at the offer is
// done (an interprocess event, none if idle); an Offer is plain bytes sent by MPI (ok 0: not
// readable in place). A reader copies the offers of its GPU, and of GPUs it has peer access to,
// with one kernel; others by the copy engines.
struct Offer {
  Export at;
  i64 bytes = 0, slot = -1;
  std::uint64_t gpu = 0;  // the data's GPU (device_key)
  char event[64] = {};
  int ok = 0;
};
class Pull {  // one call's offers and reads; throws ferry::Error
 public:
  Pull();
  ~Pull();  // gives the event back: only once every reader is done (the caller's barrier)
  bool offer(const void* p, i64 bytes, Offer* out);  // the first records the event; false: cannot
  bool take(int peer, const Offer& o, void* dst);    // world rank `peer`'s, into GPU memory here
  void run();                                        // on the legacy stream, waited for
 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ============================================================================ messages

// How a message travels.
enum class Method : std::uint8_t {
  host,         // host memory: the MPI moves the application's buffer itself
  passthrough,  // GPU memory handed as it is to an MPI that is CUDA-aware
  staged,       // packed into pinned host memory, moved by the MPI as bytes
  pipelined,    // chunks packed into pinned memory while the MPI moves the ones before (MPI-ACC)
  ipc,          // another process of the node copies straight from this GPU's memory
  local,        // this process (a send to itself): one copy or kernel, sender's layout to receiver's
};
const char* name(Method m);
// Where the bytes of a message are: host memory (pageable or pinned: the MPI reads both), or GPU
// memory (device or managed), with the allocation of its lowest byte.
struct Memory {
  gpu::Memory kind = gpu::Memory::host;
  gpu::Allocation alloc{gpu::Memory::host, nullptr, 0, 0, -1};
  // Every byte lies in `alloc` (what an IPC peer can map); false for blocks in several allocations.
  bool one_allocation = true;
  bool device() const { return kind == gpu::Memory::device || kind == gpu::Memory::managed; }
};
// The memory of the bytes `count` elements of `type` at `origin` touch: that of their lowest byte;
// for a null origin (MPI_BOTTOM: absolute displacements) that of every top-level block (the
// members of a struct may lie in different allocations). GPU memory when any is device or managed
// memory; MPI_ERR_BUFFER when GPU memory and pageable host memory mix (no engine reaches both).
// Cost: none without a GPU; a host page the pointer cache knows costs a table lookup; else one
// driver query (0.1-0.2 us), one per distinct allocation for MPI_BOTTOM.
Memory locate(const void* origin, i64 count, const Type& type);
// One message (or one buffer of a collective), decided once and carried: the interposer makes one
// per buffer, and nothing below it asks the type registry, the CUDA driver or the model again.
struct Route {
  const void* origin = nullptr;       // the address the type's displacements count from
  i64 count = 0;
  std::shared_ptr<const Type> type;   // null: a type Ferry cannot read (host memory is assumed)
  i64 bytes = 0;                      // packed size
  Memory memory;
  int peer = -1;                      // world rank of the other side; -1: none or not known
  model::Locality locality = model::Locality::other_node;
  Method method = Method::host;
  model::Pack pack = model::Pack::one_shot;  // how staging packs (a send) or unpacks (a receive)
  // The stream the application produces this send's data on (ferry_mpi_set_stream or a stream
  // attribute, issue 14): stage() and send() read the data only after that stream's work. Null:
  // the application synchronized before the call, as MPI assumes.
  gpu::Stream producer = nullptr;
  bool device() const { return memory.device(); }
  // The lowest byte the message touches (origin + type's data lower bound).
  const char* first() const;
};

// The route of `count` elements of `type` at `origin`, before its peer is known: one type lookup
// (a type Ferry cannot read gives a null type and host memory: the MPI then decides, and reports,
// as it would) and locate(); the method is host, passthrough or staged. Errors: those of locate().
Route route(const void* origin, i64 count, MPI_Datatype type);
Route route(const void* origin, i64 count, std::shared_ptr<const Type> type);
// What the MPI call lets a send do besides staging.
struct Allow {
  bool rendezvous = true;  // ipc and local (the send completes when the receiver has the data)
  bool pipelined = true;   // chunks on the private communicator (not persistent sends)
  // local, to this process: not for a blocking standard send, which MPI may complete before the
  // receive is posted (programs that send to themselves first rely on it for small messages)
  bool local = true;
};
// Picks the method of a send of GPU data to world rank `peer` (this process included): the model's
// choice among those the peer, the memory and `allow` permit, unless FERRY_METHOD or a threshold
// knob decides (docs/design.md). Host routes stay host, except under FERRY_PROTOCOL_TEST, where
// large host sends take the pipelined method. One hash lookup in the model's decision cache.
void choose(Route& r, int peer, Allow allow = {});
// For a staged receive of GPU data: how to unpack it (model's unpack surfaces).
void choose_unpack(Route& r);
// The decision choose() makes, from its inputs alone (the CPU tests drive it with every
// combination, a CUDA-aware MPI's included).
struct Choice {
  bool device = false;       // the data is GPU memory
  bool ipc_memory = false;   // ... device memory (not managed) a peer can map
  bool passthrough = false;  // the MPI moves GPU memory itself
  bool protocol = true;      // the stub protocol is on
  bool protocol_test = false;
  bool self = false;         // the peer is this process
  i64 bytes = 0, count = 0, block = 0;
  model::Locality locality = model::Locality::other_node;
  Allow allow;
  std::optional<model::Method> forced;  // FERRY_METHOD
  i64 ipc_min = -1, pipeline_min = -1;  // FERRY_IPC_MIN, FERRY_PIPELINE_MIN (-1: unset)
};
// `decisions`: the model's (null: staged where a threshold does not decide).
Method select(const Choice& c, model::DecisionCache* decisions);
// Forces a method / pack for the messages that follow (measurements); nullopt: the model decides.
// A forced IPC also goes below the 4 KiB floor (receives into GPU memory, or blocking ones of at
// least kStubBytes, check for stubs whatever their size).
void force_method(std::optional<model::Method> m);
void force_pack(std::optional<model::Pack> p);
// The model's locality of world rank `peer` for data on `device` as a name ("same_gpu",
// "other_gpu", "other_node"); null when the protocol is off or the rank does not exist.
const char* locality_name(int peer, int device);
// The pipelined chunk: MPI-ACC's rule on the model's curves. A message of `bytes` cut into chunks
// of c bytes takes P(c) + M(c) + U(c) + (n - 1) max(P(c), M(c), U(c)) for n chunks, P and U the
// pack and unpack times (surfaces, at block size `block`), M the MPI's time for c bytes
// (Model::predict_mpi); the size among powers of two from 64 KiB to bytes / 2 that minimizes it,
// which lies where the stages balance. `override_bytes` > 0 (FERRY_PIPELINE_CHUNK) wins.
i64 pipeline_chunk(const model::Model& m, i64 bytes, i64 block, model::Locality l,
                   i64 override_bytes = 0);
// Pass-through: whether the MPI moves GPU memory itself, as it says (Open MPI's
// MPIX_Query_cuda_support, MPICH's MPIX_GPU_query_support; `unknown`: neither), asked once.
enum class CudaAware : std::uint8_t { no, yes, unknown };
CudaAware mpi_cuda_aware();
// FERRY_PASSTHROUGH ("auto": when the MPI says yes; "on": always; "off": never) against what the
// MPI says. Unmeasured on the lent machines, whose MPI is not CUDA-aware.
bool use_passthrough(const std::string& knob, CudaAware mpi);

// ---- The stub protocol (run by the interposer; docs/design.md). A message of the rendezvous
// methods (ipc, local) and the pipelined one is announced by a stub of kStubBytes on the
// application's communicator and tag, so matching, wildcards, order and truncation stay the MPI's;
// the data, acknowledgements and chunks travel on a private duplicate of MPI_COMM_WORLD.
constexpr int kStubBytes = 232;
// Non-blocking host receives smaller than this never look for a stub, so no send below it uses one
// (receives into GPU memory, and blocking ones of kStubBytes or more, check whatever their size).
constexpr i64 kStubMinBytes = 4096;

// Collective over MPI_COMM_WORLD after init(): on where every rank wants it (FERRY_IPC, a GPU or
// FERRY_PROTOCOL_TEST, the transport up).
void start_protocol();
void stop_protocol();
bool protocol_on();
// FERRY_PROTOCOL_TEST=1: the stub protocol runs without a GPU, large host sends pipelined.
bool protocol_test();
// Decided at start_protocol, alike at every rank: pass-through; FERRY_PULL (the protocol on too).
bool passthrough();
bool pull_on();
// A communicator's ranks as world ranks (kept by receives: the communicator may be freed first).
struct Ranks {
  bool world = false;  // MPI_COMM_WORLD itself
  std::shared_ptr<const std::vector<int>> table;  // empty: an intercommunicator
  int to_world(int rank) const {
    if (rank < 0) return -1;
    if (world) return rank;
    return table && rank < static_cast<int>(table->size()) ? (*table)[static_cast<std::size_t>(rank)] : -1;
  }
};
Ranks ranks_of(MPI_Comm comm);  // cached per communicator until forget(comm) (MPI_Comm_free)
int world_rank(MPI_Comm comm, int rank);
void forget(MPI_Comm comm);
// A receive of `capacity` bytes from `source` of `comm` may get a stub: the protocol is on, the
// source may send one (any rank of the world, this one included, or MPI_ANY_SOURCE on an
// intracommunicator), and the buffer takes one: GPU memory (any size) or host memory of at least
// kStubMinBytes, or kStubBytes for a blocking receive (where only a truncated message can be one,
// answered so that its sender does not hang).
bool may_get_stub(i64 capacity, bool device, int source, MPI_Comm comm, bool blocking);

// Where a receive's data goes: `count` elements of `type` at `buf`, GPU or host memory. Holds the
// translated type, so a receive completes correctly after MPI_Type_free of its datatype.
struct Target {
  void* buf = nullptr;
  i64 count = 0;
  std::shared_ptr<const Type> type;
  bool device = false;
  bool managed = false;  // the host may read it at once: never left for the stream to finish
  int gpu = -1;          // the CUDA device of GPU memory
  char* element(i64 k) const;
  i64 capacity() const { return type ? count * type->size() : 0; }
};
Target target(const Route& r);

// How a send must behave in MPI's terms.
enum class Mode { standard, sync, ready };
// Serves pending receives while a send waits (the interposer's progress; may be null).
using Serve = void (*)();

// A stub message on its way out. The caller waits for `request` (serving pending receives
// meanwhile: the receiver may be waiting for this process), then calls finish() once, which
// completes what remains (the stub's own send, data the receiver asked for, chunks) and gives back
// what the send held. `request` is MPI_REQUEST_NULL when nothing is left to wait for.
class Outgoing {
 public:
  virtual ~Outgoing() = default;
  virtual int finish() = 0;
  // `request` has completed and the caller has not finished the send yet: start, without
  // blocking, whatever the receiver waits for (a rendezvous whose receiver could not map the
  // data asks for it staged: it goes now, not when the application completes the send, which may
  // be after a receive of its own that this receiver cannot reach until it has the data).
  virtual void serve() {}
  MPI_Request request = MPI_REQUEST_NULL;
  // finish() already ran (all had completed in send()): `request` is a completed MPI request.
  bool done = false;
};
// Sends route `r` (method ipc, local or pipelined, chosen by choose()) to rank `dest` of `comm`
// with `tag` in `mode`. `blocking`: a pipelined send waits for its chunks here (serving); the
// rendezvous methods leave the waiting to the caller either way. Null when the method cannot be
// used after all (no IPC handle for the memory, one chunk only): the caller stages. `*rc` is the
// MPI result when the stub could not be sent (the Outgoing is then null too).
std::unique_ptr<Outgoing> send(const Route& r, Mode mode, int dest, int tag, MPI_Comm comm,
                               bool blocking, Serve serve, int* rc);

// A receive into `to` completed with `st` (`ranks`: its communicator's). When the message is a
// stub (kStubBytes from a rank that uses the protocol, with the job's magic), the data is moved
// into the target now (`received`: the bytes that arrived, in staging, or null when they arrived
// in the target itself), the sender answered and the status fixed; returns true and sets *rc
// (MPI_SUCCESS, or MPI_ERR_TRUNCATE when the real message does not fit). With `batch`, a receive
// that moves its data with one copy or kernel (IPC, local) leaves its GPU wait and its answer to
// the batch (data in place, *rc final, once the batch has settled).
class ReceiveBatch;
bool receive(const Target& to, const void* received, const Ranks& ranks, MPI_Status* st, int* rc,
             ReceiveBatch* batch = nullptr);

// Receives whose copies are queued and whose senders are not answered yet (see receive()).
class ReceiveBatch {
 public:
  ReceiveBatch();
  ~ReceiveBatch();  // settles
  ReceiveBatch(const ReceiveBatch&) = delete;
  ReceiveBatch& operator=(const ReceiveBatch&) = delete;
  // Waits once for the queued copies, then answers every sender (whatever the wait said) and lets
  // the mappings go. MPI_SUCCESS, or the error class of a failure (kept for later calls).
  int settle() noexcept;
  // No more receives join: an event after the copies lets done() tell, without waiting, whether
  // the data is in place (then settle() does not wait). Both throw ferry::Error.
  void close();
  bool done() const;
  std::size_t size() const { return queued_; }  // receives deferred so far
  static bool enabled();                          // FERRY_BATCH_RECEIVE

  struct Held;  // one deferred receive: its answer and its mapping (receive.cpp)
  void add(std::unique_ptr<Held> h, gpu::Stream s, bool legacy);
  void drain(gpu::Stream s, bool legacy) noexcept;  // settle, then wait for s (no room to add)
  // A contiguous copy, or a typed one (types kept by the batch), on `s`: queued, then launched
  // with the others in few kernels (copy_spans_async, copy_many_async) at close or settle.
  void add_span(const gpu::Span& span, gpu::Stream s);
  void add_copy(const void* src, i64 scount, std::shared_ptr<const Type> stype, void* dst, i64 dcount,
                std::shared_ptr<const Type> dtype, gpu::Stream s);

 private:
  void launch_queued();  // throws ferry::Error
  struct Queue;          // copies not launched yet (receive.cpp)
  std::unique_ptr<Queue> queue_;
  std::vector<std::unique_ptr<Held>> held_;
  std::vector<gpu::Stream> streams_;
  std::vector<gpu::Event> events_;  // after close(): one per stream with queued copies
  bool legacy_ = false;
  std::size_t queued_ = 0;
  int rc_ = MPI_SUCCESS;
};
// True when `received` (kStubBytes from `st`'s source) is a stub: the size of its message in *bytes.
bool stub_size(const void* received, const Ranks& ranks, const MPI_Status& st, i64* bytes);

// Staging: packs route `r`'s GPU data into pinned host memory `host` (one copy for dense data; the
// pack the route says otherwise). Waits for the GPU: `host` is complete when it returns.
void stage(const Route& r, void* host);
// Unpacks `nbytes` packed bytes at `packed` (host memory; `pinned`: pinned and mapped, read by the
// GPU directly) into the target's elements from `first` on (a partial last element gets its
// leading bytes). GPU targets: waits for the GPU, except under FERRY_ASYNC_RECV into device memory
// with `pool_buffer` (a pinned pool buffer holding `packed`, put back once the queued copy is done;
// true returned: the caller must not put it back), where the data is ordered before later work on
// the legacy and blocking streams (docs/design.md), and inside an UnstageBatch, until it settles.
bool unstage(const void* packed, i64 nbytes, const Target& to, i64 first = 0, bool pinned = false,
             void* pool_buffer = nullptr);
// A scope (per thread; a nested one holds the unstage() calls made while it is open) whose calls
// with a `pool_buffer` queue their copies (unpacks of whole elements: launched together in settle,
// copy_many_async) and wait once, in settle() or at its end, then give the buffers back: the staged
// receives one MPI_Waitall completes. Not for a caller that reads the data before.
struct UnstageBatch {
  UnstageBatch();
  ~UnstageBatch() { settle(); }
  UnstageBatch(const UnstageBatch&) = delete;
  UnstageBatch& operator=(const UnstageBatch&) = delete;
  int settle() noexcept;  // MPI_SUCCESS, or the error class of the failed launch or wait
  std::vector<void*> held;  // pool buffers read by queued copies
  std::vector<std::pair<gpu::Copy, std::shared_ptr<const Type>>> copies;  // with the target type
  UnstageBatch* outer;  // the thread's batch open before this one
};
// FERRY_ASYNC_RECV: small receives into device memory are queued on the legacy stream, not waited.
bool async_receive();
// Pinned buffers whose copies are still queued come back to the pool (called by the pool users
// now and then; cheap when there are none). `all`: wait for them (finalize).
void reclaim(bool all = false);
// Messages per stub method so far; batched, batch_waits: a ReceiveBatch's receives and waits;
struct Counters {  // pulled: blocks Pull copied
  long ipc_sent = 0, ipc_received = 0, local = 0, pipelined = 0, batched = 0, batch_waits = 0, pulled = 0;
};
Counters counters();

}  // namespace ferry::transport
