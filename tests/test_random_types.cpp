// tests/test_random_types.cpp — Ferry against the system MPI on random derived datatypes.
//
// For each of N random types (FERRY_RANDOM_TYPES, default 10000), type i built from seed
// FERRY_SEED + i (FERRY_SEED has a fixed default; FERRY_MAX_DEPTH, default 4, bounds the nesting),
// the test commits the type with MPI and with Ferry
// and checks, for count 1 and a random count in 2..4 (and now and then 0):
//   - ferry_pack_size == MPI_Pack_size;
//   - ferry_pack writes exactly the bytes MPI_Pack writes (into identically poisoned buffers, at
//     position 0 with a tight outsize, and at a non-zero position followed by a second pack call),
//     and leaves the same final position; the input is never modified;
//   - for types whose `count` elements do not overlap, ferry_unpack leaves the whole output region
//     byte-for-byte as MPI_Unpack leaves it (so Ferry touches exactly the bytes MPI touches);
//   - ferry::Type's size, lb, extent, true lb and true extent equal MPI's, blocks() is consistent
//     with the type map, dense()/strided() agree with the type map, and the IR stays within a bound
//     proportional to the size of the type's description (no unrolled counts).
//
// The oracle is Open MPI, checked itself against the reference type map the generator computes
// from the MPI standard's definitions (random_type.hpp). Open MPI 4.1 packs a few types against
// their own type map (e.g. MPI_Type_vector(4, 1, -1, MPI_CHAR) reads bytes 0,1,2,3 instead of
// 0,-1,-2,-3; a type whose data is contiguous but whose extent is not its size is packed as
// count*size contiguous bytes). For those (type, count) pairs only, Ferry is compared with a
// pack/unpack done by the reference type map, and the test prints how many there were.
//
// With another MPI than Open MPI (MPICH: its MPI_Unpack divides by zero on some of these types),
// the MPI is not asked to pack or unpack: Ferry is compared with the reference type map alone
// (metadata still with the MPI's).
//
// The test prints its seed; a failure prints the seed, the line that reproduces that one type, and
// how the type was built.
#include "test_random_types.hpp"

