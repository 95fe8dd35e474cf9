// Same-node GPU→GPU messages over CUDA IPC: the protocol is described in ipc.hpp.
#include "mpi/ipc.hpp"

#include <ferry/model.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <ferry/transport.hpp>

#include "gpu/runtime.hpp"
#include "sys/env.hpp"

namespace ferry::mpi_detail::ipc {

namespace env = ferry::detail::env;
namespace gpu = ferry::gpu;
namespace transport = ferry::transport;

namespace {

// The protocol's state: the private communicator for acknowledgements, the magic, the method
// choice. Set once by init(); where ranks and their GPUs are is the transport's topology.
struct World {
  bool on = false;
  int rank = 0;
  MPI_Comm ctl = MPI_COMM_NULL;
  std::uint64_t magic[2] = {0, 0};
  int tag_span = 16000;  // acknowledgement tags cycle in [0, 2 * tag_span)
  // Method choice: the model's cached decisions, unless FERRY_METHOD forces a method or
  // FERRY_IPC_MIN / FERRY_PIPELINE_MIN set plain thresholds (tests, measurements).
  std::unique_ptr<model::DecisionCache> decisions;
  std::optional<model::Method> forced;
  std::optional<model::Pack> forced_pack;
  i64 ipc_min = -1;       // from FERRY_IPC_MIN, else -1: the model decides
  i64 pipeline_min = -1;  // from FERRY_PIPELINE_MIN, else -1
  i64 chunk_bytes = 0;    // pipelined chunk size
};
World& world() {
  static World w;
  return w;
}

std::atomic<long> sent_count{0}, received_count{0}, pipelined_count{0};

// Communicator rank -> world rank, per communicator (empty: an intercommunicator).
class RankTables {
 public:
  Ranks ranks(MPI_Comm comm) {
    Ranks r;
    if (comm == MPI_COMM_WORLD) {
      r.world = true;
      return r;
    }
    std::lock_guard lock(mutex_);
    auto it = tables_.find(comm);
    if (it == tables_.end())
      it = tables_.emplace(comm, std::make_shared<const std::vector<int>>(build(comm))).first;
    r.table = it->second;
    return r;
  }
  void forget(MPI_Comm comm) {
    std::lock_guard lock(mutex_);
    tables_.erase(comm);
  }

 private:
  static std::vector<int> build(MPI_Comm comm) {
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) return {};
    const int n = comm_size(comm);
    MPI_Group g, wg;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    std::vector<int> ranks(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) ranks[static_cast<std::size_t>(i)] = i;
    PMPI_Group_translate_ranks(g, n, ranks.data(), wg, out.data());
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    for (int& r : out)
      if (r == MPI_UNDEFINED) r = -1;  // a rank of a communicator from MPI_Comm_spawn / connect
    return out;
  }
  std::mutex mutex_;
  std::map<MPI_Comm, std::shared_ptr<const std::vector<int>>> tables_;
};
RankTables& rank_tables() {
  static auto* t = new RankTables();
  return *t;
}


}  // namespace

Ranks ranks_of(MPI_Comm comm) { return rank_tables().ranks(comm); }

int world_rank(MPI_Comm comm, int rank) {
  if (rank < 0) return -1;
  return comm == MPI_COMM_WORLD ? rank : ranks_of(comm).to_world(rank);
}

void forget(MPI_Comm comm) { rank_tables().forget(comm); }

bool enabled() { return world().on; }

bool host_protocol_test() {
  static const bool on = env::flag(env::Knob::protocol_test);
  return on;
}
void force_method(std::optional<model::Method> m) { world().forced = m; }
void force_pack(std::optional<model::Pack> p) { world().forced_pack = p; }
long sent() { return sent_count.load(); }
long pipelined() { return pipelined_count.load(); }
long received() { return received_count.load(); }

bool same_node(MPI_Comm comm, int rank) {
  const World& w = world();
  if (!w.on) return false;
  const int wr = world_rank(comm, rank);
  return wr >= 0 && wr != w.rank && transport::world().same_node(wr, w.rank);
}

