// General forms moved piece by piece (pack/batch_plan.hpp, piece_moves and piece_copy_moves): the
// lean records they make, emulated on the CPU chunk by chunk with the kernels' arithmetic, must
// pack, unpack and copy exactly what the CPU engine does, for random datatypes and for the case
// they exist for (one message's blocks merged into a struct of boxes in several arrays).
#include <ferry/pack.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "pack/batch_plan.hpp"
#include "pack/plan_build.hpp"
#include "random_type.hpp"
#include "type_pairs.hpp"

namespace {

using ferry::i64;
using namespace ferry::detail;

// A plan of (type, count) with its tables bound to host memory, as piece_moves reads it.
struct Bound {
  HostPlan hp;
  PlanHead head() const {
    PlanHead h = hp.head;
    h.plan.pieces = hp.pieces.data();
    h.plan.shapes = hp.shapes.data();
    return h;
  }
};

// Runs the moves between two slots in chunks of `chunk` bytes.
void run(const PieceMoves& pm, char* src, char* dst, i64 chunk) {
  std::vector<Chunk> chunks = partition(pm.bytes, chunk);
  for (Chunk& c : chunks) c.dst_slot = 1;
  emulate_lean(pm.moves, chunks, {src, dst});
}

// A buffer of words with the origin of `count` elements of `type` at a shift of `shift` bytes.
struct Buf {
  std::vector<std::uint64_t> words;
  char* origin = nullptr;
  char* begin() { return reinterpret_cast<char*>(words.data()); }
  Buf(MPI_Datatype type, int count, int shift, std::mt19937_64& rng) {
    const ferry_test::Span s = ferry_test::span_of(type, count);
    words.resize(static_cast<std::size_t>(s.size / 8 + 4));
    for (auto& w : words) w = rng();
    origin = ferry_test::offset_by(begin() + shift, s.origin);
  }
};

using ferry_test::env_int;

// The first seed of a random test (FERRY_SEED plus the test's own offset), printed with the last
// so that a failure can be rerun.
std::uint64_t first_seed(std::uint64_t offset, int n) {
  const std::uint64_t base = static_cast<std::uint64_t>(env_int("FERRY_SEED", 20261122)) + offset;
  std::printf("seeds %llu..%llu\n", static_cast<unsigned long long>(base),
              static_cast<unsigned long long>(base + static_cast<std::uint64_t>(n) - 1));
  return base;
}

// No limit but the given number of moves: every plan that fits the lean kernel goes piece by piece.
PieceLimits up_to(std::int64_t moves) {
  PieceLimits l;
  l.max_moves = moves;
  l.min_mean_bytes = 0;
  return l;
}

TEST(Pieces, RandomGeneralFormsMatchTheCpuEngine) {
  const int n = env_int("FERRY_PLAN_TYPES", 3000);
  const std::uint64_t base = first_seed(4242, n);
  std::mt19937_64 rng(base);
  const PieceLimits all = up_to(1 << 20);
  int packs = 0, copies = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(i);
    ferry_test::TypePair p = ferry_test::make_pair(seed);
    const ferry::Type t = ferry::translate(p.src);
    const int count = p.src_count;
    const Bound b{build_plan(t, count)};
    const i64 bytes = b.hp.head.bytes;
    PieceMoves pm;
    if (bytes == 0 || !piece_moves(b.head(), true, 0, 0, all, pm)) {
      ferry_test::release(p);
      continue;
    }
    ++packs;
    const std::string what = "seed " + std::to_string(seed) + "\n" + p.description;
    Buf mem(p.src, count, static_cast<int>(rng() % 4) * 4, rng);
    std::vector<char> want(static_cast<std::size_t>(bytes)), got(want.size() + 32, char(0x5A));
    i64 pos = 0;
    ferry::pack(mem.origin, count, t, want.data(), bytes, &pos);
    char* packed = got.data() + (rng() % 2) * 8;
    ASSERT_TRUE(piece_moves(b.head(), true, reinterpret_cast<std::uintptr_t>(mem.origin),
                            reinterpret_cast<std::uintptr_t>(packed), all, pm));
    run(pm, mem.origin, packed, 16 * (1 + static_cast<i64>(rng() % 64)));
    ASSERT_TRUE(std::equal(want.begin(), want.end(), packed)) << "pack, " << what;
    // Unpack into a fresh buffer: what ferry::unpack writes there, byte for byte.
    Buf out_want(p.src, count, 0, rng), out_got(p.src, count, 0, rng);
    out_got.words = out_want.words;
    pos = 0;
    ferry::unpack(want.data(), bytes, &pos, out_want.origin, count, t);
    ASSERT_TRUE(piece_moves(b.head(), false, reinterpret_cast<std::uintptr_t>(out_got.origin),
                            reinterpret_cast<std::uintptr_t>(packed), all, pm));
    run(pm, packed, out_got.origin, 16 * (1 + static_cast<i64>(rng() % 64)));
    ASSERT_TRUE(out_got.words == out_want.words) << "unpack, " << what;
    // A copy from the type into itself elsewhere: the pieces pair up.
    {
      Buf dst(p.src, count, static_cast<int>(rng() % 2) * 8, rng);
      std::vector<std::uint64_t> dst_want = dst.words;
      char* dw = ferry_test::offset_by(reinterpret_cast<char*>(dst_want.data()),
                                       dst.origin - dst.begin());
      pos = 0;
      ferry::unpack(want.data(), bytes, &pos, dw, count, t);
      ASSERT_TRUE(piece_copy_moves(b.head(), b.head(), reinterpret_cast<std::uintptr_t>(mem.origin),
                                   reinterpret_cast<std::uintptr_t>(dst.origin), all, pm));
      run(pm, mem.origin, dst.origin, 16 * (1 + static_cast<i64>(rng() % 64)));
      ASSERT_TRUE(dst.words == dst_want) << "copy, " << what;
      ++copies;
    }
    ferry_test::release(p);
  }
  std::printf("general forms moved piece by piece: %d packs and unpacks, %d copies\n", packs, copies);
  EXPECT_GT(packs, n / 20);
}

