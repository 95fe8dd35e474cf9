// halo/geometry.hpp — boxes of a subdomain, the regions a pair of neighbours exchanges, and the
// ferry::Type that describes a box of a field in its own layout.
#pragma once

#include <ferry/halo.hpp>
#include <ferry/type.hpp>

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>
#include <vector>

namespace ferry::halo::detail {

// The halo box that receives from direction d, in the receiver's local coordinates (interior extent n).
inline Box recv_box(const Widths& w, Dir d, const Index3& n) {
  Box b;
  for (int a = 0; a < 3; ++a) {
    const i64 t = w.thickness(d, a);
    if (d[a] == 0) b.lo[a] = 0, b.extent[a] = n[a];
    else if (d[a] < 0) b.lo[a] = -t, b.extent[a] = t;
    else b.lo[a] = n[a], b.extent[a] = t;
  }
  return b;
}

// The interior box the neighbour in direction d sends, in that neighbour's coordinates (extent ns):
// its side that faces the receiver.
inline Box send_box(const Widths& w, Dir d, const Index3& ns) {
  Box b;
  for (int a = 0; a < 3; ++a) {
    const i64 t = w.thickness(d, a);
    if (d[a] == 0) b.lo[a] = 0, b.extent[a] = ns[a];
    else if (d[a] < 0) b.lo[a] = ns[a] - t, b.extent[a] = t;
    else b.lo[a] = 0, b.extent[a] = t;
  }
  return b;
}

// Axes of a field from the smallest stride to the largest: the packed order of its regions, so the
// innermost loop of a pack walks the contiguous axis. Equal strides happen only beside an axis of
// one point, which goes inside (it is then the nesting the strides describe); then the lower axis.
inline std::array<int, 3> axis_order(const Field& f) {
  std::array<int, 3> o{0, 1, 2};
  auto key = [&](int a) { return std::make_tuple(f.strides[a], f.alloc[a], a); };
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j)
      if (key(o[j]) < key(o[i])) std::swap(o[i], o[j]);
  return o;
}

// Byte offset of local point p from the field's data pointer.
inline i64 byte_offset(const Field& f, const Index3& p) {
  i64 off = 0;
  for (int a = 0; a < 3; ++a) off += (f.origin[a] + p[a]) * f.strides[a];
  return off;
}

// The box as a committed-type equivalent: elements of the field in packed order `order` (innermost
// first), offsets from the field's data pointer.
inline Type box_type(const Field& f, const Box& b, const std::array<int, 3>& order) {
  NodePtr n = make_dense(0, f.elem_bytes);
  for (int a : order) n = make_stream(0, b.extent[a], f.strides[a], n);
  const i64 bytes = f.elem_bytes * b.points();
  return Type(shifted(n, byte_offset(f, b.lo)), 0, bytes);
}

// Cuts [0, extent) into slabs of at most `max_points` points where one unit holds `unit` points
// (at least one unit each): (start, length) pairs, the same on both ends of a transfer.
inline std::vector<std::pair<i64, i64>> slabs(i64 extent, i64 unit, i64 max_points) {
  std::vector<std::pair<i64, i64>> out;
  i64 step = unit > 0 && max_points > 0 ? max_points / unit : extent;
  if (step < 1) step = 1;
  for (i64 s = 0; s < extent; s += step) out.emplace_back(s, std::min(step, extent - s));
  return out;
}

}  // namespace ferry::halo::detail