bool may_get_stub(int count, MPI_Datatype type, int source, MPI_Comm comm, bool blocking) {
  if (!world().on || source == MPI_PROC_NULL || count <= 0) return false;
  const i64 capacity = static_cast<i64>(count) * mpi_detail::type_size(type);
  // A stub always fits a blocking receive of kStubBytes or more, so one into too small a buffer
  // (an erroneous program: MPI_ERR_TRUNCATE) is still answered and its sender does not hang.
  if (capacity < (blocking ? kStubBytes : kMinBytes)) return false;
  if (source != MPI_ANY_SOURCE)
    return capacity >= kPipelineMinBytes ? world_rank(comm, source) >= 0 : same_node(comm, source);
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  return !inter;
}


namespace {

constexpr std::uint32_t kVersion = 2;
constexpr std::uint32_t kIpc = 1;
constexpr std::uint32_t kPipelined = 2;
// The acknowledgement: {kAckDone or kAckNeedData, the receiver's GPU (device_key, 0: host memory)}.
constexpr std::uint64_t kAckDone = 0;      // the receiver has the data
constexpr std::uint64_t kAckNeedData = 1;  // the receiver could not open the handle: send the data

struct Stub {
  std::uint64_t magic[2];
  std::uint32_t version;
  std::int32_t sender;  // world rank
  std::int64_t bytes;   // packed size of the message
  std::int64_t seq;     // names the acknowledgement (and fallback data) tags
  std::int64_t offset;  // of the data in the sender's allocation
  std::uint64_t base;   // the allocation's address in the sender
  std::uint64_t alloc_id;
  std::uint32_t kind;         // kIpc or kPipelined
  std::uint32_t chunk_elems;  // pipelined: sender elements per chunk (`offset`: bytes per chunk)
  transport::IpcHandle handle;
  std::uint64_t gpu;  // the sender's GPU (ferry::gpu::device_key; 0: host memory)
};
static_assert(sizeof(Stub) == kStubBytes, "the stub's size is part of the protocol");

int ack_tag(i64 seq) { return static_cast<int>(seq % world().tag_span) * 2; }
int data_tag(i64 seq) { return ack_tag(seq) + 1; }

// Device buffers for packing non-contiguous IPC sends, on the current device. Their IPC handles
// stay valid while they live, so receivers keep them mapped.
transport::Pool& device_pool() { return transport::device_pool(gpu::this_device()); }

// Ferry's own stream on the current device (a rank may switch devices between messages).
gpu::Stream copy_stream() { return gpu::internal_stream(); }

// Waits for what is queued on `stream` after a failure, whatever the wait itself reports: the
// failure is what the caller reports, and nothing may be released while the GPU still uses it.
void quiesce(gpu::Stream stream) noexcept {
  try {
    gpu::sync_stream(stream);
  } catch (...) {
  }
}

// Per destination: the next sequence number.
class Sequences {
 public:
  i64 next(int dest) {
    std::lock_guard lock(mutex_);
    return seq_[dest]++;
  }

