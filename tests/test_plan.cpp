// The GPU engine's plans and index arithmetic, run on the CPU (pack/plan.hpp is compiled for both):
// every random datatype's plan, emulated word by word, must pack and unpack exactly what the CPU
// engine does (which test_random_types holds to MPI_Pack). This is how CI checks GPU addressing
// without a GPU.
#include <ferry/pack.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "pack/plan_build.hpp"
#include "random_type.hpp"

namespace {

using ferry::i64;
using ferry::detail::FastDiv;

TEST(FastDiv, MatchesDivisionBelow2To31) {
  std::mt19937_64 rng(42);
  std::vector<std::uint32_t> divisors{1, 2, 3, 5, 7, 24, 100, 255, 256, 257, 4095, 65536, 65537,
                                      1000003, (1u << 30) + 1, (1u << 31) - 1, 1u << 31};
  for (int i = 0; i < 200; ++i) divisors.push_back(static_cast<std::uint32_t>(rng() % (1u << 31)) + 1);
  for (std::uint32_t d : divisors) {
    FastDiv f(d);
    std::vector<std::uint32_t> ns{0, 1, d - 1, d, d + 1, (1u << 31) - 1, (1u << 31) - d % (1u << 31)};
    for (int i = 0; i < 2000; ++i) ns.push_back(static_cast<std::uint32_t>(rng() % (1u << 31)));
    for (std::uint32_t n : ns) {
      if (n >= (1u << 31)) continue;
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
    }
  }
}

// Plans of 2^31 words or more need 64-bit indices, also when the type is dense and count makes it
// long (a Batch runs such a plan through the kernel instead of cudaMemcpy).
TEST(Plan, LongPlansUseWideIndices) {
  for (ferry::i64 size : {1, 3, 4}) {
    ferry::Type dense(ferry::make_dense(0, size), 0, size);
    const ferry::i64 count = (ferry::i64{1} << 31) + 12345;
    ferry::detail::PlanHead hp = ferry::detail::with_count(ferry::detail::build_plan(dense).head,
                                                          dense, count);
    ASSERT_TRUE(hp.wide) << "element size " << size;
    ASSERT_EQ(hp.plan.shape.bytes, count * size);
    const int lw = std::min(hp.max_lw, 2);
    ferry::detail::set_word(hp, lw);
    for (std::uint64_t p : {std::uint64_t{0}, std::uint64_t{1}, (std::uint64_t{1} << 31) + 3,
                            static_cast<std::uint64_t>(hp.plan.total) - 1}) {
      ferry::i64 off = lw == 2 ? ferry::detail::strided_offset<std::uint64_t, 2, -1>(hp.plan, p)
                               : ferry::detail::strided_offset<std::uint64_t, 0, -1>(hp.plan, p);
      EXPECT_EQ(off, static_cast<ferry::i64>(p) << lw) << "word " << p << ", element size " << size;
    }
  }
  // A strided type whose count pushes it past 2^31 words.
  MPI_Datatype t;
  MPI_Type_vector(2, 1, 4, MPI_CHAR, &t);
  MPI_Type_commit(&t);
  ferry::Type v = ferry::translate(t);
  MPI_Type_free(&t);
  ferry::detail::HostPlan hp = ferry::detail::build_plan(v, ferry::i64{1} << 31);
  EXPECT_TRUE(hp.head.wide);
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

TEST(Plan, EmulatedPlansMatchTheCpuEngine) {
  const int n = env_int("FERRY_PLAN_TYPES", 3000);
  const int seed0 = env_int("FERRY_SEED", 20261122);
  std::printf("[plan] FERRY_SEED=%d FERRY_PLAN_TYPES=%d (rerun with both set)\n", seed0, n);
  const std::uint64_t base = static_cast<std::uint64_t>(seed0) + 7777777;
  std::mt19937_64 rng(base);
  int general = 0, strided = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(i);
    ferry_test::TypeGenerator gen(seed);
    ferry_test::RandomType rt = gen.next();
    MPI_Datatype t = rt.type;
    if (!rt.named) MPI_Type_commit(&t);
    ferry::Type type = ferry::translate(t);
    // The bounds of the type as Ferry has it (this test compares Ferry's plans with Ferry's CPU
    // engine; test_random_types checks the bounds against the MPI and the type map).
    struct {
      i64 size, extent, true_lb, true_extent;
    } m{type.size(), type.extent(), type.true_lb(), type.true_extent()};
    const int count = 1 + static_cast<int>(rng() % 3);
    // Room for `count` elements either side of the origin.
    i64 span = m.true_extent + (count - 1) * (m.extent < 0 ? -m.extent : m.extent) + 64;
    std::vector<char> mem(static_cast<std::size_t>(2 * span + 64));
    for (auto& c : mem) c = static_cast<char>(rng());
    // The origin may lie far outside `mem` (a type whose data sits at a huge displacement): its
    // address is computed as an integer, since pointer arithmetic past the object is undefined.
    const auto base_addr = reinterpret_cast<std::uintptr_t>(mem.data());
    std::uintptr_t at = base_addr + static_cast<std::uintptr_t>(span + 32 - m.true_lb);
    // Align the origin to 16 so that the plan's own alignment decides the word size.
    at -= at % 16;
    if (at + static_cast<std::uintptr_t>(m.true_lb) < base_addr) at += 16;
    char* origin = reinterpret_cast<char*>(at);

    ferry::detail::HostPlan hp = ferry::detail::build_plan(type, count);
    (hp.head.plan.npieces ? general : strided) += 1;
    const i64 size = m.size * count;
    ASSERT_EQ(size, hp.head.bytes);
    std::vector<char> want(static_cast<std::size_t>(size) + 1), got(want.size());
    i64 pos = 0;
    ferry::pack(origin, count, type, want.data(), size, &pos);
    for (int lw : {0, hp.head.max_lw}) {
      std::fill(got.begin(), got.end(), char(0x5A));
      ferry::detail::emulate(hp, lw, origin, got.data(), true);
      ASSERT_TRUE(std::equal(want.begin(), want.begin() + size, got.begin())) << "seed " << seed << " lw " << lw << " count " << count << "\n"
                               << rt.description << "\n"
                               << type.describe();
    }
    std::vector<char> out_want(mem.size(), char(0xA5)), out_got(mem.size(), char(0xA5));
    char* ow = reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(out_want.data()) + (at - base_addr));
    char* og = reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(out_got.data()) + (at - base_addr));
    pos = 0;
    ferry::unpack(want.data(), size, &pos, ow, count, type);
    ferry::detail::emulate(hp, hp.head.max_lw, og, want.data(), false);
    ASSERT_TRUE(out_want == out_got) << "unpack, seed " << seed << "\n" << rt.description;
    if (!rt.named) MPI_Type_free(&t);
  }
  std::printf("plans: %d strided, %d general\n", strided, general);
  EXPECT_GT(general, n / 20);
  EXPECT_GT(strided, n / 20);
}

}  // namespace
