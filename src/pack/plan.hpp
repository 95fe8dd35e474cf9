// pack/plan.hpp — the launch-ready description of (type, count) that the GPU kernels execute.
//
// Compiled for host and device: the same index arithmetic runs in the CUDA kernels and in the CPU
// emulation that CI tests against MPI_Pack (tests/test_plan.cpp), so the GPU engine's addressing is
// checked on every CI run even without a GPU.
//
// A plan moves `total` words of W bytes. Packed word p is found in memory by
//   strided form: block = p / words, word = p % words, then block -> one index per dimension
//                 (mixed radix over counts), address = start + sum(index_d * stride_d) + word*W
//   general form: outer = p / inner_words (mixed radix over the outer dims, like the strided form),
//                 rest = p % inner_words -> the piece holding it (binary search over packed
//                 offsets), then the piece's own strided shape.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define FERRY_HD __host__ __device__ __forceinline__
#else
#define FERRY_HD inline
#endif

namespace ferry::detail {

constexpr int kMaxDims = 16;
constexpr int kWordSizes = 5;  // log2 of the word size: 0..4 for 1..16 bytes

// Division by a run-time constant d as a multiply and shift, valid for 0 <= n < 2^31: the
// round-up reciprocal m = ceil(2^p / d) with p = 31 + ceil(log2 d) (Granlund & Montgomery 1994).
// m lies in [2^31, 2^32) for every d >= 2, so m == 0 marks d <= 1 (division by 1) and div() needs
// only m and the shift: one register less per divisor in the batch kernels' hot loops.
struct FastDiv {
  std::uint32_t d = 1;
  std::uint32_t mul = 0;
  std::uint32_t shr = 0;

  FastDiv() = default;
  explicit FastDiv(std::uint32_t divisor) : d(divisor) {
    if (d <= 1) return;
    std::uint32_t l = 0;
    while ((std::uint64_t{1} << l) < d) ++l;
    std::uint32_t p = 31 + l;
    mul = static_cast<std::uint32_t>(((std::uint64_t{1} << p) + d - 1) / d);
    shr = p - 32;
  }
  FERRY_HD std::uint32_t div(std::uint32_t n) const {
    if (mul == 0) return n;
#if defined(__CUDA_ARCH__)
    return __umulhi(n, mul) >> shr;
#else
    return static_cast<std::uint32_t>((std::uint64_t{n} * mul) >> 32) >> shr;
#endif
  }
};

template <class Idx>
FERRY_HD Idx divide(Idx n, std::int64_t d, const FastDiv& f) {
  if constexpr (sizeof(Idx) == 4) {
    (void)d;
    return f.div(n);
  } else {
    (void)f;
    return n / static_cast<Idx>(d);
  }
}

// A strided shape: contiguous blocks of `bytes`, repeated over nd <= N dimensions (innermost
// first). Kernels for 1-3 dimensions take a ShapeN of just that size, so their arguments stay small
// (a launch copies them); everything else uses Shape.
template <int N>
struct ShapeN {
  std::int64_t bytes = 0;
  int nd = 0;
  std::int64_t count[N] = {};
  std::int64_t stride[N] = {};  // bytes
  FastDiv fwords[kWordSizes];   // divides by bytes >> lw (32-bit plans only)
  FastDiv fcount[N];

  ShapeN() = default;
  template <int M>
  explicit ShapeN(const ShapeN<M>& o) : bytes(o.bytes), nd(o.nd < N ? o.nd : N) {
    for (int i = 0; i < kWordSizes; ++i) fwords[i] = o.fwords[i];
    for (int d = 0; d < nd; ++d) {
      count[d] = o.count[d];
      stride[d] = o.stride[d];
      fcount[d] = o.fcount[d];
    }
  }
};
using Shape = ShapeN<kMaxDims>;

// Byte offset of block number `block` of a shape (mixed radix over its dimensions). ND is the
// number of dimensions when known at compile time, else -1; either way the loop unrolls, so the
// shape's arrays are only ever indexed by constants (no local-memory copy of kernel parameters).
template <class Idx, int ND, int N>
FERRY_HD std::int64_t dims_offset(const ShapeN<N>& s, Idx block) {
  constexpr int kLoop = ND >= 0 ? ND : N;
  const int nd = ND >= 0 ? ND : s.nd;
  std::int64_t off = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int d = 0; d < kLoop; ++d) {
    if (ND < 0 && d >= nd) break;
    Idx q = d + 1 == nd ? Idx{0} : divide<Idx>(block, s.count[d], s.fcount[d]);
    Idx r = block - q * static_cast<Idx>(s.count[d]);
    off += static_cast<std::int64_t>(r) * s.stride[d];
    block = q;
  }
  return off;
}

