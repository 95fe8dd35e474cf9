// The GPU engine's plans and index arithmetic, run on the CPU (pack/plan.hpp is compiled for both):
// every random datatype's plan, emulated word by word, must pack and unpack exactly what the CPU
// engine does (which test_random_types holds to MPI_Pack). This is how CI checks GPU addressing
// without a GPU.
#include <ferry/error.hpp>
#include <ferry/pack.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <random>
#include <vector>

#include "pack/batch_plan.hpp"
#include "pack/plan_build.hpp"
#include "random_type.hpp"
#include "type_pairs.hpp"

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

using ferry_test::env_int;

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

// The lean kernel keeps strides in 32 bits: a side with a stride of 2 GiB or more goes to the
// general kernel (its arithmetic is 64-bit), one just below stays lean.
TEST(Batch, StridesOf2GiBLeaveTheLeanKernel) {
  for (const long long stride : {(1LL << 31) - 8, (1LL << 31) + 8, -(1LL << 31) - 8}) {
    MPI_Datatype t;
    MPI_Type_create_hvector(2, 1, static_cast<MPI_Aint>(stride), MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    const ferry::Type v = ferry::translate(t);
    MPI_Type_free(&t);
    const ferry::detail::HostPlan hp = ferry::detail::build_plan(v, 1);
    EXPECT_EQ(ferry::detail::lean_fits(hp.head), stride < (1LL << 31) && stride > -(1LL << 31))
        << "stride " << stride;
  }
}

// The batch's chunks cover every move exactly once, in order, in pieces of at most the chunk
// size that start at multiples of 16 and are equal but for each move's last.
TEST(Batch, PartitionCoversEveryMoveInEqualAlignedChunks) {
  std::mt19937_64 rng(99);
  for (int round = 0; round < 500; ++round) {
    std::vector<i64> sizes(1 + rng() % 40);
    for (auto& n : sizes) {
      const int kind = static_cast<int>(rng() % 4);
      n = kind == 0 ? 0 : kind == 1 ? static_cast<i64>(rng() % 300) : static_cast<i64>(rng() % 2000000);
      if (rng() % 2) n = n / 8 * 8;
    }
    const i64 chunk = ferry::detail::chunk_bytes(
        std::accumulate(sizes.begin(), sizes.end(), i64{0}), 1 + static_cast<int>(rng() % 200), {});
    ASSERT_EQ(chunk % 16, 0);
    ASSERT_GE(chunk, 4096);
    ASSERT_LE(chunk, 32768);
    const std::vector<ferry::detail::Chunk> chunks = ferry::detail::partition(sizes, chunk);
    std::size_t at = 0;
    for (std::size_t m = 0; m < sizes.size(); ++m) {
      i64 covered = 0, first_size = -1;
      for (; at < chunks.size() && chunks[at].move == m; ++at) {
        const auto& c = chunks[at];
        ASSERT_EQ(c.begin, covered) << "move " << m;
        ASSERT_EQ(c.begin % 16, 0);
        ASSERT_GT(c.end, c.begin);
        ASSERT_LE(c.end - c.begin, chunk);
        if (first_size < 0) first_size = c.end - c.begin;
        else if (c.end != sizes[m]) ASSERT_EQ(c.end - c.begin, first_size);
        covered = c.end;
      }
      ASSERT_EQ(covered, sizes[m]) << "move " << m;
    }
    ASSERT_EQ(at, chunks.size());
  }
  // The size follows the batch: small batches still fill the GPU, large ones cap the block's work.
  ferry::detail::ChunkPolicy policy;
  EXPECT_EQ(ferry::detail::chunk_bytes(i64{1} << 30, 132, policy), 32768);
  EXPECT_EQ(ferry::detail::chunk_bytes(1572864, 132, policy), 4096);
  EXPECT_EQ(ferry::detail::chunk_bytes(132 * 8 * 10000, 132, policy), 10000);
  EXPECT_EQ(ferry::detail::chunk_bytes(132 * 8 * 10001, 132, policy), 10016);
  policy.fixed = 1000;
  EXPECT_EQ(ferry::detail::chunk_bytes(i64{1} << 30, 132, policy), 1008);
}

TEST(Batch, ChunksAreOrderedByKeyStably) {
  std::vector<ferry::detail::Chunk> chunks;
  std::vector<std::uint64_t> key;
  for (std::uint32_t i = 0; i < 100; ++i) {
    chunks.push_back({i * 16, i * 16 + 16, i, 0, 0, 0});
    key.push_back((i * 37) % 10);
  }
  ferry::detail::order_chunks(chunks, key);
  for (std::size_t i = 1; i < chunks.size(); ++i) {
    const std::uint64_t a = (chunks[i - 1].move * 37) % 10, b = (chunks[i].move * 37) % 10;
    ASSERT_TRUE(a < b || (a == b && chunks[i - 1].move < chunks[i].move));
  }
}

// The batch kernels' records and arithmetic, emulated on the CPU chunk by chunk, for copies
// between random layouts of equal size and for packs and unpacks: every byte of the destination
// buffers must be what the CPU engine's pack then unpack gives. Lean records wherever both sides
// fit them, general records always (the general kernel runs strided moves too when a batch mixes).
struct HostSide {
  ferry::detail::HostPlan hp;
  ferry::detail::SidePlan side(char* base) const {
    ferry::detail::SidePlan s;
    s.typed = true;
    s.head = hp.head;
    s.head.plan.pieces = hp.pieces.data();
    s.head.plan.shapes = hp.shapes.data();
    s.base = reinterpret_cast<std::uintptr_t>(base);
    return s;
  }
};

// Runs one move (records of both kinds where they apply) and compares `dst` with `want`.
void check_move(const ferry::detail::SidePlan& src, const ferry::detail::SidePlan& dst, i64 bytes,
                char* dst_buf, const std::vector<char>& before, const std::vector<char>& want,
                std::mt19937_64& rng, const std::string& what) {
  using namespace ferry::detail;
  const int lw = move_lw(src, dst);
  // Slot pointers below the bases, offsets making up the difference, as a batch's shared slots.
  const std::int64_t so = static_cast<std::int64_t>(rng() % 64), dof = static_cast<std::int64_t>(rng() % 64);
  const std::vector<char*> slots{reinterpret_cast<char*>(src.base) - so, reinterpret_cast<char*>(dst.base) - dof};
  std::vector<Chunk> chunks = partition({bytes}, 16 * (1 + static_cast<i64>(rng() % 8)));
  for (auto& c : chunks) c.dst_slot = 1;
  const bool lean = (!src.typed || lean_fits(src.head)) && (!dst.typed || lean_fits(dst.head));
  for (int general = lean ? 0 : 1; general < 2; ++general) {
    std::copy(before.begin(), before.end(), dst_buf);
    if (general) emulate_general({make_general(src, dst, lw, so, dof)}, chunks, slots);
    else emulate_lean({make_lean(src, dst, lw, so, dof)}, chunks, slots);
    ASSERT_TRUE(std::equal(want.begin(), want.end(), dst_buf))
        << what << (general ? " (general record)" : " (lean record)") << ", word size " << (1 << lw);
  }
}

TEST(Batch, EmulatedMovesMatchTheCpuEngine) {
  const int n = env_int("FERRY_PLAN_TYPES", 3000) / 2;
  const std::uint64_t base = static_cast<std::uint64_t>(env_int("FERRY_SEED", 20261122)) + 31337;
  std::printf("seeds %llu..%llu\n", static_cast<unsigned long long>(base),
              static_cast<unsigned long long>(base + static_cast<std::uint64_t>(n) - 1));
  std::mt19937_64 rng(base);
  int lean_copies = 0, general_copies = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(i);
    ferry_test::TypePair p = ferry_test::make_pair(seed);
    const ferry::Type ts = ferry::translate(p.src), td = ferry::translate(p.dst);
    const i64 bytes = ts.size() * p.src_count;
    if (bytes == 0 || p.dst_overlaps) {
      ferry_test::release(p);
      continue;
    }
    HostSide hs{ferry::detail::build_plan(ts, p.src_count)};
    HostSide hd{ferry::detail::build_plan(td, p.dst_count)};
    const ferry_test::Span ss = ferry_test::span_of(p.src, p.src_count);
    const ferry_test::Span ds = ferry_test::span_of(p.dst, p.dst_count);
    // Buffers 16-aligned, then shifted so that the word size varies.
    const i64 shift_s = static_cast<i64>(rng() % 3) * 4, shift_d = static_cast<i64>(rng() % 2) * 8;
    std::vector<std::uint64_t> src_words(static_cast<std::size_t>(ss.size / 8 + 4));
    std::vector<std::uint64_t> dst_words(static_cast<std::size_t>(ds.size / 8 + 4));
    for (auto& w : src_words) w = rng();
    char* src = reinterpret_cast<char*>(src_words.data()) + shift_s;
    char* dst = reinterpret_cast<char*>(dst_words.data()) + shift_d;
    std::vector<char> before(dst, dst + ds.size), want = before;
    std::vector<char> packed(static_cast<std::size_t>(bytes) + 16);
    i64 pos = 0;
    ferry::pack(ferry_test::offset_by(src, ss.origin), p.src_count, ts, packed.data(), bytes, &pos);
    pos = 0;
    ferry::unpack(packed.data(), bytes, &pos, ferry_test::offset_by(want.data(), ds.origin),
                  p.dst_count, td);
    const std::string what = "seed " + std::to_string(seed) + "\n" + p.description;
    const auto s = hs.side(ferry_test::offset_by(src, ss.origin)),
               d = hd.side(ferry_test::offset_by(dst, ds.origin));
    (ferry::detail::lean_fits(s.head) && ferry::detail::lean_fits(d.head) ? lean_copies : general_copies) += 1;
    check_move(s, d, bytes, dst, before, want, rng, "copy, " + what);
    // Pack into a 16-aligned buffer, and unpack from it.
    std::vector<std::uint64_t> out_words(static_cast<std::size_t>(bytes / 8 + 4));
    char* out = reinterpret_cast<char*>(out_words.data());
    ferry::detail::SidePlan flat;
    flat.base = reinterpret_cast<std::uintptr_t>(out);
    const std::vector<char> out_before(out, out + bytes + 16);
    std::vector<char> out_want = out_before;
    std::copy(packed.begin(), packed.begin() + bytes, out_want.begin());
    check_move(s, flat, bytes, out, out_before, out_want, rng, "pack, " + what);
    std::copy(packed.begin(), packed.begin() + bytes, out);
    check_move(flat, d, bytes, dst, before, want, rng, "unpack, " + what);
    ferry_test::release(p);
  }
  std::printf("copies: %d lean, %d general only\n", lean_copies, general_copies);
  EXPECT_GT(lean_copies, n / 10);
  EXPECT_GT(general_copies, n / 10);
}

}  // namespace

