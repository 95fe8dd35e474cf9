// ferry::gpu::copy_many_async: many layout-to-layout copies in few launches (what a receive batch
// does with the typed copies of the messages one MPI_Waitall completes). Random pairs of layouts
// (type_pairs.hpp) in groups, each copy into a buffer of its own, compared over the whole buffer
// with the CPU engine's pack then unpack; 3-D boxes (the halo's subarrays) must take
// ceil(n / kCopiesPerLaunch) launches; packed bytes in pinned host memory unpack into boxes (what
// a batch of staged receives does); bad copies give copy_async's error classes, and the good ones
// beside them are still done. Exits 77 (skipped) where there is no GPU.
#include <cuda_runtime.h>
#include <ferry/error.hpp>
#include <ferry/gpu.hpp>
#include <ferry/pack.hpp>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "pack/cuda/engine.hpp"
#include "random_type.hpp"
#include "type_pairs.hpp"

namespace {

using ferry::i64;

using ferry_test::Device;
using ferry_test::download;
using ferry_test::error_class;

// One copy: its layouts, device buffers and what the CPU engine makes of it.
struct One {
  ferry::Type stype, dtype;
  int scount = 0, dcount = 0;
  i64 sorigin = 0, dorigin = 0;
  std::unique_ptr<Device> src, dst;
  std::vector<char> want;
  std::string what;

