// The GPU layer (src/gpu/runtime.hpp) and the transport's GPU parts on a real GPU: devices, memory,
// copies, events, priority streams, stream memory operations (wait/write a flag), graph capture,
// errors naming the caller, device pools, IPC export, and, between two ranks (pairs 0-1, 2-3, on
// one GPU under MPS or on two), the IPC import cache: hits, a peer's new allocation, IPC events,
// and an allocation this process has mapped itself already (ucx#3192). Skipped without a GPU.
#include <ferry/error.hpp>
#include <ferry/transport.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu/runtime.hpp"
#include "mpi_pairs.hpp"

namespace {

namespace gpu = ferry::gpu;
namespace transport = ferry::transport;

template <class F>
int error_class(F&& f, std::string* what = nullptr) {
  try {
    f();
  } catch (const ferry::Error& e) {
    if (what) *what = e.what();
    return e.mpi_error_class();
  }
  return MPI_SUCCESS;
}

std::vector<unsigned char> pattern(std::size_t n, int seed) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>((i * 131 + static_cast<std::size_t>(seed) * 7) % 251);
  return v;
}

class GpuRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    gpu::set_device(rank % gpu::device_count());
  }
};

TEST_F(GpuRuntime, Devices) {
  ASSERT_GE(gpu::device_count(), 1);
  const int d = gpu::this_device();
  EXPECT_EQ(d, gpu::current_device());
  const gpu::DeviceInfo& info = gpu::device_info(d);
  EXPECT_EQ(info.ordinal, d);
  EXPECT_GT(info.sms, 0);
  EXPECT_GE(info.major, 7);
  EXPECT_GT(info.memory, 0);
  EXPECT_FALSE(info.name.empty());
  EXPECT_EQ(info.key, gpu::device_key(d));
  EXPECT_NE(info.key, 0u);
  EXPECT_EQ(error_class([] { gpu::device_info(gpu::device_count()); }), MPI_ERR_OTHER);
  {
    gpu::DeviceScope on(gpu::device_count() - 1);
    EXPECT_EQ(gpu::this_device(), gpu::device_count() - 1);
  }
  EXPECT_EQ(gpu::this_device(), d) << "DeviceScope restores the device";
}

TEST_F(GpuRuntime, CopiesBetweenEveryMemory) {
  constexpr std::size_t n = (1 << 20) + 12345;
  const auto want = pattern(n, 1);
  void* pinned = gpu::alloc_pinned(static_cast<ferry::i64>(n));
  void* a = gpu::alloc_device(static_cast<ferry::i64>(n));
  void* b = gpu::alloc_device(static_cast<ferry::i64>(n));
  std::vector<unsigned char> registered(n, 0);
  gpu::register_host(registered.data(), static_cast<ferry::i64>(n));
  EXPECT_EQ(gpu::memory_of(registered.data()), gpu::Memory::pinned_host);
  gpu::Stream s = gpu::create_stream();
  std::memcpy(pinned, want.data(), n);
  gpu::copy_h2d_async(a, pinned, static_cast<ferry::i64>(n), s);
  gpu::copy_d2d_async(b, a, static_cast<ferry::i64>(n), s);
  const int d = gpu::this_device();
  gpu::copy_peer_async(a, d, b, d, static_cast<ferry::i64>(n), s);  // a device is its own peer
  gpu::copy_d2h_async(registered.data(), a, static_cast<ferry::i64>(n), s);
  gpu::sync_stream(s);
  EXPECT_TRUE(gpu::stream_idle(s));
  EXPECT_EQ(registered, want);
  std::vector<unsigned char> back(n, 0);
  gpu::copy_async(back.data(), b, static_cast<ferry::i64>(n), s);
  gpu::sync_stream(s);
  EXPECT_EQ(back, want);
  std::string what;
  EXPECT_EQ(error_class([&] { gpu::copy_async(back.data(), b, -1, s); }, &what), MPI_ERR_ARG);
  gpu::unregister_host(registered.data());
  gpu::destroy_stream(s);
  gpu::free_device(a);
  gpu::free_device(b);
  gpu::free_pinned(pinned);
}

