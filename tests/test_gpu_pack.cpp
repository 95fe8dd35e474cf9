// The GPU engine on random datatypes (the generator of test_random_types): pack into device memory
// and into mapped pinned host memory, unpack, batched — every result compared with the CPU engine
// (held to MPI_Pack by test_random_types) and, for single elements, with MPI_Pack itself; outputs
// poisoned first, guard bytes checked. Exits 77 (skipped) where there is no GPU.
#include <cuda_runtime.h>
#include <ferry/error.hpp>
#include <ferry/gpu.hpp>
#include <ferry/pack.hpp>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "pack/cuda/engine.hpp"
#include "random_type.hpp"

namespace {

using ferry::i64;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

using ferry_test::env_int;

constexpr i64 kGuard = 64;
constexpr i64 kMem = i64{16} << 20;     // unpacked buffers: 3 elements of spans up to 1 MiB
constexpr i64 kPacked = i64{4} << 20;   // packed buffers

struct Buffers {
  char* dev_mem = nullptr;
  char* dev_mem2 = nullptr;
  char* dev_packed = nullptr;
  char* mapped = nullptr;
  Buffers() {
    cudaMalloc(&dev_mem, kMem);
    cudaMalloc(&dev_mem2, kMem);
    cudaMalloc(&dev_packed, kPacked);
    cudaHostAlloc(&mapped, kPacked, cudaHostAllocMapped);
  }
  ~Buffers() {
    cudaFree(dev_mem);
    cudaFree(dev_mem2);
    cudaFree(dev_packed);
    cudaFreeHost(mapped);
  }
};

struct Case {
  std::uint64_t seed;
  ferry_test::RandomType rt;
  MPI_Datatype t;
  ferry::Type type;
  int count;
  i64 origin;  // offset of the origin in the unpacked buffers
  i64 size;
  std::vector<char> host;  // unpacked data
  std::vector<char> ref;   // CPU engine's packed bytes
};

// A packed buffer never null, also when empty (a null packed buffer is MPI_ERR_ARG).
char* packed_ptr(std::vector<char>& v) {
  static char empty;
  return v.empty() ? &empty : v.data();
}

Case make_case(std::uint64_t seed, std::mt19937_64& rng) {
  Case c;
  c.seed = seed;
  ferry_test::TypeGenerator gen(seed);
  c.rt = gen.next();
  c.t = c.rt.type;
  if (!c.rt.named) MPI_Type_commit(&c.t);
  c.type = ferry::translate(c.t);
  ferry_test::MpiMeta m = ferry_test::mpi_meta(c.t);
  c.count = 1 + static_cast<int>(rng() % 3);
  i64 span = m.true_extent + (c.count - 1) * std::llabs(m.extent) + 64;
  c.origin = span + 64 - m.true_lb;
  c.origin -= c.origin % 16;
  if (c.origin + m.true_lb < 0) c.origin += 16;
  c.host.resize(static_cast<std::size_t>(2 * span + 256));
  for (auto& b : c.host) b = static_cast<char>(rng());
  c.size = c.type.size() * c.count;
  c.ref.resize(static_cast<std::size_t>(c.size));
  i64 pos = 0;
  ferry::pack(c.host.data() + c.origin, c.count, c.type, packed_ptr(c.ref), c.size, &pos);
  return c;
}

std::string what(const Case& c) {
  return "seed " + std::to_string(c.seed) + " count " + std::to_string(c.count) + "\n" +
         c.rt.description + "\n" + c.type.describe();
}

class GpuPack : public ::testing::Test {
 protected:
  static Buffers* buf;
  static void SetUpTestSuite() { buf = new Buffers(); }
  static void TearDownTestSuite() { delete buf; }
};
Buffers* GpuPack::buf = nullptr;

// Packs into device memory at an aligned and a misaligned position, into mapped host memory, and
// unpacks back; each against the CPU engine.
TEST_F(GpuPack, RandomTypesMatchTheCpuEngine) {
  const int n = env_int("FERRY_GPU_TYPES", 2000);
  const int seed0 = env_int("FERRY_SEED", 20261122);
  std::printf("[gpu pack] FERRY_SEED=%d FERRY_GPU_TYPES=%d (rerun with both set)\n", seed0, n);
  const std::uint64_t base = static_cast<std::uint64_t>(seed0) + 555;
  std::mt19937_64 rng(base);
  int mpi_agrees = 0, mpi_deviates = 0;
  for (int i = 0; i < n; ++i) {
    Case c = make_case(base + static_cast<std::uint64_t>(i), rng);
    ASSERT_LE(static_cast<i64>(c.host.size()), kMem);
    ASSERT_LE(c.size + kGuard + 16, kPacked);
    CUDA_OK(cudaMemcpy(buf->dev_mem, c.host.data(), c.host.size(), cudaMemcpyHostToDevice));
    if (c.count == 1) {
      // The CPU engine's bytes are the standard's type map (the generator's own reference), and
      // the system MPI's where Open MPI follows the standard (test_random_types lists where not).
      std::vector<char> standard;
      for (i64 off : c.rt.map) standard.push_back(c.host[static_cast<std::size_t>(c.origin + off)]);
      ASSERT_TRUE(standard == c.ref) << what(c);
      std::vector<char> mpi(static_cast<std::size_t>(c.size) + 1);
      int pos = 0;
      MPI_Pack(c.host.data() + c.origin, 1, c.t, mpi.data(), static_cast<int>(mpi.size()), &pos,
               MPI_COMM_WORLD);
      if (std::equal(c.ref.begin(), c.ref.end(), mpi.begin())) ++mpi_agrees;
      else ++mpi_deviates;
    }
    for (i64 at : {i64{0}, i64{3}}) {  // 3: a misaligned destination forces narrow words
      CUDA_OK(cudaMemset(buf->dev_packed, 0x5A, static_cast<std::size_t>(c.size + kGuard + at)));
      ASSERT_NO_THROW(ferry::gpu::pack_async(buf->dev_mem + c.origin, c.count, c.type,
                                             buf->dev_packed + at))
          << what(c);
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<char> got(static_cast<std::size_t>(c.size + kGuard + at));
      CUDA_OK(cudaMemcpy(got.data(), buf->dev_packed, got.size(), cudaMemcpyDeviceToHost));
      ASSERT_TRUE(std::equal(c.ref.begin(), c.ref.end(), got.begin() + at)) << "device, at " << at
                                                                            << "\n" << what(c);
      for (i64 k = 0; k < at; ++k) ASSERT_EQ(got[static_cast<std::size_t>(k)], char(0x5A));
      for (i64 k = at + c.size; k < static_cast<i64>(got.size()); ++k)
        ASSERT_EQ(got[static_cast<std::size_t>(k)], char(0x5A)) << "wrote past the end\n" << what(c);
    }
    // One-shot: straight into mapped pinned host memory.
    std::memset(buf->mapped, 0x5A, static_cast<std::size_t>(c.size + kGuard));
    ferry::gpu::pack(buf->dev_mem + c.origin, c.count, c.type, buf->mapped);
    ASSERT_TRUE(std::equal(c.ref.begin(), c.ref.end(), buf->mapped)) << "mapped\n" << what(c);
    ASSERT_EQ(buf->mapped[c.size], char(0x5A));

    // Unpack from device memory into a poisoned device buffer, against the CPU engine.
    std::vector<char> want(c.host.size(), char(0xA5));
    i64 pos = 0;
    ferry::unpack(packed_ptr(c.ref), c.size, &pos, want.data() + c.origin, c.count, c.type);
    CUDA_OK(cudaMemset(buf->dev_mem2, 0xA5, c.host.size()));
    CUDA_OK(cudaMemcpy(buf->dev_packed, packed_ptr(c.ref), c.ref.size(), cudaMemcpyHostToDevice));
    ferry::gpu::unpack(buf->dev_packed, buf->dev_mem2 + c.origin, c.count, c.type);
    std::vector<char> got(c.host.size());
    CUDA_OK(cudaMemcpy(got.data(), buf->dev_mem2, got.size(), cudaMemcpyDeviceToHost));
    ASSERT_TRUE(got == want) << "unpack\n" << what(c);
    // And from mapped host memory.
    std::memcpy(buf->mapped, packed_ptr(c.ref), c.ref.size());
    CUDA_OK(cudaMemset(buf->dev_mem2, 0xA5, c.host.size()));
    ferry::gpu::unpack(buf->mapped, buf->dev_mem2 + c.origin, c.count, c.type);
    CUDA_OK(cudaMemcpy(got.data(), buf->dev_mem2, got.size(), cudaMemcpyDeviceToHost));
    ASSERT_TRUE(got == want) << "unpack from mapped\n" << what(c);
    if (!c.rt.named) MPI_Type_free(&c.t);
  }
  std::printf("single elements: MPI_Pack agrees %d times, deviates from the standard %d times\n",
              mpi_agrees, mpi_deviates);
  EXPECT_GT(mpi_agrees, 10 * mpi_deviates);
}

// Groups of random types packed by one launch each, then unpacked by one launch.
TEST_F(GpuPack, BatchesMatchTheCpuEngine) {
  const int groups = env_int("FERRY_GPU_BATCHES", 100);
  const int seed0 = env_int("FERRY_SEED", 20261122);
  std::printf("[gpu pack] FERRY_SEED=%d FERRY_GPU_BATCHES=%d (rerun with both set)\n", seed0, groups);
  const std::uint64_t base = static_cast<std::uint64_t>(seed0) + 99999;
  std::mt19937_64 rng(base);
  constexpr int kJobs = 8;
  for (int g = 0; g < groups; ++g) {
    std::vector<Case> cases;
    std::vector<ferry::gpu::Job> jobs;
    i64 mem_at = 0, packed_at = 0;
    std::vector<i64> mem_off, packed_off;
    for (int j = 0; j < kJobs; ++j) {
      Case c = make_case(base + static_cast<std::uint64_t>(g * kJobs + j), rng);
      i64 need = (static_cast<i64>(c.host.size()) + 15) / 16 * 16;
      if (mem_at + need > kMem || packed_at + c.size + 16 > kPacked) break;
      mem_off.push_back(mem_at);
      packed_off.push_back(packed_at);
      CUDA_OK(cudaMemcpy(buf->dev_mem + mem_at, c.host.data(), c.host.size(), cudaMemcpyHostToDevice));
      mem_at += need;
      packed_at += (c.size + 15) / 16 * 16 + (j % 3);  // some misaligned destinations
      cases.push_back(std::move(c));
    }
    for (std::size_t j = 0; j < cases.size(); ++j)
      jobs.push_back({buf->dev_mem + mem_off[j] + cases[j].origin, buf->dev_packed + packed_off[j],
                      cases[j].count, &cases[j].type});
    CUDA_OK(cudaMemset(buf->dev_packed, 0x5A, static_cast<std::size_t>(packed_at + 16)));
    ferry::gpu::Batch pack(ferry::gpu::Direction::pack, jobs);
    pack.launch();
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<char> got(static_cast<std::size_t>(packed_at + 16));
    CUDA_OK(cudaMemcpy(got.data(), buf->dev_packed, got.size(), cudaMemcpyDeviceToHost));
    for (std::size_t j = 0; j < cases.size(); ++j)
      ASSERT_TRUE(std::equal(cases[j].ref.begin(), cases[j].ref.end(),
                             got.begin() + packed_off[j]))
          << "batch job " << j << "\n" << what(cases[j]);

    // Unpack the same packed bytes into a poisoned copy of the unpacked buffers.
    CUDA_OK(cudaMemset(buf->dev_mem2, 0xA5, static_cast<std::size_t>(mem_at)));
    for (auto& job : jobs) job.origin = static_cast<char*>(job.origin) - buf->dev_mem + buf->dev_mem2;
    ferry::gpu::Batch unpack(ferry::gpu::Direction::unpack, jobs);
    unpack.launch();
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<char> mem(static_cast<std::size_t>(mem_at));
    CUDA_OK(cudaMemcpy(mem.data(), buf->dev_mem2, mem.size(), cudaMemcpyDeviceToHost));
    // Types that write a byte twice make unpack order matter; the batch keeps each job's order,
    // and jobs use disjoint memory, so the result equals the CPU engine's job by job.
    for (std::size_t j = 0; j < cases.size(); ++j) {
      std::vector<char> want(cases[j].host.size(), char(0xA5));
      i64 pos = 0;
      ferry::unpack(packed_ptr(cases[j].ref), cases[j].size, &pos, want.data() + cases[j].origin,
                    cases[j].count, cases[j].type);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), mem.begin() + mem_off[j]))
          << "batch unpack job " << j << "\n" << what(cases[j]);
    }
    for (Case& c : cases)
      if (!c.rt.named) MPI_Type_free(&c.t);
  }
}