// ferry::interleave: two boxes of one shape as one strided layout of alternating pieces. For
// random boxes in random arrays (both orders, so the pair stride is negative half the time, and
// pieces that cut the rows), the interleaved type must pack the alternation of the two boxes'
// pieces, and a copy between two interleaved pairs must equal the two copies it replaces: on the
// CPU engine and through the batch kernels' records (lean and general) emulated on the CPU.
namespace pairs {

using ferry::Type;

Type take(MPI_Datatype t) {
  MPI_Type_commit(&t);
  Type r = ferry::translate(t);
  MPI_Type_free(&t);
  return r;
}

// A box of `ext` elements at `at` in an array of `dims` elements of `es` bytes (z, y, x order).
Type box(const int dims[3], const int ext[3], const int at[3], int es) {
  MPI_Datatype elem;
  MPI_Type_contiguous(es, MPI_BYTE, &elem);
  MPI_Datatype t;
  MPI_Type_create_subarray(3, dims, ext, at, MPI_ORDER_C, elem, &t);
  MPI_Type_free(&elem);
  return take(t);
}

std::vector<char> packed_of(const std::vector<char>& buf, const Type& t) {
  std::vector<char> out(static_cast<std::size_t>(t.size()));
  i64 pos = 0;
  ferry::pack(buf.data(), 1, t, out.data(), t.size(), &pos);
  return out;
}

}  // namespace pairs

