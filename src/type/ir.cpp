// The IR's node constructors (derived fields, overflow checks), equality, printing and Algorithm 5.
#include <ferry/type.hpp>

#include <algorithm>
#include <sstream>
#include <unordered_set>

#include "sys/error.hpp"

namespace ferry {

using detail::checked_add;
using detail::checked_mul;

namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  // 64-bit mixing (splitmix-style finalizer over the running value).
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

i64 sat_add(i64 a, i64 b) {
  i64 r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}
i64 sat_mul(i64 a, i64 b) {
  i64 r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

}  // namespace

NodePtr make_dense(i64 off, i64 size) {
  if (size < 0) detail::fail(MPI_ERR_TYPE, "negative dense size");
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::dense;
  n->off = off;
  n->size = size;
  n->bytes = size;
  n->lo = off;
  n->hi = checked_add(off, size, MPI_ERR_TYPE, "datatype bounds");
  n->runs = size > 0 ? 1 : 0;
  n->hash = mix(mix(mix(1, static_cast<std::uint64_t>(off)), static_cast<std::uint64_t>(size)), 0);
  return n;
}

NodePtr make_stream(i64 off, i64 count, i64 stride, NodePtr child) {
  if (count < 0) detail::fail(MPI_ERR_COUNT, "negative count in datatype");
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::stream;
  n->off = off;
  n->count = count;
  n->stride = stride;
  n->bytes = checked_mul(count, child->bytes, MPI_ERR_TYPE, "datatype size");
  if (n->bytes > 0) {
    i64 span = checked_mul(count - 1, stride, MPI_ERR_TYPE, "datatype extent");
    i64 lo = checked_add(off, child->lo, MPI_ERR_TYPE, "datatype bounds");
    i64 hi = checked_add(off, child->hi, MPI_ERR_TYPE, "datatype bounds");
    if (span >= 0) hi = checked_add(hi, span, MPI_ERR_TYPE, "datatype bounds");
    else lo = checked_add(lo, span, MPI_ERR_TYPE, "datatype bounds");
    n->lo = lo;
    n->hi = hi;
  }
  n->runs = sat_mul(count, child->runs);
  n->nodes = sat_add(1, child->nodes);
  std::uint64_t h = mix(2, static_cast<std::uint64_t>(off));
  h = mix(h, static_cast<std::uint64_t>(count));
  h = mix(h, static_cast<std::uint64_t>(stride));
  n->hash = mix(h, child->hash);
  n->child = std::move(child);
  return n;
}

NodePtr make_blocks(std::vector<Entry> entries, i64 off) {
  auto n = std::make_shared<Node>();
  n->kind = NodeKind::blocks;
  n->off = off;
  std::uint64_t h = mix(3, static_cast<std::uint64_t>(off));
  bool any = false;
  std::unordered_set<const Node*> distinct;
  for (const Entry& e : entries) {
    const Node& c = *e.child;
    n->bytes = checked_add(n->bytes, c.bytes, MPI_ERR_TYPE, "datatype size");
    if (c.bytes > 0) {
      i64 at = checked_add(off, e.disp, MPI_ERR_TYPE, "datatype displacement");
      i64 lo = checked_add(at, c.lo, MPI_ERR_TYPE, "datatype bounds");
      i64 hi = checked_add(at, c.hi, MPI_ERR_TYPE, "datatype bounds");
      n->lo = any ? std::min(n->lo, lo) : lo;
      n->hi = any ? std::max(n->hi, hi) : hi;
      any = true;
    }
    n->runs = sat_add(n->runs, c.runs);
    if (distinct.insert(&c).second) n->nodes = sat_add(n->nodes, c.nodes);
    h = mix(mix(h, static_cast<std::uint64_t>(e.disp)), c.hash);
  }
  n->hash = mix(h, entries.size());
  n->entries = std::move(entries);
  return n;
}

NodePtr shifted(const NodePtr& n, i64 delta) {
  if (delta == 0) return n;
  i64 off = checked_add(n->off, delta, MPI_ERR_TYPE, "datatype displacement");
  switch (n->kind) {
    case NodeKind::dense: return make_dense(off, n->size);
    case NodeKind::stream: return make_stream(off, n->count, n->stride, n->child);
    case NodeKind::blocks: return make_blocks(n->entries, off);
  }
  return n;
}

bool equal(const NodePtr& a, const NodePtr& b) {
  if (a == b) return true;
  if (a->hash != b->hash || a->kind != b->kind || a->off != b->off || a->bytes != b->bytes)
    return false;
  switch (a->kind) {
    case NodeKind::dense: return a->size == b->size;
    case NodeKind::stream:
      return a->count == b->count && a->stride == b->stride && equal(a->child, b->child);
    case NodeKind::blocks:
      if (a->entries.size() != b->entries.size()) return false;
      for (std::size_t i = 0; i < a->entries.size(); ++i) {
        if (a->entries[i].disp != b->entries[i].disp) return false;
        if (!equal(a->entries[i].child, b->entries[i].child)) return false;
      }
      return true;
  }
  return false;
}

namespace {

void print(std::ostream& os, const NodePtr& n, int depth, int max_entries) {
  os << std::string(static_cast<std::size_t>(depth) * 2, ' ');
  switch (n->kind) {
    case NodeKind::dense:
      os << "Dense{off: " << n->off << ", size: " << n->size << "}\n";
      return;
    case NodeKind::stream:
      os << "Stream{off: " << n->off << ", count: " << n->count << ", stride: " << n->stride
         << "}\n";
      print(os, n->child, depth + 1, max_entries);
      return;
    case NodeKind::blocks: {
      os << "Blocks{entries: " << n->entries.size() << "}\n";
      int shown = 0;
      for (const Entry& e : n->entries) {
        if (shown++ == max_entries) {
          os << std::string(static_cast<std::size_t>(depth + 1) * 2, ' ') << "... "
             << n->entries.size() - static_cast<std::size_t>(max_entries) << " more\n";
          break;
        }
        os << std::string(static_cast<std::size_t>(depth + 1) * 2, ' ') << "@" << e.disp << ":\n";
        print(os, e.child, depth + 2, max_entries);
      }
      return;
    }
  }
}

}  // namespace

std::string to_string(const NodePtr& n) {
  std::ostringstream os;
  print(os, n, 0, 8);
  return os.str();
}

std::string to_string(const StridedBlock& sb) {
  std::ostringstream os;
  os << "StridedBlock{start: " << sb.start << ", counts: [";
  for (std::size_t i = 0; i < sb.counts.size(); ++i) os << (i ? " " : "") << sb.counts[i];
  os << "], strides: [";
  for (std::size_t i = 0; i < sb.strides.size(); ++i) os << (i ? " " : "") << sb.strides[i];
  os << "]}";
  return os.str();
}

std::optional<StridedBlock> strided_block(const NodePtr& root) { return strided_block(*root); }

std::optional<StridedBlock> strided_block(const Node& root) {
  // Algorithm 5, walking parent to child; the Dense at the bottom is dimension 0.
  StridedBlock sb;
  std::vector<const Node*> chain;
  const Node* cur = &root;
  while (cur->kind == NodeKind::stream) {
    chain.push_back(cur);
    cur = cur->child.get();
  }
  if (cur->kind != NodeKind::dense) return std::nullopt;
  sb.start = cur->off;
  sb.counts.push_back(cur->size);
  sb.strides.push_back(1);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    sb.start = checked_add(sb.start, (*it)->off, MPI_ERR_TYPE, "datatype displacement");
    sb.counts.push_back((*it)->count);
    sb.strides.push_back((*it)->stride);
  }
  return sb;
}

Type::Type(NodePtr root, i64 lb, i64 extent) : root_(canonicalize(std::move(root))), lb_(lb),
                                               extent_(extent) {
  strided_ = strided_block(root_);
  dense_ = root_->bytes == 0 || (strided_ && strided_->ndims() == 1 && extent_ == root_->bytes);
}

std::string Type::describe() const {
  std::ostringstream os;
  os << "size " << size() << " B, extent " << extent_ << " B (lb " << lb_ << "), true extent "
     << true_extent() << " B (true lb " << true_lb() << "), " << blocks() << " contiguous block"
     << (blocks() == 1 ? "" : "s") << ", " << root_->nodes << " IR node"
     << (root_->nodes == 1 ? "" : "s") << "\n";
  if (strided_) os << "  " << to_string(*strided_) << "\n";
  else os << "  general form:\n";
  std::istringstream tree(to_string(root_));
  for (std::string line; std::getline(tree, line);) os << "  | " << line << "\n";
  return os.str();
}

}  // namespace ferry
