// The CPU engine. One template over the direction (pack or unpack) so both directions run the
// same loops. Strided blocks become one loop nest whose innermost loop copies fixed-size words when
// the contiguous block is small (the compiler turns memcpy of a constant size into moves, where a
// call to memcpy would cost more than the copy); the general form walks the canonical tree.
#include <cstring>

#include "pack/cpu/engine.hpp"

namespace ferry::detail {

namespace {

template <bool Pack>
inline void move(char* mem, char* packed, std::size_t n) {
  if constexpr (Pack) std::memcpy(packed, mem, n);
  else std::memcpy(mem, packed, n);
}

// Copies n blocks of b bytes, `stride` apart in memory, packed back to back. Returns the packed
// cursor after them.
using RowFn = char* (*)(char* mem, char* packed, i64 n, i64 stride, i64 b);

template <bool Pack, std::size_t B>
char* rows_fixed(char* mem, char* packed, i64 n, i64 stride, i64) {
  for (i64 i = 0; i < n; ++i, mem += stride, packed += B) move<Pack>(mem, packed, B);
  return packed;
}

template <bool Pack>
char* rows_any(char* mem, char* packed, i64 n, i64 stride, i64 b) {
  const auto len = static_cast<std::size_t>(b);
  for (i64 i = 0; i < n; ++i, mem += stride, packed += b) move<Pack>(mem, packed, len);
  return packed;
}

template <bool Pack>
RowFn pick_rows(i64 b) {
  switch (b) {
    case 1: return rows_fixed<Pack, 1>;
    case 2: return rows_fixed<Pack, 2>;
    case 4: return rows_fixed<Pack, 4>;
    case 8: return rows_fixed<Pack, 8>;
    case 12: return rows_fixed<Pack, 12>;
    case 16: return rows_fixed<Pack, 16>;
    case 24: return rows_fixed<Pack, 24>;
    case 32: return rows_fixed<Pack, 32>;
    case 48: return rows_fixed<Pack, 48>;
    case 64: return rows_fixed<Pack, 64>;
    default: return rows_any<Pack>;
  }
}

// Loop nest over dimensions 1..d of a strided block (dimension 1 innermost, copied by `row`).
template <bool Pack>
char* nest(char* mem, char* packed, const i64* counts, const i64* strides, int d, RowFn row,
           i64 b) {
  if (d == 1) return row(mem, packed, counts[1], strides[1], b);
  for (i64 i = 0; i < counts[d]; ++i, mem += strides[d])
    packed = nest<Pack>(mem, packed, counts, strides, d - 1, row, b);
  return packed;
}

template <bool Pack>
void strided(char* origin, char* packed, i64 count, i64 extent, const StridedBlock& sb) {
  const i64* c = sb.counts.data();
  const i64* s = sb.strides.data();
  const int nd = sb.ndims();
  char* mem = origin + sb.start;
  const i64 b = c[0];
  const RowFn row = pick_rows<Pack>(b);
  // The common shapes without the general loop nest: one block per element (count is the only
  // dimension) and vectors (one dimension, with count folded in when it continues the stride).
  if (nd == 1) {
    row(mem, packed, count, extent, b);
    return;
  }
  if (nd == 2) {
    if (count == 1 || c[1] * s[1] == extent) {
      row(mem, packed, c[1] * count, s[1], b);
      return;
    }
    for (i64 e = 0; e < count; ++e, mem += extent) packed = row(mem, packed, c[1], s[1], b);
    return;
  }
  // More dimensions: count becomes one more dimension (merged into the outermost one when the
  // elements continue its stride), then one loop nest.
  constexpr int kMaxInline = 16;
  i64 counts_buf[kMaxInline + 1];
  i64 strides_buf[kMaxInline + 1];
  std::vector<i64> counts_vec, strides_vec;
  i64* counts = counts_buf;
  i64* strides = strides_buf;
  if (nd + 1 > kMaxInline + 1) {
    counts_vec.resize(static_cast<std::size_t>(nd) + 1);
    strides_vec.resize(static_cast<std::size_t>(nd) + 1);
    counts = counts_vec.data();
    strides = strides_vec.data();
  }
  int n = nd;
  for (int i = 0; i < nd; ++i) {
    counts[i] = c[i];
    strides[i] = s[i];
  }
  if (count > 1) {
    if (strides[n - 1] * counts[n - 1] == extent) {
      counts[n - 1] *= count;
    } else {
      counts[n] = count;
      strides[n] = extent;
      ++n;
    }
  }
  nest<Pack>(mem, packed, counts, strides, n - 1, row, b);
}

template <bool Pack>
char* walk(const Node& n, char* origin, char* packed) {
  char* base = origin + n.off;
  switch (n.kind) {
    case NodeKind::dense:
      move<Pack>(base, packed, static_cast<std::size_t>(n.size));
      return packed + n.size;
    case NodeKind::stream: {
      const Node& c = *n.child;
      if (c.kind == NodeKind::dense)
        return pick_rows<Pack>(c.size)(base + c.off, packed, n.count, n.stride, c.size);
      for (i64 i = 0; i < n.count; ++i, base += n.stride) packed = walk<Pack>(c, base, packed);
      return packed;
    }
    case NodeKind::blocks:
      for (const Entry& e : n.entries) packed = walk<Pack>(*e.child, base + e.disp, packed);
      return packed;
  }
  return packed;
}

template <bool Pack>
void run(char* origin, char* packed, i64 count, const Type& type) {
  if (count == 0 || type.size() == 0) return;
  if (type.dense()) {
    move<Pack>(origin + type.true_lb(), packed, static_cast<std::size_t>(count * type.size()));
    return;
  }
  if (type.strided()) {
    strided<Pack>(origin, packed, count, type.extent(), *type.strided());
    return;
  }
  const Node& root = *type.root();
  for (i64 i = 0; i < count; ++i, origin += type.extent()) packed = walk<Pack>(root, origin, packed);
}

}  // namespace

void cpu_pack(const char* origin, i64 count, const Type& type, char* packed) {
  run<true>(const_cast<char*>(origin), packed, count, type);
}

void cpu_unpack(const char* packed, char* origin, i64 count, const Type& type) {
  run<false>(origin, const_cast<char*>(packed), count, type);
}

}  // namespace ferry::detail
