// Test helpers of the halo library, independent of its code: host arrays in random layouts (axis
// order, padding, element size, interleaved fields), values that are a function of (field, global
// point, round), and a check of every allocated point of every field against what an exchange must
// leave there, computed from global coordinates alone.
#pragma once

#include <ferry/halo.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace halo_test {

namespace fh = ferry::halo;
using fh::i64;
using fh::Index3;

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Value of field f at global point g in round `round`; halo sentinels use kind 1 and the local
// point with the subdomain id.
inline void value(unsigned char* out, i64 bytes, int f, const Index3& g, int round, int kind = 0) {
  std::uint64_t h = mix(static_cast<std::uint64_t>(f) * 131 + static_cast<std::uint64_t>(round) * 7919 + kind);
  for (int a = 0; a < 3; ++a) h = mix(h ^ static_cast<std::uint64_t>(g[a] + 1000));
  for (i64 k = 0; k < bytes; ++k) out[k] = static_cast<unsigned char>(mix(h + static_cast<std::uint64_t>(k / 8)) >> (8 * (k % 8)));
}

// One subdomain's arrays in one allocation per field (or one shared allocation for interleaved
// fields), with the description the library gets.
struct Arrays {
  std::vector<std::vector<unsigned char>> mem;  // one per allocation
  std::vector<fh::Field> fields;
  std::vector<Index3> extent;  // per field (all the same: the subdomain's)
};

struct Layout {
  std::vector<i64> elem;     // element size of each field
  std::vector<fh::Widths> widths;
  int order = 0;             // 0 x fastest, 1 z fastest, 2 y fastest
  int pad = 0;               // extra points on each side
  bool interleave = false;   // all fields in one allocation, element by element
  bool second = false;       // data_next for swap()
};

inline Arrays make_arrays(const Layout& L, const Index3& n) {
  Arrays A;
  const int nf = static_cast<int>(L.elem.size());
  Index3 alloc{}, origin{};
  for (int a = 0; a < 3; ++a) {
    int lo = 0, hi = 0;
    for (const auto& w : L.widths) lo = std::max(lo, w.side(a, -1)), hi = std::max(hi, w.side(a, +1));
    origin[a] = lo + L.pad;
    alloc[a] = n[a] + lo + hi + 2 * L.pad;
  }
  static const int kOrders[3][3] = {{0, 1, 2}, {2, 1, 0}, {1, 0, 2}};
  i64 group = 0;  // bytes of one point of all fields when interleaved
  for (i64 e : L.elem) group += e;
  std::vector<i64> field_off(static_cast<std::size_t>(nf), 0);
  for (int f = 1; f < nf; ++f) field_off[f] = field_off[f - 1] + L.elem[f - 1];
  const int copies = L.second ? 2 : 1;
  for (int f = 0; f < nf; ++f) {
    fh::Field fl;
    fl.elem_bytes = L.elem[f];
    fl.alloc = alloc;
    fl.origin = origin;
    fl.widths = L.widths[f];
    fl.name = "f" + std::to_string(f);
    i64 s = L.interleave ? group : L.elem[f];
    for (int k = 0; k < 3; ++k) {
      const int a = kOrders[L.order][k];
      fl.strides[a] = s;
      s *= alloc[a];
    }
    A.fields.push_back(fl);
    A.extent.push_back(n);
  }
  const i64 total = alloc[0] * alloc[1] * alloc[2];
  if (L.interleave) {
    for (int c = 0; c < copies; ++c) A.mem.emplace_back(static_cast<std::size_t>(total * group + 1));
    for (int f = 0; f < nf; ++f) {
      A.fields[f].data = A.mem[0].data() + field_off[f];
      if (L.second) A.fields[f].data_next = A.mem[1].data() + field_off[f];
    }
  } else {
    for (int f = 0; f < nf; ++f)
      for (int c = 0; c < copies; ++c) {
        A.mem.emplace_back(static_cast<std::size_t>(total * L.elem[f]));
        (c == 0 ? A.fields[f].data : A.fields[f].data_next) = A.mem.back().data();
      }
  }
  return A;
}

