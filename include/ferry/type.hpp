// ferry/type.hpp — MPI datatypes translated into Ferry's IR and canonicalized.
//
// A committed MPI datatype is read through MPI_Type_get_envelope / MPI_Type_get_contents and turned
// into a tree of three node kinds (dissertation §5.2.1, extended for indexed and struct types):
//
//   Dense  {off, size}                 size contiguous bytes at off
//   Stream {off, count, stride, child} count copies of child, the i-th at off + i*stride
//   Blocks {off, entries: (disp, child)...} each child at off + disp, in order (indexed, struct)
//
// Offsets are bytes from the buffer origin (the address passed to MPI), exactly as in the type map.
// The order of the tree is the order of the type map, which is the order of the packed bytes.
//
// canonicalize() rewrites the tree to a fixed point with transformations that keep the type map
// (dense folding, stream elision, stream flattening, offset hoisting, and for Blocks: splicing small
// nested Blocks, dropping empty entries, turning a list that repeats a group of entries at a
// constant step into a Stream of the group, merging abutting dense blocks, turning runs of equal
// children at a constant step into Streams). Descriptions of one type map built from the same
// blocks end in the same tree (checked on random types by tests/test_random_types.cpp); a strided
// type map always does, however it is described. TEMPI's fourth pass, sorting
// streams by stride, is deliberately not applied: it reorders the type map, so the packed bytes would
// no longer match MPI_Pack (see docs/design.md).
//
// A canonical tree that is a chain of Streams over one Dense is a StridedBlock (Algorithm 5); anything
// else is the general form. The general form is a DAG: equal subtrees are shared, Streams are never
// unrolled, so its size grows with the number of distinct blocks, not with the bytes it describes.
#pragma once

#include <ferry/error.hpp>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ferry {

using i64 = std::int64_t;

struct Node;
using NodePtr = std::shared_ptr<const Node>;

enum class NodeKind : std::uint8_t { dense, stream, blocks };

struct Entry {
  i64 disp = 0;
  NodePtr child;
};

struct Node {
  NodeKind kind = NodeKind::dense;
  i64 off = 0;
  // dense
  i64 size = 0;
  // stream
  i64 count = 0;
  i64 stride = 0;
  NodePtr child;
  // blocks
  std::vector<Entry> entries;
  // Derived when the node is made (see make_*): bytes of data, lowest and one-past-highest byte
  // touched (relative to the origin, only meaningful when bytes > 0), number of contiguous leaf
  // runs in the type map, number of tree nodes below and including this one, structural hash.
  i64 bytes = 0;
  i64 lo = 0;
  i64 hi = 0;
  i64 runs = 0;
  i64 nodes = 1;
  std::uint64_t hash = 0;
};

// Node constructors; they compute the derived fields. Throw Error(MPI_ERR_TYPE) on i64 overflow.
NodePtr make_dense(i64 off, i64 size);
NodePtr make_stream(i64 off, i64 count, i64 stride, NodePtr child);
NodePtr make_blocks(std::vector<Entry> entries, i64 off = 0);
NodePtr shifted(const NodePtr& n, i64 delta);  // the same node with off += delta

bool equal(const NodePtr& a, const NodePtr& b);  // structural equality
std::string to_string(const NodePtr& n);        // one line per node, parent above child

// Rewrites to the canonical fixed point described above. Never changes the type map.
NodePtr canonicalize(NodePtr n);

// Dissertation §5.2.3: start byte, then per dimension the count and stride in bytes; dimension 0 is
// the contiguous block (counts[0] bytes, strides[0] == 1).
struct StridedBlock {
  i64 start = 0;
  std::vector<i64> counts;
  std::vector<i64> strides;
  int ndims() const { return static_cast<int>(counts.size()); }
  bool operator==(const StridedBlock& o) const {
    return start == o.start && counts == o.counts && strides == o.strides;
  }
};
std::string to_string(const StridedBlock& sb);

// Algorithm 5: the StridedBlock of a canonical tree, if it is a chain of Streams over a Dense.
std::optional<StridedBlock> strided_block(const NodePtr& canonical);
std::optional<StridedBlock> strided_block(const Node& canonical);

// A committed datatype: its canonical IR and the MPI metadata needed to pack `count` of them.
class Type {
 public:
  Type() = default;
  // root need not be canonical; it is canonicalized here. lb/extent are the MPI lower bound and
  // extent (the stride between consecutive elements when count > 1).
  Type(NodePtr root, i64 lb, i64 extent);

  const NodePtr& root() const { return root_; }
  i64 size() const { return root_->bytes; }  // MPI_Type_size
  i64 lb() const { return lb_; }
  i64 extent() const { return extent_; }
  i64 true_lb() const { return root_->bytes ? root_->lo : 0; }
  i64 true_extent() const { return root_->bytes ? root_->hi - root_->lo : 0; }
  // Offset from the origin of the lowest byte that `count` elements touch (where to classify or
  // bounds-check the memory; the origin itself may lie outside it).
  i64 data_lb(i64 count) const {
    return true_lb() + (count > 1 && extent_ < 0 ? (count - 1) * extent_ : 0);
  }
  // Contiguous blocks in one element (1 for a dense type, 0 for an empty one).
  i64 blocks() const { return root_->runs; }
  // Present when the type is a strided block (Algorithm 5).
  const std::optional<StridedBlock>& strided() const { return strided_; }
  // True when `count` elements are one contiguous run of count*size() bytes starting at true_lb().
  bool dense() const { return dense_; }
  std::string describe() const;  // canonical form and sizes, for people

 private:
  NodePtr root_;
  i64 lb_ = 0;
  i64 extent_ = 0;
  std::optional<StridedBlock> strided_;
  bool dense_ = false;
};

// Translates a committed MPI datatype (named or derived, any nesting) into a canonical Type.
// Throws Error(MPI_ERR_TYPE) for MPI_DATATYPE_NULL or a combiner Ferry cannot read.
Type translate(MPI_Datatype datatype);

// The uncanonicalized translation, for tests and the demo (fig. 5.9).
NodePtr translate_raw(MPI_Datatype datatype);

}  // namespace ferry
