// The stub protocol's wire (wire.hpp): its setup, communicator ranks, stubs, type descriptions.
#include "transport/wire.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <unordered_map>

#include "gpu/runtime.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"
#include "transport/methods.hpp"

namespace ferry::transport {

namespace env = detail::env;

namespace wire {

State& state() {
  static State s;
  return s;
}

Stats& stats() {
  static Stats s;
  return s;
}

gpu::Stream stream() { return gpu::internal_stream(); }

void quiesce(gpu::Stream s) noexcept {
  try {
    gpu::sync_stream(s);
  } catch (...) {
  }
}

namespace {
// Per destination: the next sequence number.
class Sequences {
 public:
  i64 next(int dest) {
    std::lock_guard lock(mutex_);
    return seq_[dest]++;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<int, i64> seq_;
};
Sequences& sequences() {
  static auto* s = new Sequences();
  return *s;
}
}  // namespace

void fill(Stub& s, std::uint32_t kind, i64 bytes, int dest_world, int device) {
  const State& w = state();
  s.magic[0] = w.magic[0];
  s.magic[1] = w.magic[1];
  s.version = kVersion;
  s.kind = kind;
  s.sender = w.rank;
  s.flags = 0;
  s.bytes = bytes;
  s.seq = sequences().next(dest_world);
  s.gpu = gpu::device_key(device);
}

bool parse(const void* received, int sender, Stub* out) {
  const State& w = state();
  if (!w.on) return false;
  std::memcpy(out, received, sizeof *out);
  return out->magic[0] == w.magic[0] && out->magic[1] == w.magic[1] && out->version == kVersion &&
         out->sender == sender && out->bytes >= 0 &&
         (out->kind == kIpc || out->kind == kPipelined || out->kind == kLocal);
}

int post(Mode mode, const Stub& s, int dest, int tag, MPI_Comm comm, MPI_Request* r) {
  switch (mode) {
    case Mode::sync: return PMPI_Issend(&s, kStubBytes, MPI_BYTE, dest, tag, comm, r);
    case Mode::ready: return PMPI_Irsend(&s, kStubBytes, MPI_BYTE, dest, tag, comm, r);
    case Mode::standard: break;
  }
  return PMPI_Isend(&s, kStubBytes, MPI_BYTE, dest, tag, comm, r);
}

// ---------------------------------------------------------------------------- descriptions
//
// The text: a count of nodes, then each node after its children (so every child reference points
// back), as kind (1 byte), offset, and dense: size; stream: count, stride, child; blocks: the
// number of entries and each entry's displacement and child; then the lower bound and extent.
// Integers are little-endian as the machine has them (the protocol runs within one node or one
// homogeneous job, as the packed data does).

namespace {

template <class T>
void put(std::vector<char>& out, T v) {
  const char* p = reinterpret_cast<const char*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

template <class T>
T get(const std::vector<char>& in, std::size_t* at) {
  if (*at + sizeof(T) > in.size()) detail::fail(MPI_ERR_OTHER, "type description cut short");
  T v;
  std::memcpy(&v, in.data() + *at, sizeof v);
  *at += sizeof v;
  return v;
}

void write_node(const NodePtr& n, std::map<const Node*, std::uint32_t>& ids, std::vector<char>& out,
                std::uint32_t* count) {
  if (ids.count(n.get())) return;
  if (n->kind == NodeKind::stream) write_node(n->child, ids, out, count);
  if (n->kind == NodeKind::blocks)
    for (const Entry& e : n->entries) write_node(e.child, ids, out, count);
  put(out, static_cast<std::uint8_t>(n->kind));
  put(out, n->off);
  switch (n->kind) {
    case NodeKind::dense: put(out, n->size); break;
    case NodeKind::stream:
      put(out, n->count);
      put(out, n->stride);
      put(out, ids.at(n->child.get()));
      break;
    case NodeKind::blocks:
      put(out, static_cast<std::uint32_t>(n->entries.size()));
      for (const Entry& e : n->entries) {
        put(out, e.disp);
        put(out, ids.at(e.child.get()));
      }
      break;
  }
  ids.emplace(n.get(), (*count)++);
}

}  // namespace

std::vector<char> Describe::write(const Type& t) {
  std::vector<char> body;
  std::map<const Node*, std::uint32_t> ids;
  std::uint32_t count = 0;
  write_node(t.root(), ids, body, &count);
  std::vector<char> out;
  put(out, count);
  out.insert(out.end(), body.begin(), body.end());
  put(out, t.lb());
  put(out, t.extent());
  return out;
}

Type Describe::read(const std::vector<char>& text) {
  std::size_t at = 0;
  const auto count = get<std::uint32_t>(text, &at);
  if (count == 0 || count > text.size()) detail::fail(MPI_ERR_OTHER, "malformed type description");
  std::vector<NodePtr> nodes;
  nodes.reserve(count);
  auto child = [&](std::uint32_t id) {
    if (id >= nodes.size()) detail::fail(MPI_ERR_OTHER, "malformed type description");
    return nodes[id];
  };
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto kind = get<std::uint8_t>(text, &at);
    const i64 off = get<i64>(text, &at);
    if (kind == static_cast<std::uint8_t>(NodeKind::dense)) {
      nodes.push_back(make_dense(off, get<i64>(text, &at)));
    } else if (kind == static_cast<std::uint8_t>(NodeKind::stream)) {
      const i64 n = get<i64>(text, &at);
      const i64 stride = get<i64>(text, &at);
      nodes.push_back(make_stream(off, n, stride, child(get<std::uint32_t>(text, &at))));
    } else if (kind == static_cast<std::uint8_t>(NodeKind::blocks)) {
      const auto n = get<std::uint32_t>(text, &at);
      if (n > text.size()) detail::fail(MPI_ERR_OTHER, "malformed type description");
      std::vector<Entry> entries;
      entries.reserve(n);
      for (std::uint32_t k = 0; k < n; ++k) {
        const i64 disp = get<i64>(text, &at);
        entries.push_back({disp, child(get<std::uint32_t>(text, &at))});
      }
      nodes.push_back(make_blocks(std::move(entries), off));
    } else {
      detail::fail(MPI_ERR_OTHER, "malformed type description");
    }
  }
  const i64 lb = get<i64>(text, &at);
  const i64 extent = get<i64>(text, &at);
  if (at != text.size()) detail::fail(MPI_ERR_OTHER, "malformed type description");
  return Type(nodes.back(), lb, extent);
}

std::uint64_t Describe::key_of(const std::vector<char>& text) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h ? h : 1;
}

namespace {
struct DescribeState {
  std::mutex mutex;
  // Sender: descriptions by type (the weak pointer tells a freed type from a new one at its address).
  struct Mine {
    std::weak_ptr<const Type> type;
    std::optional<Describe::Text> text;
  };
  std::unordered_map<const Type*, Mine> mine;
  std::set<std::pair<int, std::uint64_t>> sent;
  // Receiver: types peers described.
  std::map<std::pair<int, std::uint64_t>, std::shared_ptr<const Type>> known;
};
DescribeState& describe_state() {
  static auto* s = new DescribeState();
  return *s;
}
}  // namespace

std::optional<Describe::Text> Describe::of(const std::shared_ptr<const Type>& t) {
  DescribeState& d = describe_state();
  {
    std::lock_guard lock(d.mutex);
    auto it = d.mine.find(t.get());
    if (it != d.mine.end() && !it->second.type.expired()) return it->second.text;
  }
  std::optional<Text> text;
  std::vector<char> bytes = write(*t);
  if (bytes.size() <= kMaxBytes) {
    Text x;
    x.key = key_of(bytes);
    x.bytes = std::make_shared<const std::vector<char>>(std::move(bytes));
    text = std::move(x);
  }
  std::lock_guard lock(d.mutex);
  if (d.mine.size() > 4096) d.mine.clear();  // bounded: a lost entry costs a recomputation
  d.mine[t.get()] = DescribeState::Mine{t, text};
  return text;
}

bool Describe::unconfirmed(int dest, std::uint64_t key) {
  DescribeState& d = describe_state();
  std::lock_guard lock(d.mutex);
  return d.sent.count({dest, key}) == 0;
}

void Describe::confirm(int dest, std::uint64_t key) {
  DescribeState& d = describe_state();
  std::lock_guard lock(d.mutex);
  d.sent.insert({dest, key});
}

std::shared_ptr<const Type> Describe::known(int sender, std::uint64_t key) {
  DescribeState& d = describe_state();
  std::lock_guard lock(d.mutex);
  auto it = d.known.find({sender, key});
  return it == d.known.end() ? nullptr : it->second;
}

std::shared_ptr<const Type> Describe::learn(int sender, std::uint64_t key, const std::vector<char>& text) {
  if (key_of(text) != key) detail::fail(MPI_ERR_OTHER, "type description does not match its key");
  auto t = std::make_shared<const Type>(read(text));
  DescribeState& d = describe_state();
  std::lock_guard lock(d.mutex);
  // Kept for the job: a sender describes each type once to each receiver. (A description this
  // process no longer had would make its message go the staged way: kAckNeedData.)
  d.known[{sender, key}] = t;
  return t;
}

Describe& describe() {
  static Describe d;
  return d;
}

}  // namespace wire

// ---------------------------------------------------------------------------- communicator ranks

namespace {

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
    int n = 0;
    PMPI_Comm_size(comm, &n);
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

bool may_get_stub(i64 capacity, bool device, int source, MPI_Comm comm, bool blocking) {
  if (!wire::state().on || source == MPI_PROC_NULL || capacity <= 0) return false;
  // A stub always fits a receive into GPU memory (Ferry posts it with room for one) and a blocking
  // one of kStubBytes or more; one into too small a buffer (an erroneous program: MPI_ERR_TRUNCATE)
  // is still answered, so its sender does not hang.
  if (!device && capacity < (blocking ? kStubBytes : kStubMinBytes)) return false;
  if (source != MPI_ANY_SOURCE) return world_rank(comm, source) >= 0;
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  return !inter;
}

// ---------------------------------------------------------------------------- setup

bool protocol_on() { return wire::state().on; }
bool passthrough() { return wire::state().passthrough; }
bool pull_on() { return wire::state().on && wire::state().pull; }

bool protocol_test() {
  static const bool on = env::flag(env::Knob::protocol_test);
  return on;
}

void start_protocol() {
  wire::State& w = wire::state();
  if (w.on) return;
  // Every rank takes part in the collective setup, so all agree even where some lack a GPU.
  int want[3] = {env::flag(env::Knob::ipc) && (gpu::available() || protocol_test()) && initialized(),
                 use_passthrough(env::text(env::Knob::passthrough), mpi_cuda_aware()) && gpu::available(),
                 env::flag(env::Knob::pull)};
  PMPI_Allreduce(MPI_IN_PLACE, want, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  w.passthrough = want[1] != 0;
  w.pull = want[2] != 0;
  if (!want[0] || w.passthrough) return;  // a CUDA-aware MPI moves GPU memory itself
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
  if (flag && ub) w.tag_span = std::max(1, (*ub - 2) / 3);
  methods::init();
  w.on = true;
}

void stop_protocol() {
  wire::State& w = wire::state();
  reclaim(true);
  if (!w.on) return;
  w.on = false;  // the transport's finalize closes IPC mappings and frees the pools
  if (w.ctl != MPI_COMM_NULL) PMPI_Comm_free(&w.ctl);
}

Counters counters() {
  const wire::Stats& s = wire::stats();
  Counters c;
  c.ipc_sent = s.ipc_sent.load();
  c.ipc_received = s.ipc_received.load();
  c.local = s.local.load();
  c.pipelined = s.pipelined.load();
  c.batched = s.batched.load();
  c.batch_waits = s.batch_waits.load();
  c.pulled = s.pulled.load();
  return c;
}

}  // namespace ferry::transport