// A null user buffer is MPI_BOTTOM: absolute addresses, here of device memory.
TEST_F(GpuPack, MpiBottomWithDeviceAddresses) {
  std::vector<unsigned char> host(1024);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 7);
  CUDA_OK(cudaMemcpy(buf->dev_mem, host.data(), host.size(), cudaMemcpyHostToDevice));
  MPI_Aint a, b;
  MPI_Get_address(buf->dev_mem + 64, &a);
  MPI_Get_address(buf->dev_mem + 500, &b);
  MPI_Aint disps[2] = {a, b};
  MPI_Datatype t;
  MPI_Type_create_hindexed_block(2, 8, disps, MPI_BYTE, &t);
  MPI_Type_commit(&t);
  ferry::Type ty = ferry::translate(t);
  MPI_Type_free(&t);
  std::vector<unsigned char> out(16);
  i64 pos = 0;
  ferry::pack(nullptr, 1, ty, out.data(), 16, &pos);
  EXPECT_EQ(pos, 16);
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(out[static_cast<std::size_t>(k)], host[static_cast<std::size_t>(64 + k)]);
    EXPECT_EQ(out[static_cast<std::size_t>(8 + k)], host[static_cast<std::size_t>(500 + k)]);
  }
}

// A struct of boxes in two arrays at absolute addresses (a merged halo message: x faces of both
// fields and an edge of the first; src/pack/cuda/pieces.cu moves it one box per move) packs,
// unpacks and copies on the GPU exactly as the CPU engine does with the same boxes in host arrays.
MPI_Datatype boxes_at(char* const fields[2], int n, bool halo) {
  const int dims[3] = {n, n, n}, w = 3;
  const int face[3] = {n - 2 * w, n - 2 * w, w}, edge[3] = {n - 2 * w, w, w};
  const int face_at[3] = {w, w, halo ? n - w : w}, edge_at[3] = {w, halo ? n - w : w, halo ? n - w : w};
  MPI_Datatype f, e;
  MPI_Type_create_subarray(3, dims, face, face_at, MPI_ORDER_C, MPI_DOUBLE, &f);
  MPI_Type_create_subarray(3, dims, edge, edge_at, MPI_ORDER_C, MPI_DOUBLE, &e);
  MPI_Aint disp[3];
  MPI_Get_address(fields[0], &disp[0]);
  MPI_Get_address(fields[1], &disp[1]);
  disp[2] = disp[0];
  const int lens[3] = {1, 1, 1};
  const MPI_Datatype types[3] = {f, f, e};
  MPI_Datatype s;
  MPI_Type_create_struct(3, lens, disp, types, &s);
  MPI_Type_commit(&s);
  MPI_Type_free(&f);
  MPI_Type_free(&e);
  return s;
}

