// tests/test_random_types.hpp — helpers and the Oracle shared by test_random_types' files.
#pragma once

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

namespace ferry_random_types {

using ferry_test::MpiMeta;
using ferry_test::RandomType;
using ferry_test::TypeGenerator;
using i64 = std::int64_t;

inline constexpr std::uint64_t kDefaultSeed = 0x0F3A77C0DE5EEDull;
inline constexpr i64 kDefaultTypes = 10000;
inline constexpr i64 kMargin = 64;  // bytes of poison around every buffer
inline constexpr unsigned char kPackPoison = 0x5A;
inline constexpr unsigned char kUnpackPoison = 0xA5;

inline std::uint64_t env_u64(const char* name, std::uint64_t dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return std::strtoull(v, nullptr, 0);
}

inline std::string rc_name(int rc) {
  if (rc == MPI_SUCCESS) return "MPI_SUCCESS";
  int cls = rc;
  MPI_Error_class(rc, &cls);
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(cls, s, &len);
  return "class " + std::to_string(cls) + " (" + std::string(s, static_cast<size_t>(len)) + ")";
}

inline std::string ferry_rc(int rc) {
  std::string s = rc_name(rc);
  if (rc != MPI_SUCCESS) s += ": " + std::string(ferry_error_string());
  return s;
}

inline void fill_random(std::vector<unsigned char>& v, std::mt19937_64& rng) {
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    const std::uint64_t w = rng();
    std::memcpy(v.data() + i, &w, 8);
  }
  for (; i < v.size(); ++i) v[i] = static_cast<unsigned char>(rng());
}

inline void* at(void* base, i64 off) {
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

inline Region region_for(const std::vector<i64>& map, i64 margin = kMargin) {
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
inline bool same_bytes(const std::string& what, const unsigned char* want, const unsigned char* fer,
                       size_t n, i64 base = 0) {
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
inline std::vector<i64> ferry_packed_map(MPI_Datatype type, int count, i64 lo, i64 hi, i64 total) {
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
inline std::vector<i64> strided_map(const ferry::StridedBlock& sb) {
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
inline bool mpi_is_oracle() {
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
inline Deviations& deviations() {
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

// Defined in test_random_types_meta.cpp.
void check_metadata(MPI_Datatype type, const MpiMeta& m, const RandomType& r);
void check_canonical_forms(MPI_Datatype type, const MpiMeta& m, const ferry::Type& t, std::mt19937_64& rng);

}  // namespace ferry_random_types