 private:
  std::mutex mutex_;
  std::map<int, i64> seq_;
};
Sequences& sequences() {
  static auto* s = new Sequences();
  return *s;
}

// The fields every stub has, for a message of `bytes` packed bytes to world rank `dw` from data on
// `device`.
void fill_stub(Stub& s, std::uint32_t kind, i64 bytes, int dw, int device) {
  const World& w = world();
  s.magic[0] = w.magic[0];
  s.magic[1] = w.magic[1];
  s.version = kVersion;
  s.kind = kind;
  s.sender = w.rank;
  s.bytes = bytes;
  s.seq = sequences().next(dw);
  s.gpu = ferry::gpu::device_key(device);
}

// Sends the stub in the application's send mode, on its communicator and tag.
int post_stub(Mode mode, const Stub& s, int dest, int tag, MPI_Comm comm, MPI_Request* r) {
  switch (mode) {
    case Mode::sync: return PMPI_Issend(&s, kStubBytes, MPI_BYTE, dest, tag, comm, r);
    case Mode::ready: return PMPI_Irsend(&s, kStubBytes, MPI_BYTE, dest, tag, comm, r);
    case Mode::standard: break;
  }
  return PMPI_Isend(&s, kStubBytes, MPI_BYTE, dest, tag, comm, r);
}

// What a send keeps until its acknowledgement: the stub (its buffer must outlive the Isend), the
// acknowledgement word, the packed staging buffer.
struct InFlight {
  Stub stub{};
  std::uint64_t ack[2] = {~std::uint64_t{0}, 0};
  MPI_Request stub_request = MPI_REQUEST_NULL;
  void* staging = nullptr;  // device pool buffer, or null when the user's buffer was sent
  const void* src = nullptr;
  int dest_world = -1;
  int staging_device = -1;
  ~InFlight() {
    if (staging) transport::device_pool(staging_device).put(staging);
  }
};

// After the acknowledgement: finish the stub's send; send the data if the receiver asked for it.
int conclude(InFlight& f) {
  int rc = PMPI_Wait(&f.stub_request, MPI_STATUS_IGNORE);
  transport::learn_gpu(f.dest_world, f.ack[1]);
  if (rc != MPI_SUCCESS || f.ack[0] != kAckNeedData) return rc;
  Staged host(f.stub.bytes);
  ferry::gpu::copy(host.p, f.src, f.stub.bytes);
  return PMPI_Send(host.p, static_cast<int>(f.stub.bytes), MPI_BYTE, f.dest_world,
                   data_tag(f.stub.seq), world().ctl);
}

// Where world rank `peer` receives, seen from data on `device` (the transport's topology and the
// GPUs that stubs and acknowledgements told).
model::Locality locality(int peer, int device) { return transport::locality(peer, device); }

// The method for a message of `bytes` packed bytes in blocks of `block` bytes.
model::Method decide(i64 bytes, i64 block, model::Locality loc, bool ipc_possible) {
  const World& w = world();
  ipc_possible = ipc_possible && loc != model::Locality::other_node && bytes >= kMinBytes;
  const bool pipeline_possible = bytes >= kPipelineMinBytes;
  if (w.forced) {
    if (*w.forced == model::Method::ipc && ipc_possible) return model::Method::ipc;
    if (*w.forced == model::Method::pipelined && pipeline_possible) return model::Method::pipelined;
    return model::Method::staged;
  }
  if (w.ipc_min >= 0 || w.pipeline_min >= 0) {
    if (w.ipc_min >= 0 && ipc_possible && bytes >= w.ipc_min) return model::Method::ipc;
    if (w.pipeline_min >= 0 && pipeline_possible && bytes >= w.pipeline_min)
      return model::Method::pipelined;
    if (w.ipc_min >= 0 && w.pipeline_min >= 0) return model::Method::staged;
    // One threshold set: the model decides the other method.
    const auto d = w.decisions->get(bytes, block, loc, w.ipc_min < 0 && ipc_possible).method;
    if (d == model::Method::pipelined && w.pipeline_min >= 0) return model::Method::staged;
    return d;
  }
  return w.decisions->get(bytes, block, loc, ipc_possible).method;
}

// Average contiguous block of a type (the model's second axis).
i64 block_of(const ferry::Type& t) { return t.blocks() > 0 ? t.size() / t.blocks() : t.size(); }

}  // namespace

const char* locality_name(int peer, int device) {
  const World& w = world();
  if (!w.on || peer < 0 || peer >= transport::world().size()) return nullptr;
  return model::name(locality(peer, device));
}

