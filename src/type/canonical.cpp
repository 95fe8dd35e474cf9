// Canonicalization (dissertation §5.2.2, Algorithms 1-4, extended to Blocks): rewrite bottom-up
// until nothing changes. Every rule keeps the type map, order included:
//   empty       a node with no data becomes Dense{0,0}; empty Blocks entries are dropped
//   elision     Stream{count 1} is its child, shifted (Alg. 3, also at the root)
//   hoisting    a child's offset moves into its parent, so offsets sit as high as they can and
//               equal layouts at different places share one canonical child
//   folding     Stream over Dense with stride == size is one bigger Dense (Alg. 2)
//   flattening  Stream over Stream with outer stride == inner count * inner stride is one Stream
//               (Alg. 4)
//   blocks      nested small Blocks are spliced in; abutting Dense entries merge; runs of equal
//               children at a constant step become one Stream entry; one entry is its child
// TEMPI's sort-by-stride pass is left out on purpose: swapping two streams reorders the type map.
#include <ferry/type.hpp>

#include <unordered_map>

#include "sys/error.hpp"

namespace ferry {

using detail::checked_add;
using detail::checked_mul;

namespace {

// A Blocks child with at most this many entries is spliced into its parent: small structs of
// structs flatten, while large indexed children stay shared (factored) instead of being copied.
constexpr std::size_t kSpliceMax = 32;

class Pass {
 public:
  bool changed = false;

  NodePtr visit(const NodePtr& n) {
    // The IR is a DAG (shared children); memoize so each shared node is rewritten once.
    auto it = memo_.find(n.get());
    if (it != memo_.end()) return it->second;
    NodePtr r = rewrite(n);
    if (r != n) changed = true;
    memo_.emplace(n.get(), r);
    return r;
  }

 private:
  std::unordered_map<const Node*, NodePtr> memo_;

  NodePtr empty() { return make_dense(0, 0); }

  NodePtr rewrite(const NodePtr& n) {
    switch (n->kind) {
      case NodeKind::dense: return n->size == 0 && n->off != 0 ? empty() : n;
      case NodeKind::stream: return rewrite_stream(n);
      case NodeKind::blocks: return rewrite_blocks(n);
    }
    return n;
  }

  NodePtr rewrite_stream(const NodePtr& n) {
    NodePtr c = visit(n->child);
    if (n->count == 0 || c->bytes == 0) return empty();
    if (n->count == 1) return shifted(c, n->off);
    if (c->off != 0) {
      i64 off = checked_add(n->off, c->off, MPI_ERR_TYPE, "datatype displacement");
      return make_stream(off, n->count, n->stride, shifted(c, -c->off));
    }
    if (c->kind == NodeKind::dense && c->size == n->stride)
      return make_dense(n->off, checked_mul(n->count, c->size, MPI_ERR_TYPE, "datatype size"));
    if (c->kind == NodeKind::stream && n->stride == c->count * c->stride)
      return make_stream(n->off, checked_mul(n->count, c->count, MPI_ERR_TYPE, "datatype size"),
                         c->stride, c->child);
    if (c != n->child) return make_stream(n->off, n->count, n->stride, c);
    return n;
  }

  // A run of entries: `reps` copies of `unit`, `step` bytes apart, the first at `disp`.
  struct Run {
    i64 disp;
    NodePtr unit;
    i64 reps;
    i64 step;
  };

  // Appends entry b (unit at b.disp, reps 1) to run a if together they are one run. The rules are
  // tried in a fixed order so that equal entry lists always give the same runs.
  static bool merge(Run& a, const Run& b) {
    const Node& u = *a.unit;
    const Node& v = *b.unit;
    // Abutting dense blocks are one block.
    if (a.reps == 1 && u.kind == NodeKind::dense && v.kind == NodeKind::dense && u.off == 0 &&
        v.off == 0 && a.disp + u.size == b.disp) {
      a.unit = make_dense(0, u.size + v.size);
      return true;
    }
    // A stream continued by more of its elements, or by another stream of them. Before the
    // rule for equal entries: two equal streams that continue each other are one longer stream
    // now, not a stream of two streams that a later pass flattens, by when its neighbours may
    // have been grouped differently (equivalent descriptions would canonicalize apart).
    if (a.reps == 1 && u.kind == NodeKind::stream && u.off == 0 && b.disp == a.disp + u.count * u.stride) {
      if (equal(u.child, b.unit)) {
        a.unit = make_stream(0, u.count + 1, u.stride, u.child);
        return true;
      }
      if (v.kind == NodeKind::stream && v.off == 0 && v.stride == u.stride &&
          equal(u.child, v.child)) {
        a.unit = make_stream(0, u.count + v.count, u.stride, u.child);
        return true;
      }
    }
    // Equal entries at a constant step.
    if (equal(a.unit, b.unit)) {
      if (a.reps == 1) {
        a.step = b.disp - a.disp;
        a.reps = 2;
        return true;
      }
      if (b.disp != a.disp + a.reps * a.step) return false;
      a.reps += 1;
      return true;
    }
    if (a.reps != 1) return false;
    // One element followed by a stream of the same elements.
    if (v.kind == NodeKind::stream && v.off == 0 && b.disp - a.disp == v.stride &&
        equal(a.unit, v.child)) {
      a.unit = make_stream(0, v.count + 1, v.stride, v.child);
      return true;
    }
    return false;
  }

