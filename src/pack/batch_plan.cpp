#include "pack/batch_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>

namespace ferry::detail {

namespace {

constexpr std::int64_t round16(std::int64_t n) { return (n + 15) / 16 * 16; }

}  // namespace

bool same_counts(const Shape3& a, const Shape3& b) {
  if (a.nd != b.nd || a.words != b.words) return false;
  for (int d = 0; d < a.nd; ++d)
    if (a.count[d] != b.count[d]) return false;
  return true;
}

int move_lw(const SidePlan& src, const SidePlan& dst) {
  int lw = 4;
  for (const SidePlan* s : {&src, &dst}) {
    std::uintptr_t first = s->base;
    if (s->typed) {
      lw = std::min(lw, s->head.max_lw);
      first += static_cast<std::uintptr_t>(s->head.plan.start);
    }
    lw = std::min(lw, address_lw(first));
  }
  return lw;
}

bool lean_fits(const PlanHead& hp) {
  const Shape& sh = hp.plan.shape;
  if (hp.plan.npieces != 0 || sh.nd > 3 || hp.wide) return false;
  for (int d = 0; d < sh.nd; ++d)
    if (sh.stride[d] > INT32_MAX || sh.stride[d] < -INT32_MAX) return false;
  return true;
}

Shape3 make_shape3(const PlanHead& hp, int lw) {
  const Shape& sh = hp.plan.shape;
  Shape3 s{};
  s.start = hp.plan.start;
  s.nd = sh.nd;
  s.words = static_cast<std::uint32_t>(sh.bytes >> lw);
  s.fwords = sh.fwords[lw];
  for (int d = 0; d < sh.nd && d < 3; ++d) {
    s.count[d] = static_cast<std::uint32_t>(sh.count[d]);
    s.stride[d] = static_cast<std::int32_t>(sh.stride[d]);
    if (d < 2) s.fcount[d] = sh.fcount[d];
  }
  return s;
}

LeanMove make_lean(const SidePlan& src, const SidePlan& dst, int lw, std::int64_t src_off,
                   std::int64_t dst_off) {
  LeanMove m{};
  m.lw = lw;
  m.src_off = src_off;
  m.dst_off = dst_off;
  bool st = src.typed, dt = dst.typed;
  // A typed side that is one contiguous run is packed bytes at its start: a copy from or into it
  // is an unpack or a pack, with one offset computation per word instead of two.
  if (st && dt && src.head.contiguous) {
    st = false;
    m.src_off += src.head.plan.start;
  } else if (st && dt && dst.head.contiguous) {
    dt = false;
    m.dst_off += dst.head.plan.start;
  }
  if (st && !dt) {
    m.kind = kPack;
    m.a = make_shape3(src.head, lw);
  } else if (!st && dt) {
    m.kind = kUnpack;
    m.a = make_shape3(dst.head, lw);
  } else {
    m.a = make_shape3(src.head, lw);
    m.b = make_shape3(dst.head, lw);
    m.kind = same_counts(m.a, m.b) ? kCopySame : kCopyTwo;
  }
  return m;
}

GeneralMove make_general(const SidePlan& src, const SidePlan& dst, int lw, std::int64_t src_off,
                         std::int64_t dst_off) {
  GeneralMove m{};
  m.lw = lw;
  m.src_off = src_off;
  m.dst_off = dst_off;
  m.src_typed = src.typed ? 1 : 0;
  m.dst_typed = dst.typed ? 1 : 0;
  // Whether indices need 64 bits is decided at 1-byte words (PlanHead::wide), so a rebinding that
  // narrows the word size never outgrows the index type chosen here.
  m.wide = (src.typed && src.head.wide) || (dst.typed && dst.head.wide) ? 1 : 0;
  if (src.typed) m.src = src.head.plan;
  if (dst.typed) m.dst = dst.head.plan;
  return m;
}

std::int64_t chunk_bytes(std::int64_t total, int sms, const ChunkPolicy& policy) {
  if (policy.fixed > 0) return round16(policy.fixed);
  const std::int64_t blocks = std::int64_t{std::max(1, sms)} * std::max(1, policy.waves);
  const std::int64_t c = round16((total + blocks - 1) / blocks);
  return std::clamp(c, round16(policy.min_bytes), std::max(round16(policy.min_bytes),
                                                           round16(policy.max_bytes)));
}

std::vector<Chunk> partition(const std::vector<std::int64_t>& bytes, std::int64_t chunk) {
  chunk = std::max<std::int64_t>(16, round16(chunk));
  std::vector<Chunk> out;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const std::int64_t n = bytes[i];
    if (n <= 0) continue;
    const std::int64_t k = (n + chunk - 1) / chunk;
    const std::int64_t size = round16((n + k - 1) / k);
    for (std::int64_t begin = 0; begin < n; begin += size)
      out.push_back({begin, std::min(n, begin + size), static_cast<std::uint32_t>(i), 0, 0, 0});
  }
  return out;
}