TEST_F(GpuRuntime, EventsAndErrorsNameTheCaller) {
  gpu::Stream s = gpu::create_stream();
  gpu::Event start = gpu::create_event(true), stop = gpu::create_event(true);
  void* d = gpu::alloc_device(1 << 24);
  gpu::record(start, s);
  gpu::copy_d2d_async(d, static_cast<char*>(d) + (1 << 23), 1 << 23, s);
  gpu::record(stop, s);
  gpu::sync_event(stop);
  EXPECT_TRUE(gpu::event_idle(stop));
  EXPECT_GE(gpu::elapsed_ms(start, stop), 0.0f);
  gpu::Stream other = gpu::create_stream();
  gpu::stream_wait_event(other, stop);
  gpu::sync_stream(other);
  // An event without timing cannot be timed: the error names this file and line.
  gpu::Event plain = gpu::create_event();
  gpu::record(plain, s);
  gpu::sync_event(plain);
  std::string what;
  const int line = __LINE__ + 1;
  EXPECT_EQ(error_class([&] { gpu::elapsed_ms(start, plain); }, &what), MPI_ERR_OTHER);
  EXPECT_NE(what.find("test_gpu_runtime.cpp:"), std::string::npos) << what;
  EXPECT_NE(what.find(std::to_string(line)), std::string::npos) << what;
  EXPECT_NE(what.find("cudaEventElapsedTime"), std::string::npos) << what;
  for (gpu::Event e : {start, stop, plain}) gpu::destroy_event(e);
  gpu::destroy_stream(s);
  gpu::destroy_stream(other);
  gpu::free_device(d);
}

TEST_F(GpuRuntime, PriorityStreams) {
  const gpu::Priorities p = gpu::stream_priorities();
  EXPECT_LE(p.greatest, p.least);
  gpu::Stream high = gpu::create_stream(p.greatest);
  gpu::Stream low = gpu::create_stream(p.least);
  void* d = gpu::alloc_device(4096);
  gpu::copy_d2d_async(d, static_cast<char*>(d) + 2048, 2048, high);
  gpu::copy_d2d_async(static_cast<char*>(d) + 2048, d, 2048, low);
  gpu::sync_stream(high);
  gpu::sync_stream(low);
  gpu::destroy_stream(high);
  gpu::destroy_stream(low);
  gpu::free_device(d);
  EXPECT_NE(gpu::internal_stream(), nullptr);
  EXPECT_EQ(gpu::internal_stream(), gpu::internal_stream()) << "one per device";
}

// A copy that waits on the GPU for a flag another stream (or the host) writes.
TEST_F(GpuRuntime, StreamMemoryOperations) {
  constexpr ferry::i64 n = 1 << 16;
  const auto want = pattern(n, 2);
  auto* flags = static_cast<std::uint32_t*>(gpu::alloc_device(64));
  void* src = gpu::alloc_device(n);
  void* dst = gpu::alloc_device(n);
  gpu::copy(src, want.data(), n);
  gpu::write_value32(gpu::internal_stream(), flags, 0);
  gpu::sync_stream(gpu::internal_stream());
  gpu::Stream waiter = gpu::create_stream(), writer = gpu::create_stream();
  gpu::wait_value32(waiter, flags, 7, gpu::Until::geq);
  gpu::copy_d2d_async(dst, src, n, waiter);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(gpu::stream_idle(waiter)) << "the copy waits for the flag";
  gpu::write_value32(writer, flags, 7);
  gpu::sync_stream(waiter);
  std::vector<unsigned char> got(static_cast<std::size_t>(n));
  gpu::copy(got.data(), dst, n);
  EXPECT_EQ(got, want);
  // The host releases a wait on a flag in mapped pinned memory.
  auto* host_flag = static_cast<volatile std::uint32_t*>(gpu::alloc_pinned(64));
  *host_flag = 0;
  gpu::wait_value32(waiter, const_cast<std::uint32_t*>(host_flag), 1, gpu::Until::eq);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(gpu::stream_idle(waiter));
  *host_flag = 1;
  gpu::sync_stream(waiter);
  if (gpu::memops_64bit(gpu::this_device())) {
    auto* flag64 = reinterpret_cast<std::uint64_t*>(flags + 2);  // 8-byte aligned
    gpu::write_value64(writer, flag64, std::uint64_t{1} << 40);
    gpu::wait_value64(waiter, flag64, std::uint64_t{1} << 40, gpu::Until::eq);
    gpu::sync_stream(waiter);
  }
  gpu::destroy_stream(waiter);
  gpu::destroy_stream(writer);
  gpu::free_pinned(const_cast<std::uint32_t*>(host_flag));
  for (void* p : {static_cast<void*>(flags), src, dst}) gpu::free_device(p);
}