namespace {

using namespace ferry_random_types;

// On a pack mismatch, say which type-map entry Ferry got wrong.
void explain_pack(MPI_Datatype type, Oracle& oracle, int count) {
  const std::vector<i64>& want = oracle.map(count);
  if (want.empty()) return;
  const auto [mn, mx] = std::minmax_element(want.begin(), want.end());
  const std::vector<i64> got = ferry_packed_map(type, count, *mn, *mx + 1, static_cast<i64>(want.size()));
  for (size_t j = 0; j < want.size() && j < got.size(); ++j) {
    if (want[j] != got[j]) {
      ADD_FAILURE() << "packed byte " << j << " (of " << want.size() << "): the type map has offset "
                    << want[j] << ", Ferry read offset " << got[j];
      return;
    }
  }
}

// Pack and unpack `count` elements with the oracle and with Ferry and compare everything observable.
void check_count(MPI_Datatype type, const MpiMeta& m, Oracle& oracle, int count, std::mt19937_64& rng) {
  SCOPED_TRACE("count " + std::to_string(count) +
               (oracle.mpi_follows_map(count) ? "" : " (Open MPI packs this against the type map: "
                                                     "compared with the reference type map)"));
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  // Pack size.
  int mpi_size = -1, fer_size = -1;
  ASSERT_EQ(MPI_Pack_size(count, type, MPI_COMM_WORLD, &mpi_size), MPI_SUCCESS);
  const int rc_size = ferry_pack_size(count, type, &fer_size);
  ASSERT_EQ(rc_size, MPI_SUCCESS) << "ferry_pack_size: " << ferry_rc(rc_size);
  ASSERT_EQ(fer_size, mpi_size) << "ferry_pack_size vs MPI_Pack_size";
  ASSERT_EQ(static_cast<i64>(mpi_size), count * m.size);
  const int S = mpi_size;

  // Input for packing: exactly the bytes the type map reads.
  Region in = region_for(oracle.map(count), 0);
  fill_random(in.bytes, rng);
  const std::vector<unsigned char> in_copy = in.bytes;
  bool pack_ok = true;

  // 1. Position 0, outsize exactly the packed size.
  {
    std::vector<unsigned char> mo(static_cast<size_t>(S + kMargin), kPackPoison), fo = mo;
    int mpos = 0, fpos = 0;
    ASSERT_EQ(oracle.pack(in.origin(), count, mo.data(), S, &mpos), MPI_SUCCESS);
    const int rc = ferry_pack(in.origin(), count, type, fo.data(), S, &fpos);
    EXPECT_EQ(rc, MPI_SUCCESS) << "ferry_pack at position 0: " << ferry_rc(rc);
    EXPECT_EQ(fpos, mpos) << "final position after ferry_pack at position 0";
    pack_ok = same_bytes("ferry_pack at position 0 (packed bytes, then margin)", mo.data(), fo.data(),
                         mo.size());
    if (!pack_ok) explain_pack(type, oracle, count);

    // The C++ API gives the same bytes.
    std::vector<unsigned char> co(mo.size(), kPackPoison);
    try {
      i64 cpos = 0;
      ferry::pack(in.origin(), count, *ferry::lookup(type), co.data(), S, &cpos);
      EXPECT_EQ(cpos, mpos) << "final position after ferry::pack";
      same_bytes("ferry::pack (C++ API) at position 0", mo.data(), co.data(), mo.size());
    } catch (const ferry::Error& e) {
      ADD_FAILURE() << "ferry::pack threw class " << e.mpi_error_class() << ": " << e.what();
    }
  }

  // 2. Non-zero start, then a second pack call continuing at the returned position.
  const int count2 = count == 0 ? 0 : pick(1, count);
  {
    const int start = pick(1, 13);
    const int S2 = static_cast<int>(count2 * m.size);
    const int outsize = start + S + S2 + pick(0, 1) * pick(0, 7);
    std::vector<unsigned char> mo(static_cast<size_t>(outsize + kMargin), kPackPoison), fo = mo;
    int mpos = start, fpos = start;
    ASSERT_EQ(oracle.pack(in.origin(), count, mo.data(), outsize, &mpos), MPI_SUCCESS);
    ASSERT_EQ(oracle.pack(in.origin(), count2, mo.data(), outsize, &mpos), MPI_SUCCESS);
    int rc = ferry_pack(in.origin(), count, type, fo.data(), outsize, &fpos);
    EXPECT_EQ(rc, MPI_SUCCESS) << "first ferry_pack at position " << start << ": " << ferry_rc(rc);
    rc = ferry_pack(in.origin(), count2, type, fo.data(), outsize, &fpos);
    EXPECT_EQ(rc, MPI_SUCCESS) << "second ferry_pack (count " << count2 << "): " << ferry_rc(rc);
    EXPECT_EQ(fpos, mpos) << "final position after two ferry_pack calls from position " << start;
    if (pack_ok) {
      same_bytes("two consecutive ferry_pack calls (count " + std::to_string(count) + ", then " +
                     std::to_string(count2) + ") from position " + std::to_string(start),
                 mo.data(), fo.data(), mo.size());
    }
  }
  same_bytes("pack input (must not be modified)", in_copy.data(), in.bytes.data(), in.bytes.size(), in.lo);

  // 3. Unpack, unless the elements overlap (unpacking into them is erroneous).
  if (ferry_test::map_overlaps(oracle.map(count))) return;
  {
    const int start = pick(0, 9);
    const int S2 = static_cast<int>(count2 * m.size);
    const int insize = start + S + S2;
    std::vector<unsigned char> packed(static_cast<size_t>(std::max(insize, 1)));  // exactly insize
    fill_random(packed, rng);
    const std::vector<unsigned char> packed_copy = packed;
    Region mo = region_for(oracle.map(count));
    std::fill(mo.bytes.begin(), mo.bytes.end(), kUnpackPoison);
    Region fo = mo, co = mo, mo1 = mo;
    int mpos = start, fpos = start;
    ASSERT_EQ(oracle.unpack(packed.data(), insize, &mpos, mo.origin(), count), MPI_SUCCESS);
    const int mpos1 = mpos;
    mo1.bytes = mo.bytes;
    int rc = ferry_unpack(packed.data(), insize, &fpos, fo.origin(), count, type);
    EXPECT_EQ(rc, MPI_SUCCESS) << "ferry_unpack at position " << start << ": " << ferry_rc(rc);
    EXPECT_EQ(fpos, mpos) << "position after ferry_unpack from position " << start;
    const bool unpack_ok = same_bytes("ferry_unpack (whole output region, offsets from the origin)",
                                      mo.bytes.data(), fo.bytes.data(), mo.bytes.size(), mo.lo);

    // Second call continues at the returned position and overwrites the first count2 elements.
    ASSERT_EQ(oracle.unpack(packed.data(), insize, &mpos, mo.origin(), count2), MPI_SUCCESS);
    rc = ferry_unpack(packed.data(), insize, &fpos, fo.origin(), count2, type);
    EXPECT_EQ(rc, MPI_SUCCESS) << "second ferry_unpack (count " << count2 << "): " << ferry_rc(rc);
    EXPECT_EQ(fpos, mpos) << "position after the second ferry_unpack";
    if (unpack_ok) {
      same_bytes("second consecutive ferry_unpack (whole output region)", mo.bytes.data(),
                 fo.bytes.data(), mo.bytes.size(), mo.lo);
    }
    same_bytes("unpack input (must not be modified)", packed_copy.data(), packed.data(), packed.size());

    // The C++ API, first call only.
    try {
      i64 cpos = start;
      ferry::unpack(packed.data(), insize, &cpos, co.origin(), count, *ferry::lookup(type));
      EXPECT_EQ(cpos, mpos1) << "position after ferry::unpack";
      if (unpack_ok)
        same_bytes("ferry::unpack (C++ API)", mo1.bytes.data(), co.bytes.data(), mo1.bytes.size(), mo1.lo);
    } catch (const ferry::Error& e) {
      ADD_FAILURE() << "ferry::unpack threw class " << e.mpi_error_class() << ": " << e.what();
    }
  }
}

// Everything for one seed: packing and metadata, or (canonical_only) the canonical-form checks.
void check_seed(std::uint64_t seed, bool canonical_only) {
  RandomType r;
  try {
    r = TypeGenerator(seed, static_cast<int>(env_u64("FERRY_MAX_DEPTH", 4))).next();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "generator failed for seed " << seed << ": " << e.what();
    return;
  }
  SCOPED_TRACE("seed " + std::to_string(seed) + " (reproduce: FERRY_SEED=" + std::to_string(seed) +
               " FERRY_RANDOM_TYPES=1 test_random_types)\n  type: " + r.description);
  bool ferry_committed = false;
  if (!r.named) {
    ASSERT_EQ(MPI_Type_commit(&r.type), MPI_SUCCESS);
    const int rc = ferry_type_commit(r.type);
    EXPECT_EQ(rc, MPI_SUCCESS) << "ferry_type_commit: " << ferry_rc(rc);
    ferry_committed = rc == MPI_SUCCESS;
  }
  if (r.named || ferry_committed) {
    try {
      const MpiMeta m = ferry_test::mpi_meta(r.type);
      if (canonical_only) {
        std::mt19937_64 rng(seed ^ 0xC0FFEEull);
        check_canonical_forms(r.type, m, *ferry::lookup(r.type), rng);
      } else if (static_cast<i64>(r.map.size()) != m.size) {
        ADD_FAILURE() << "test bug: reference type map has " << r.map.size() << " bytes, MPI_Type_size "
                      << m.size;
      } else {
        check_metadata(r.type, m, r);
        std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
        Oracle oracle(r.type, m, r.map, seed, r.description);
        const int counts[2] = {1, std::uniform_int_distribution<int>(2, 4)(rng)};
        for (int count : counts) check_count(r.type, m, oracle, count, rng);
        if (seed % 16 == 0) check_count(r.type, m, oracle, 0, rng);
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "exception: " << e.what();
    }
  }
  if (ferry_committed) {
    const int rc = ferry_type_free(r.type);
    EXPECT_EQ(rc, MPI_SUCCESS) << "ferry_type_free: " << ferry_rc(rc);
  }
  if (!r.named) MPI_Type_free(&r.type);
}

int failures_so_far() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
}

// Runs check_seed over FERRY_RANDOM_TYPES seeds from FERRY_SEED; stops after
// FERRY_MAX_FAILING_TYPES failing types and lists the failing seeds.
void run_seeds(bool canonical_only) {
  const std::uint64_t base = env_u64("FERRY_SEED", kDefaultSeed);
  const i64 n = static_cast<i64>(env_u64("FERRY_RANDOM_TYPES", kDefaultTypes));
  const i64 max_failing = static_cast<i64>(env_u64("FERRY_MAX_FAILING_TYPES", 20));
  i64 failing_types = 0;
  std::vector<std::uint64_t> failing;
  deviations() = Deviations{};
  std::printf("[random types] FERRY_SEED=%llu FERRY_RANDOM_TYPES=%lld (rerun with both set); "
              "oracle: %s\n",
              static_cast<unsigned long long>(base), static_cast<long long>(n),
              mpi_is_oracle() ? "Open MPI, the reference type map where it deviates"
                              : "the reference type map (this MPI is not Open MPI)");
  for (i64 i = 0; i < n; ++i) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(i);
    const int before = failures_so_far();
    check_seed(seed, canonical_only);
    if (failures_so_far() != before) {
      failing.push_back(seed);
      if (++failing_types >= max_failing) {
        ADD_FAILURE() << "stopping after " << failing_types
                      << " failing types (FERRY_MAX_FAILING_TYPES raises the limit)";
        break;
      }
    }
    if (n >= 100000 && (i + 1) % 100000 == 0)
      std::fprintf(stderr, "[random types] %lld of %lld\n", static_cast<long long>(i + 1),
                   static_cast<long long>(n));
  }
  const Deviations& d = deviations();
  if (d.cases > 0 && !canonical_only) {
    std::printf("[random types] Open MPI packed %lld (type, count) cases against the MPI type map; "
                "Ferry was compared with the reference type map there. Examples:\n",
                static_cast<long long>(d.cases));
    for (const auto& e : d.examples) std::printf("  %s\n", e.c_str());
  }
  if (!failing.empty()) {
    std::ostringstream os;
    for (auto s : failing) os << ' ' << s;
    ADD_FAILURE() << failing.size() << " failing seeds:" << os.str();
  }
}

