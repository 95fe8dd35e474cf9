// Topology: places of ranks, simulated layouts, discovery over MPI (PMPI only), the bandwidth
// matrix, and the process's world (transport.hpp says what each promises).
#include <ferry/transport.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "gpu/runtime.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::transport {

using detail::fail;
namespace env = detail::env;

// ---------------------------------------------------------------------------- Bandwidth

Bandwidth Bandwidth::uniform(int gpus, double gbps) {
  if (gpus < 0 || !(gbps > 0)) fail(MPI_ERR_ARG, "uniform bandwidth: bad GPU count or rate");
  Bandwidth b;
  b.n_ = gpus;
  b.gbps_.assign(static_cast<std::size_t>(gpus) * static_cast<std::size_t>(gpus), gbps);
  return b;
}

Bandwidth Bandwidth::parse(const std::string& text, const std::string& origin) {
  std::vector<std::vector<double>> rows;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::vector<double> row;
    std::string field;
    while (fields >> field) {
      std::size_t used = 0;
      double v = 0;
      try {
        v = std::stod(field, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != field.size() || !(v > 0) || v > 1e9)
        fail(MPI_ERR_ARG, origin + ":" + std::to_string(lineno) + ": '" + field +
                              "' is not a positive bandwidth in GB/s");
      row.push_back(v);
    }
    if (!row.empty()) rows.push_back(std::move(row));
  }
  const std::size_t n = rows.size();
  for (std::size_t i = 0; i < n; ++i)
    if (rows[i].size() != n)
      fail(MPI_ERR_ARG, origin + ": the bandwidth matrix must be square: row " + std::to_string(i) + " has " +
                            std::to_string(rows[i].size()) + " entries, there are " + std::to_string(n) + " rows");
  if (n == 0) fail(MPI_ERR_ARG, origin + ": no bandwidth matrix (one row of GB/s per GPU)");
  Bandwidth b;
  b.n_ = static_cast<int>(n);
  for (const auto& r : rows) b.gbps_.insert(b.gbps_.end(), r.begin(), r.end());
  b.source_ = origin;
  return b;
}