void init() {
  World& w = world();
  const bool wanted = env::flag(env::Knob::ipc) && (ferry::gpu::available() || host_protocol_test()) &&
                      transport::initialized();  // its setup failed (reported): no IPC
  // Every rank takes part in the collective setup, so all agree even where some lack a GPU.
  int all = wanted ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) return;
  PMPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  PMPI_Comm_dup(MPI_COMM_WORLD, &w.ctl);
  if (w.rank == 0) {
    std::random_device rd;
    w.magic[0] = (std::uint64_t{rd()} << 32) ^ rd();
    w.magic[1] = (std::uint64_t{rd()} << 32) ^ rd() ^ 0x46455252590000ULL;
  }
  PMPI_Bcast(w.magic, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  int* ub = nullptr;
  int flag = 0;
  PMPI_Comm_get_attr(w.ctl, MPI_TAG_UB, &ub, &flag);
  if (flag && ub) w.tag_span = std::max(1, (*ub - 1) / 2);
  w.ipc_min = env::integer_if_set(env::Knob::ipc_min).value_or(-1);
  w.pipeline_min = env::integer_if_set(env::Knob::pipeline_min).value_or(-1);
  w.chunk_bytes = env::integer(env::Knob::pipeline_chunk);
  if (const std::string f = env::text(env::Knob::method); !f.empty()) w.forced = model::method_named(f);
  if (const std::string f = env::text(env::Knob::pack); !f.empty()) w.forced_pack = model::pack_named(f);
  std::string why;
  w.decisions = std::make_unique<model::DecisionCache>(
      std::make_shared<const model::Model>(model::Model::from_environment(&why)));
  if (verbose() && w.rank == 0) {
    std::fprintf(stderr, "ferry-mpi: %s\n", why.c_str());
    std::fprintf(stderr, "ferry-mpi: topology: %s\n", transport::world().describe().c_str());
  }
  w.on = true;
}

void finalize() {
  World& w = world();
  if (!w.on) return;
  w.on = false;  // the transport's finalize closes IPC mappings and frees the pools
  if (w.ctl != MPI_COMM_NULL) PMPI_Comm_free(&w.ctl);
}

bool try_send(Mode mode, const void* buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm, MPI_Request* request, int* rc) {
  if (!world().on || count <= 0) return false;
  std::shared_ptr<const ferry::Type> t;
  try {
    t = ferry::lookup(type);
  } catch (const ferry::Error&) {
    return false;
  }
  return try_send(mode, buf, count, t, dest, tag, comm, request, rc);
}

bool try_send(Mode mode, const void* buf, int count, const std::shared_ptr<const ferry::Type>& t,
              int dest, int tag, MPI_Comm comm, MPI_Request* request, int* rc) {
  const World& w = world();
  if (!w.on || count <= 0 || !t) return false;
  const int dw = world_rank(comm, dest);
  if (dw < 0 || dw == w.rank || !transport::world().same_node(dw, w.rank)) return false;
  const i64 bytes = ferry::pack_size(count, *t);
  if (bytes < kMinBytes) return false;
  const char* first = static_cast<const char*>(buf) + t->data_lb(count);
  ferry::gpu::Allocation a = ferry::gpu::allocation_of(first);
  if (a.kind != ferry::gpu::Memory::device) return false;
  const int device = a.device;  // the user's buffer's (a becomes the staging buffer's below)
  if (decide(bytes, block_of(*t), locality(dw, device), true) != model::Method::ipc) return false;
  ferry::gpu::settle(a);  // the receiver reads from its own context: no stream orders it after ours

  auto f = std::make_shared<InFlight>();
  f->dest_world = dw;
  if (t->dense()) {
    f->src = first;
  } else {
    f->staging_device = gpu::this_device();
    f->staging = transport::device_pool(f->staging_device).get(bytes);
    ferry::gpu::pack(buf, count, *t, f->staging);
    f->src = f->staging;
    a = ferry::gpu::allocation_of(f->staging);
  }
  transport::Export e;
  if (!transport::exports().of(a, f->src, &e)) return false;  // f's staging goes back to the pool
  Stub& s = f->stub;
  s.handle = e.handle;
  fill_stub(s, kIpc, bytes, dw, device);
  s.offset = e.offset;
  s.base = e.base;
  s.alloc_id = e.id;

  MPI_Request ack;
  *rc = PMPI_Irecv(f->ack, 2, MPI_UINT64_T, dw, ack_tag(s.seq), w.ctl, &ack);
  if (*rc != MPI_SUCCESS) return true;
  *rc = post_stub(mode, s, dest, tag, comm, &f->stub_request);
  if (*rc != MPI_SUCCESS) {
    PMPI_Cancel(&ack);
    PMPI_Request_free(&ack);
    return true;
  }
  sent_count.fetch_add(1);
  if (request == nullptr) {  // blocking: wait for the acknowledgement, serving others meanwhile
    for (;;) {
      int flag = 0;
      *rc = PMPI_Test(&ack, &flag, MPI_STATUS_IGNORE);
      if (*rc != MPI_SUCCESS || flag) break;
      requests().progress();
    }
    if (*rc == MPI_SUCCESS) *rc = conclude(*f);
    return true;
  }
  *request = ack;
  Pending p;
  p.uncancellable = true;
  p.finish = [f](const MPI_Status*) { return conclude(*f); };
  requests().add(ack, std::move(p));
  return true;
}

