#include "pack/plan_build.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>

#include "sys/error.hpp"

namespace ferry::detail {

namespace {

constexpr std::size_t kMaxPieces = std::size_t{1} << 22;

struct Dim {
  i64 count;
  i64 stride;
};

// Fills a shape's dimensions and its fast divisions; tracks the alignment and index width.
class Builder {
 public:
  std::uint64_t align = 0;  // gcd of every byte quantity (0: none seen)
  bool wide = false;

  void see(i64 v) { align = std::gcd(align, static_cast<std::uint64_t>(v < 0 ? -v : v)); }

  Shape shape(i64 bytes, const std::vector<Dim>& dims) {
    if (dims.size() > static_cast<std::size_t>(kMaxDims))
      fail(MPI_ERR_TYPE, "datatype has " + std::to_string(dims.size()) +
                             " strided dimensions; the GPU engine handles " +
                             std::to_string(kMaxDims));
    Shape s;
    s.bytes = bytes;
    see(bytes);
    s.nd = static_cast<int>(dims.size());
    for (int d = 0; d < s.nd; ++d) {
      s.count[d] = dims[static_cast<std::size_t>(d)].count;
      s.stride[d] = dims[static_cast<std::size_t>(d)].stride;
      see(s.stride[d]);
      if (s.count[d] >= (i64{1} << 31)) wide = true;
      else s.fcount[d] = FastDiv(static_cast<std::uint32_t>(s.count[d]));
    }
    for (int lw = 0; lw < kWordSizes; ++lw)
      if ((bytes >> lw) < (i64{1} << 31) && (bytes >> lw) > 0)
        s.fwords[lw] = FastDiv(static_cast<std::uint32_t>(bytes >> lw));
    return s;
  }
};

// count elements `extent` apart as the outermost dimension, merged into the outermost dimension
// when the elements continue its stride.
void add_count(std::vector<Dim>& dims, i64 count, i64 extent) {
  if (count <= 1) return;
  if (!dims.empty() && dims.back().count * dims.back().stride == extent) dims.back().count *= count;
  else dims.push_back({count, extent});
}

std::vector<Dim> dims_of(const StridedBlock& sb) {
  std::vector<Dim> dims;
  for (int d = 1; d < sb.ndims(); ++d)
    dims.push_back({sb.counts[static_cast<std::size_t>(d)], sb.strides[static_cast<std::size_t>(d)]});
  return dims;
}

class Flattener {
 public:
  Flattener(Builder& b, HostPlan& hp) : b_(b), hp_(hp) {}

  void emit(const Node& n, i64 mem, i64 packed) {
    if (auto sb = strided_block(n)) {
      add(mem + sb->start, packed, *sb);
      return;
    }
    i64 base = mem + n.off;
    if (n.kind == NodeKind::blocks) {
      for (const Entry& e : n.entries) {
        emit(*e.child, base + e.disp, packed);
        packed += e.child->bytes;
      }
    } else {  // a stream of irregular elements inside an irregular part: unrolled
      for (i64 i = 0; i < n.count; ++i) emit(*n.child, base + i * n.stride, packed + i * n.child->bytes);
    }
  }

 private:
  Builder& b_;
  HostPlan& hp_;
  std::map<std::vector<i64>, int> shape_ids_;