Bandwidth Bandwidth::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(MPI_ERR_FILE, "cannot read the bandwidth matrix " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

Bandwidth Bandwidth::measure() {
  const int n = gpu::device_count();
  if (n == 0) fail(MPI_ERR_OTHER, "measuring GPU bandwidth needs a GPU");
  constexpr i64 kBytes = i64{64} << 20;
  constexpr int kReps = 5;
  Bandwidth b = uniform(n);
  std::vector<void*> bufs(static_cast<std::size_t>(n), nullptr);
  auto free_all = [&] {
    for (int d = 0; d < n; ++d) {
      if (!bufs[static_cast<std::size_t>(d)]) continue;
      gpu::DeviceScope on(d);
      gpu::free_device(bufs[static_cast<std::size_t>(d)]);
    }
  };
  try {
    for (int d = 0; d < n; ++d) {
      gpu::DeviceScope on(d);
      bufs[static_cast<std::size_t>(d)] = gpu::alloc_device(kBytes);
      for (int p = 0; p < n; ++p)
        if (p != d && gpu::can_access_peer(d, p)) gpu::enable_peer_access(p);
    }
    for (int from = 0; from < n; ++from) {
      for (int to = 0; to < n; ++to) {
        if (from == to) continue;
        gpu::DeviceScope on(from);
        gpu::Stream s = gpu::create_stream();
        gpu::Event start = gpu::create_event(true), stop = gpu::create_event(true);
        float best = 0;
        for (int r = 0; r <= kReps; ++r) {  // the first is a warm-up
          gpu::record(start, s);
          gpu::copy_peer_async(bufs[static_cast<std::size_t>(to)], to, bufs[static_cast<std::size_t>(from)],
                               from, kBytes, s);
          gpu::record(stop, s);
          gpu::sync_event(stop);
          const float ms = gpu::elapsed_ms(start, stop);
          if (r > 0 && (best == 0 || ms < best)) best = ms;
        }
        gpu::destroy_event(start);
        gpu::destroy_event(stop);
        gpu::destroy_stream(s);
        b.gbps_[static_cast<std::size_t>(from * n + to)] = best > 0 ? static_cast<double>(kBytes) / (best * 1e6) : kUniformGbps;
      }
    }
  } catch (...) {
    free_all();
    throw;
  }
  free_all();
  b.source_ = "measured";
  return b;
}

double Bandwidth::at(int from, int to) const {
  if (from < 0 || to < 0 || from >= n_ || to >= n_) return kUniformGbps;
  return gbps_[static_cast<std::size_t>(from * n_ + to)];
}

std::string Bandwidth::to_text() const {
  std::ostringstream out;
  out << "# GPU-to-GPU bandwidth in GB/s (row: from, column: to), " << source_ << "\n";
  for (int i = 0; i < n_; ++i) {
    for (int j = 0; j < n_; ++j) out << (j ? " " : "") << at(i, j);
    out << "\n";
  }
  return out.str();
}

// ---------------------------------------------------------------------------- Topology

Topology::Topology(std::vector<Place> places, int self, Bandwidth bandwidth)
    : places_(std::move(places)), self_(self), bandwidth_(std::move(bandwidth)) {
  if (places_.empty()) fail(MPI_ERR_ARG, "topology: no ranks");
  if (self < 0 || self >= size()) fail(MPI_ERR_RANK, "topology: self " + std::to_string(self) + " is not a rank");
  int top = -1;
  for (const Place& p : places_) {
    if (p.node < 0) fail(MPI_ERR_ARG, "topology: negative node index");
    top = std::max(top, p.node);
  }
  nodes_ = top + 1;
  std::vector<bool> used(static_cast<std::size_t>(nodes_), false);
  gpus_.assign(static_cast<std::size_t>(nodes_), 0);
  std::vector<std::vector<bool>> gpu_used(static_cast<std::size_t>(nodes_));
  for (const Place& p : places_) {
    used[static_cast<std::size_t>(p.node)] = true;
    if (p.gpu < -1) fail(MPI_ERR_ARG, "topology: GPU index below -1");
    auto& g = gpu_used[static_cast<std::size_t>(p.node)];
    if (p.gpu >= 0) {
      if (static_cast<std::size_t>(p.gpu) >= g.size()) g.resize(static_cast<std::size_t>(p.gpu) + 1, false);
      g[static_cast<std::size_t>(p.gpu)] = true;
    }
  }
  for (int n = 0; n < nodes_; ++n) {
    if (!used[static_cast<std::size_t>(n)])
      fail(MPI_ERR_ARG, "topology: node " + std::to_string(n) + " has no rank (nodes are numbered 0..N-1)");
    const auto& g = gpu_used[static_cast<std::size_t>(n)];
    if (std::find(g.begin(), g.end(), false) != g.end())
      fail(MPI_ERR_ARG, "topology: node " + std::to_string(n) + "'s GPUs are not numbered 0..G-1");
    gpus_[static_cast<std::size_t>(n)] = static_cast<int>(g.size());
  }
}

Topology Topology::simulated(int nodes, int gpus, int ranks, int self, Bandwidth bandwidth) {
  if (nodes < 1 || gpus < 1 || ranks < 1)
    fail(MPI_ERR_ARG, "simulated topology: nodes, GPUs and ranks must be at least 1");
  if (ranks < nodes)
    fail(MPI_ERR_ARG, "simulated topology: " + std::to_string(ranks) + " ranks cannot fill " +
                          std::to_string(nodes) + " nodes");
  std::vector<Place> places(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) places[static_cast<std::size_t>(r)].node = static_cast<int>(i64{r} * nodes / ranks);
  for (int n = 0; n < nodes; ++n) {
    std::vector<int> on;
    for (int r = 0; r < ranks; ++r)
      if (places[static_cast<std::size_t>(r)].node == n) on.push_back(r);
    const int k = static_cast<int>(on.size());
    // Fewer ranks than GPUs: the first k GPUs, one rank each (GPU indices stay 0..k-1).
    for (int i = 0; i < k; ++i)
      places[static_cast<std::size_t>(on[static_cast<std::size_t>(i)])].gpu =
          k <= gpus ? i : static_cast<int>(i64{i} * gpus / k);
  }
  Topology t(std::move(places), self, std::move(bandwidth));
  t.simulated_ = true;
  return t;
}

std::pair<int, int> Topology::parse_layout(const std::string& text) {
  const std::size_t x = text.find_first_of("xX");
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 7 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (x != std::string::npos && digits(text.substr(0, x)) && digits(text.substr(x + 1))) {
    const int n = std::stoi(text.substr(0, x)), g = std::stoi(text.substr(x + 1));
    if (n >= 1 && g >= 1) return {n, g};
  }
  fail(MPI_ERR_ARG, "'" + text + "' is not a layout NxG (N nodes of G GPUs, e.g. 4x2)");
}

const Place& Topology::place(int rank) const {
  if (rank < 0 || rank >= size()) fail(MPI_ERR_RANK, "topology: no rank " + std::to_string(rank));
  return places_[static_cast<std::size_t>(rank)];
}

int Topology::gpus_on(int node) const {
  if (node < 0 || node >= nodes_) fail(MPI_ERR_ARG, "topology: no node " + std::to_string(node));
  return gpus_[static_cast<std::size_t>(node)];
}

std::vector<int> Topology::ranks_on(int node) const {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r)
    if (places_[static_cast<std::size_t>(r)].node == node) out.push_back(r);
  return out;
}