namespace {

std::shared_ptr<const ferry::Type> ferry_type(MPI_Datatype type) {
  try {
    return ferry::lookup(type);
  } catch (const ferry::Error&) {
    return nullptr;
  }
}

// `take` bytes of the packed stream at `src`, in GPU memory (mapped from the sender), into the
// target: dense types one copy, others unpacked by the GPU engine straight from the sender's
// memory (device targets) or brought over first (host targets); a partial last element last.
void deliver_from_gpu(const char* src, i64 take, const Target& to) {
  const ferry::Type& t = *to.type;
  const i64 size = t.size();
  if (take <= 0 || size <= 0) return;
  if (t.dense()) {
    char* dst = to.element(0) + t.true_lb();
    gpu::copy_async(dst, src, take, copy_stream());
    gpu::sync_stream(copy_stream());
    return;
  }
  if (!to.device) {
    Staged host(take);
    ferry::gpu::copy(host.p, src, take);
    unpack_into(host.p, take, to);
    return;
  }
  const i64 full = take / size, rem = take % size;
  if (full > 0) ferry::gpu::unpack_async(src, to.buf, full, t, copy_stream());
  gpu::sync_stream(copy_stream());
  if (rem > 0) {
    std::vector<char> tail(static_cast<std::size_t>(rem));
    ferry::gpu::copy(tail.data(), src + full * size, rem);
    unpack_into(tail.data(), rem, to, full);
  }
}

// Answers an IPC sender however the fetch ends, so it never waits for ever.
struct Answer {
  int peer, tag;
  std::uint64_t word[2];
  bool sent = false;
  void send() {
    if (!sent) PMPI_Send(word, 2, MPI_UINT64_T, peer, tag, world().ctl);
    sent = true;
  }
  ~Answer() { send(); }
};

// The GPU a receive target is on (device_key), 0 for host memory or when the driver cannot say.
std::uint64_t gpu_of(const Target& to) noexcept {
  if (!to.device || !to.type || to.count <= 0) return 0;
  try {
    return ferry::gpu::device_key(
        ferry::gpu::allocation_of(static_cast<const char*>(to.buf) + to.type->data_lb(to.count)).device);
  } catch (const ferry::Error&) {
    return 0;
  }
}

// IPC: copy or unpack straight from the sender's GPU memory, then acknowledge.
void fetch_ipc(const Stub& s, int sw, i64 take, const Target& to) {
  // Held until after the acknowledgement (declared first, released last).
  const transport::IpcCache::Lease mapped = transport::ipc_cache().open(s.sender, s.base, s.alloc_id, s.handle);
  Answer ack{sw, ack_tag(s.seq), {mapped ? kAckDone : kAckNeedData, gpu_of(to)}};
  if (mapped) {
    deliver_from_gpu(static_cast<const char*>(mapped.get()) + s.offset, take, to);
    return;  // ~Answer acknowledges
  }
  // The handle did not open here (another node's, or this process has the allocation mapped
  // already: transport.hpp, IpcCache): the data comes staged on the private communicator.
  ack.send();
  Staged host(s.bytes);
  PMPI_Recv(host.p, static_cast<int>(s.bytes), MPI_BYTE, sw, data_tag(s.seq), world().ctl,
            MPI_STATUS_IGNORE);
  unpack_into(host.p, take, to);
}

// Pipelined: every chunk's receive is posted at once into one pinned buffer; as each arrives, the
// whole receive elements it completes are unpacked while the next chunks come in.
void receive_pipelined(const Stub& s, int sw, i64 take, const Target& to) {
  const World& w = world();
  const i64 chunk = s.offset;
  const i64 nchunks = (s.bytes + chunk - 1) / chunk;
  Staged host(s.bytes);
  char* base = static_cast<char*>(host.p);
  std::vector<MPI_Request> r(static_cast<std::size_t>(nchunks));
  for (i64 c = 0; c < nchunks; ++c)
    PMPI_Irecv(base + c * chunk, static_cast<int>(std::min(chunk, s.bytes - c * chunk)), MPI_BYTE,
               sw, data_tag(s.seq), w.ctl, &r[static_cast<std::size_t>(c)]);
  const ferry::Type& t = *to.type;
  const i64 size = t.size();
  const bool on_gpu = to.device && ferry::gpu::available();
  i64 done = 0;  // elements unpacked
  try {
    for (i64 c = 0; c < nchunks; ++c) {
      PMPI_Wait(&r[static_cast<std::size_t>(c)], MPI_STATUS_IGNORE);
      const i64 covered = size ? std::min(take, (c + 1) * chunk) / size : 0;
      if (covered <= done || t.dense()) continue;
      if (on_gpu) {  // asynchronous: overlaps the next chunks' arrival
        ferry::gpu::unpack_async(base + done * size, to.element(done), covered - done, t, copy_stream());
      } else {
        unpack_into(base + done * size, (covered - done) * size, to, done);
      }
      done = covered;
    }
  } catch (...) {
    for (auto& q : r) PMPI_Wait(&q, MPI_STATUS_IGNORE);  // the sender's chunks must all arrive
    throw;
  }
  if (on_gpu) gpu::sync_stream(copy_stream());
  unpack_into(base + done * size, take - done * size, to, done);  // dense data, or the partial tail
}

}  // namespace

