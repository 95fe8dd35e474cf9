// Widths, dense fields, method names, and the checks of one field's description.
#include "halo/field.hpp"

#include <algorithm>

#include "halo/geometry.hpp"
#include "sys/error.hpp"

namespace ferry::halo {

using ferry::detail::fail;

namespace {
void check_width(int w) {
  if (w < 0) fail(MPI_ERR_ARG, "halo: negative width " + std::to_string(w));
}
}  // namespace

Widths Widths::uniform(int w) {
  check_width(w);
  Widths r;
  for (int i = 0; i < kDirections; ++i)
    if (i != 13) r.set(dir_of(i), w);
  return r;
}

Widths Widths::axes(std::array<int, 3> minus, std::array<int, 3> plus) {
  for (int a = 0; a < 3; ++a) check_width(minus[a]), check_width(plus[a]);
  Widths r;
  for (int i = 0; i < kDirections; ++i) {
    if (i == 13) continue;
    const Dir d = dir_of(i);
    for (int a = 0; a < 3; ++a) r.t_[i][a] = d[a] < 0 ? minus[a] : d[a] > 0 ? plus[a] : 0;
    // A region that is 0 thick along one of its axes is empty: keep it all 0 so sends() is simple.
    bool empty = false;
    for (int a = 0; a < 3; ++a) empty |= d[a] != 0 && r.t_[i][a] == 0;
    if (empty) r.t_[i] = {0, 0, 0};
  }
  return r;
}

Widths& Widths::set(Dir d, int w) {
  check_width(w);
  const int i = index_of(d);
  if (i == 13 || std::abs(d.x) > 1 || std::abs(d.y) > 1 || std::abs(d.z) > 1)
    fail(MPI_ERR_ARG, "halo: (" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
                          std::to_string(d.z) + ") is not a neighbour direction");
  for (int a = 0; a < 3; ++a) t_[i][a] = d[a] != 0 ? w : 0;
  return *this;
}

Widths& Widths::faces_only() {
  for (int i = 0; i < kDirections; ++i) {
    const Dir d = dir_of(i);
    if (std::abs(d.x) + std::abs(d.y) + std::abs(d.z) > 1) t_[i] = {0, 0, 0};
  }
  return *this;
}

Widths& Widths::no_corners() {
  for (int i = 0; i < kDirections; ++i) {
    const Dir d = dir_of(i);
    if (std::abs(d.x) + std::abs(d.y) + std::abs(d.z) == 3) t_[i] = {0, 0, 0};
  }
  return *this;
}

bool Widths::sends(Dir d) const {
  const int i = index_of(d);
  if (i == 13) return false;
  for (int a = 0; a < 3; ++a)
    if (d[a] != 0 && t_[i][a] <= 0) return false;
  return true;
}

int Widths::side(int axis, int sign) const {
  int m = 0;
  for (int i = 0; i < kDirections; ++i)
    if (dir_of(i)[axis] == sign && sends(dir_of(i))) m = std::max(m, t_[i][axis]);
  return m;
}

Field dense_field_bytes(void* data, i64 elem_bytes, Index3 extent, const Widths& w, Order order,
                        void* next, std::string name) {
  Field f;
  f.data = data;
  f.data_next = next;
  f.elem_bytes = elem_bytes;
  f.widths = w;
  f.name = std::move(name);
  for (int a = 0; a < 3; ++a) {
    f.origin[a] = w.side(a, -1);
    f.alloc[a] = extent[a] + w.side(a, -1) + w.side(a, +1);
  }
  i64 s = elem_bytes;
  const int first = order == Order::x_fastest ? 0 : 2, step = order == Order::x_fastest ? 1 : -1;
  for (int k = 0, a = first; k < 3; ++k, a += step) {
    f.strides[a] = s;
    s = ferry::detail::checked_mul(s, f.alloc[a], MPI_ERR_ARG, "halo: field size");
  }
  return f;
}

const char* name(Method m) {
  switch (m) {
    case Method::local: return "local";
    case Method::peer: return "peer";
    case Method::ipc: return "ipc";
    case Method::staged: return "staged";
    case Method::pipelined: return "pipelined";
    case Method::mpi: return "mpi";
  }
  return "?";
}

std::optional<Method> method_named(const std::string& s) {
  for (int i = 0; i < kMethods; ++i)
    if (s == name(static_cast<Method>(i))) return static_cast<Method>(i);
  return std::nullopt;
}

namespace detail {

std::string field_name(const Field& f, int index) {
  return f.name.empty() ? "field " + std::to_string(index) : "field '" + f.name + "'";
}

std::string check_field(const Field& f, int index, const Index3& extent) {
  const std::string who = field_name(f, index);
  if (f.data == nullptr) return who + ": data is a null pointer";
  if (f.elem_bytes <= 0) return who + ": element size " + std::to_string(f.elem_bytes) + " bytes";
  for (int i = 0; i < kDirections; ++i)
    for (int a = 0; a < 3; ++a)
      if (f.widths.t_[i][a] < 0) return who + ": negative width " + std::to_string(f.widths.t_[i][a]);
  static const char* kAxis = "xyz";
  for (int a = 0; a < 3; ++a) {
    const std::string ax = std::string(" along ") + kAxis[a];
    if (f.strides[a] <= 0) return who + ": stride " + std::to_string(f.strides[a]) + ax;
    if (f.alloc[a] < 1) return who + ": allocated extent " + std::to_string(f.alloc[a]) + ax;
    const i64 minus = f.widths.side(a, -1), plus = f.widths.side(a, +1);
    if (f.origin[a] < minus)
      return who + ": the halo of width " + std::to_string(minus) + " below the interior does not fit" +
             ax + " (origin " + std::to_string(f.origin[a]) + ")";
    if (f.origin[a] + extent[a] + plus > f.alloc[a])
      return who + ": interior " + std::to_string(extent[a]) + " + halo " + std::to_string(plus) +
             " from origin " + std::to_string(f.origin[a]) + " exceeds the allocated " +
             std::to_string(f.alloc[a]) + ax;
  }
  // Points must not alias: in stride order, each axis steps over the whole of the one inside it.
  const auto o = detail::axis_order(f);
  if (f.strides[o[0]] < f.elem_bytes)
    return who + ": stride " + std::to_string(f.strides[o[0]]) + " is smaller than the element";
  for (int k = 1; k < 3; ++k)
    if (f.strides[o[k]] < f.strides[o[k - 1]] * f.alloc[o[k - 1]])
      return who + ": strides overlap (axis " + kAxis[o[k]] + " stride " +
             std::to_string(f.strides[o[k]]) + " < " + std::to_string(f.strides[o[k - 1]]) + " x " +
             std::to_string(f.alloc[o[k - 1]]) + ")";
  return {};
}

i64 span_bytes(const Field& f) {
  i64 hi = f.elem_bytes;
  for (int a = 0; a < 3; ++a) hi += (f.alloc[a] - 1) * f.strides[a];
  return hi;
}

}  // namespace detail
}  // namespace ferry::halo