// Byte offset (from the shape's origin) of word p, words being 1 << LW bytes.
template <class Idx, int LW, int ND, int N>
FERRY_HD std::int64_t shape_offset(const ShapeN<N>& s, Idx p) {
  std::int64_t words = s.bytes >> LW;
  Idx block = divide<Idx>(p, words, s.fwords[LW]);
  Idx word = p - block * static_cast<Idx>(words);
  return (static_cast<std::int64_t>(word) << LW) + dims_offset<Idx, ND>(s, block);
}

// One piece of a general form: a strided shape (or, with shape < 0, a contiguous run) at mem_off
// bytes from the inner element's origin, packed from packed_byte on within that element.
struct Piece {
  std::int64_t mem_off;
  std::int64_t packed_byte;
  std::int32_t shape;
  std::int32_t unused;
};

struct Plan {
  std::int64_t total = 0;   // words moved (set for the chosen word size)
  std::int64_t start = 0;   // bytes from the origin to the plan's origin
  // Strided form (npieces == 0): `shape` covers everything, count folded in.
  Shape shape;
  // General form: `outer.bytes` is the packed bytes of one inner element; outer's dimensions
  // repeat it (the streams above the irregular part, then count); the pieces make it up.
  Shape outer;
  const Piece* pieces = nullptr;  // sorted by packed_byte; device memory on the GPU
  const Shape* shapes = nullptr;
  int npieces = 0;
};

// The strided form alone, with room for N dimensions: the kernel argument of 1-3-D launches.
template <int N>
struct StridedPlan {
  std::int64_t total = 0;
  std::int64_t start = 0;
  ShapeN<N> shape;
  StridedPlan() = default;
  explicit StridedPlan(const Plan& pl) : total(pl.total), start(pl.start), shape(pl.shape) {}
};

// Byte offset from the origin of packed word p of the strided form.
template <class Idx, int LW, int ND, class P>
FERRY_HD std::int64_t strided_offset(const P& pl, Idx p) {
  return pl.start + shape_offset<Idx, LW, ND>(pl.shape, p);
}

// Byte offset from the origin of packed word p of the general form.
template <class Idx, int LW>
FERRY_HD std::int64_t general_offset(const Plan& pl, Idx p) {
  std::int64_t inner_words = pl.outer.bytes >> LW;
  Idx rep = divide<Idx>(p, inner_words, pl.outer.fwords[LW]);
  std::int64_t rest = static_cast<std::int64_t>(p - rep * static_cast<Idx>(inner_words)) << LW;
  std::int64_t off = pl.start + dims_offset<Idx, -1>(pl.outer, rep);
  int lo = 0, hi = pl.npieces - 1;  // the last piece that starts at or before `rest`
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (pl.pieces[mid].packed_byte <= rest) lo = mid;
    else hi = mid - 1;
  }
  const Piece& pc = pl.pieces[lo];
  std::int64_t in = rest - pc.packed_byte;
  off += pc.mem_off;
  if (pc.shape < 0) return off + in;
  return off + shape_offset<Idx, LW, -1>(pl.shapes[pc.shape], static_cast<Idx>(in >> LW));
}

template <class Idx, int LW>
FERRY_HD std::int64_t plan_offset(const Plan& pl, Idx p) {
  return pl.npieces == 0 ? strided_offset<Idx, LW, -1>(pl, p) : general_offset<Idx, LW>(pl, p);
}

}  // namespace ferry::detail
