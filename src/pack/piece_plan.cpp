// General forms moved piece by piece (batch_plan.hpp, piece_moves and piece_copy_moves): a plan is
// cut into segments, each a strided shape of at most three dimensions that the lean kernel runs,
// and a copy pairs the segments of its two sides, cutting either wherever the other's boundaries
// fall. No CUDA here: tests/test_plan_pieces.cpp checks all of it against the CPU engine.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "pack/batch_plan.hpp"

namespace ferry::detail {

namespace {

using i64 = std::int64_t;

// Packed bytes [packed, packed + bytes) of a side, at byte `mem` from its base: contiguous runs of
// `block` bytes repeated over nd dimensions (innermost first); nd 0 is one run.
struct Seg {
  i64 packed = 0;
  i64 bytes = 0;
  i64 mem = 0;
  i64 block = 0;
  int nd = 0;
  i64 count[kMaxDims] = {};
  i64 stride[kMaxDims] = {};
};

// Segments of a side, and how many more it may be cut into.
struct Cutter {
  i64 budget;
  bool spend(i64 n) {
    budget -= n;
    return budget >= 0;
  }
};

Seg run(i64 packed, i64 bytes, i64 mem) {
  Seg g;
  g.packed = packed;
  g.bytes = g.block = bytes;
  g.mem = mem;
  return g;
}

Seg of_shape(const Shape& sh, i64 packed, i64 mem) {
  Seg g = run(packed, sh.bytes, mem);
  for (int d = 0; d < sh.nd; ++d) {
    if (sh.count[d] == 1) continue;  // index 0 always: no offset, no dimension
    g.count[g.nd] = sh.count[d];
    g.stride[g.nd] = sh.stride[d];
    g.bytes *= sh.count[d];
    ++g.nd;
  }
  return g;
}

// Slices [first, first + n) of the outermost dimension (nd >= 1).
Seg slices(const Seg& g, i64 first, i64 n) {
  Seg s = g;
  const i64 slice = g.bytes / g.count[g.nd - 1];
  s.packed += first * slice;
  s.mem += first * g.stride[g.nd - 1];
  s.bytes = n * slice;
  s.count[g.nd - 1] = n;
  if (n == 1) s.nd -= 1;
  return s;
}

// Cuts g after `at` of its bytes (0 < at < bytes): a run anywhere, a strided shape between slices
// of its outermost dimension, the slice that holds the cut recursively.
void cut(const Seg& g, i64 at, std::vector<Seg>& head, std::vector<Seg>& tail) {
  if (g.nd == 0) {
    head.push_back(run(g.packed, at, g.mem));
    tail.push_back(run(g.packed + at, g.bytes - at, g.mem + at));
    return;
  }
  const i64 n = g.count[g.nd - 1], slice = g.bytes / n, k = at / slice, r = at % slice;
  if (k > 0) head.push_back(slices(g, 0, k));
  if (r == 0) {
    tail.push_back(slices(g, k, n - k));
    return;
  }
  cut(slices(g, k, 1), r, head, tail);
  if (k + 1 < n) tail.push_back(slices(g, k + 1, n - k - 1));
}

bool lean_ok(const Seg& g) {
  if (g.nd > 3 || g.bytes >= (i64{1} << 31)) return false;
  for (int d = 0; d < g.nd; ++d)
    if (g.stride[d] > INT32_MAX || g.stride[d] < -INT32_MAX) return false;
  return true;
}

// g as segments the lean kernel takes: outer dimensions become slices, runs of 2 GiB or more are
// cut in 1 GiB runs. False when that would pass the budget.
bool fit(const Seg& g, Cutter& c, std::vector<Seg>& out) {
  if (lean_ok(g)) {
    out.push_back(g);
    return c.spend(1);
  }
  if (g.nd == 0) {
    constexpr i64 kRun = i64{1} << 30;
    if (!c.spend((g.bytes + kRun - 1) / kRun)) return false;
    for (i64 at = 0; at < g.bytes; at += kRun) out.push_back(run(g.packed + at, std::min(kRun, g.bytes - at), g.mem + at));
    return true;
  }
  const i64 n = g.count[g.nd - 1];
  if (n > c.budget) return false;
  for (i64 i = 0; i < n; ++i)
    if (!fit(slices(g, i, 1), c, out)) return false;
  return true;
}

// The segments of a plan in packed order, each fit for the lean kernel.
bool segments(const PlanHead& hp, Cutter& c, std::vector<Seg>& out) {
  const Plan& pl = hp.plan;
  if (hp.bytes <= 0) return false;
  if (hp.contiguous) return fit(run(0, hp.bytes, pl.start), c, out);
  if (pl.npieces == 0) return fit(of_shape(pl.shape, 0, pl.start), c, out);
  const i64 inner = pl.outer.bytes;
  if (inner <= 0 || hp.bytes % inner != 0) return false;
  const i64 reps = hp.bytes / inner;
  if (reps > c.budget) return false;
  for (i64 r = 0; r < reps; ++r) {
    const i64 base = pl.start + dims_offset<std::uint64_t, -1>(pl.outer, static_cast<std::uint64_t>(r));
    for (int k = 0; k < pl.npieces; ++k) {
      const Piece& pc = pl.pieces[k];
      const i64 end = k + 1 < pl.npieces ? pl.pieces[k + 1].packed_byte : inner;
      if (end == pc.packed_byte) continue;
      const Seg g = pc.shape < 0 ? run(r * inner + pc.packed_byte, end - pc.packed_byte, base + pc.mem_off)
                                 : of_shape(pl.shapes[pc.shape], r * inner + pc.packed_byte, base + pc.mem_off);
      if (g.bytes != end - pc.packed_byte) return false;  // not a piece as the single kernel reads it
      if (!fit(g, c, out)) return false;
    }
  }
  return !out.empty();
}

i64 abs64(i64 v) { return v < 0 ? -v : v; }

// The widest word (log2) the segment's layout and its first byte's address allow.
int seg_lw(const Seg& g, std::uintptr_t base) {
  int lw = std::min(address_lw(static_cast<std::uintptr_t>(g.block)),
                    address_lw(base + static_cast<std::uintptr_t>(g.mem)));
  for (int d = 0; d < g.nd; ++d) lw = std::min(lw, address_lw(static_cast<std::uintptr_t>(abs64(g.stride[d]))));
  return lw;
}

Shape3 shape3_of(const Seg& g, int lw) {
  Shape3 s{};
  s.start = g.mem;
  s.nd = g.nd;
  s.words = static_cast<std::uint32_t>(g.block >> lw);
  s.fwords = FastDiv(s.words);
  for (int d = 0; d < g.nd; ++d) {
    s.count[d] = static_cast<std::uint32_t>(g.count[d]);
    s.stride[d] = static_cast<std::int32_t>(g.stride[d]);
    if (d < 2) s.fcount[d] = FastDiv(s.count[d]);
  }
  return s;
}

bool mean_ok(i64 bytes, std::size_t moves, const PieceLimits& limits) {
  return moves > 0 && bytes / static_cast<i64>(moves) >= limits.min_mean_bytes;
}

}  // namespace

bool piece_moves(const PlanHead& hp, bool pack, std::uintptr_t mem, std::uintptr_t packed,
                 const PieceLimits& limits, PieceMoves& out) {
  out = {};
  std::vector<Seg> segs;
  Cutter c{limits.max_moves};
  if (hp.plan.npieces == 0 || !segments(hp, c, segs) || !mean_ok(hp.bytes, segs.size(), limits)) return false;
  for (const Seg& g : segs) {
    LeanMove m{};
    m.lw = std::min(seg_lw(g, mem), address_lw(packed + static_cast<std::uintptr_t>(g.packed)));
    m.kind = pack ? kPack : kUnpack;
    m.a = shape3_of(g, m.lw);
    (pack ? m.dst_off : m.src_off) = g.packed;
    out.moves.push_back(m);
    out.bytes.push_back(g.bytes);
  }
  return true;
}

bool piece_copy_moves(const PlanHead& src, const PlanHead& dst, std::uintptr_t s, std::uintptr_t d,
                      const PieceLimits& limits, PieceMoves& out) {
  out = {};
  std::vector<Seg> sa, sb;
  Cutter c{limits.max_moves};
  if (src.bytes != dst.bytes || !segments(src, c, sa) || !segments(dst, c, sb)) return false;
  // Pair the two lists, cutting the longer front segment where the shorter one ends.
  std::deque<Seg> a(sa.begin(), sa.end()), b(sb.begin(), sb.end());
  std::vector<std::pair<Seg, Seg>> pairs;
  while (!a.empty() && !b.empty()) {
    if (a.front().bytes == b.front().bytes) {
      pairs.emplace_back(a.front(), b.front());
      a.pop_front();
      b.pop_front();
      continue;
    }
    const bool a_longer = a.front().bytes > b.front().bytes;
    std::deque<Seg>& q = a_longer ? a : b;
    const Seg big = q.front();
    const i64 at = a_longer ? b.front().bytes : a.front().bytes;
    q.pop_front();
    std::vector<Seg> head, tail;
    cut(big, at, head, tail);
    if (!c.spend(static_cast<i64>(head.size() + tail.size()) - 1)) return false;
    q.insert(q.begin(), tail.begin(), tail.end());
    q.insert(q.begin(), head.begin(), head.end());
  }
  if (!a.empty() || !b.empty() || !mean_ok(src.bytes, pairs.size(), limits)) return false;
  for (const auto& [x, y] : pairs) {
    LeanMove m{};
    m.lw = std::min(seg_lw(x, s), seg_lw(y, d));
    if (x.nd == 0) {  // a contiguous source: an unpack of its run
      m.kind = kUnpack;
      m.src_off = x.mem;
      m.a = shape3_of(y, m.lw);
    } else if (y.nd == 0) {
      m.kind = kPack;
      m.dst_off = y.mem;
      m.a = shape3_of(x, m.lw);
    } else {
      m.a = shape3_of(x, m.lw);
      m.b = shape3_of(y, m.lw);
      m.kind = same_counts(m.a, m.b) ? kCopySame : kCopyTwo;
    }
    out.moves.push_back(m);
    out.bytes.push_back(x.bytes);
  }
  return true;
}

std::int64_t lean_offset_of(const LeanMove& m, std::int64_t at) {
  if (m.kind == kUnpack) return m.src_off + at;  // the source is packed (a copy from a run)
  const auto p = static_cast<std::uint32_t>(at >> m.lw);
  std::int64_t off = 0;
  switch (m.lw) {
    case 0: off = shape3_offset<0>(m.a, p); break;
    case 1: off = shape3_offset<1>(m.a, p); break;
    case 2: off = shape3_offset<2>(m.a, p); break;
    case 3: off = shape3_offset<3>(m.a, p); break;
    default: off = shape3_offset<4>(m.a, p);
  }
  return off + m.src_off;
}

}  // namespace ferry::detail