bool finish_recv(const Target& to, const void* staging, const Ranks& ranks, MPI_Status* st, int* rc) {
  const World& w = world();
  if (!w.on || st->MPI_SOURCE < 0 || !to.type) return false;
  int got = 0;
  PMPI_Get_count(st, MPI_BYTE, &got);
  if (got != kStubBytes) return false;
  const int sw = ranks.to_world(st->MPI_SOURCE);
  if (sw < 0 || sw == w.rank) return false;
  const ferry::Type& t = *to.type;
  Stub s;
  if (staging) {
    std::memcpy(&s, staging, sizeof s);
  } else {  // the bytes went into the user's host buffer, laid out by its type
    if (t.size() <= 0) return false;
    const i64 elems = std::min(to.count, (kStubBytes + t.size() - 1) / t.size());
    std::vector<char> packed(static_cast<std::size_t>(elems * t.size()));
    i64 pos = 0;
    ferry::pack(to.buf, elems, t, packed.data(), static_cast<i64>(packed.size()), &pos);
    if (pos < kStubBytes) return false;
    std::memcpy(&s, packed.data(), sizeof s);
  }
  if (s.magic[0] != w.magic[0] || s.magic[1] != w.magic[1] || s.version != kVersion ||
      s.sender != sw || (s.kind != kIpc && s.kind != kPipelined))
    return false;

  const i64 capacity = to.count * t.size();
  const i64 take = std::min(s.bytes, capacity);
  transport::learn_gpu(sw, s.gpu);
  if (s.kind == kIpc) {
    fetch_ipc(s, sw, take, to);
  } else {
    receive_pipelined(s, sw, take, to);
  }
  received_count.fetch_add(1);
  PMPI_Status_set_elements_x(st, MPI_BYTE, take);
  *rc = s.bytes > capacity ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
  if (*rc != MPI_SUCCESS) st->MPI_ERROR = *rc;
  return true;
}