model::Locality Topology::locality(int a, int b) const {
  const Place& pa = place(a);
  const Place& pb = place(b);
  if (pa.node != pb.node) return model::Locality::other_node;
  return pa.gpu >= 0 && pa.gpu == pb.gpu ? model::Locality::same_gpu : model::Locality::other_gpu;
}

double Topology::bandwidth(int a, int b) const {
  const Place& pa = place(a);
  const Place& pb = place(b);
  if (pa.node != pb.node) return Bandwidth::kUniformGbps;
  return bandwidth_.at(pa.gpu, pb.gpu);
}

std::string Topology::describe() const {
  std::ostringstream out;
  out << nodes_ << (nodes_ == 1 ? " node" : " nodes");
  if (simulated_) out << " (simulated)";
  out << ", " << size() << (size() == 1 ? " rank" : " ranks") << ":";
  for (int n = 0; n < nodes_; ++n) {
    out << (n ? ";" : "") << " node " << n << " ranks";
    const auto rs = ranks_on(n);
    for (std::size_t i = 0; i < rs.size(); ++i) {
      // Runs of consecutive ranks as a-b.
      std::size_t j = i;
      while (j + 1 < rs.size() && rs[j + 1] == rs[j] + 1) ++j;
      out << (i ? "," : " ") << rs[i];
      if (j > i) out << "-" << rs[j];
      i = j;
    }
    out << " on " << gpus_on(n) << (gpus_on(n) == 1 ? " GPU" : " GPUs");
  }
  out << "; bandwidth " << bandwidth_.source();
  return out.str();
}

namespace {

// FERRY_BANDWIDTH's matrix, else uniform; a bad file is reported and the uniform one used (this
// runs inside MPI_Init).
Bandwidth bandwidth_from_environment(int gpus) {
  const std::string path = env::text(env::Knob::bandwidth);
  if (!path.empty()) {
    try {
      return Bandwidth::load(path);
    } catch (const Error& e) {
      std::fprintf(stderr, "ferry: FERRY_BANDWIDTH: %s; using uniform links\n", e.what());
    }
  }
  return Bandwidth::uniform(std::max(gpus, 0));
}

}  // namespace