TEST(RandomTypes, MatchMpi) { run_seeds(false); }

// Kept apart from MatchMpi: a failure here is a canonical form that is not unique (type.hpp's
// promise), not a wrong byte.
TEST(RandomTypes, EquivalentDescriptionsCanonicalizeAlike) { run_seeds(true); }

struct Owned {
  MPI_Datatype t = MPI_DATATYPE_NULL;
  ~Owned() {
    if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
  }
};

// ---------------------------------------------------------------------------------------------
// "All functions are thread-safe" (ferry.h): worker threads pack and unpack a fixed set of committed
// types while the main thread (the only one that calls MPI: MPI_Init gave MPI_THREAD_SINGLE)
// commits and frees other types through Ferry's registry.
TEST(RandomTypes, ConcurrentPackWhileCommitting) {
  struct Item {
    RandomType r;
    MpiMeta m;
    Region in;
    std::vector<unsigned char> packed;  // what packing 2 elements must give
  };
  std::vector<std::unique_ptr<Item>> items;
  std::mt19937_64 rng(7);
  for (std::uint64_t seed = 900000; items.size() < 24 && seed < 901000; ++seed) {
    auto it = std::make_unique<Item>();
    it->r = TypeGenerator(seed).next();
    if (it->r.named) continue;
    it->m = ferry_test::mpi_meta(it->r.type);
    if (it->m.size == 0 || it->m.size > 4096) {
      MPI_Type_free(&it->r.type);
      continue;
    }
    ASSERT_EQ(MPI_Type_commit(&it->r.type), MPI_SUCCESS);
    ASSERT_EQ(ferry_type_commit(it->r.type), MPI_SUCCESS) << ferry_error_string();
    Oracle oracle(it->r.type, it->m, it->r.map, seed, it->r.description);
    it->in = region_for(oracle.map(2));
    fill_random(it->in.bytes, rng);
    it->packed.assign(static_cast<size_t>(2 * it->m.size), 0);
    int pos = 0;
    ASSERT_EQ(oracle.pack(it->in.origin(), 2, it->packed.data(), static_cast<int>(it->packed.size()), &pos),
              MPI_SUCCESS);
    items.push_back(std::move(it));
  }
  ASSERT_GE(items.size(), 8u);

  std::atomic<bool> stop{false};
  std::atomic<long> packs{0}, wrong{0};
  std::vector<std::string> first_error(4);
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      std::vector<unsigned char> out;
      for (size_t i = static_cast<size_t>(w); !stop.load() || packs.load() < 2000; ++i) {
        Item& it = *items[i % items.size()];
        out.assign(it.packed.size(), 0);
        int pos = 0, size = 0;
        const int rc1 = ferry_pack_size(2, it.r.type, &size);
        const int rc2 = ferry_pack(it.in.origin(), 2, it.r.type, out.data(), static_cast<int>(out.size()), &pos);
        if (rc1 != MPI_SUCCESS || rc2 != MPI_SUCCESS || size != static_cast<int>(out.size()) ||
            pos != static_cast<int>(out.size()) || out != it.packed) {
          if (wrong.fetch_add(1) == 0 || first_error[static_cast<size_t>(w)].empty())
            first_error[static_cast<size_t>(w)] = it.r.description + ": rc " + std::to_string(rc1) + "/" +
                                                  std::to_string(rc2) + " " + ferry_error_string();
        }
        ++packs;
        if (packs.load() > 400000) break;
      }
    });
  }
  // Churn the registry from the MPI thread meanwhile.
  for (std::uint64_t seed = 700000; seed < 700400; ++seed) {
    RandomType r = TypeGenerator(seed).next();
    if (r.named) continue;
    MPI_Type_commit(&r.type);
    EXPECT_EQ(ferry_type_commit(r.type), MPI_SUCCESS) << ferry_error_string();
    int size = -1;
    EXPECT_EQ(ferry_pack_size(1, r.type, &size), MPI_SUCCESS);
    EXPECT_EQ(ferry_type_free(r.type), MPI_SUCCESS);
    MPI_Type_free(&r.type);
  }
  stop = true;
  for (auto& t : workers) t.join();
  EXPECT_EQ(wrong.load(), 0) << "of " << packs.load() << " concurrent packs; e.g. " << first_error[0]
                             << first_error[1] << first_error[2] << first_error[3];
  for (auto& it : items) {
    EXPECT_EQ(ferry_type_free(it->r.type), MPI_SUCCESS);
    MPI_Type_free(&it->r.type);
  }
}