  void add(i64 mem, i64 packed, const StridedBlock& sb) {
    if (hp_.pieces.size() >= kMaxPieces)
      fail(MPI_ERR_TYPE, "datatype too irregular for the GPU engine (more than 4M pieces)");
    b_.see(mem);
    b_.see(packed);
    int id = -1;
    if (sb.ndims() > 1) {
      std::vector<i64> key{sb.counts[0]};
      for (int d = 1; d < sb.ndims(); ++d) {
        key.push_back(sb.counts[static_cast<std::size_t>(d)]);
        key.push_back(sb.strides[static_cast<std::size_t>(d)]);
      }
      auto it = shape_ids_.find(key);
      if (it == shape_ids_.end()) {
        id = static_cast<int>(hp_.shapes.size());
        hp_.shapes.push_back(b_.shape(sb.counts[0], dims_of(sb)));
        shape_ids_.emplace(std::move(key), id);
      } else {
        id = it->second;
      }
    } else {
      b_.see(sb.counts[0]);
      // A contiguous run right after another one in memory and in the packed stream extends it.
      if (!hp_.pieces.empty()) {
        Piece& last = hp_.pieces.back();
        if (last.shape < 0 && packed - last.packed_byte == mem - last.mem_off) return;
      }
    }
    hp_.pieces.push_back({mem, packed, id, 0});
  }
};

}  // namespace

int address_lw(std::uintptr_t a) {
  int lw = 0;
  while (lw < 4 && (a & ((std::uintptr_t{2} << lw) - 1)) == 0) ++lw;
  return lw;
}

namespace {

std::vector<Dim> dims_of(const Shape& s) {
  std::vector<Dim> dims;
  for (int d = 0; d < s.nd; ++d) dims.push_back({s.count[d], s.stride[d]});
  return dims;
}

}  // namespace

HostPlan build_plan(const Type& type) {
  HostPlan host;
  PlanHead& hp = host.head;
  hp.bytes = type.size();
  if (hp.bytes == 0) {
    hp.contiguous = true;
    return host;
  }
  Builder b;
  Plan& pl = hp.plan;
  if (type.strided() && type.strided()->ndims() == 1) {
    hp.contiguous = true;  // one run per element; count may make it a strided shape
    pl.start = type.strided()->start;
    b.see(pl.start);
    pl.shape = b.shape(hp.bytes, {});
  } else if (type.strided()) {
    const StridedBlock& sb = *type.strided();
    pl.start = sb.start;
    b.see(pl.start);
    pl.shape = b.shape(sb.counts[0], dims_of(sb));
  } else {
    // Peel the streams above the irregular part: they, and count, repeat it.
    const Node* node = type.root().get();
    std::vector<Dim> top_down;
    i64 start = 0;
    while (node->kind == NodeKind::stream) {
      start += node->off;
      top_down.push_back({node->count, node->stride});
      node = node->child.get();
    }
    pl.start = start;
    b.see(start);
    pl.outer = b.shape(node->bytes, std::vector<Dim>(top_down.rbegin(), top_down.rend()));
    Flattener f(b, host);
    f.emit(*node, 0, 0);
    pl.npieces = static_cast<int>(host.pieces.size());
  }
  hp.max_lw = b.align == 0 ? 4 : std::min(4, address_lw(static_cast<std::uintptr_t>(b.align)));
  hp.wide = b.wide || hp.bytes >= (i64{1} << 31);
  return host;
}

PlanHead with_count(const PlanHead& one, const Type& type, i64 count) {
  PlanHead hp = one;
  hp.bytes = checked_mul(count, one.bytes, MPI_ERR_COUNT, "packed size");
  hp.wide = one.wide || hp.bytes >= (i64{1} << 31);
  if (count <= 1 || hp.bytes == 0) {
    if (count == 0) hp.contiguous = true;
    return hp;
  }
  Builder b;
  b.align = std::uint64_t{1} << one.max_lw;
  if (one.contiguous && type.extent() == one.bytes) {  // dense: still one run, count times longer
    hp.plan.shape = b.shape(hp.bytes, {});
    hp.max_lw = std::min(one.max_lw, address_lw(static_cast<std::uintptr_t>(b.align)));
    return hp;
  }
  b.see(type.extent());
  Shape& s = one.plan.npieces ? hp.plan.outer : hp.plan.shape;
  std::vector<Dim> dims = dims_of(s);
  add_count(dims, count, type.extent());
  s = b.shape(s.bytes, dims);
  hp.contiguous = false;
  hp.max_lw = std::min(one.max_lw, address_lw(static_cast<std::uintptr_t>(b.align)));
  hp.wide = one.wide || b.wide || hp.bytes >= (i64{1} << 31);
  return hp;
}

namespace {

template <class Idx, int LW>
void emulate_words(const HostPlan& hp, char* origin, char* packed, bool pack) {
  Plan pl = hp.head.plan;
  pl.total = hp.head.bytes >> LW;
  pl.pieces = hp.pieces.data();
  pl.shapes = hp.shapes.data();
  constexpr std::size_t w = std::size_t{1} << LW;
  for (i64 p = 0; p < pl.total; ++p) {
    char* mem = origin + plan_offset<Idx, LW>(pl, static_cast<Idx>(p));
    char* pk = packed + (p << LW);
    if (pack) std::memcpy(pk, mem, w);
    else std::memcpy(mem, pk, w);
  }
}

template <class Idx>
void emulate_idx(const HostPlan& hp, int lw, char* origin, char* packed, bool pack) {
  switch (lw) {
    case 0: return emulate_words<Idx, 0>(hp, origin, packed, pack);
    case 1: return emulate_words<Idx, 1>(hp, origin, packed, pack);
    case 2: return emulate_words<Idx, 2>(hp, origin, packed, pack);
    case 3: return emulate_words<Idx, 3>(hp, origin, packed, pack);
    default: return emulate_words<Idx, 4>(hp, origin, packed, pack);
  }
}

}  // namespace

void emulate(const HostPlan& host, int lw, char* origin, char* packed, bool pack) {
  const PlanHead& hp = host.head;
  if (hp.contiguous) {
    if (pack) std::memcpy(packed, origin + hp.plan.start, static_cast<std::size_t>(hp.bytes));
    else std::memcpy(origin + hp.plan.start, packed, static_cast<std::size_t>(hp.bytes));
    return;
  }
  if (hp.wide) emulate_idx<std::uint64_t>(host, lw, origin, packed, pack);
  else emulate_idx<std::uint32_t>(host, lw, origin, packed, pack);
}

}  // namespace ferry::detail