bool try_pipelined(Mode mode, const void* buf, int count, MPI_Datatype type, int dest, int tag,
                   MPI_Comm comm, MPI_Request* request, int* rc) {
  const World& w = world();
  if (!w.on || count < 2) return false;
  const int dw = world_rank(comm, dest);
  if (dw < 0 || dw == w.rank) return false;
  auto t = ferry_type(type);
  if (!t) return false;
  const i64 bytes = ferry::pack_size(count, *t);
  if (bytes < kPipelineMinBytes || t->size() == 0) return false;
  const ferry::gpu::Allocation a = ferry::gpu::allocation_of(static_cast<const char*>(buf) + t->data_lb(count));
  const bool ipc_possible = a.kind == ferry::gpu::Memory::device;
  if (decide(bytes, block_of(*t), locality(dw, a.device), ipc_possible) != model::Method::pipelined)
    return false;
  ferry::gpu::settle(a);  // packed on Ferry's own stream
  const i64 chunk_elems = std::max<i64>(1, w.chunk_bytes / t->size());
  if (chunk_elems >= count) return false;  // one chunk: nothing to overlap
  const i64 chunk = chunk_elems * t->size();
  const i64 nchunks = (bytes + chunk - 1) / chunk;

  // The stub's buffer must outlive its send, which a non-blocking send leaves running.
  auto stub_box = std::make_shared<Stub>();
  Stub& s = *stub_box;
  fill_stub(s, kPipelined, bytes, dw, a.device);
  s.offset = chunk;
  s.chunk_elems = static_cast<std::uint32_t>(chunk_elems);
  MPI_Request stub;
  *rc = post_stub(mode, s, dest, tag, comm, &stub);
  if (*rc != MPI_SUCCESS) return true;

  // Pack every chunk asynchronously into pinned memory, each with its event; send each chunk as
  // soon as its event fires, while the GPU packs the next ones.
  Staged host(bytes);
  char* base = static_cast<char*>(host.p);
  const bool on_gpu = ferry::gpu::memory_of(static_cast<const char*>(buf) + t->data_lb(count)) !=
                      ferry::gpu::Memory::host;  // host memory only in the host protocol test
  std::vector<gpu::Event> ev(on_gpu ? static_cast<std::size_t>(nchunks) : 0);
  for (auto& e : ev) e = gpu::create_event();
  const i64 extent = t->extent();
  auto chunk_origin = [&](i64 c) { return static_cast<const char*>(buf) + c * chunk_elems * extent; };
  auto chunk_count = [&](i64 c) { return std::min(chunk_elems, static_cast<i64>(count) - c * chunk_elems); };
  // If packing fails part-way, the receiver still gets every chunk (it waits for all of them) and
  // the sender reports the error; nothing is released while the GPU or MPI may still use it.
  std::unique_ptr<ferry::Error> failed;
  try {
    for (i64 c = 0; c < nchunks && on_gpu; ++c)
      ferry::gpu::pack_async(chunk_origin(c), chunk_count(c), *t, base + c * chunk, copy_stream(),
                             ev[static_cast<std::size_t>(c)]);
  } catch (const ferry::Error& e) {
    failed = std::make_unique<ferry::Error>(e);
    quiesce(copy_stream());
  }
  std::vector<MPI_Request> r(static_cast<std::size_t>(nchunks) + 1, MPI_REQUEST_NULL);
  r.back() = stub;
  for (i64 c = 0; c < nchunks && *rc == MPI_SUCCESS; ++c) {
    try {
      if (failed) {
      } else if (on_gpu) {
        gpu::sync_event(ev[static_cast<std::size_t>(c)]);
      } else {
        i64 pos = 0;
        ferry::pack(chunk_origin(c), chunk_count(c), *t, base + c * chunk, chunk, &pos);
      }
    } catch (const ferry::Error& e) {
      failed = std::make_unique<ferry::Error>(e);
      if (on_gpu) quiesce(copy_stream());
    }
    *rc = PMPI_Isend(base + c * chunk, static_cast<int>(std::min(chunk, bytes - c * chunk)), MPI_BYTE,
                     dw, data_tag(s.seq), w.ctl, &r[static_cast<std::size_t>(c)]);
    int flag = 0;
    PMPI_Testall(static_cast<int>(c) + 1, r.data(), &flag, MPI_STATUSES_IGNORE);  // progress
  }
  for (auto& e : ev) gpu::destroy_event(e);
  if (request && !failed && *rc == MPI_SUCCESS) {
    // Non-blocking: every chunk is packed and posted; the application's request is the send that
    // completes last, and completing it waits for the rest (by then done, or nearly) and gives the
    // staging buffer back. That is the last chunk's send (it went last to the same process), but
    // for a synchronous send the stub's: chunks small enough to go eagerly may complete before the
    // receiver has matched anything, and MPI_Issend must not.
    const std::size_t last = mode == Mode::sync ? static_cast<std::size_t>(nchunks)
                                                : static_cast<std::size_t>(nchunks) - 1;
    *request = r[last];
    r[last] = MPI_REQUEST_NULL;
    Pending p;
    p.uncancellable = true;  // the stub is out: the receiver waits for every chunk
    p.staging = host.release();
    p.finish = [rest = std::move(r), stub_box](const MPI_Status*) mutable {
      return PMPI_Waitall(static_cast<int>(rest.size()), rest.data(), MPI_STATUSES_IGNORE);
    };
    requests().add(*request, std::move(p));
    pipelined_count.fetch_add(1);
    return true;
  }
  for (;;) {
    int flag = 0;
    int e = PMPI_Testall(static_cast<int>(r.size()), r.data(), &flag, MPI_STATUSES_IGNORE);
    if (e != MPI_SUCCESS) {
      *rc = e;
      break;
    }
    if (flag) break;
    requests().progress();
  }
  if (failed) throw *failed;
  pipelined_count.fetch_add(1);
  return true;
}