// A flag wait, a copy and a flag write captured once and replayed: what a handshake inside a graph
// needs.
TEST_F(GpuRuntime, GraphsCaptureCopiesAndFlags) {
  constexpr ferry::i64 n = 1 << 14;
  auto* flags = static_cast<std::uint32_t*>(gpu::alloc_device(64));
  void* src = gpu::alloc_device(n);
  void* dst = gpu::alloc_device(n);
  gpu::Stream s = gpu::create_stream();
  gpu::write_value32(s, flags, 1);
  gpu::sync_stream(s);
  EXPECT_FALSE(gpu::capturing(s));
  gpu::begin_capture(s);
  EXPECT_TRUE(gpu::capturing(s));
  gpu::wait_value32(s, flags, 1, gpu::Until::geq);
  gpu::copy_d2d_async(dst, src, n, s);
  gpu::write_value32(s, flags + 1, 5);
  gpu::Graph g = gpu::end_capture(s);
  EXPECT_FALSE(gpu::capturing(s));
  gpu::GraphExec exec = gpu::instantiate(g);
  for (int round = 0; round < 3; ++round) {
    const auto want = pattern(static_cast<std::size_t>(n), 10 + round);
    gpu::copy(src, want.data(), n);
    gpu::write_value32(s, flags + 1, 0);
    gpu::launch(exec, s);
    gpu::sync_stream(s);
    std::vector<unsigned char> got(static_cast<std::size_t>(n));
    gpu::copy(got.data(), dst, n);
    EXPECT_EQ(got, want) << "round " << round;
    std::uint32_t done = 0;
    gpu::copy(&done, flags + 1, sizeof done);
    EXPECT_EQ(done, 5u);
  }
  gpu::destroy_graph_exec(exec);
  gpu::destroy_graph(g);
  gpu::destroy_stream(s);
  for (void* p : {static_cast<void*>(flags), src, dst}) gpu::free_device(p);
}

TEST_F(GpuRuntime, TransportPoolsAndExports) {
  const int d = gpu::this_device();
  transport::Pool& pool = transport::device_pool(d);
  void* p = pool.get(10000);
  EXPECT_EQ(gpu::memory_of(p), gpu::Memory::device);
  EXPECT_TRUE(pool.put(p));
  EXPECT_EQ(pool.get(9000), p) << "reused";
  pool.put(p);
  transport::Buffer staging(transport::pinned_pool(), 5000);
  EXPECT_EQ(gpu::memory_of(staging.get()), gpu::Memory::pinned_host);
  // A device pointer inside an allocation exports that allocation with the offset.
  char* mem = static_cast<char*>(gpu::alloc_device(1 << 20));
  transport::Export e;
  ASSERT_TRUE(transport::export_pointer(mem + 4096, &e));
  EXPECT_EQ(e.base, reinterpret_cast<std::uint64_t>(mem));
  EXPECT_EQ(e.offset, 4096);
  EXPECT_EQ(e.device, d);
  transport::Export again;
  ASSERT_TRUE(transport::export_pointer(mem, &again));
  EXPECT_EQ(std::memcmp(e.handle.bytes, again.handle.bytes, sizeof e.handle.bytes), 0);
  EXPECT_EQ(e.id, again.id);
  EXPECT_FALSE(transport::export_pointer(staging.get(), &again)) << "pinned host memory";
  gpu::free_device(mem);
}

TEST_F(GpuRuntime, MeasuresPeerBandwidth) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) GTEST_SKIP() << "one measurement per node";
  const transport::Bandwidth b = transport::Bandwidth::measure();
  EXPECT_EQ(b.gpus(), gpu::device_count());
  EXPECT_EQ(b.source(), "measured");
  for (int i = 0; i < b.gpus(); ++i)
    for (int j = 0; j < b.gpus(); ++j)
      if (i != j) EXPECT_GT(b.at(i, j), 1.0) << i << " to " << j << ": more than 1 GB/s between GPUs";
  const transport::Bandwidth back = transport::Bandwidth::parse(b.to_text(), "again");
  EXPECT_EQ(back.gpus(), b.gpus());
  std::printf("peer bandwidth, GB/s:\n%s", b.to_text().c_str());
}