Topology Topology::discover(MPI_Comm comm) {
  int rank = 0, n = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &n);
  const std::uint64_t mine = gpu::device_key(gpu::context_device());
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(n), 0);
  PMPI_Allgather(&mine, 1, MPI_UINT64_T, keys.data(), 1, MPI_UINT64_T, comm);

  // FERRY_TOPOLOGY: a simulated layout; every rank reads the same variable (mpiexec exports it).
  if (const std::string layout = env::text(env::Knob::topology); !layout.empty()) {
    const auto [nodes, gpus] = parse_layout(layout);
    if (n >= nodes) {
      Topology t = simulated(nodes, gpus, n, rank, bandwidth_from_environment(gpus));
      for (int r = 0; r < n; ++r) t.places_[static_cast<std::size_t>(r)].key = keys[static_cast<std::size_t>(r)];
      return t;
    }
    if (rank == 0)
      std::fprintf(stderr, "ferry: FERRY_TOPOLOGY=%s needs at least %d ranks, there are %d; using the machine's\n",
                   layout.c_str(), nodes, n);
  }

  // Nodes: the processes that share memory, named by their lowest rank.
  MPI_Comm node;
  PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int leader = rank;
  PMPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, node);
  PMPI_Comm_free(&node);
  std::vector<int> leaders(static_cast<std::size_t>(n), 0);
  PMPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm);

  std::vector<Place> places(static_cast<std::size_t>(n));
  std::map<int, int> node_index;            // leader -> node number, in order of lowest rank
  std::map<std::pair<int, std::uint64_t>, int> gpu_index;  // (node, key) -> GPU number
  std::vector<int> gpus_of_node;
  for (int r = 0; r < n; ++r) {
    const auto [it, fresh] = node_index.emplace(leaders[static_cast<std::size_t>(r)], static_cast<int>(node_index.size()));
    if (fresh) gpus_of_node.push_back(0);
    Place& p = places[static_cast<std::size_t>(r)];
    p.node = it->second;
    p.key = keys[static_cast<std::size_t>(r)];
    if (p.key == 0) continue;
    // GPUs numbered on each node in the order of the first rank that uses each.
    const auto [g, new_gpu] = gpu_index.emplace(std::make_pair(p.node, p.key), gpus_of_node[static_cast<std::size_t>(p.node)]);
    if (new_gpu) ++gpus_of_node[static_cast<std::size_t>(p.node)];
    p.gpu = g->second;
  }
  const int most = gpus_of_node.empty() ? 0 : *std::max_element(gpus_of_node.begin(), gpus_of_node.end());
  return Topology(std::move(places), rank, bandwidth_from_environment(most));
}

// ---------------------------------------------------------------------------- the world

namespace {

struct World {
  std::mutex mutex;
  std::atomic<bool> on{false};
  std::unique_ptr<Topology> topology;
  MPI_Comm node = MPI_COMM_NULL;
  std::unique_ptr<std::atomic<std::uint64_t>[]> gpu;  // per world rank: device_key, 0 unknown
  int size = 0;
};
World& the_world() {
  static auto* w = new World();  // never destroyed: used until the process exits
  return *w;
}

}  // namespace

void init() {
  World& w = the_world();
  std::lock_guard lock(w.mutex);
  if (w.on.load()) return;
  auto t = std::make_unique<Topology>(Topology::discover(MPI_COMM_WORLD));
  PMPI_Comm_split(MPI_COMM_WORLD, t->place(t->self()).node, t->self(), &w.node);
  w.size = t->size();
  w.gpu = std::make_unique<std::atomic<std::uint64_t>[]>(static_cast<std::size_t>(w.size));
  for (int r = 0; r < w.size; ++r) w.gpu[static_cast<std::size_t>(r)].store(t->place(r).key);
  w.topology = std::move(t);
  w.on.store(true);
}

void finalize() {
  World& w = the_world();
  std::lock_guard lock(w.mutex);
  if (!w.on.load()) return;
  ipc_cache().close_all();
  exports().clear();
  pinned_pool().release_all();
  for (int d = 0; d < gpu::device_count(); ++d) device_pool(d).release_all();
  if (w.node != MPI_COMM_NULL) PMPI_Comm_free(&w.node);
  w.on.store(false);
}

bool initialized() { return the_world().on.load(); }

const Topology& world() {
  World& w = the_world();
  if (!w.on.load()) fail(MPI_ERR_OTHER, "the transport is not initialized (MPI_Init, or ferry::transport::init)");
  return *w.topology;
}

MPI_Comm node_comm() {
  World& w = the_world();
  return w.on.load() ? w.node : MPI_COMM_NULL;
}

void learn_gpu(int rank, std::uint64_t key) noexcept {
  World& w = the_world();
  if (!w.on.load() || rank < 0 || rank >= w.size || key == 0) return;
  w.gpu[static_cast<std::size_t>(rank)].store(key, std::memory_order_relaxed);
}

std::uint64_t gpu_of(int rank) noexcept {
  World& w = the_world();
  if (!w.on.load() || rank < 0 || rank >= w.size) return 0;
  return w.gpu[static_cast<std::size_t>(rank)].load(std::memory_order_relaxed);
}

model::Locality locality(int peer, int device) {
  const Topology& t = world();
  if (!t.same_node(peer, t.self())) return model::Locality::other_node;
  const std::uint64_t theirs = gpu_of(peer);
  return theirs != 0 && theirs == gpu::device_key(device) ? model::Locality::same_gpu
                                                          : model::Locality::other_gpu;
}

}  // namespace ferry::transport