// ---------------------------------------------------------------------------------------------
// Every block length the copy loops special-case (fixed-size moves for 1..64 bytes, memcpy above),
// at odd strides, negative strides, and with an extent that makes consecutive elements continue
// the stride (the count then merges into the outermost dimension).
TEST(RandomTypes, EveryBlockLength) {
  std::mt19937_64 rng(11);
  int failing = 0;
  for (int len = 1; len <= 140 && failing < 10; ++len) {
    for (int variant = 0; variant < 6 && failing < 10; ++variant) {
      const int n = variant % 3 == 0 ? 1 : variant % 3 == 1 ? 3 : 6;
      MPI_Aint stride = variant < 3 ? len + 1 + (len % 7) : -(len + 3);
      if (variant == 2) stride = len + 64;
      Owned v, r;
      ASSERT_EQ(MPI_Type_create_hvector(n, len, stride, MPI_BYTE, &v.t), MPI_SUCCESS);
      MPI_Datatype type = v.t;
      std::string what = "hvector(" + std::to_string(n) + ", " + std::to_string(len) + ", " +
                         std::to_string(stride) + " bytes, MPI_BYTE)";
      if (stride > 0 && variant != 1) {  // consecutive elements continue the stride
        ASSERT_EQ(MPI_Type_create_resized(v.t, 0, n * stride, &r.t), MPI_SUCCESS);
        type = r.t;
        what = "resized(0, " + std::to_string(n * stride) + ", " + what + ")";
      }
      SCOPED_TRACE(what);
      ASSERT_EQ(MPI_Type_commit(&type), MPI_SUCCESS);
      ASSERT_EQ(ferry_type_commit(type), MPI_SUCCESS) << ferry_error_string();
      const MpiMeta m = ferry_test::mpi_meta(type);
      std::vector<i64> map;
      for (int i = 0; i < n; ++i)
        for (int b = 0; b < len; ++b) map.push_back(i * static_cast<i64>(stride) + b);
      Oracle oracle(type, m, map, 0, what);
      const int before = failures_so_far();
      for (int count : {1, 2, 5}) check_count(type, m, oracle, count, rng);
      if (failures_so_far() != before) ++failing;
      EXPECT_EQ(ferry_type_free(type), MPI_SUCCESS);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The general form stays compact: types with thousands of blocks have IRs of a few nodes, and still
// pack exactly as MPI does.

void check_compact(MPI_Datatype type, const char* what, i64 max_nodes, i64 min_blocks) {
  SCOPED_TRACE(what);
  ASSERT_EQ(MPI_Type_commit(&type), MPI_SUCCESS);
  const int rc = ferry_type_commit(type);
  ASSERT_EQ(rc, MPI_SUCCESS) << ferry_rc(rc);
  std::shared_ptr<const ferry::Type> t;
  try {
    t = ferry::lookup(type);
  } catch (const ferry::Error& e) {
    FAIL() << "ferry::lookup threw " << e.what();
  }
  const MpiMeta m = ferry_test::mpi_meta(type);
  // These types are ones Open MPI packs correctly: its packed map is the type map.
  const std::vector<i64> map =
      ferry_test::mpi_packed_map(type, 1, m.true_lb, m.true_lb + m.true_extent);
  const i64 runs = ferry_test::map_runs(map);
  EXPECT_GE(runs, min_blocks) << "test setup: type has fewer runs than intended";
  EXPECT_GE(t->blocks(), runs);
  EXPECT_LE(t->root()->nodes, max_nodes)
      << "IR has " << t->root()->nodes << " nodes for " << t->blocks() << " blocks:\n"
      << ferry::to_string(t->root());
  // Far below the number of blocks (and so below blocks * count for any count).
  EXPECT_LE(t->root()->nodes * 10, t->blocks());
  Oracle oracle(type, m, map, 0, what);
  std::mt19937_64 rng(42);
  for (int count : {1, 3}) check_count(type, m, oracle, count, rng);
  EXPECT_EQ(ferry_type_free(type), MPI_SUCCESS) << ferry_error_string();
}

TEST(RandomTypes, GeneralFormStaysCompact) {
  {  // vector of an irregular indexed type: 7000 blocks per element
    Owned idx, vec;
    const int lens[7] = {1, 3, 2, 5, 1, 2, 4};
    const int disps[7] = {0, 2, 7, 11, 20, 23, 30};
    ASSERT_EQ(MPI_Type_indexed(7, lens, disps, MPI_INT, &idx.t), MPI_SUCCESS);
    ASSERT_EQ(MPI_Type_vector(1000, 1, 2, idx.t, &vec.t), MPI_SUCCESS);
    check_compact(vec.t, "vector(1000, 1, 2, indexed(7 irregular blocks of MPI_INT))", 64, 7000);
  }
  {  // hvector of a struct with holes
    Owned st, hv;
    const int lens[3] = {1, 1, 3};
    const MPI_Aint disps[3] = {0, 8, 20};
    const MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    ASSERT_EQ(MPI_Type_create_struct(3, lens, disps, types, &st.t), MPI_SUCCESS);
    ASSERT_EQ(MPI_Type_create_hvector(2000, 2, 64, st.t, &hv.t), MPI_SUCCESS);
    check_compact(hv.t, "hvector(2000, 2, 64 bytes, struct{int@0, double@8, char[3]@20})", 64, 8000);
  }
  {  // 3-D subarray of a pair type with a hole
    Owned sub;
    const int sizes[3] = {24, 20, 16}, subs[3] = {12, 10, 8}, starts[3] = {3, 5, 7};
    ASSERT_EQ(MPI_Type_create_subarray(3, sizes, subs, starts, MPI_ORDER_C, MPI_SHORT_INT, &sub.t),
              MPI_SUCCESS);
    check_compact(sub.t, "subarray 24x20x16 -> 12x10x8 of MPI_SHORT_INT", 64, 960);
  }
  {  // cyclic(3) x block darray: many blocks, a partial cyclic block at the end
    Owned da;
    const int g[2] = {100, 64}, d[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_BLOCK},
              a[2] = {3, MPI_DISTRIBUTE_DFLT_DARG}, p[2] = {2, 2};
    ASSERT_EQ(MPI_Type_create_darray(4, 3, 2, g, d, a, p, MPI_ORDER_FORTRAN, MPI_FLOAT, &da.t),
              MPI_SUCCESS);
    check_compact(da.t, "darray 100x64 CYCLIC(3) x BLOCK on 2x2, rank 3, Fortran order", 48, 500);
  }
}

}  // namespace