TEST(Interleave, PairsOfBoxesCopyAsTheirTwoCopies) {
  const int n = env_int("FERRY_PLAN_TYPES", 3000) / 10;
  const std::uint64_t base = static_cast<std::uint64_t>(env_int("FERRY_SEED", 20261122)) + 24;
  std::printf("seeds %llu..%llu\n", static_cast<unsigned long long>(base),
              static_cast<unsigned long long>(base + static_cast<std::uint64_t>(n) - 1));
  std::mt19937_64 rng(base);
  int negative = 0, cut = 0, lean = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(i);
    ferry_test::BoxPair bp = ferry_test::make_box_pair(seed);
    const pairs::Type sa = ferry::translate(bp.src[0]), sb = ferry::translate(bp.src[1]);
    const pairs::Type da = ferry::translate(bp.dst[0]), db = ferry::translate(bp.dst[1]);
    const int piece = bp.piece;
    const std::string what = "seed " + std::to_string(seed) + ": " + bp.description;
    const pairs::Type ps = ferry::interleave(sa, sb, piece), pd = ferry::interleave(da, db, piece);
    ASSERT_TRUE(ps.strided() && pd.strided()) << what;
    ASSERT_EQ(ps.size(), 2 * sa.size()) << what;
    negative += pd.strided()->ndims() > 1 && pd.strided()->strides[1] < 0;
    cut += piece < sa.strided()->counts[0];

    std::vector<char> src(static_cast<std::size_t>(bp.src_bytes)), dst(static_cast<std::size_t>(bp.dst_bytes));
    for (auto& c : src) c = static_cast<char>(rng());
    for (auto& c : dst) c = static_cast<char>(rng());
    // Packed bytes: a's and b's pieces, alternating.
    const std::vector<char> pa = pairs::packed_of(src, sa), pb = pairs::packed_of(src, sb);
    std::vector<char> alternating;
    for (std::size_t at_byte = 0; at_byte < pa.size(); at_byte += static_cast<std::size_t>(piece)) {
      alternating.insert(alternating.end(), pa.begin() + static_cast<std::ptrdiff_t>(at_byte),
                         pa.begin() + static_cast<std::ptrdiff_t>(at_byte) + piece);
      alternating.insert(alternating.end(), pb.begin() + static_cast<std::ptrdiff_t>(at_byte),
                         pb.begin() + static_cast<std::ptrdiff_t>(at_byte) + piece);
    }
    ASSERT_TRUE(pairs::packed_of(src, ps) == alternating) << what;
    // The copy of the pair against the two copies.
    std::vector<char> want = dst, got = dst;
    ferry::copy(src.data(), 1, sa, want.data(), 1, da);
    ferry::copy(src.data(), 1, sb, want.data(), 1, db);
    ferry::copy(src.data(), 1, ps, got.data(), 1, pd);
    ASSERT_TRUE(got == want) << "CPU engine, " << what;
    HostSide hs{ferry::detail::build_plan(ps, 1)}, hd{ferry::detail::build_plan(pd, 1)};
    lean += ferry::detail::lean_fits(hs.hp.head) && ferry::detail::lean_fits(hd.hp.head);
    const std::vector<char> before = dst;
    check_move(hs.side(src.data()), hd.side(dst.data()), ps.size(), dst.data(), before, want, rng, what);
    ferry_test::release(bp);
  }
  std::printf("pairs: %d with a negative pair stride, %d with pieces shorter than the block, %d lean\n",
              negative, cut, lean);
  EXPECT_GT(negative, n / 5);
  EXPECT_GT(cut, n / 10);
  EXPECT_GT(lean, n / 10);
}

