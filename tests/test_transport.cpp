// The transport layer on the CPU build: topology (layouts given place by place, simulated NxG
// layouts, discovery over MPI), bandwidth matrices, pools, and the CUDA IPC caches against a fake
// CUDA (the export side's handle query and the import side's open/close are injected).
#include <ferry/error.hpp>
#include <ferry/transport.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace ferry::transport;
using ferry::model::Locality;

// The MPI error class of the ferry::Error `f` throws; MPI_SUCCESS when it throws nothing.
template <class F>
int error_class(F&& f) {
  try {
    f();
  } catch (const ferry::Error& e) {
    return e.mpi_error_class();
  }
  return MPI_SUCCESS;
}

// ---------------------------------------------------------------------------- topology

TEST(Topology, FromPlaces) {
  // Two nodes: node 0 has ranks 0, 1 on GPU 0 and rank 2 on GPU 1; node 1 has rank 3 without a GPU.
  const Topology t({{0, 0}, {0, 0}, {0, 1}, {1, -1}}, 2);
  EXPECT_EQ(t.size(), 4);
  EXPECT_EQ(t.self(), 2);
  EXPECT_EQ(t.nodes(), 2);
  EXPECT_EQ(t.gpus_on(0), 2);
  EXPECT_EQ(t.gpus_on(1), 0);
  EXPECT_EQ(t.ranks_on(0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(t.ranks_on(1), (std::vector<int>{3}));
  EXPECT_EQ(t.locality(0, 1), Locality::same_gpu);
  EXPECT_EQ(t.locality(1, 2), Locality::other_gpu);
  EXPECT_EQ(t.locality(2, 3), Locality::other_node);
  EXPECT_TRUE(t.same_node(0, 2));
  EXPECT_FALSE(t.same_node(0, 3));
  EXPECT_FALSE(t.simulated());
  EXPECT_EQ(t.describe(), "2 nodes, 4 ranks: node 0 ranks 0-2 on 2 GPUs; node 1 ranks 3 on 0 GPUs; bandwidth uniform");
  EXPECT_EQ(error_class([&] { t.place(4); }), MPI_ERR_RANK);
  EXPECT_EQ(error_class([&] { t.place(-1); }), MPI_ERR_RANK);
  EXPECT_EQ(error_class([&] { t.gpus_on(2); }), MPI_ERR_ARG);
}

TEST(Topology, RefusesMalformedLayouts) {
  EXPECT_EQ(error_class([] { Topology({}); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([] { Topology({{0, 0}, {2, 0}}); }), MPI_ERR_ARG) << "node 1 has no rank";
  EXPECT_EQ(error_class([] { Topology({{0, 0}, {0, 2}}); }), MPI_ERR_ARG) << "GPU 1 missing";
  EXPECT_EQ(error_class([] { Topology({{-1, 0}}); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([] { Topology({{0, -2}}); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([] { Topology({{0, 0}}, 1); }), MPI_ERR_RANK);
}

TEST(Topology, SimulatedLayoutsAssignBlocks) {
  // 8 ranks on 4 nodes of 2 GPUs: one rank per GPU.
  const Topology a = Topology::simulated(4, 2, 8);
  EXPECT_TRUE(a.simulated());
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(a.place(r).node, r / 2) << r;
    EXPECT_EQ(a.place(r).gpu, r % 2) << r;
  }
  EXPECT_EQ(a.locality(0, 1), Locality::other_gpu);
  EXPECT_EQ(a.locality(1, 2), Locality::other_node);
  // 8 ranks on 2 nodes of 2 GPUs: two ranks per GPU, in blocks.
  const Topology b = Topology::simulated(2, 2, 8, 5);
  EXPECT_EQ(b.self(), 5);
  const int gpu[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(b.place(r).node, r / 4) << r;
    EXPECT_EQ(b.place(r).gpu, gpu[r]) << r;
  }
  EXPECT_EQ(b.locality(0, 1), Locality::same_gpu);
  EXPECT_EQ(b.locality(1, 2), Locality::other_gpu);
  // 5 ranks on 2 nodes of 3 GPUs: blocks of 3 and 2; the second node uses 2 of its GPUs.
  const Topology c = Topology::simulated(2, 3, 5);
  EXPECT_EQ(c.ranks_on(0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(c.ranks_on(1), (std::vector<int>{3, 4}));
  EXPECT_EQ(c.gpus_on(0), 3);
  EXPECT_EQ(c.gpus_on(1), 2);
  // 7 ranks on 1 node of 3 GPUs: blocks of 2 or 3 ranks per GPU.
  const Topology d = Topology::simulated(1, 3, 7);
  std::map<int, int> per_gpu;
  for (int r = 0; r < 7; ++r) ++per_gpu[d.place(r).gpu];
  EXPECT_EQ(per_gpu.size(), 3u);
  for (auto [g, n] : per_gpu) EXPECT_TRUE(n == 2 || n == 3) << "GPU " << g << " has " << n;
  for (int r = 1; r < 7; ++r) EXPECT_GE(d.place(r).gpu, d.place(r - 1).gpu) << "blocks, not round robin";
  EXPECT_EQ(error_class([] { Topology::simulated(4, 1, 3); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([] { Topology::simulated(0, 1, 3); }), MPI_ERR_ARG);
  EXPECT_EQ(error_class([] { Topology::simulated(1, 0, 3); }), MPI_ERR_ARG);
}

TEST(Topology, ParsesLayouts) {
  EXPECT_EQ(Topology::parse_layout("4x2"), std::make_pair(4, 2));
  EXPECT_EQ(Topology::parse_layout("1X8"), std::make_pair(1, 8));
  for (const char* bad : {"", "4", "x2", "4x", "0x2", "4x0", "-1x2", "4x2x1", "4 x 2", "ax2", "99999999999x1"})
    EXPECT_EQ(error_class([bad] { Topology::parse_layout(bad); }), MPI_ERR_ARG) << bad;
}

// ---------------------------------------------------------------------------- bandwidth

// Summit's node: two sockets of three V100s; NVLink 50 GB/s inside a triad, the X-bus between
// (the diagonal, a GPU to itself, is read but not used).
const char* kSummit =
    "# Summit, GB/s\n"
    "900 50 50 16 16 16\n"
    "50 900 50 16 16 16   # GPU 1\n"
    "50 50 900 16 16 16\n"
    "\n"
    "16 16 16 900 50 50\n"
    "16 16 16 50 900 50\n"
    "16 16 16 50 50 900\n";

TEST(Bandwidth, ParsesAMatrix) {
  const Bandwidth b = Bandwidth::parse(kSummit, "summit");
  EXPECT_EQ(b.gpus(), 6);
  EXPECT_EQ(b.source(), "summit");
  EXPECT_EQ(b.at(0, 1), 50);
  EXPECT_EQ(b.at(1, 4), 16);
  EXPECT_EQ(b.at(5, 3), 50);
  EXPECT_EQ(b.at(0, 0), 900);
  EXPECT_EQ(b.at(6, 0), Bandwidth::kUniformGbps) << "outside the matrix";
  const Bandwidth back = Bandwidth::parse(b.to_text(), "again");
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(back.at(i, j), b.at(i, j)) << i << "," << j;
  // A simulated node of 6 GPUs, one rank each, reads it by GPU.
  const Topology t = Topology::simulated(1, 6, 6, 0, b);
  EXPECT_EQ(t.bandwidth(0, 2), 50);
  EXPECT_EQ(t.bandwidth(2, 3), 16);
  const Topology two = Topology::simulated(2, 6, 12, 0, b);
  EXPECT_EQ(two.bandwidth(0, 6), Bandwidth::kUniformGbps) << "between nodes";
}

TEST(Bandwidth, RefusesBadMatrices) {
  for (const char* bad : {"", "# nothing\n", "1 2\n3\n", "1 2\n3 4\n5 6\n", "1 -2\n3 4\n", "1 0\n3 4\n",
                          "1 x\n3 4\n", "1 2e\n3 4\n", "1 nan\n3 4\n"})
    EXPECT_EQ(error_class([bad] { Bandwidth::parse(bad, "m"); }), MPI_ERR_ARG) << bad;
  EXPECT_EQ(error_class([] { Bandwidth::load("/nonexistent/ferry-bandwidth.txt"); }), MPI_ERR_FILE);
  const Bandwidth u = Bandwidth::uniform(3, 25);
  EXPECT_EQ(u.gpus(), 3);
  EXPECT_EQ(u.at(1, 2), 25);
  EXPECT_EQ(u.source(), "uniform");
  EXPECT_EQ(error_class([] { Bandwidth::uniform(-1); }), MPI_ERR_ARG);
#if !FERRY_HAVE_CUDA
  EXPECT_EQ(error_class([] { Bandwidth::measure(); }), MPI_ERR_OTHER);
#endif
}

// ---------------------------------------------------------------------------- discovery

// Sets an environment variable on every rank for one scope.
struct Env {
  const char* name;
  Env(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~Env() { unsetenv(name); }
};

TEST(Topology, DiscoversThisMachine) {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const Topology t = Topology::discover(MPI_COMM_WORLD);
  EXPECT_EQ(t.size(), n);
  EXPECT_EQ(t.self(), rank);
  EXPECT_FALSE(t.simulated());
  // Every rank sees the same layout.
  std::vector<int> nodes(static_cast<std::size_t>(n)), mine(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) mine[static_cast<std::size_t>(r)] = t.place(r).node;
  MPI_Allreduce(mine.data(), nodes.data(), n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(nodes, mine);
  EXPECT_EQ(t.place(0).node, 0) << "nodes are numbered from rank 0's";
#if !FERRY_HAVE_CUDA
  for (int r = 0; r < n; ++r) EXPECT_EQ(t.place(r).gpu, -1) << "no GPU in this build";
#endif
}

TEST(Topology, DiscoversASimulatedLayout) {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const Env layout("FERRY_TOPOLOGY", "2x2");
  const std::string path = "/tmp/ferry-test-bandwidth-" + std::to_string(rank) + ".txt";
  {
    std::ofstream out(path);
    out << "100 40\n40 100\n";
  }
  const Env matrix("FERRY_BANDWIDTH", path.c_str());
  const Topology t = Topology::discover(MPI_COMM_WORLD);
  std::remove(path.c_str());
  if (n < 2) {
    EXPECT_FALSE(t.simulated()) << "2 nodes need 2 ranks: the machine's layout";
    return;
  }
  EXPECT_TRUE(t.simulated());
  EXPECT_EQ(t.nodes(), 2);
  const Topology want = Topology::simulated(2, 2, n, rank);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(t.place(r).node, want.place(r).node) << r;
    EXPECT_EQ(t.place(r).gpu, want.place(r).gpu) << r;
  }
  EXPECT_EQ(t.bandwidth().source(), path);
  EXPECT_EQ(t.bandwidth().at(0, 1), 40);
}

TEST(Transport, WorldAndNodeCommunicator) {
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  EXPECT_EQ(error_class([] { world(); }), initialized() ? MPI_SUCCESS : MPI_ERR_OTHER);
  init();
  init();  // once
  ASSERT_TRUE(initialized());
  const Topology& t = world();
  EXPECT_EQ(t.size(), n);
  int node_size = 0;
  ASSERT_NE(node_comm(), MPI_COMM_NULL);
  MPI_Comm_size(node_comm(), &node_size);
  EXPECT_EQ(node_size, static_cast<int>(t.ranks_on(t.place(rank).node).size()));
  const int peer = (rank + 1) % n;
  EXPECT_EQ(gpu_of(peer), t.place(peer).key);
  learn_gpu(peer, 0x1234);
  EXPECT_EQ(gpu_of(peer), 0x1234u);
  learn_gpu(peer, 0);  // "not known" never overwrites what was learned
  EXPECT_EQ(gpu_of(peer), 0x1234u);
  learn_gpu(n + 5, 7);  // ignored
  EXPECT_EQ(gpu_of(n + 5), 0u);
  EXPECT_EQ(locality(peer, -1), t.same_node(peer, rank) ? Locality::other_gpu : Locality::other_node);
  EXPECT_EQ(error_class([n] { locality(n, 0); }), MPI_ERR_RANK);
  finalize();
  EXPECT_FALSE(initialized());
  EXPECT_EQ(node_comm(), MPI_COMM_NULL);
}

// ---------------------------------------------------------------------------- pools

TEST(Pool, ReusesSizeClasses) {
  std::map<void*, long> live;
  long allocs = 0, frees = 0;
  Pool pool(
      [&](ferry::i64 bytes) {
        ++allocs;
        void* p = std::malloc(static_cast<std::size_t>(bytes));
        live[p] = bytes;
        return p;
      },
      [&](void* p) {
        ++frees;
        live.erase(p);
        std::free(p);
      });
  EXPECT_EQ(Pool::size_class(0), 4096);
  EXPECT_EQ(Pool::size_class(4097), 8192);
  EXPECT_EQ(Pool::size_class(1 << 20), 1 << 20);
  void* a = pool.get(100);
  void* b = pool.get(5000);
  EXPECT_EQ(live.at(a), 4096);
  EXPECT_EQ(live.at(b), 8192);
  EXPECT_EQ(pool.held(), 4096 + 8192);
  EXPECT_TRUE(pool.put(a));
  EXPECT_EQ(pool.get(4000), a) << "the class's kept buffer";
  EXPECT_EQ(allocs, 2);
  int local = 0;
  EXPECT_FALSE(pool.put(&local)) << "not the pool's";
  EXPECT_TRUE(pool.put(nullptr));
  {
    Buffer scoped(pool, 6000);
    EXPECT_NE(scoped.get(), b) << "b is in use";
  }
  void* c = pool.get(6000);  // the scoped buffer came back
  EXPECT_EQ(allocs, 3);
  pool.put(b);
  pool.put(c);
  EXPECT_EQ(error_class([&] { pool.get(-1); }), MPI_ERR_ARG);
  pool.release_all();
  EXPECT_EQ(frees, 3);
  EXPECT_TRUE(live.empty());
  EXPECT_EQ(pool.held(), 0);
}

TEST(Pool, PinnedPoolWithoutAGpuIsHostMemory) {
  Buffer buf(pinned_pool(), 10000);
  std::vector<char> want(10000, 'x');
  std::memcpy(buf.get(), want.data(), want.size());
  EXPECT_EQ(std::memcmp(buf.get(), want.data(), want.size()), 0);
#if !FERRY_HAVE_CUDA
  EXPECT_EQ(error_class([] { device_pool(0); }), MPI_ERR_OTHER);
#endif
}

// ---------------------------------------------------------------------------- IPC export

IpcHandle handle_of(int n) {
  IpcHandle h{};
  std::snprintf(h.bytes, sizeof h.bytes, "handle-%d", n);
  return h;
}

ferry::gpu::Allocation device_allocation(std::uintptr_t base, ferry::i64 size, unsigned long long id) {
  return {ferry::gpu::Memory::device, reinterpret_cast<void*>(base), size, id, 0};
}

TEST(Exports, CachedPerAllocation) {
  int asked = 0;
  std::set<std::uintptr_t> refuse;  // allocations without a handle
  Exports ex([&](void* base, IpcHandle* out) {
    ++asked;
    if (refuse.count(reinterpret_cast<std::uintptr_t>(base))) return false;
    *out = handle_of(asked);
    return true;
  });
  const auto a = device_allocation(0x10000, 4096, 7);
  Export e;
  ASSERT_TRUE(ex.of(a, reinterpret_cast<void*>(0x10100), &e));
  EXPECT_EQ(std::string(e.handle.bytes), "handle-1");
  EXPECT_EQ(e.base, 0x10000u);
  EXPECT_EQ(e.offset, 0x100);
  EXPECT_EQ(e.id, 7u);
  ASSERT_TRUE(ex.of(a, reinterpret_cast<void*>(0x10000), &e));
  EXPECT_EQ(asked, 1) << "asked once per allocation";
  EXPECT_EQ(e.offset, 0);
  // Freed and allocated again at the same address: a new id, a new handle.
  const auto again = device_allocation(0x10000, 8192, 8);
  ASSERT_TRUE(ex.of(again, reinterpret_cast<void*>(0x11000), &e));
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(std::string(e.handle.bytes), "handle-2");
  EXPECT_EQ(e.id, 8u);
  // Memory without a handle is remembered as such.
  refuse.insert(0x40000);
  const auto pool_memory = device_allocation(0x40000, 4096, 9);
  EXPECT_FALSE(ex.of(pool_memory, reinterpret_cast<void*>(0x40000), &e));
  EXPECT_FALSE(ex.of(pool_memory, reinterpret_cast<void*>(0x40010), &e));
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(ex.size(), 2u);
  // Host memory never has one; a pointer outside the allocation is a caller's bug.
  const ferry::gpu::Allocation host{ferry::gpu::Memory::host, nullptr, 0, 0, -1};
  int x = 0;
  EXPECT_FALSE(ex.of(host, &x, &e));
  EXPECT_EQ(error_class([&] { ex.of(a, reinterpret_cast<void*>(0x20000), &e); }), MPI_ERR_ARG);
  ex.clear();
  EXPECT_EQ(ex.size(), 0u);
  EXPECT_FALSE(export_pointer(&x, &e)) << "host memory (and no GPU in CPU builds)";
}

// ---------------------------------------------------------------------------- IPC import

// A fake CUDA: each open maps a handle at a new address, unless the test says this process has
// it mapped already or the open fails; every mapping must be closed exactly once.
struct FakeCuda {
  std::map<std::string, IpcCache::Status> verdict;  // by handle text; default ok
  // The driver block of a handle (default: its own): a handle is refused as already mapped while
  // another handle of its block is mapped, as the driver does for small allocations sharing one.
  std::map<std::string, int> block;
  std::map<void*, int> mapped;  // address -> block
  int opens = 0, closes = 0, bad_closes = 0, blocks = 1000;
  std::uintptr_t next = 0x7000000;
  IpcCache make(std::size_t capacity) {
    return IpcCache(
        [this](const IpcHandle& h, void** out) {
          auto it = verdict.find(h.bytes);
          if (it != verdict.end() && it->second != IpcCache::Status::ok) return it->second;
          auto b = block.find(h.bytes);
          const int blk = b != block.end() ? b->second : ++blocks;
          for (const auto& [p, other] : mapped)
            if (other == blk) return IpcCache::Status::already_mapped;
          ++opens;
          *out = reinterpret_cast<void*>(next += 0x100000);
          mapped[*out] = blk;
          return IpcCache::Status::ok;
        },
        [this](void* p) {
          ++closes;
          if (!mapped.erase(p)) ++bad_closes;
        },
        capacity);
  }
};

TEST(IpcCache, HitsAndInvalidation) {
  FakeCuda cuda;
  IpcCache cache = cuda.make(8);
  void* first = nullptr;
  {
    auto a = cache.open(1, 0x1000, 10, handle_of(1));
    ASSERT_TRUE(a);
    first = a.get();
    auto b = cache.open(1, 0x1000, 10, handle_of(1));  // the same allocation, in use twice
    EXPECT_EQ(b.get(), first);
  }
  EXPECT_EQ(cuda.opens, 1);
  {
    auto again = cache.open(1, 0x1000, 10, handle_of(1));
    EXPECT_EQ(again.get(), first) << "kept for reuse";
  }
  auto other_peer = cache.open(2, 0x1000, 10, handle_of(2));
  EXPECT_NE(other_peer.get(), first) << "another peer's allocation at the same address";
  EXPECT_EQ(cuda.opens, 2);
  // Peer 1 freed its allocation and made another at the same address: the old mapping closes.
  auto fresh = cache.open(1, 0x1000, 11, handle_of(3));
  ASSERT_TRUE(fresh);
  EXPECT_EQ(cuda.opens, 3);
  EXPECT_EQ(cuda.closes, 1);
  EXPECT_EQ(cuda.mapped.count(first), 0u);
  EXPECT_EQ(cache.mapped(), 2u);
  const auto st = cache.stats();
  EXPECT_EQ(st.opens, 3);
  EXPECT_EQ(st.hits, 2);
  EXPECT_EQ(st.closes, 1);
  EXPECT_EQ(cuda.bad_closes, 0);
}

TEST(IpcCache, MappingsInUseOutliveInvalidation) {
  FakeCuda cuda;
  IpcCache cache = cuda.make(8);
  auto old = cache.open(1, 0x1000, 10, handle_of(1));
  void* p = old.get();
  auto fresh = cache.open(1, 0x1000, 11, handle_of(2));  // replaced while `old` is in use
  EXPECT_EQ(cuda.closes, 0) << "not closed under a message that still reads it";
  EXPECT_EQ(cuda.mapped.count(p), 1u);
  old = IpcCache::Lease();  // its message is done
  EXPECT_EQ(cuda.closes, 1);
  EXPECT_EQ(cuda.mapped.count(p), 0u);
  EXPECT_EQ(cache.mapped(), 1u);
}

TEST(IpcCache, EvictsTheLeastRecentlyUsedUnusedMapping) {
  FakeCuda cuda;
  IpcCache cache = cuda.make(2);
  void* m1 = cache.open(1, 0x1000, 1, handle_of(1)).get();
  void* m2 = cache.open(1, 0x2000, 2, handle_of(2)).get();
  cache.open(1, 0x1000, 1, handle_of(1));  // m1 used last
  auto held = cache.open(1, 0x3000, 3, handle_of(3));
  EXPECT_EQ(cuda.mapped.count(m2), 0u) << "m2 was the least recently used";
  EXPECT_EQ(cuda.mapped.count(m1), 1u);
  // Every mapping in use: the cache grows past its capacity rather than close one.
  auto a = cache.open(1, 0x1000, 1, handle_of(1));
  auto b = cache.open(1, 0x4000, 4, handle_of(4));
  EXPECT_EQ(cache.mapped(), 3u);
  a = IpcCache::Lease();
  EXPECT_EQ(cache.mapped(), 2u) << "back to capacity once one is free";
  EXPECT_EQ(cuda.bad_closes, 0);
}

TEST(IpcCache, CapacityZeroClosesAfterEachMessage) {
  FakeCuda cuda;
  IpcCache cache = cuda.make(0);
  {
    auto a = cache.open(1, 0x1000, 1, handle_of(1));
    ASSERT_TRUE(a);
    EXPECT_EQ(cache.mapped(), 1u);
  }
  EXPECT_EQ(cache.mapped(), 0u);
  EXPECT_EQ(cuda.closes, 1);
  cache.open(1, 0x1000, 1, handle_of(1));
  EXPECT_EQ(cuda.opens, 2);
  EXPECT_EQ(cuda.closes, 2);
}

// The peer freed an allocation this cache still holds mapped (kept after its message) and made a
// new one in the same driver block, at another address: the driver refuses the new handle as
// already mapped until the stale mapping is closed. The cache closes the peer's unused mappings
// and maps the new one; a block mapping in use is not closed, and its refusal is answered.
TEST(IpcCache, StaleMappingsOfThePeerGiveWayToItsNewAllocations) {
  FakeCuda cuda;
  cuda.block["handle-1"] = cuda.block["handle-2"] = cuda.block["handle-3"] = 7;
  IpcCache cache = cuda.make(8);
  { EXPECT_TRUE(cache.open(1, 0x1000, 10, handle_of(1))); }  // kept mapped after its message
  auto other_peer = cache.open(2, 0x5000, 1, handle_of(4));    // another peer's: left alone
  ASSERT_TRUE(other_peer);
  EXPECT_EQ(cache.mapped(), 2u);
  auto fresh = cache.open(1, 0x3000, 11, handle_of(2));
  ASSERT_TRUE(fresh) << "the stale mapping of block 7 was closed and the new handle opened";
  EXPECT_EQ(fresh.status(), IpcCache::Status::ok);
  EXPECT_EQ(cache.mapped(), 2u);
  EXPECT_EQ(cuda.closes, 1);
  // Block 7 is now in use by `fresh`: a third allocation in it is refused, nothing in use closed.
  auto third = cache.open(1, 0x4000, 12, handle_of(3));
  EXPECT_FALSE(third);
  EXPECT_EQ(third.status(), IpcCache::Status::already_mapped);
  EXPECT_TRUE(fresh.get() != nullptr && other_peer.get() != nullptr);
  EXPECT_EQ(cache.mapped(), 2u);
  EXPECT_EQ(cuda.bad_closes, 0);
}

TEST(IpcCache, AllocationsMappedElsewhereAreRememberedUntilTheyChange) {
  FakeCuda cuda;
  cuda.verdict["handle-1"] = IpcCache::Status::already_mapped;  // the application opened it itself
  cuda.verdict["handle-2"] = IpcCache::Status::failed;
  IpcCache cache = cuda.make(8);
  for (int i = 0; i < 3; ++i) {
    auto l = cache.open(1, 0x1000, 10, handle_of(1));
    EXPECT_FALSE(l);
    EXPECT_EQ(l.status(), IpcCache::Status::already_mapped);
  }
  EXPECT_EQ(cache.stats().already_mapped, 3);
  EXPECT_EQ(cache.mapped(), 0u);
  // A new allocation at that address is tried again.
  auto fresh = cache.open(1, 0x1000, 11, handle_of(5));
  EXPECT_TRUE(fresh);
  // A failure is not remembered: the next message tries again.
  EXPECT_EQ(cache.open(1, 0x9000, 1, handle_of(2)).status(), IpcCache::Status::failed);
  cuda.verdict.erase("handle-2");
  EXPECT_TRUE(cache.open(1, 0x9000, 1, handle_of(2)));
  EXPECT_EQ(cache.stats().failures, 1);
}

TEST(IpcCache, CloseAllWaitsForLeases) {
  FakeCuda cuda;
  IpcCache cache = cuda.make(8);
  cache.open(1, 0x1000, 1, handle_of(1));
  auto held = cache.open(2, 0x1000, 1, handle_of(2));
  cache.close_all();
  EXPECT_EQ(cuda.closes, 1);
  EXPECT_EQ(cuda.mapped.size(), 1u) << "in use";
  held = IpcCache::Lease();
  EXPECT_EQ(cuda.closes, 2);
  EXPECT_TRUE(cuda.mapped.empty());
  EXPECT_EQ(cache.mapped(), 0u);
  EXPECT_EQ(cuda.bad_closes, 0);
}

}  // namespace