// Copies between two different layouts of the same size (type_pairs.hpp: random types, indexed and
// vector layouts, boxes): the segments of each side are cut where the other's end.
TEST(Pieces, RandomPairsCopyAsTheCpuEngine) {
  const int n = env_int("FERRY_PLAN_TYPES", 3000);
  const std::uint64_t base = first_seed(5151, n);
  std::mt19937_64 rng(base);
  const PieceLimits all = up_to(1 << 16);
  int copies = 0, cut = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(i);
    ferry_test::TypePair p = ferry_test::make_pair(seed);
    const ferry::Type ts = ferry::translate(p.src), td = ferry::translate(p.dst);
    const Bound bs{build_plan(ts, p.src_count)}, bd{build_plan(td, p.dst_count)};
    const i64 bytes = bs.hp.head.bytes;
    Buf src(p.src, p.src_count, static_cast<int>(rng() % 4) * 4, rng);
    Buf dst(p.dst, p.dst_count, static_cast<int>(rng() % 2) * 8, rng);
    PieceMoves pm;
    if (bytes == 0 || p.dst_overlaps ||
        !piece_copy_moves(bs.head(), bd.head(), reinterpret_cast<std::uintptr_t>(src.origin),
                          reinterpret_cast<std::uintptr_t>(dst.origin), all, pm)) {
      ferry_test::release(p);
      continue;
    }
    ++copies;
    if (pm.moves.size() > std::max<std::size_t>(1, static_cast<std::size_t>(bs.hp.head.plan.npieces))) ++cut;
    std::vector<std::uint64_t> want = dst.words;
    char* w = ferry_test::offset_by(reinterpret_cast<char*>(want.data()), dst.origin - dst.begin());
    std::vector<char> packed(static_cast<std::size_t>(bytes));
    i64 pos = 0;
    ferry::pack(src.origin, p.src_count, ts, packed.data(), bytes, &pos);
    pos = 0;
    ferry::unpack(packed.data(), bytes, &pos, w, p.dst_count, td);
    run(pm, src.origin, dst.origin, 16 * (1 + static_cast<i64>(rng() % 64)));
    ASSERT_TRUE(dst.words == want) << "seed " << seed << "\n" << p.description;
    ferry_test::release(p);
  }
  std::printf("pairs copied piece by piece: %d (%d with cut segments)\n", copies, cut);
  EXPECT_GT(copies, n / 4);
  EXPECT_GT(cut, n / 20);
}

// Two arrays of n^3 doubles ("fields") and a struct of boxes in them at absolute addresses
// (MPI_BOTTOM): an x face in both fields and an edge in the first, sent from interior boxes and
// received into halo boxes of the same extents, as one merged halo message. It must go piece by
// piece under the default limits, in 8-byte words for 3-double rows.
struct Box {
  int field;
  int ext[3];
  int at[3];
};