void order_chunks(std::vector<Chunk>& chunks, const std::vector<std::uint64_t>& key) {
  std::vector<std::size_t> idx(chunks.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return key[a] < key[b]; });
  std::vector<Chunk> sorted;
  sorted.reserve(chunks.size());
  for (std::size_t i : idx) sorted.push_back(chunks[i]);
  chunks.swap(sorted);
}

std::int64_t side_offset_of(const SidePlan& side, std::int64_t at, int /*lw*/) {
  if (!side.typed) return at;
  const Plan& pl = side.head.plan;
  if (side.head.contiguous) return pl.start + at;
  if (pl.npieces) return pl.start;  // the pieces live on the GPU
  return strided_offset<std::uint64_t, 0, -1>(pl, static_cast<std::uint64_t>(at));
}

namespace {

template <int LW, int Kind>
void lean_words(const LeanMove& m, char* src, char* dst, std::uint32_t p0, std::uint32_t p1) {
  for (std::uint32_t p = p0; p < p1; ++p) {
    std::int64_t s = 0, d = 0;
    lean_offsets<LW, Kind>(m, p, s, d);
    std::memcpy(dst + d, src + s, std::size_t{1} << LW);
  }
}

template <int LW>
void lean_kind(const LeanMove& m, char* src, char* dst, std::uint32_t p0, std::uint32_t p1) {
  switch (m.kind) {
    case kPack: return lean_words<LW, kPack>(m, src, dst, p0, p1);
    case kUnpack: return lean_words<LW, kUnpack>(m, src, dst, p0, p1);
    case kCopySame: return lean_words<LW, kCopySame>(m, src, dst, p0, p1);
    default: return lean_words<LW, kCopyTwo>(m, src, dst, p0, p1);
  }
}

template <class Idx, int LW>
void general_words(const GeneralMove& m, char* src, char* dst, Idx p0, Idx p1) {
  for (Idx p = p0; p < p1; ++p) {
    std::int64_t s = 0, d = 0;
    general_offsets<Idx, LW>(m, p, s, d);
    std::memcpy(dst + d, src + s, std::size_t{1} << LW);
  }
}

template <class Idx>
void general_lw(const GeneralMove& m, char* src, char* dst, std::int64_t begin, std::int64_t end) {
  const int lw = m.lw;
  const Idx p0 = static_cast<Idx>(begin >> lw), p1 = static_cast<Idx>(end >> lw);
  switch (lw) {
    case 0: return general_words<Idx, 0>(m, src, dst, p0, p1);
    case 1: return general_words<Idx, 1>(m, src, dst, p0, p1);
    case 2: return general_words<Idx, 2>(m, src, dst, p0, p1);
    case 3: return general_words<Idx, 3>(m, src, dst, p0, p1);
    default: return general_words<Idx, 4>(m, src, dst, p0, p1);
  }
}

}  // namespace

void emulate_lean(const std::vector<LeanMove>& moves, const std::vector<Chunk>& chunks,
                  const std::vector<char*>& slots) {
  for (const Chunk& c : chunks) {
    const LeanMove& m = moves[c.move];
    char* src = slots[c.src_slot] + m.src_off;
    char* dst = slots[c.dst_slot] + m.dst_off;
    const auto p0 = static_cast<std::uint32_t>(c.begin >> m.lw);
    const auto p1 = static_cast<std::uint32_t>(c.end >> m.lw);
    switch (m.lw) {
      case 0: lean_kind<0>(m, src, dst, p0, p1); break;
      case 1: lean_kind<1>(m, src, dst, p0, p1); break;
      case 2: lean_kind<2>(m, src, dst, p0, p1); break;
      case 3: lean_kind<3>(m, src, dst, p0, p1); break;
      default: lean_kind<4>(m, src, dst, p0, p1);
    }
  }
}

void emulate_general(const std::vector<GeneralMove>& moves, const std::vector<Chunk>& chunks,
                     const std::vector<char*>& slots) {
  for (const Chunk& c : chunks) {
    const GeneralMove& m = moves[c.move];
    char* src = slots[c.src_slot] + m.src_off;
    char* dst = slots[c.dst_slot] + m.dst_off;
    if (m.wide) general_lw<std::uint64_t>(m, src, dst, c.begin, c.end);
    else general_lw<std::uint32_t>(m, src, dst, c.begin, c.end);
  }
}

}  // namespace ferry::detail