  // The smallest k < size (k dividing size) such that run i + k is run i moved by one constant
  // step, or 0.
  static std::size_t period(const std::vector<Run>& runs) {
    const std::size_t n = runs.size();
    for (std::size_t k = 1; k <= n / 2; ++k) {
      if (n % k) continue;
      const i64 step = runs[k].disp - runs[0].disp;
      bool ok = true;
      for (std::size_t i = k; i < n && ok; ++i) {
        const Run& a = runs[i - k];
        const Run& b = runs[i];
        ok = b.disp - a.disp == step && a.reps == b.reps && a.step == b.step && equal(a.unit, b.unit);
      }
      if (ok) return k;
    }
    return 0;
  }

  NodePtr rewrite_blocks(const NodePtr& n) {
    bool local_change = false;
    // The entries, small Blocks children spliced in, each child's offset hoisted into its
    // displacement.
    std::vector<Run> raw;
    raw.reserve(n->entries.size());
    auto add = [&](i64 disp, const NodePtr& c) {
      if (c->off != 0) local_change = true;
      raw.push_back({checked_add(disp, c->off, MPI_ERR_TYPE, "datatype displacement"),
                     c->off ? shifted(c, -c->off) : c, 1, 0});
    };
    for (const Entry& e : n->entries) {
      NodePtr c = visit(e.child);
      if (c != e.child) local_change = true;
      if (c->bytes == 0) {
        local_change = true;
        continue;
      }
      i64 disp = checked_add(n->off, e.disp, MPI_ERR_TYPE, "datatype displacement");
      if (c->kind == NodeKind::blocks && c->entries.size() <= kSpliceMax) {
        local_change = true;
        i64 base = checked_add(disp, c->off, MPI_ERR_TYPE, "datatype displacement");
        for (const Entry& ce : c->entries)
          add(checked_add(base, ce.disp, MPI_ERR_TYPE, "datatype displacement"), ce.child);
        continue;
      }
      add(disp, c);
    }
    if (raw.empty()) return empty();
    auto node_of = [](const Run& r) {
      return r.reps == 1 ? r.unit : make_stream(0, r.reps, r.step, r.unit);
    };
    // The whole list repeats a group of k entries at a constant step: a Stream of the group. Tried
    // before merging, so that blocks merging across the seam between two copies (struct{T, T})
    // cannot hide the repetition; tried again after merging for groups that only repeat once
    // their blocks are merged.
    auto as_stream = [&](const std::vector<Run>& runs, std::size_t k) {
      NodePtr group = runs[0].unit;
      if (k > 1 || runs[0].reps > 1) {
        std::vector<Entry> es;
        for (std::size_t i = 0; i < k; ++i) es.push_back({runs[i].disp - runs[0].disp, node_of(runs[i])});
        group = k > 1 ? make_blocks(std::move(es)) : es[0].child;
      }
      return make_stream(runs[0].disp, static_cast<i64>(runs.size() / k),
                         runs[k].disp - runs[0].disp, group);
    };
    if (raw.size() > 1)
      if (std::size_t k = period(raw); k) return as_stream(raw, k);
    std::vector<Run> runs;
    runs.reserve(raw.size());
    for (Run& r : raw) {
      if (!runs.empty() && merge(runs.back(), r)) local_change = true;
      else runs.push_back(std::move(r));
    }
    if (runs.size() == 1) return shifted(node_of(runs[0]), runs[0].disp);
    if (std::size_t k = period(runs); k) return as_stream(runs, k);
    // Canonical Blocks: the first entry at displacement 0, the rest relative to it; the base
    // offset sits in the node so that a parent Stream can hoist it.
    i64 base = runs[0].disp;
    if (!local_change && n->entries.size() == runs.size() && n->entries[0].disp == 0) return n;
    std::vector<Entry> es;
    es.reserve(runs.size());
    for (const Run& r : runs) es.push_back({r.disp - base, node_of(r)});
    return make_blocks(std::move(es), base);
  }

};

}  // namespace

NodePtr canonicalize(NodePtr n) {
  for (;;) {
    Pass p;
    NodePtr r = p.visit(n);
    if (!p.changed) return r;
    n = std::move(r);
  }
}

}  // namespace ferry
