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
#include <ferry/error.hpp>
#include <ferry/ferry.h>
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>
#include <ferry/type.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "random_type.hpp"

namespace {

using ferry_test::MpiMeta;
using ferry_test::RandomType;
using ferry_test::TypeGenerator;
using i64 = std::int64_t;

constexpr std::uint64_t kDefaultSeed = 0x0F3A77C0DE5EEDull;
constexpr i64 kDefaultTypes = 10000;
constexpr i64 kMargin = 64;  // bytes of poison around every buffer
constexpr unsigned char kPackPoison = 0x5A;
constexpr unsigned char kUnpackPoison = 0xA5;

std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return std::strtoull(v, nullptr, 0);
}

std::string rc_name(int rc) {
  if (rc == MPI_SUCCESS) return "MPI_SUCCESS";
  int cls = rc;
  MPI_Error_class(rc, &cls);
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(cls, s, &len);
  return "class " + std::to_string(cls) + " (" + std::string(s, static_cast<size_t>(len)) + ")";
}

std::string ferry_rc(int rc) {
  std::string s = rc_name(rc);
  if (rc != MPI_SUCCESS) s += ": " + std::string(ferry_error_string());
  return s;
}

void fill_random(std::vector<unsigned char>& v, std::mt19937_64& rng) {
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    const std::uint64_t w = rng();
    std::memcpy(v.data() + i, &w, 8);
  }
  for (; i < v.size(); ++i) v[i] = static_cast<unsigned char>(rng());
}

void* at(void* base, i64 off) {
  return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(base) + static_cast<std::uintptr_t>(off));
}

// A buffer covering bytes [lo, hi) relative to the origin handed to MPI and Ferry, plus `margin`
// bytes of slack on each side (poison to compare for outputs; none for inputs, so that a sanitizer
// build catches a read outside the type map).
struct Region {
  std::vector<unsigned char> bytes;
  i64 lo = 0;  // offset (relative to the origin) of bytes[0]
  void* origin() { return at(bytes.data(), -lo); }
};

Region region_for(const std::vector<i64>& map, i64 margin = kMargin) {
  Region r;
  i64 lo = 0, hi = 0;
  if (!map.empty()) {
    const auto [mn, mx] = std::minmax_element(map.begin(), map.end());
    lo = *mn;
    hi = *mx + 1;
  }
  if (hi == lo && margin == 0) hi = lo + 1;  // never an empty buffer (its data() may be null)
  r.lo = lo - margin;
  r.bytes.assign(static_cast<size_t>(hi - lo + 2 * margin), 0);
  return r;
}

// Compares two byte ranges; on mismatch records a failure that says where (offsets are reported
// relative to `base`, e.g. the origin of an unpack region).
bool same_bytes(const std::string& what, const unsigned char* want, const unsigned char* fer, size_t n,
                i64 base = 0) {
  if (std::memcmp(want, fer, n) == 0) return true;
  size_t first = 0, diffs = 0;
  for (size_t i = 0; i < n; ++i) {
    if (want[i] != fer[i]) {
      if (diffs++ == 0) first = i;
    }
  }
  std::ostringstream os;
  os << what << ": " << diffs << " of " << n << " bytes differ; first at offset "
     << static_cast<i64>(first) + base << ": expected 0x" << std::hex << int(want[first])
     << ", Ferry 0x" << int(fer[first]) << std::dec << "; expected bytes from there:";
  for (size_t i = first; i < std::min(n, first + 16); ++i) os << ' ' << int(want[i]);
  os << "; Ferry:";
  for (size_t i = first; i < std::min(n, first + 16); ++i) os << ' ' << int(fer[i]);
  ADD_FAILURE() << os.str();
  return false;
}