MPI_Datatype boxes_of(double* const fields[2], int n, const std::vector<Box>& boxes) {
  const int dims[3] = {n, n, n};
  std::vector<MPI_Datatype> types;
  std::vector<MPI_Aint> disp;
  std::vector<int> lens;
  for (const Box& b : boxes) {
    MPI_Datatype t;
    MPI_Type_create_subarray(3, dims, b.ext, b.at, MPI_ORDER_C, MPI_DOUBLE, &t);
    types.push_back(t);
    MPI_Aint d;
    MPI_Get_address(fields[b.field], &d);
    disp.push_back(d);
    lens.push_back(1);
  }
  MPI_Datatype s;
  MPI_Type_create_struct(static_cast<int>(boxes.size()), lens.data(), disp.data(), types.data(), &s);
  MPI_Type_commit(&s);
  for (MPI_Datatype& t : types) MPI_Type_free(&t);
  return s;
}

TEST(Pieces, MergedHaloBoxesGoPieceByPiece) {
  constexpr int n = 20, w = 3;
  std::vector<std::vector<double>> a(2, std::vector<double>(n * n * n)), b = a;
  for (std::size_t f = 0; f < 2; ++f)
    for (std::size_t i = 0; i < a[f].size(); ++i) {
      a[f][i] = static_cast<double>(f) * 1e6 + static_cast<double>(i);
      b[f][i] = -1;
    }
  double* src_fields[2] = {a[0].data(), a[1].data()};
  double* dst_fields[2] = {b[0].data(), b[1].data()};
  // An x face (interior x = w..2w-1 -> halo x = n-w..n-1) in both fields, then the +x+y edge.
  const Box face_s{0, {n - 2 * w, n - 2 * w, w}, {w, w, w}}, face_d{0, {n - 2 * w, n - 2 * w, w}, {w, w, n - w}};
  const Box edge_s{0, {n - 2 * w, w, w}, {w, w, w}}, edge_d{0, {n - 2 * w, w, w}, {w, n - w, n - w}};
  Box face_s1 = face_s, face_d1 = face_d;
  face_s1.field = face_d1.field = 1;
  MPI_Datatype st = boxes_of(src_fields, n, {face_s, face_s1, edge_s});
  MPI_Datatype dt = boxes_of(dst_fields, n, {face_d, face_d1, edge_d});
  const ferry::Type ts = ferry::translate(st), td = ferry::translate(dt);
  const Bound bs{build_plan(ts, 1)}, bd{build_plan(td, 1)};
  ASSERT_GT(bs.hp.head.plan.npieces, 1) << ts.describe();
  auto at = [&](int z, int y, int x) { return static_cast<std::size_t>((z * n + y) * n + x); };
  PieceMoves pm;
  ASSERT_TRUE(piece_moves(bs.head(), true, 0, 0, PieceLimits{}, pm));
  for (const LeanMove& m : pm.moves) EXPECT_EQ(m.lw, 3) << "3-double rows move in 8-byte words";
  // The chunk-order key of the first byte: the face's first element in the first field.
  EXPECT_EQ(lean_offset_of(pm.moves[0], 0), static_cast<i64>(reinterpret_cast<std::uintptr_t>(&a[0][at(w, w, w)])));
  ASSERT_TRUE(piece_copy_moves(bs.head(), bd.head(), 0, 0, PieceLimits{}, pm));
  run(pm, nullptr, nullptr, 4096);  // absolute addresses: slots at 0
  for (std::size_t f = 0; f < 2; ++f)
    for (int z = 0; z < n; ++z)
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x) {
          const bool inner = z >= w && z < n - w;
          const bool face = inner && y >= w && y < n - w && x >= n - w;
          const bool edge = f == 0 && inner && y >= n - w && x >= n - w;
          const double want = face ? a[f][at(z, y, x - (n - 2 * w))]
                              : edge ? a[f][at(z, y - (n - 2 * w), x - (n - 2 * w))] : -1;
          ASSERT_EQ(b[f][at(z, y, x)], want) << "field " << f << " at " << z << "," << y << "," << x;
        }
  const std::size_t paired = pm.moves.size();
  // Into the same boxes in another order (the bytes land elsewhere), the segments are cut where
  // the other side's end: more moves. A budget below that refuses, leaving nothing.
  MPI_Datatype ot = boxes_of(dst_fields, n, {edge_d, face_d, face_d1});
  const ferry::Type to = ferry::translate(ot);
  const Bound bo{build_plan(to, 1)};
  ASSERT_TRUE(piece_copy_moves(bs.head(), bo.head(), 0, 0, PieceLimits{}, pm));
  EXPECT_GT(pm.moves.size(), paired);
  PieceLimits tight;
  tight.max_moves = 4;
  EXPECT_FALSE(piece_copy_moves(bs.head(), bo.head(), 0, 0, tight, pm));
  EXPECT_TRUE(pm.moves.empty());
  for (MPI_Datatype* t : {&st, &dt, &ot}) MPI_Type_free(t);
}

}  // namespace
