// tests/random_type_detail.hpp — helpers shared by random_type.cpp and random_type_derived.cpp.
#pragma once

#include "random_type.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace ferry_test::random_detail {

using i64 = std::int64_t;

struct NamedType {
  MPI_Datatype type;
  const char* name;
  // For the pair types: offset of the int after the value (the value is at 0), and the value size.
  i64 pair_int_offset = -1;
  i64 pair_value_size = 0;
};

template <typename T>
struct Pair {
  T value;
  int index;
};
template <typename T>
inline NamedType pair(MPI_Datatype t, const char* name) {
  return {t, name, static_cast<i64>(offsetof(Pair<T>, index)), static_cast<i64>(sizeof(T))};
}

// Predefined types, including the pair types with holes (MPI_SHORT_INT: 6 bytes in 8,
// MPI_LONG_DOUBLE_INT: 20 bytes in 32, ...).
inline const std::vector<NamedType>& named_types() {
  static const std::vector<NamedType> types = {
      {MPI_BYTE, "MPI_BYTE"},
      {MPI_CHAR, "MPI_CHAR"},
      {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR"},
      {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR"},
      {MPI_SHORT, "MPI_SHORT"},
      {MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT"},
      {MPI_INT, "MPI_INT"},
      {MPI_UNSIGNED, "MPI_UNSIGNED"},
      {MPI_LONG, "MPI_LONG"},
      {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG"},
      {MPI_LONG_LONG, "MPI_LONG_LONG"},
      {MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG"},
      {MPI_FLOAT, "MPI_FLOAT"},
      {MPI_DOUBLE, "MPI_DOUBLE"},
      {MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE"},
      {MPI_WCHAR, "MPI_WCHAR"},
      {MPI_C_BOOL, "MPI_C_BOOL"},
      {MPI_INT8_T, "MPI_INT8_T"},
      {MPI_INT16_T, "MPI_INT16_T"},
      {MPI_INT32_T, "MPI_INT32_T"},
      {MPI_INT64_T, "MPI_INT64_T"},
      {MPI_UINT8_T, "MPI_UINT8_T"},
      {MPI_UINT16_T, "MPI_UINT16_T"},
      {MPI_UINT32_T, "MPI_UINT32_T"},
      {MPI_UINT64_T, "MPI_UINT64_T"},
      {MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX"},
      {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"},
      {MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX"},
      {MPI_AINT, "MPI_AINT"},
      {MPI_OFFSET, "MPI_OFFSET"},
      {MPI_COUNT, "MPI_COUNT"},
      {MPI_PACKED, "MPI_PACKED"},
      pair<float>(MPI_FLOAT_INT, "MPI_FLOAT_INT"),
      pair<double>(MPI_DOUBLE_INT, "MPI_DOUBLE_INT"),
      pair<long>(MPI_LONG_INT, "MPI_LONG_INT"),
      pair<int>(MPI_2INT, "MPI_2INT"),
      pair<short>(MPI_SHORT_INT, "MPI_SHORT_INT"),
      pair<long double>(MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT"),
  };
  return types;
}

// Saturating arithmetic for the node bound (it only needs to be an upper bound).
inline i64 sat_add(i64 a, i64 b) {
  const i64 cap = i64{1} << 50;
  return std::min(cap, a + b);
}
inline i64 sat_mul(i64 a, i64 b) {
  const i64 cap = i64{1} << 50;
  if (a != 0 && b > cap / a) return cap;
  return std::min(cap, a * b);
}

template <typename T>
inline std::string list(const std::vector<T>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << ']';
  return os.str();
}

inline void check(int rc, const std::string& what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw std::runtime_error("random type generator: " + what + " failed: " +
                             std::string(msg, static_cast<size_t>(len)));
  }
}

inline void append_shifted(std::vector<i64>& out, const std::vector<i64>& m, i64 shift) {
  for (i64 off : m) out.push_back(off + shift);
}

// The type map of an array type (subarray, darray) by its definition: the elements whose global
// index in dimension i is in idx[i] (increasing), in array order (C: last dimension fastest,
// Fortran: first dimension fastest), each at its linear index times the old type's extent.
inline std::vector<i64> array_map(const std::vector<std::vector<i64>>& idx,
                                  const std::vector<int>& gsizes, bool fortran,
                                  const std::vector<i64>& child_map, i64 child_extent) {
  const int nd = static_cast<int>(gsizes.size());
  std::vector<i64> stride(static_cast<size_t>(nd), 1);
  for (int i = 0; i < nd; ++i)
    for (int j = 0; j < nd; ++j)
      if (fortran ? j < i : j > i) stride[static_cast<size_t>(i)] *= gsizes[static_cast<size_t>(j)];
  std::vector<i64> out;
  // Level 0 is the outermost dimension.
  auto dim_at = [&](int level) { return fortran ? nd - 1 - level : level; };
  std::function<void(int, i64)> walk = [&](int level, i64 lin) {
    if (level == nd) {
      append_shifted(out, child_map, lin * child_extent);
      return;
    }
    const int d = dim_at(level);
    for (i64 g : idx[static_cast<size_t>(d)]) walk(level + 1, lin + g * stride[static_cast<size_t>(d)]);
  };
  walk(0, 0);
  return out;
}

inline const char* dist_name(int d) {
  switch (d) {
    case MPI_DISTRIBUTE_BLOCK: return "BLOCK";
    case MPI_DISTRIBUTE_CYCLIC: return "CYCLIC";
    default: return "NONE";
  }
}

}  // namespace ferry_test::random_detail
