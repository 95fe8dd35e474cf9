// ferry::copy on host memory: for random pairs of layouts of equal size (type_pairs.hpp), copying
// must give, byte for byte over the whole destination buffer (the bytes the type does not touch
// included), what packing the source and unpacking into the destination gives; pack and unpack
// are held to MPI_Pack by test_random_types. Also the error classes of bad calls.
#include <ferry/error.hpp>
#include <ferry/pack.hpp>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "random_type.hpp"
#include "type_pairs.hpp"

namespace {

using ferry::i64;

using ferry_test::env_int;

TEST(Copy, RandomPairsMatchPackThenUnpack) {
  const int n = env_int("FERRY_COPY_TYPES", 1500);
  const std::uint64_t base = static_cast<std::uint64_t>(env_int("FERRY_SEED", 20261122)) + 4242;
  std::printf("seeds %llu..%llu\n", static_cast<unsigned long long>(base),
              static_cast<unsigned long long>(base + static_cast<std::uint64_t>(n) - 1));
  std::mt19937_64 rng(base);
  int strided = 0, dense = 0, general = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(i);
    ferry_test::TypePair p = ferry_test::make_pair(seed);
    const ferry::Type ts = ferry::translate(p.src), td = ferry::translate(p.dst);
    ASSERT_EQ(ts.size() * p.src_count, td.size() * p.dst_count) << "seed " << seed;
    if (ts.dense() || td.dense()) ++dense;
    else if (ts.strided() && td.strided()) ++strided;
    else ++general;
    const ferry_test::Span ss = ferry_test::span_of(p.src, p.src_count);
    const ferry_test::Span ds = ferry_test::span_of(p.dst, p.dst_count);
    std::vector<char> src(static_cast<std::size_t>(ss.size)), dst(static_cast<std::size_t>(ds.size));
    for (auto& b : src) b = static_cast<char>(rng());
    for (auto& b : dst) b = static_cast<char>(rng());
    std::vector<char> want = dst;
    const i64 bytes = ts.size() * p.src_count;
    std::vector<char> packed(static_cast<std::size_t>(bytes) + 1);
    i64 pos = 0;
    ferry::pack(ferry_test::offset_by(src.data(), ss.origin), p.src_count, ts, packed.data(), bytes,
                &pos);
    pos = 0;
    ferry::unpack(packed.data(), bytes, &pos, ferry_test::offset_by(want.data(), ds.origin),
                  p.dst_count, td);
    ferry::copy(ferry_test::offset_by(src.data(), ss.origin), p.src_count, ts,
                ferry_test::offset_by(dst.data(), ds.origin), p.dst_count, td);
    ASSERT_TRUE(dst == want) << "seed " << seed << "\n" << p.description << "\nsrc " << ts.describe()
                             << "\ndst " << td.describe();
    ferry_test::release(p);
  }
  std::printf("pairs: %d strided to strided, %d with a dense side, %d general\n", strided, dense,
              general);
  EXPECT_GT(strided, n / 10);
  EXPECT_GT(dense, n / 20);
  EXPECT_GT(general, n / 10);
}

int error_class(const std::function<void()>& f) {
  try {
    f();
  } catch (const ferry::Error& e) {
    return e.mpi_error_class();
  }
  return MPI_SUCCESS;
}

TEST(Copy, BadCallsGiveTheirErrorClass) {
  MPI_Datatype v;
  MPI_Type_vector(4, 1, 2, MPI_INT, &v);
  MPI_Type_commit(&v);
  const ferry::Type vec = ferry::translate(v);
  MPI_Type_free(&v);
  const ferry::Type one = ferry::translate(MPI_INT);
  std::vector<int> a(16, 1), b(16, 2);
  EXPECT_EQ(error_class([&] { ferry::copy(a.data(), 1, vec, b.data(), 3, one); }), MPI_ERR_TRUNCATE);
  EXPECT_EQ(error_class([&] { ferry::copy(a.data(), 1, vec, b.data(), 5, one); }), MPI_ERR_COUNT);
  EXPECT_EQ(error_class([&] { ferry::copy(a.data(), -1, vec, b.data(), 4, one); }), MPI_ERR_COUNT);
  EXPECT_EQ(error_class([&] { ferry::copy(nullptr, 1, vec, b.data(), 4, one); }), MPI_ERR_BUFFER);
  EXPECT_EQ(b, std::vector<int>(16, 2)) << "a failed copy wrote";
  // Zero bytes: nothing happens, null buffers included.
  EXPECT_EQ(error_class([&] { ferry::copy(nullptr, 0, vec, nullptr, 0, one); }), MPI_SUCCESS);
  for (int i = 0; i < 16; ++i) a[static_cast<std::size_t>(i)] = i;
  ferry::copy(a.data(), 1, vec, b.data(), 4, one);
  EXPECT_EQ(std::vector<int>(b.begin(), b.begin() + 5), (std::vector<int>{0, 2, 4, 6, 2}));
}

}  // namespace