// The byte offsets ferry_pack reads for `count` elements, in packed order (labelled buffer, as
// ferry_test::mpi_packed_map does for MPI). Used to explain a pack mismatch.
std::vector<i64> ferry_packed_map(MPI_Datatype type, int count, i64 lo, i64 hi, i64 total) {
  lo -= 4096;
  hi += 4096;
  std::vector<i64> map(static_cast<size_t>(total), 0);
  std::vector<unsigned char> buf(static_cast<size_t>(hi - lo)), out(static_cast<size_t>(total));
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i >> (8 * pass));
    int pos = 0;
    if (ferry_pack(at(buf.data(), -lo), count, type, out.data(), static_cast<int>(total), &pos) != MPI_SUCCESS)
      return {};
    for (size_t j = 0; j < out.size(); ++j) map[j] |= static_cast<i64>(out[j]) << (8 * pass);
  }
  for (auto& off : map) off += lo;
  return map;
}

// The type map a StridedBlock describes, in its order (dimension 0 innermost).
std::vector<i64> strided_map(const ferry::StridedBlock& sb) {
  std::vector<i64> out;
  std::function<void(int, i64)> walk = [&](int d, i64 off) {
    if (d == 0) {
      for (i64 b = 0; b < sb.counts[0]; ++b) out.push_back(off + b);
      return;
    }
    for (i64 i = 0; i < sb.counts[static_cast<size_t>(d)]; ++i)
      walk(d - 1, off + i * sb.strides[static_cast<size_t>(d)]);
  };
  if (sb.ndims() > 0) walk(sb.ndims() - 1, sb.start);
  return out;
}

// Whether the MPI packs and unpacks as the oracle (Open MPI), or the reference type map does.
bool mpi_is_oracle() {
  static const bool open_mpi = [] {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    return std::string(v, static_cast<size_t>(len)).find("Open MPI") != std::string::npos;
  }();
  return open_mpi;
}

// Cases where Open MPI packed against the type map, for the summary.
struct Deviations {
  i64 cases = 0;
  std::vector<std::string> examples;
};
Deviations& deviations() {
  static Deviations d;
  return d;
}

// What MPI_Pack/MPI_Unpack should do for one type: Open MPI where it follows the type map, the
// reference type map where it does not.
class Oracle {
 public:
  Oracle(MPI_Datatype type, const MpiMeta& m, const std::vector<i64>& map, std::uint64_t seed,
         const std::string& desc)
      : type_(type), m_(m), map_(map), seed_(seed), desc_(desc) {}

  const std::vector<i64>& map(int count) { return entry(count).map; }
  bool mpi_follows_map(int count) { return entry(count).mpi_ok; }

  int pack(void* inbuf, int count, void* outbuf, int outsize, int* position) {
    const Entry& e = entry(count);
    if (e.mpi_ok) return MPI_Pack(inbuf, count, type_, outbuf, outsize, position, MPI_COMM_WORLD);
    if (*position + static_cast<i64>(e.map.size()) > outsize) return MPI_ERR_TRUNCATE;
    auto* out = static_cast<unsigned char*>(outbuf) + *position;
    for (size_t j = 0; j < e.map.size(); ++j) out[j] = *static_cast<unsigned char*>(at(inbuf, e.map[j]));
    *position += static_cast<int>(e.map.size());
    return MPI_SUCCESS;
  }
  int unpack(const void* inbuf, int insize, int* position, void* outbuf, int count) {
    const Entry& e = entry(count);
    if (e.mpi_ok)
      return MPI_Unpack(inbuf, insize, position, outbuf, count, type_, MPI_COMM_WORLD);
    if (*position + static_cast<i64>(e.map.size()) > insize) return MPI_ERR_TRUNCATE;
    const auto* in = static_cast<const unsigned char*>(inbuf) + *position;
    for (size_t j = 0; j < e.map.size(); ++j) *static_cast<unsigned char*>(at(outbuf, e.map[j])) = in[j];
    *position += static_cast<int>(e.map.size());
    return MPI_SUCCESS;
  }