bool stub_size(const void* received, const Ranks& ranks, const MPI_Status& st, i64* bytes) {
  const World& w = world();
  if (!w.on) return false;
  Stub s;
  std::memcpy(&s, received, sizeof s);
  if (s.magic[0] != w.magic[0] || s.magic[1] != w.magic[1] || s.version != kVersion ||
      s.sender != ranks.to_world(st.MPI_SOURCE) || (s.kind != kIpc && s.kind != kPipelined))
    return false;
  *bytes = s.bytes;
  return true;
}

namespace {
// Staging through device memory (pack there, then one copy; or one copy, then unpack there)
// rather than one-shot over the bus, as the model's pack or unpack surfaces say.
bool through_device(i64 count, const ferry::Type& t, model::Direction dir) {
  const World& w = world();
  if (t.dense()) return false;
  if (w.forced_pack) return *w.forced_pack == model::Pack::device;
  if (!w.decisions) return false;
  const i64 bytes = count * t.size();
  const model::Decision d = w.decisions->get(bytes, block_of(t), model::Locality::other_gpu, false);
  return (dir == model::Direction::pack ? d.pack : d.unpack) == model::Pack::device;
}
}  // namespace

void stage_pack(const void* buf, i64 count, const ferry::Type& t, void* host) {
  if (t.dense()) {  // one copy; the caller knows where the data is (no pointer queries here)
    if (count > 0) ferry::gpu::copy(host, static_cast<const char*>(buf) + t.data_lb(count), count * t.size());
    return;
  }
  if (!through_device(count, t, model::Direction::pack)) return ferry::gpu::pack(buf, count, t, host);
  // Packed on Ferry's own stream, not ordered after the application's default stream.
  if (count > 0) ferry::gpu::settle(ferry::gpu::allocation_of(static_cast<const char*>(buf) + t.data_lb(count)));
  const i64 bytes = count * t.size();
  const transport::Buffer dev(device_pool(), bytes);
  ferry::gpu::pack_async(buf, count, t, dev.get(), copy_stream());
  gpu::copy_d2h_async(host, dev.get(), bytes, copy_stream());
  gpu::sync_stream(copy_stream());
}

void stage_unpack(const void* host, void* buf, i64 count, const ferry::Type& t) {
  if (!through_device(count, t, model::Direction::unpack)) return ferry::gpu::unpack(host, buf, count, t);
  const i64 bytes = count * t.size();
  const transport::Buffer dev(device_pool(), bytes);
  gpu::copy_h2d_async(dev.get(), host, bytes, copy_stream());
  ferry::gpu::unpack_async(dev.get(), buf, count, t, copy_stream());
  gpu::sync_stream(copy_stream());
}

}  // namespace ferry::mpi_detail::ipc