// The Astaroth x faces (24 B at both ends of every row of a dense 3-D array, periodic) as one
// pair per field: the layout the halo library and bench_gpu_halo use. The pair is a strided block
// of 3 dimensions above the 24 B piece (the lean kernel's limit), the destination's pair stride
// negative; the same layout described with MPI (an indexed block at {+X, -X} inside the rows)
// canonicalizes to the same block; the copy record divides once per word (kCopySame) and moves
// both faces; a pack of both faces into two packed buffers in one allocation works through an
// interleaved packed side.
TEST(Interleave, PeriodicXFacesAreOneStridedPair) {
  using namespace ferry::detail;
  constexpr int n = 7, r = 3, e = n + 2 * r;
  const int dims[3] = {e, e, e}, ext[3] = {n, n, r};
  const int from_plus[3] = {r, r, r}, to_plus[3] = {r, r, n + r};
  const int from_minus[3] = {r, r, n}, to_minus[3] = {r, r, 0};
  const pairs::Type sp = pairs::box(dims, ext, from_plus, 8), dp = pairs::box(dims, ext, to_plus, 8);
  const pairs::Type sm = pairs::box(dims, ext, from_minus, 8), dm = pairs::box(dims, ext, to_minus, 8);
  const pairs::Type src = ferry::interleave(sp, sm), dst = ferry::interleave(dp, dm);
  const i64 row = e * 8, plane = row * e;
  ASSERT_TRUE(src.strided() && dst.strided());
  EXPECT_EQ(*src.strided(), (ferry::StridedBlock{plane * r + row * r + r * 8, {24, 2, n, n},
                                                  {1, (n - r) * 8, row, plane}}));
  EXPECT_EQ(*dst.strided(), (ferry::StridedBlock{plane * r + row * r + (n + r) * 8, {24, 2, n, n},
                                                  {1, -(n + r) * 8, row, plane}}));
  // The same destination from MPI: 24 B at {+X halo, -X halo} of a row, rows, planes.
  MPI_Datatype ends, rows, planes;
  const MPI_Aint disps[2] = {(n + r) * 8, 0};
  MPI_Type_create_hindexed_block(2, 24, disps, MPI_BYTE, &ends);
  MPI_Type_create_hvector(n, 1, row, ends, &rows);
  MPI_Type_create_hvector(n, 1, plane, rows, &planes);
  MPI_Aint block_disp = plane * r + row * r;
  MPI_Datatype placed;
  MPI_Type_create_hindexed_block(1, 1, &block_disp, planes, &placed);
  const pairs::Type from_mpi = pairs::take(placed);
  MPI_Type_free(&ends);
  MPI_Type_free(&rows);
  MPI_Type_free(&planes);
  ASSERT_TRUE(from_mpi.strided()) << from_mpi.describe();
  EXPECT_EQ(*from_mpi.strided(), *dst.strided());

  std::mt19937_64 rng(5);
  std::vector<std::uint64_t> words(static_cast<std::size_t>(plane * e / 8) + 2);
  for (auto& w : words) w = rng();
  char* field = reinterpret_cast<char*>(words.data());  // 8-aligned: 8 B words
  const std::vector<char> before(field, field + plane * e);
  std::vector<char> want = before;
  ferry::copy(want.data(), 1, sp, want.data(), 1, dp);
  ferry::copy(want.data(), 1, sm, want.data(), 1, dm);
  HostSide hs{build_plan(src, 1)}, hd{build_plan(dst, 1)};
  const SidePlan s = hs.side(field), d = hd.side(field);
  ASSERT_TRUE(lean_fits(s.head) && lean_fits(d.head));
  const LeanMove m = make_lean(s, d, move_lw(s, d), 0, 0);
  EXPECT_EQ(m.kind, kCopySame);
  EXPECT_EQ(m.lw, 3);
  emulate_lean({m}, partition({src.size()}, 4096), {field, field});
  EXPECT_TRUE(std::equal(want.begin(), want.end(), field)) << "lean record, in place";

  // Pack both faces into one allocation: -X's buffer at 0, +X's 64 B after the first's end.
  const i64 face = sp.size(), off_b = face + 64;
  const pairs::Type packed = ferry::interleave(pairs::Type(ferry::make_dense(0, face), 0, face),
                                               pairs::Type(ferry::make_dense(off_b, face), 0, face), 24);
  ASSERT_TRUE(packed.strided());
  EXPECT_EQ(*packed.strided(), (ferry::StridedBlock{0, {24, 2, n * n}, {1, off_b, 24}}));
  std::copy(before.begin(), before.end(), field);
  const pairs::Type faces = ferry::interleave(sp, sm);
  std::vector<char> out(static_cast<std::size_t>(off_b + face), char(0x5A)), out_want = out;
  i64 pos = 0;
  ferry::pack(field, 1, sp, out_want.data(), face, &pos);
  pos = 0;
  ferry::pack(field, 1, sm, out_want.data() + off_b, face, &pos);
  HostSide hp{build_plan(packed, 1)};
  const std::vector<char> out_before = out;
  check_move(hs.side(field), hp.side(out.data()), faces.size(), out.data(), out_before, out_want, rng,
             "pack of both x faces");
}