 private:
  struct Entry {
    std::vector<i64> map;
    bool mpi_ok = true;
  };
  const Entry& entry(int count) {
    auto it = cache_.find(count);
    if (it != cache_.end()) return it->second;
    Entry e;
    e.map = ferry_test::repeat_map(map_, m_.extent, count);
    if (!mpi_is_oracle()) {
      e.mpi_ok = false;
      return cache_.emplace(count, std::move(e)).first->second;
    }
    if (!e.map.empty()) {
      const auto [mn, mx] = std::minmax_element(e.map.begin(), e.map.end());
      // Label what the type map covers, and what Open MPI might read instead (it packs some types
      // as count*size contiguous bytes from the true lb).
      const i64 tlb = m_.size > 0 ? m_.true_lb : 0;
      const i64 lo = std::min({*mn, tlb, tlb + (count - 1) * m_.extent});
      const i64 hi = std::max({*mx + 1, tlb + m_.true_extent + (count - 1) * m_.extent, tlb + count * m_.size});
      e.mpi_ok = ferry_test::mpi_packed_map(type_, count, lo, hi) == e.map;
    }
    if (!e.mpi_ok) {
      auto& d = deviations();
      ++d.cases;
      if (d.examples.size() < 8)
        d.examples.push_back("seed " + std::to_string(seed_) + " count " + std::to_string(count) +
                             ": " + desc_);
    }
    return cache_.emplace(count, std::move(e)).first->second;
  }

  MPI_Datatype type_;
  MpiMeta m_;
  const std::vector<i64>& map_;
  std::uint64_t seed_;
  std::string desc_;
  std::map<int, Entry> cache_;
};

// Ferry's metadata and IR against MPI's metadata and the type map.
void check_metadata(MPI_Datatype type, const MpiMeta& m, const RandomType& r) {
  std::shared_ptr<const ferry::Type> t;
  try {
    t = ferry::lookup(type);
  } catch (const ferry::Error& e) {
    ADD_FAILURE() << "ferry::lookup threw class " << e.mpi_error_class() << ": " << e.what();
    return;
  }
  ASSERT_TRUE(t) << "ferry::lookup returned null";
  const std::vector<i64>& map = r.map;
  i64 tlb = 0, text = 0;
  if (!map.empty()) {
    const auto [mn, mx] = std::minmax_element(map.begin(), map.end());
    tlb = *mn;
    text = *mx + 1 - *mn;
  }
  EXPECT_EQ(t->size(), m.size) << "size (MPI_Type_size_x)";
  EXPECT_EQ(t->lb(), m.lb) << "lb (MPI_Type_get_extent_x)";
  EXPECT_EQ(t->extent(), m.extent) << "extent (MPI_Type_get_extent_x)";
  // True bounds are those of the type map; Open MPI reports the same except where it mis-builds
  // the type (see the top of this file).
  EXPECT_EQ(t->true_lb(), tlb) << "true lb (type map; MPI_Type_get_true_extent_x says " << m.true_lb << ")";
  EXPECT_EQ(t->true_extent(), text)
      << "true extent (type map; MPI_Type_get_true_extent_x says " << m.true_extent << ")";

  // blocks(): contiguous runs Ferry copies; never fewer than the maximal runs of the type map, never
  // more than one per byte, 0 for an empty type.
  const i64 runs = ferry_test::map_runs(map);
  if (m.size == 0) {
    EXPECT_EQ(t->blocks(), 0) << "blocks() of an empty type";
  } else {
    EXPECT_GE(t->blocks(), runs) << "blocks() is below the number of contiguous runs in the type map";
    EXPECT_LE(t->blocks(), m.size) << "blocks() exceeds the number of bytes";
  }

  // dense(): count elements are one run of count*size bytes from true_lb, i.e. one element is the
  // bytes [true_lb, true_lb + size) in order and the extent equals the size.
  bool sequential = m.size > 0;
  for (size_t j = 0; j < map.size() && sequential; ++j) sequential = map[j] == tlb + static_cast<i64>(j);
  const bool want_dense = sequential && m.extent == m.size;
  // (An empty type is vacuously dense: any count of it is zero bytes.)
  if (m.size > 0) {
    EXPECT_EQ(t->dense(), want_dense) << "dense(): the type map is " << (sequential ? "" : "not ")
                                      << "one in-order run; extent " << m.extent << ", size " << m.size;
  }
  if (sequential) {
    // "Two descriptions of the same type map end in the same tree": one run is one Dense.
    EXPECT_EQ(t->root()->kind, ferry::NodeKind::dense)
        << "a single contiguous run did not canonicalize to a Dense node:\n"
        << ferry::to_string(t->root());
  }

  // strided(): when present it must describe the type map exactly.
  if (const auto& sb = t->strided()) {
    const bool shape_ok =
        sb->ndims() >= 1 && sb->strides.size() == sb->counts.size() && sb->strides[0] == 1;
    EXPECT_TRUE(shape_ok) << "malformed StridedBlock " << ferry::to_string(*sb);
    if (shape_ok) {
      i64 bytes = 1;
      for (i64 c : sb->counts) bytes *= c;
      EXPECT_EQ(bytes, m.size) << "StridedBlock " << ferry::to_string(*sb) << " covers " << bytes << " bytes";
      if (bytes == m.size) {
        EXPECT_TRUE(strided_map(*sb) == map)
            << "StridedBlock " << ferry::to_string(*sb) << " does not describe the type map";
      }
    }
  }

  // Compactness: the IR grows with the description, not with the counts in it.
  EXPECT_LE(t->root()->nodes, 4 * r.node_bound)
      << "IR has " << t->root()->nodes << " nodes for a description bounded by " << r.node_bound
      << " (blocks " << t->blocks() << "):\n"
      << ferry::to_string(t->root());

  // ferry_type_describe: NUL-terminated, never past len.
  char buf[96];
  std::memset(buf, 0x7E, sizeof buf);
  const int len = 1 + static_cast<int>(r.description.size() % 40);
  const int rc = ferry_type_describe(type, buf, len);
  EXPECT_EQ(rc, MPI_SUCCESS) << "ferry_type_describe: " << ferry_rc(rc);
  EXPECT_NE(std::memchr(buf, '\0', static_cast<size_t>(len)), nullptr)
      << "ferry_type_describe(len=" << len << ") did not NUL-terminate within len";
  for (size_t i = static_cast<size_t>(len); i < sizeof buf; ++i) {
    if (static_cast<unsigned char>(buf[i]) != 0x7E) {
      ADD_FAILURE() << "ferry_type_describe(len=" << len << ") wrote byte " << i;
      break;
    }
  }
}

