// halo_jacobi/stencil.hpp — the two updates of the example, written once for the host and the GPU
// with the same order of operations, so every rank count and both backends give the same bits (the
// GPU file is compiled without FMA contraction; the host build does not contract either).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HJ_HD __host__ __device__ inline
#else
#define HJ_HD inline
#endif

namespace hj {

using i64 = std::int64_t;

constexpr int kMaxFields = 8;

// One update of a box of points: out = f(in), every field, at local points lo .. lo + n - 1.
struct Step {
  int kind = 0;      // 0: Jacobi 7-point on field 0; 1: Astaroth-like radius-3 update of 8 fields
  int fields = 1;
  const double* in[kMaxFields] = {};   // local point (0,0,0) of each field
  double* out[kMaxFields] = {};
  i64 sx = 1, sy = 1, sz = 1;  // strides in elements (the same for every field)
  i64 lo[3] = {0, 0, 0};
  i64 n[3] = {0, 0, 0};
};

HJ_HD double jacobi(const double* u, i64 sx, i64 sy, i64 sz) {
  double s = u[-sx] + u[sx];
  s = s + u[-sy];
  s = s + u[sy];
  s = s + u[-sz];
  s = s + u[sz];
  return s * (1.0 / 6.0);
}

// A 6th-order Laplacian (radius 3 along each axis), the three mixed derivatives (edges), and a
// coupling to the next field: the shape of Astaroth's MHD update, not its physics.
HJ_HD double astaroth(const Step& s, int f, i64 i) {
  const double* u = s.in[f] + i;
  const double c1 = 1.5, c2 = -0.15, c3 = 1.0 / 90.0, c0 = -49.0 / 18.0;
  const i64 st[3] = {s.sx, s.sy, s.sz};
  double lap = 3.0 * c0 * u[0];
  for (int a = 0; a < 3; ++a) {
    const i64 d = st[a];
    lap = lap + c1 * (u[-d] + u[d]);
    lap = lap + c2 * (u[-2 * d] + u[2 * d]);
    lap = lap + c3 * (u[-3 * d] + u[3 * d]);
  }
  double cross = 0.0;
  for (int a = 0; a < 3; ++a) {
    const i64 p = st[a], q = st[(a + 1) % 3];
    cross = cross + ((u[p + q] - u[p - q]) - (u[-p + q] - u[-p - q]));
  }
  const double v = s.in[(f + 1) % s.fields][i];
  return u[0] + 0.01 * (lap + 0.05 * cross + 0.1 * v);
}

HJ_HD void update_point(const Step& s, i64 x, i64 y, i64 z) {
  const i64 i = x * s.sx + y * s.sy + z * s.sz;
  if (s.kind == 0) {
    s.out[0][i] = jacobi(s.in[0] + i, s.sx, s.sy, s.sz);
    return;
  }
  for (int f = 0; f < s.fields; ++f) s.out[f][i] = astaroth(s, f, i);
}

}  // namespace hj