// Calls fn(local point, byte offset) for every allocated point of a field.
template <class F>
void each_point(const fh::Field& fl, F&& fn) {
  Index3 q;
  for (q[2] = 0; q[2] < fl.alloc[2]; ++q[2])
    for (q[1] = 0; q[1] < fl.alloc[1]; ++q[1])
      for (q[0] = 0; q[0] < fl.alloc[0]; ++q[0]) {
        Index3 l{q[0] - fl.origin[0], q[1] - fl.origin[1], q[2] - fl.origin[2]};
        fn(l, q[0] * fl.strides[0] + q[1] * fl.strides[1] + q[2] * fl.strides[2]);
      }
}

inline bool inside(const Index3& l, const Index3& n) {
  return l[0] >= 0 && l[0] < n[0] && l[1] >= 0 && l[1] < n[1] && l[2] >= 0 && l[2] < n[2];
}

// Interior: round's values; halo: sentinels. `base` is the array (data or data_next).
inline void fill(const fh::Field& fl, unsigned char* base, int f, const fh::Subdomain& sub, int round) {
  each_point(fl, [&](const Index3& l, i64 off) {
    if (inside(l, sub.extent))
      value(base + off, fl.elem_bytes, f, {sub.offset[0] + l[0], sub.offset[1] + l[1], sub.offset[2] + l[2]}, round);
    else
      value(base + off, fl.elem_bytes, f, {l[0], l[1], l[2] + 100000 * sub.id}, round, 1);
  });
}

// Checks every point; returns "" or a description of the first few wrong ones.
inline std::string check(const fh::Field& fl, const unsigned char* base, int f, const fh::Subdomain& sub,
                         int round, const Index3& global, const std::array<bool, 3>& periodic) {
  std::ostringstream os;
  int bad = 0;
  std::vector<unsigned char> want(static_cast<std::size_t>(fl.elem_bytes));
  each_point(fl, [&](const Index3& l, i64 off) {
    Index3 g{sub.offset[0] + l[0], sub.offset[1] + l[1], sub.offset[2] + l[2]};
    bool from_neighbour = !inside(l, sub.extent);
    if (from_neighbour) {
      // The direction and the depth into the halo decide whether the width reaches this point;
      // the global point decides whether anything lies there (non-periodic boundaries).
      fh::Dir d{l[0] < 0 ? -1 : l[0] >= sub.extent[0] ? 1 : 0, l[1] < 0 ? -1 : l[1] >= sub.extent[1] ? 1 : 0,
                l[2] < 0 ? -1 : l[2] >= sub.extent[2] ? 1 : 0};
      for (int a = 0; a < 3; ++a) {
        const i64 depth = l[a] < 0 ? -l[a] : l[a] - sub.extent[a] + 1;
        if (d[a] != 0 && depth > fl.widths.thickness(d, a)) from_neighbour = false;
        if (g[a] < 0 || g[a] >= global[a]) {
          if (!periodic[a]) from_neighbour = false;
          g[a] = (g[a] % global[a] + global[a]) % global[a];
        }
      }
      if (!fl.widths.sends(d)) from_neighbour = false;
    }
    if (inside(l, sub.extent) || from_neighbour) value(want.data(), fl.elem_bytes, f, g, round);
    else value(want.data(), fl.elem_bytes, f, {l[0], l[1], l[2] + 100000 * sub.id}, round, 1);
    if (std::memcmp(want.data(), base + off, want.size()) != 0 && bad++ < 4)
      os << "field " << f << " subdomain " << sub.id << " point (" << l[0] << "," << l[1] << "," << l[2]
         << ")" << (inside(l, sub.extent) ? " interior" : from_neighbour ? " halo" : " untouched halo") << "\n";
  });
  if (bad) os << bad << " wrong points\n";
  return os.str();
}

}  // namespace halo_test