TEST(Interleave, LayoutsThatCannotPairAreErrors) {
  auto cls = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const ferry::Error& e) {
      return e.mpi_error_class();
    }
    return MPI_SUCCESS;
  };
  const int dims[3] = {4, 4, 8};
  const int e2[3] = {2, 2, 2}, e3[3] = {2, 2, 4}, e4[3] = {1, 4, 2}, at[3] = {0, 0, 0}, at2[3] = {1, 1, 3};
  const pairs::Type a = pairs::box(dims, e2, at, 8), b = pairs::box(dims, e2, at2, 8);
  const pairs::Type bigger = pairs::box(dims, e3, at, 8), other = pairs::box(dims, e4, at, 8);
  MPI_Datatype idx;
  const int lens[2] = {1, 2}, disps[2] = {0, 5};
  MPI_Type_indexed(2, lens, disps, MPI_DOUBLE, &idx);
  const pairs::Type irregular = pairs::take(idx);
  EXPECT_EQ(cls([&] { ferry::interleave(a, b); }), MPI_SUCCESS);
  EXPECT_EQ(cls([&] { ferry::interleave(a, b, 8); }), MPI_SUCCESS);
  EXPECT_EQ(cls([&] { ferry::interleave(a, bigger); }), MPI_ERR_TYPE);   // sizes differ
  EXPECT_EQ(cls([&] { ferry::interleave(a, other); }), MPI_ERR_TYPE);    // shapes differ
  EXPECT_EQ(cls([&] { ferry::interleave(a, b, 12); }), MPI_ERR_TYPE);    // 12 does not divide 16
  EXPECT_EQ(cls([&] { ferry::interleave(a, b, -8); }), MPI_ERR_ARG);
  EXPECT_EQ(cls([&] { ferry::interleave(irregular, irregular); }), MPI_ERR_TYPE);
}