TEST_F(GpuPack, StructsOfBoxesInSeveralArrays) {
  constexpr int n = 64;
  const std::size_t bytes = std::size_t{n} * n * n * sizeof(double);
  ASSERT_LE(static_cast<i64>(2 * bytes), kMem);
  std::vector<char> h0(bytes), h1(bytes), g0(bytes), g1(bytes);
  std::mt19937_64 rng(7);
  for (auto* v : {&h0, &h1})
    for (char& c : *v) c = static_cast<char>(rng());
  char* dev[2] = {buf->dev_mem, buf->dev_mem + bytes};
  char* host[2] = {h0.data(), h1.data()};
  CUDA_OK(cudaMemcpy(dev[0], h0.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dev[1], h1.data(), bytes, cudaMemcpyHostToDevice));
  MPI_Datatype ts[4] = {boxes_at(dev, n, false), boxes_at(dev, n, true), boxes_at(host, n, false),
                        boxes_at(host, n, true)};
  const ferry::Type dsend = ferry::translate(ts[0]), drecv = ferry::translate(ts[1]),
                    hsend = ferry::translate(ts[2]), hrecv = ferry::translate(ts[3]);
  for (MPI_Datatype& t : ts) MPI_Type_free(&t);
  const i64 size = hsend.size();
  ASSERT_LE(size, kPacked);
  std::vector<char> want(static_cast<std::size_t>(size)), got(want.size());
  i64 pos = 0;
  ferry::pack(nullptr, 1, hsend, want.data(), size, &pos);
  const long launches = ferry::gpu::impl::piece_launches();
  ferry::gpu::pack_async(nullptr, 1, dsend, buf->dev_packed);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(got.data(), buf->dev_packed, want.size(), cudaMemcpyDeviceToHost));
  ASSERT_TRUE(want == got) << "pack";
  // Unpack into the halo boxes, then copy the interior boxes into them again: each time the
  // arrays must equal what the CPU engine makes of the host arrays.
  pos = 0;
  ferry::unpack(want.data(), size, &pos, nullptr, 1, hrecv);
  ferry::gpu::unpack_async(buf->dev_packed, nullptr, 1, drecv);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(g0.data(), dev[0], bytes, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(g1.data(), dev[1], bytes, cudaMemcpyDeviceToHost));
  ASSERT_TRUE(g0 == h0 && g1 == h1) << "unpack";
  for (auto* v : {&h0, &h1})
    for (char& c : *v) c = static_cast<char>(rng());
  CUDA_OK(cudaMemcpy(dev[0], h0.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dev[1], h1.data(), bytes, cudaMemcpyHostToDevice));
  ferry::copy(nullptr, 1, hsend, nullptr, 1, hrecv);
  ferry::gpu::copy_async(nullptr, 1, dsend, nullptr, 1, drecv);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(g0.data(), dev[0], bytes, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(g1.data(), dev[1], bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(g0 == h0 && g1 == h1) << "copy";
  // The pack, the unpack and the copy each went piece by piece (one launch), unless turned off.
  const char* off = std::getenv("FERRY_PIECES");
  if (!off || std::string(off) != "0") EXPECT_EQ(ferry::gpu::impl::piece_launches() - launches, 3);
}

TEST_F(GpuPack, PageableBuffersAreRefusedAsync) {
  MPI_Datatype t;
  MPI_Type_vector(4, 1, 2, MPI_INT, &t);
  MPI_Type_commit(&t);
  ferry::Type ty = ferry::translate(t);
  MPI_Type_free(&t);
  std::vector<int> host(8), out(4);
  try {
    ferry::gpu::pack_async(host.data(), 1, ty, buf->dev_packed);
    FAIL() << "no error";
  } catch (const ferry::Error& e) {
    EXPECT_EQ(e.mpi_error_class(), MPI_ERR_BUFFER);
  }
  // The synchronous API stages instead, and ferry::pack picks the GPU for device buffers.
  for (int i = 0; i < 8; ++i) host[static_cast<std::size_t>(i)] = i;
  CUDA_OK(cudaMemcpy(buf->dev_mem, host.data(), 32, cudaMemcpyHostToDevice));
  i64 pos = 0;
  ferry::pack(buf->dev_mem, 1, ty, out.data(), 16, &pos);
  EXPECT_EQ(out, (std::vector<int>{0, 2, 4, 6}));
}

// Pointer classification (driver API, cached): every kind of memory, a pointer inside a
// sub-allocated pool reports the enclosing allocation, and an address reused by a new allocation
// gets a new id; pinned memory at an address that was device memory before is pinned memory.
TEST_F(GpuPack, PointersAreClassifiedByTheDriver) {
  using ferry::gpu::Memory;
  std::vector<char> pageable(64);
  EXPECT_EQ(ferry::gpu::memory_of(pageable.data()), Memory::host);
  EXPECT_EQ(ferry::gpu::memory_of(pageable.data()), Memory::host);  // cached verdict
  void* pinned = ferry::gpu::alloc_pinned(4096);
  EXPECT_EQ(ferry::gpu::memory_of(pinned), Memory::pinned_host);
  ferry::gpu::free_pinned(pinned);
  void* managed = nullptr;
  CUDA_OK(cudaMallocManaged(&managed, 1 << 16));
  EXPECT_EQ(ferry::gpu::memory_of(static_cast<char*>(managed) + 100), Memory::managed);
  CUDA_OK(cudaFree(managed));

  char* pool = nullptr;
  CUDA_OK(cudaMalloc(&pool, 8 << 20));
  char* inside = pool + (3 << 20) + 40;
  EXPECT_EQ(ferry::gpu::memory_of(inside), Memory::device);
  EXPECT_EQ(ferry::gpu::memory_of(pool + (8 << 20) - 1), Memory::device);
  ferry::gpu::Allocation a = ferry::gpu::allocation_of(inside);
  EXPECT_EQ(a.kind, Memory::device);
  EXPECT_EQ(a.base, pool);
  EXPECT_EQ(a.size, 8 << 20);
  int dev = -1;
  CUDA_OK(cudaGetDevice(&dev));
  EXPECT_EQ(a.device, dev);
  const unsigned long long id = a.id;
  EXPECT_EQ(ferry::gpu::allocation_of(pool).id, id);
  CUDA_OK(cudaFree(pool));
  char* again = nullptr;
  CUDA_OK(cudaMalloc(&again, 8 << 20));
  EXPECT_EQ(ferry::gpu::memory_of(again), Memory::device);
  EXPECT_NE(ferry::gpu::allocation_of(again).id, id);
  CUDA_OK(cudaFree(again));
  void* pinned_again = ferry::gpu::alloc_pinned(8 << 20);
  EXPECT_EQ(ferry::gpu::memory_of(pinned_again), Memory::pinned_host);
  ferry::gpu::free_pinned(pinned_again);
  EXPECT_EQ(ferry::gpu::allocation_of(pageable.data()).kind, Memory::host);
  EXPECT_EQ(ferry::gpu::allocation_of(pageable.data()).device, -1);
}

}  // namespace