  // src and dst: host bytes of the two buffers; the origins are offsets into them.
  void load(const std::vector<char>& s, const std::vector<char>& d) {
    src = std::make_unique<Device>(static_cast<i64>(s.size()));
    dst = std::make_unique<Device>(static_cast<i64>(d.size()));
    cudaMemcpy(src->p, s.data(), s.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(dst->p, d.data(), d.size(), cudaMemcpyHostToDevice);
    want = d;
    const i64 bytes = stype.size() * scount;
    std::vector<char> packed(static_cast<std::size_t>(bytes) + 1);
    i64 pos = 0;
    ferry::pack(ferry_test::offset_by(const_cast<char*>(s.data()), sorigin), scount, stype,
                packed.data(), bytes, &pos);
    pos = 0;
    ferry::unpack(packed.data(), bytes, &pos, ferry_test::offset_by(want.data(), dorigin), dcount,
                  dtype);
  }
  ferry::gpu::Copy copy() const {
    return {ferry_test::offset_by(src->p, sorigin), scount, &stype,
            ferry_test::offset_by(dst->p, dorigin), dcount, &dtype};
  }
};

std::vector<char> random_bytes(i64 n, std::mt19937_64& rng) {
  std::vector<char> v(static_cast<std::size_t>(n));
  for (char& b : v) b = static_cast<char>(rng());
  return v;
}

TEST(GpuCopyMany, RandomPairsInGroupsMatchTheCpuEngine) {
  const int groups = ferry_test::env_int("FERRY_GPU_COPY_GROUPS", 30);
  const auto base = static_cast<std::uint64_t>(ferry_test::env_int("FERRY_SEED", 20261129)) + 4242;
  std::printf("seed base %llu\n", static_cast<unsigned long long>(base));
  std::mt19937_64 rng(base);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::uint64_t seed = base;
  const long launches = ferry::gpu::impl::copies_launches();
  for (int g = 0; g < groups; ++g) {
    // 1 to 40 copies: one launch's worth, a few, and the remainder of a partial launch.
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<One> ones;
    std::vector<std::uint64_t> seeds;
    while (static_cast<int>(ones.size()) < n) {
      ferry_test::TypePair pair = ferry_test::make_pair(++seed);
      if (pair.dst_overlaps) {  // which write lands last is not defined on the GPU
        ferry_test::release(pair);
        continue;
      }
      One o;
      o.stype = ferry::translate(pair.src);
      o.dtype = ferry::translate(pair.dst);
      o.scount = pair.src_count;
      o.dcount = pair.dst_count;
      const ferry_test::Span ss = ferry_test::span_of(pair.src, pair.src_count);
      const ferry_test::Span ds = ferry_test::span_of(pair.dst, pair.dst_count);
      o.sorigin = ss.origin;
      o.dorigin = ds.origin;
      o.what = pair.description;
      o.load(random_bytes(ss.size, rng), random_bytes(ds.size, rng));
      ferry_test::release(pair);
      ones.push_back(std::move(o));
      seeds.push_back(seed);
    }
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<ferry::gpu::Copy> copies;
    for (const One& o : ones) copies.push_back(o.copy());
    ASSERT_NO_THROW(ferry::gpu::copy_many_async(copies.data(), copies.size(), stream))
        << "group " << g;
    CUDA_OK(cudaStreamSynchronize(stream));
    for (std::size_t k = 0; k < ones.size(); ++k)
      ASSERT_TRUE(download(ones[k].dst->p, static_cast<i64>(ones[k].want.size())) == ones[k].want)
          << "group " << g << " copy " << k << " of " << ones.size() << ", seed " << seeds[k] << "\n"
          << ones[k].what << "\nsrc " << ones[k].stype.describe() << "\ndst "
          << ones[k].dtype.describe();
  }
  // Some pairs are boxes (type_pairs.hpp's halo recipe): they went in multi-copy launches.
  EXPECT_GT(ferry::gpu::impl::copies_launches(), launches);
  CUDA_OK(cudaStreamDestroy(stream));
}

// A box of `sub` elements of `elem` at `at` in a 3-D array of `dims` (C order).
ferry::Type box(const int dims[3], const int sub[3], const int at[3], MPI_Datatype elem) {
  MPI_Datatype t;
  MPI_Type_create_subarray(3, dims, sub, at, MPI_ORDER_C, elem, &t);
  MPI_Type_commit(&t);
  ferry::Type ty = ferry::translate(t);
  MPI_Type_free(&t);
  return ty;
}

TEST(GpuCopyMany, HaloBoxesGoSixteenToALaunch) {
  // The halo's messages to itself: 37 boxes of fp64 (faces, edges, corners of a ghost-3 array)
  // from the inside of one array into the ghost zone of another, with a dense copy and an empty
  // one among them (those take no multi-copy launch).
  const int dims[3] = {40, 36, 32};
  const i64 bytes = i64{dims[0]} * dims[1] * dims[2] * 8;
  std::mt19937_64 rng(20261129);
  const std::vector<char> src = random_bytes(bytes, rng), dst = random_bytes(bytes, rng);
  Device dsrc(bytes), ddst(bytes);
  CUDA_OK(cudaMemcpy(dsrc.p, src.data(), src.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(ddst.p, dst.data(), dst.size(), cudaMemcpyHostToDevice));
  std::vector<ferry::Type> types;
  std::vector<char> want = dst;
  types.reserve(2 * 40);
  std::vector<ferry::gpu::Copy> copies;
  int boxes = 0;
  for (int dz = -1; dz <= 1 && boxes < 37; ++dz)
    for (int dy = -1; dy <= 1 && boxes < 37; ++dy)
      for (int dx = -1; dx <= 1 && boxes < 37; ++dx) {
        if (dx == 0 && dy == 0 && dz == 0) continue;
        int sub[3], from[3], to[3];
        const int d[3] = {dz, dy, dx};
        for (int a = 0; a < 3; ++a) {
          sub[a] = d[a] == 0 ? dims[a] - 6 : 3;
          from[a] = d[a] < 0 ? 3 : d[a] > 0 ? dims[a] - 6 : 3;  // inside
          to[a] = d[a] < 0 ? dims[a] - 3 : d[a] > 0 ? 0 : 3;    // the opposite ghost zone
        }
        types.push_back(box(dims, sub, from, MPI_DOUBLE));
        types.push_back(box(dims, sub, to, MPI_DOUBLE));
        const ferry::Type& s = types[types.size() - 2];
        const ferry::Type& t = types.back();
        copies.push_back({dsrc.p, 1, &s, ddst.p, 1, &t});
        ferry::copy(src.data(), 1, s, want.data(), 1, t);
        ++boxes;
      }
  // 11 more boxes (the first 11 pairs of types again, into a second array).
  Device dst2(bytes);
  std::vector<char> want2 = dst;
  CUDA_OK(cudaMemcpy(dst2.p, dst.data(), dst.size(), cudaMemcpyHostToDevice));
  for (int k = 0; k < 11; ++k) {
    copies.push_back({dsrc.p, 1, copies[static_cast<std::size_t>(k)].stype, dst2.p, 1,
                      copies[static_cast<std::size_t>(k)].dtype});
    ferry::copy(src.data(), 1, *copies.back().stype, want2.data(), 1, *copies.back().dtype);
  }
  ASSERT_EQ(copies.size(), 37u);
  // A dense copy (one cudaMemcpyAsync) and an empty one in the middle.
  const ferry::Type bytes_type = ferry::translate(MPI_BYTE);
  Device dense_src(4096), dense_dst(4096);
  CUDA_OK(cudaMemcpy(dense_src.p, src.data(), 4096, cudaMemcpyHostToDevice));
  copies.insert(copies.begin() + 20, {dense_src.p, 4096, &bytes_type, dense_dst.p, 4096, &bytes_type});
  copies.insert(copies.begin() + 5, {dsrc.p, 0, &types[0], ddst.p, 0, &types[1]});
  const long before = ferry::gpu::impl::copies_launches();
  ASSERT_NO_THROW(ferry::gpu::copy_many_async(copies.data(), copies.size(), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(ferry::gpu::impl::copies_launches() - before, 3) << "37 boxes: 16 + 16 + 5";
  EXPECT_TRUE(download(ddst.p, bytes) == want);
  EXPECT_TRUE(download(dst2.p, bytes) == want2);
  EXPECT_TRUE(download(dense_dst.p, 4096) == std::vector<char>(src.begin(), src.begin() + 4096));
}

TEST(GpuCopyMany, BadCopiesGiveTheirErrorClass) {
  const ferry::Type dbl = ferry::translate(MPI_DOUBLE);
  Device a(1024), b(1024);
  std::vector<char> host(1024);
  auto run = [](std::vector<ferry::gpu::Copy> c) {
    return error_class([&] { ferry::gpu::copy_many_async(c.data(), c.size(), nullptr); });
  };
  EXPECT_EQ(run({{a.p, 4, &dbl, b.p, 3, &dbl}}), MPI_ERR_TRUNCATE);
  EXPECT_EQ(run({{a.p, 3, &dbl, b.p, 4, &dbl}}), MPI_ERR_COUNT);
  EXPECT_EQ(run({{a.p, -1, &dbl, b.p, -1, &dbl}}), MPI_ERR_COUNT);
  EXPECT_EQ(run({{a.p, 4, nullptr, b.p, 4, &dbl}}), MPI_ERR_TYPE);
  EXPECT_EQ(run({{host.data(), 4, &dbl, b.p, 4, &dbl}}), MPI_ERR_BUFFER);
  EXPECT_EQ(run({}), MPI_SUCCESS);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// What a batch of staged receives does (transport's UnstageBatch): packed bytes in pinned, mapped
// host memory, which the GPU reads directly, unpacked into boxes of device arrays, 20 at once.
TEST(GpuCopyMany, PinnedPackedBytesUnpackIntoBoxes) {
  const int dims[3] = {16, 12, 10};
  const i64 bytes = i64{dims[0]} * dims[1] * dims[2] * 8;
  std::mt19937_64 rng(29112026);
  const ferry::Type byte_type = ferry::translate(MPI_BYTE);
  std::vector<ferry::Type> boxes;
  boxes.reserve(20);
  for (int k = 0; k < 20; ++k) {
    const int sub[3] = {1 + k % 3, 2 + k % 4, 3};
    const int at[3] = {k % 5, k % 7, k % 6};
    boxes.push_back(box(dims, sub, at, MPI_DOUBLE));
  }
  i64 packed_bytes = 0;
  for (const ferry::Type& b : boxes) packed_bytes += b.size();
  void* pinned = nullptr;
  CUDA_OK(cudaHostAlloc(&pinned, static_cast<std::size_t>(packed_bytes), cudaHostAllocMapped));
  const std::vector<char> packed = random_bytes(packed_bytes, rng);
  std::memcpy(pinned, packed.data(), packed.size());
  std::vector<std::unique_ptr<Device>> arrays;
  std::vector<std::vector<char>> want;
  std::vector<ferry::gpu::Copy> copies;
  i64 at = 0;
  for (const ferry::Type& b : boxes) {
    const std::vector<char> before = random_bytes(bytes, rng);
    arrays.push_back(std::make_unique<Device>(bytes));
    CUDA_OK(cudaMemcpy(arrays.back()->p, before.data(), before.size(), cudaMemcpyHostToDevice));
    want.push_back(before);
    i64 pos = 0;
    ferry::unpack(packed.data() + at, b.size(), &pos, want.back().data(), 1, b);
    copies.push_back({static_cast<char*>(pinned) + at, b.size(), &byte_type, arrays.back()->p, 1, &b});
    at += b.size();
  }
  const long before = ferry::gpu::impl::copies_launches();
  ASSERT_NO_THROW(ferry::gpu::copy_many_async(copies.data(), copies.size(), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(ferry::gpu::impl::copies_launches() - before, 2) << "20 unpacks: 16 + 4";
  for (std::size_t k = 0; k < arrays.size(); ++k)
    EXPECT_TRUE(download(arrays[k]->p, bytes) == want[k]) << "box " << k;
  CUDA_OK(cudaFreeHost(pinned));
}

// A bad copy among good ones: the good ones are all done, then its error class comes back.
TEST(GpuCopyMany, ABadCopyLeavesTheOthersDone) {
  const int dims[3] = {8, 8, 8};
  const i64 bytes = 8 * 8 * 8 * 8;
  std::mt19937_64 rng(7);
  const int sub[3] = {2, 3, 4}, from[3] = {1, 1, 1}, to[3] = {5, 4, 2};
  const ferry::Type s = box(dims, sub, from, MPI_DOUBLE), d = box(dims, sub, to, MPI_DOUBLE);
  const ferry::Type dbl = ferry::translate(MPI_DOUBLE);
  const std::vector<char> src = random_bytes(bytes, rng);
  Device dsrc(bytes);
  CUDA_OK(cudaMemcpy(dsrc.p, src.data(), src.size(), cudaMemcpyHostToDevice));
  std::vector<std::unique_ptr<Device>> dst;
  std::vector<std::vector<char>> want;
  std::vector<ferry::gpu::Copy> copies;
  for (int k = 0; k < 5; ++k) {
    const std::vector<char> before = random_bytes(bytes, rng);
    dst.push_back(std::make_unique<Device>(bytes));
    CUDA_OK(cudaMemcpy(dst.back()->p, before.data(), before.size(), cudaMemcpyHostToDevice));
    want.push_back(before);
    ferry::copy(src.data(), 1, s, want.back().data(), 1, d);
    copies.push_back({dsrc.p, 1, &s, dst.back()->p, 1, &d});
  }
  Device spare(bytes);
  copies.insert(copies.begin() + 2, {dsrc.p, 4, &dbl, spare.p, 3, &dbl});  // truncates
  EXPECT_EQ(error_class([&] { ferry::gpu::copy_many_async(copies.data(), copies.size(), nullptr); }),
            MPI_ERR_TRUNCATE);
  CUDA_OK(cudaDeviceSynchronize());
  for (std::size_t k = 0; k < dst.size(); ++k)
    EXPECT_TRUE(download(dst[k]->p, bytes) == want[k]) << "copy " << k;
}

}  // namespace