// Two ranks: the exporter's allocations mapped by the importer through the cache.
TEST_F(GpuRuntime, IpcImportBetweenRanks) {
  int n = 0;
  MPI_Comm_size(pair_comm(), &n);
  if (n != 2) GTEST_SKIP() << "needs pairs of ranks";
  const int me = pair_rank(), other = 1 - me;
  constexpr ferry::i64 bytes = 1 << 20;
  const auto want = pattern(static_cast<std::size_t>(bytes), 3);
  transport::IpcCache& cache = transport::ipc_cache();
  struct Offer {
    transport::Export e;
    gpu::IpcEventHandle event;
  };
  auto exchange = [&](void* mem, gpu::Event ev) {  // rank 0 offers, rank 1 receives
    Offer o{};
    if (me == 0) {
      EXPECT_TRUE(transport::export_pointer(static_cast<char*>(mem) + 256, &o.e));
      if (ev) o.event = gpu::ipc_handle(ev);
      MPI_Send(&o, sizeof o, MPI_BYTE, other, 1, pair_comm());
    } else {
      MPI_Recv(&o, sizeof o, MPI_BYTE, other, 1, pair_comm(), MPI_STATUS_IGNORE);
    }
    return o;
  };
  auto check_mapped = [&](const transport::Export& e) {
    auto lease = cache.open(other, e.base, e.id, e.handle);
    EXPECT_TRUE(lease) << "status " << static_cast<int>(lease.status());
    if (!lease) return lease;
    std::vector<unsigned char> got(static_cast<std::size_t>(bytes - 256));
    gpu::copy(got.data(), static_cast<char*>(lease.get()) + e.offset, bytes - 256);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + 256));
    return lease;
  };

  // 1. Map, reuse, and an IPC event the importer waits for.
  void* a = nullptr;
  gpu::Event ev = nullptr;
  if (me == 0) {
    a = gpu::alloc_device(bytes);
    gpu::copy(a, want.data(), bytes);
    ev = gpu::create_ipc_event();
    gpu::record(ev, gpu::internal_stream());
  }
  Offer o = exchange(a, ev);
  const auto before = cache.stats();
  if (me == 1) {
    gpu::Event theirs = gpu::open_ipc_event(o.event);
    gpu::sync_event(theirs);
    gpu::destroy_event(theirs);
    { auto l = check_mapped(o.e); }
    { auto l = check_mapped(o.e); }
    const auto after = cache.stats();
    EXPECT_EQ(after.opens - before.opens, 1);
    EXPECT_EQ(after.hits - before.hits, 1);
  }
  MPI_Barrier(pair_comm());

  // 2. The exporter frees the allocation and makes another: the importer maps the new one.
  if (me == 0) {
    gpu::free_device(a);
    a = gpu::alloc_device(bytes);
    gpu::copy(a, want.data(), bytes);
  }
  const Offer o2 = exchange(a, nullptr);
  if (me == 1) {
    EXPECT_NE(o2.e.id, o.e.id) << "a new allocation has a new id";
    const auto s0 = cache.stats();
    { auto l = check_mapped(o2.e); }
    EXPECT_EQ(cache.stats().opens - s0.opens, 1);
    if (o2.e.base == o.e.base) EXPECT_EQ(cache.stats().closes - s0.closes, 1) << "the old mapping closed";
  }
  MPI_Barrier(pair_comm());

  // 3. The importer's program maps an allocation itself first (ucx#3192). Current drivers count
  // opens of one handle in one context and give the same address; older ones, or another context
  // on the device, refuse the second open as "already mapped", which the cache reports (the
  // message then goes staged). Either way the program's own mapping outlives Ferry's.
  void* b = nullptr;
  if (me == 0) {
    b = gpu::alloc_device(bytes);
    gpu::copy(b, want.data(), bytes);
  }
  const Offer o3 = exchange(b, nullptr);
  if (me == 1) {
    gpu::IpcMemHandle h{};
    std::memcpy(h.bytes, o3.e.handle.bytes, sizeof h.bytes);
    void* own = nullptr;
    ASSERT_EQ(gpu::open_ipc(h, &own), gpu::IpcOpen::ok);
    {
      auto lease = cache.open(other, o3.e.base, o3.e.id, o3.e.handle);
      if (lease) {
        EXPECT_EQ(lease.get(), own) << "one mapping per handle and context, counted";
      } else {
        EXPECT_EQ(lease.status(), transport::IpcCache::Status::already_mapped);
      }
    }
    cache.close_all();  // Ferry lets go of its reference
    std::vector<unsigned char> got(static_cast<std::size_t>(bytes));
    gpu::copy(got.data(), own, bytes);
    EXPECT_EQ(got, want) << "the program's mapping still works";
    gpu::close_ipc(own);
  }
  MPI_Barrier(pair_comm());
  if (me == 0) {
    gpu::destroy_event(ev);
    gpu::free_device(a);
    gpu::free_device(b);
  } else {
    cache.close_all();
  }
  MPI_Barrier(pair_comm());
}

}  // namespace