// Canonical forms: a fixed point, the same whichever way the type map is described.
//   "canonicalize() rewrites the tree to a fixed point ... Two descriptions of the same type map end
//   in the same tree" (type.hpp); the rules include stream elision (count 1), dropping empty
//   entries, a Blocks of one entry is that entry, equal entries at a constant step become a Stream,
//   a Blocks that repeats a group of entries at a constant step becomes a Stream of the group.
void check_canonical_forms(MPI_Datatype type, const MpiMeta& m, const ferry::Type& t, std::mt19937_64& rng) {
  const ferry::NodePtr& root = t.root();
  try {
    const ferry::NodePtr again = ferry::canonicalize(root);
    EXPECT_TRUE(ferry::equal(again, root)) << "canonicalize() of a canonical tree changed it:\n"
                                           << ferry::to_string(root) << "became\n"
                                           << ferry::to_string(again);
    const ferry::Type from_raw(ferry::translate_raw(type), m.lb, m.extent);
    EXPECT_TRUE(ferry::equal(from_raw.root(), root))
        << "Type(translate_raw(type)) differs from the committed translation";
  } catch (const ferry::Error& e) {
    ADD_FAILURE() << "canonicalize/translate_raw threw: " << e.what();
    return;
  }

  // Pairs of MPI descriptions with one type map: {what, first, second}. The first is `type` itself
  // (nullptr) or a wrapper of it.
  const MPI_Aint e = static_cast<MPI_Aint>(m.extent);
  struct Built {
    std::string what;
    MPI_Datatype a = MPI_DATATYPE_NULL, b = MPI_DATATYPE_NULL;
  };
  const int which = std::uniform_int_distribution<int>(0, 11)(rng);
  Built p;
  const int one = 1, two[2] = {1, 1}, zero_last[2] = {1, 0};
  const MPI_Aint d0 = 0, d01[2] = {0, e}, dz[2] = {0, 40};
  const int i0 = 0, i01[2] = {0, 1}, iz[2] = {0, 5};
  switch (which) {
    case 0: p.what = "dup(T)"; MPI_Type_dup(type, &p.b); break;
    case 1: p.what = "contiguous(1, T)"; MPI_Type_contiguous(1, type, &p.b); break;
    case 2: p.what = "resized(T, its own lb and extent)"; MPI_Type_create_resized(type, static_cast<MPI_Aint>(m.lb), e, &p.b); break;
    case 3: p.what = "hvector(1, 1, 12345 bytes, T)"; MPI_Type_create_hvector(1, 1, 12345, type, &p.b); break;
    case 4: {
      p.what = "struct{1 x T at 0}";
      MPI_Type_create_struct(1, &one, &d0, &type, &p.b);
      break;
    }
    case 5: p.what = "hindexed_block(1, 1, [0], T)"; MPI_Type_create_hindexed_block(1, 1, &d0, type, &p.b); break;
    case 6: p.what = "indexed(2, [1,0], [0,5], T) (zero-length block)"; MPI_Type_indexed(2, zero_last, iz, type, &p.b); break;
    case 7: {
      p.what = "struct{1 x T at 0, 0 x MPI_DOUBLE at 40}";
      const MPI_Datatype ts[2] = {type, MPI_DOUBLE};
      MPI_Type_create_struct(2, zero_last, dz, ts, &p.b);
      break;
    }
    case 8: {
      const int sz = 1, sub = 1, st = 0;
      p.what = "subarray([1], [1], [0], T)";
      MPI_Type_create_subarray(1, &sz, &sub, &st, MPI_ORDER_C, type, &p.b);
      break;
    }
    case 9:
      p.what = "contiguous(2, T) vs hvector(2, 1, extent, T)";
      MPI_Type_contiguous(2, type, &p.a);
      MPI_Type_create_hvector(2, 1, e, type, &p.b);
      break;
    case 10: {
      p.what = "contiguous(2, T) vs struct{T at 0, T at extent}";
      MPI_Type_contiguous(2, type, &p.a);
      const MPI_Datatype ts[2] = {type, type};
      MPI_Type_create_struct(2, two, d01, ts, &p.b);
      break;
    }
    default: {
      const int len2 = 2;
      p.what = "indexed_block(2, 1, [0,1], T) vs indexed(1, [2], [0], T)";
      MPI_Type_create_indexed_block(2, 1, i01, type, &p.a);
      MPI_Type_indexed(1, &len2, &i0, type, &p.b);
      break;
    }
  }
  MPI_Datatype a = p.a == MPI_DATATYPE_NULL ? type : p.a;
  if (p.a != MPI_DATATYPE_NULL) MPI_Type_commit(&p.a);
  MPI_Type_commit(&p.b);
  try {
    const ferry::NodePtr ra = p.a == MPI_DATATYPE_NULL ? root : ferry::translate(a).root();
    const ferry::NodePtr rb = ferry::translate(p.b).root();
    EXPECT_TRUE(ferry::equal(ra, rb)) << "equivalent descriptions canonicalize differently: " << p.what
                                      << "\nfirst:\n" << ferry::to_string(ra) << "second:\n"
                                      << ferry::to_string(rb);
  } catch (const ferry::Error& err) {
    ADD_FAILURE() << "translate threw for " << p.what << ": " << err.what();
  }
  if (p.a != MPI_DATATYPE_NULL) MPI_Type_free(&p.a);
  MPI_Type_free(&p.b);
}

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
