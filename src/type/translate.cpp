// Translation of committed MPI datatypes into the IR (dissertation §5.2.1), read through
// MPI_Type_get_envelope / MPI_Type_get_contents. Extents come from MPI itself, so alignment
// padding and resized bounds are exactly MPI's.
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "sys/error.hpp"
#include "type/translate.hpp"

namespace ferry {

using detail::checked_mul;
using detail::fail;

namespace {

void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) fail(MPI_ERR_TYPE, std::string(call) + " failed on this datatype");
}

i64 extent_of(MPI_Datatype t) {
  MPI_Count lb = 0, extent = 0;
  check(MPI_Type_get_extent_x(t, &lb, &extent), "MPI_Type_get_extent_x");
  return static_cast<i64>(extent);
}



// A pair type (MPI_SHORT_INT, ...) laid out as the C struct {T value; int index;}.
template <class T>
NodePtr pair_node() {
  struct P {
    T a;
    int b;
  };
  return make_blocks({{0, make_dense(0, sizeof(T))},
                      {static_cast<i64>(offsetof(P, b)), make_dense(0, sizeof(int))}});
}

NodePtr named_node(MPI_Datatype t) {
  int size = 0;
  check(MPI_Type_size(t, &size), "MPI_Type_size");
  MPI_Count tlb = 0, textent = 0;
  check(MPI_Type_get_true_extent_x(t, &tlb, &textent), "MPI_Type_get_true_extent_x");
  if (size == textent) return make_dense(static_cast<i64>(tlb), size);
  // Named types with holes: the C pair types of MINLOC/MAXLOC.
  if (t == MPI_SHORT_INT) return pair_node<short>();
  if (t == MPI_LONG_INT) return pair_node<long>();
  if (t == MPI_FLOAT_INT) return pair_node<float>();
  if (t == MPI_DOUBLE_INT) return pair_node<double>();
  if (t == MPI_LONG_DOUBLE_INT) return pair_node<long double>();
  if (t == MPI_2INT) return pair_node<int>();
  fail(MPI_ERR_TYPE, "named datatype with holes that Ferry does not know");
}

// Translation of one top-level type: each handle met below it is translated once, so a struct of
// many copies of one type shares that type's subtree instead of rebuilding it per field.
// Handles returned by MPI_Type_get_contents for derived types are new references to free; they are
// freed only when the whole translation is done, so that no handle value is reused (and found in
// the memo) for another type meanwhile. Predefined ones (named, MPI_Type_create_f90_*) are not
// freed.
class Translator {
 public:
  Translator() = default;
  Translator(const Translator&) = delete;
  Translator& operator=(const Translator&) = delete;
  ~Translator() {
    for (MPI_Datatype& t : owned_)
      if (!detail::is_predefined(t)) MPI_Type_free(&t);
  }
  NodePtr node(MPI_Datatype t);

 private:
  std::unordered_map<MPI_Datatype, NodePtr> memo_;
  std::vector<MPI_Datatype> owned_;
  NodePtr build(MPI_Datatype t);
  NodePtr indexed_node(int count, const int* blocklens, int blocklen, const std::vector<i64>& disps,
                       MPI_Datatype old);
};

NodePtr Translator::node(MPI_Datatype t) {
  auto it = memo_.find(t);
  if (it != memo_.end()) return it->second;
  NodePtr n = build(t);
  memo_.emplace(t, n);
  return n;
}

// `count` copies of old, each `blocklen` elements long, at the given byte displacements.
NodePtr Translator::indexed_node(int count, const int* blocklens, int blocklen,
                                 const std::vector<i64>& disps, MPI_Datatype old) {
  NodePtr child = node(old);
  i64 ext = extent_of(old);
  std::vector<Entry> entries;
  entries.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    int bl = blocklens ? blocklens[i] : blocklen;
    if (bl < 0) fail(MPI_ERR_TYPE, "negative block length in datatype");
    if (bl == 0) continue;
    entries.push_back({disps[static_cast<std::size_t>(i)], make_stream(0, bl, ext, child)});
  }
  return make_blocks(std::move(entries));
}

NodePtr Translator::build(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) fail(MPI_ERR_TYPE, "MPI_DATATYPE_NULL inside a datatype");
  int ni = 0, na = 0, nd = 0, combiner = 0;
  check(MPI_Type_get_envelope(t, &ni, &na, &nd, &combiner), "MPI_Type_get_envelope");
  if (combiner == MPI_COMBINER_NAMED) return named_node(t);

  std::vector<int> ints(static_cast<std::size_t>(ni));
  std::vector<MPI_Aint> addrs(static_cast<std::size_t>(na));
  std::vector<MPI_Datatype> ty(static_cast<std::size_t>(nd));
  check(MPI_Type_get_contents(t, ni, na, nd, ints.data(), addrs.data(), ty.data()),
        "MPI_Type_get_contents");
  owned_.insert(owned_.end(), ty.begin(), ty.end());
  const int* in = ints.data();

  switch (combiner) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED:  // bounds only; the type map is the old type's
      return node(ty[0]);
    case MPI_COMBINER_F90_REAL:
    case MPI_COMBINER_F90_COMPLEX:
    case MPI_COMBINER_F90_INTEGER:
      return named_node(t);
    case MPI_COMBINER_CONTIGUOUS:
      return make_stream(0, in[0], extent_of(ty[0]), node(ty[0]));
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
      i64 ext = extent_of(ty[0]);
      i64 stride = combiner == MPI_COMBINER_VECTOR
                       ? checked_mul(in[2], ext, MPI_ERR_TYPE, "vector stride")
                       : static_cast<i64>(addrs[0]);
      return make_stream(0, in[0], stride, make_stream(0, in[1], ext, node(ty[0])));
    }
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED: {
      int count = in[0];
      i64 ext = combiner == MPI_COMBINER_INDEXED ? extent_of(ty[0]) : 1;
      std::vector<i64> disps(static_cast<std::size_t>(count));
      for (int i = 0; i < count; ++i)
        disps[static_cast<std::size_t>(i)] =
            combiner == MPI_COMBINER_INDEXED
                ? checked_mul(in[1 + count + i], ext, MPI_ERR_TYPE, "indexed displacement")
                : static_cast<i64>(addrs[static_cast<std::size_t>(i)]);
      return indexed_node(count, in + 1, 0, disps, ty[0]);
    }
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK: {
      int count = in[0];
      i64 ext = combiner == MPI_COMBINER_INDEXED_BLOCK ? extent_of(ty[0]) : 1;
      std::vector<i64> disps(static_cast<std::size_t>(count));
      for (int i = 0; i < count; ++i)
        disps[static_cast<std::size_t>(i)] =
            combiner == MPI_COMBINER_INDEXED_BLOCK
                ? checked_mul(in[2 + i], ext, MPI_ERR_TYPE, "indexed displacement")
                : static_cast<i64>(addrs[static_cast<std::size_t>(i)]);
      return indexed_node(count, nullptr, in[1], disps, ty[0]);
    }
    case MPI_COMBINER_STRUCT: {
      int count = in[0];
      std::vector<Entry> entries;
      entries.reserve(static_cast<std::size_t>(count));
      for (int i = 0; i < count; ++i) {
        int bl = in[1 + i];
        if (bl <= 0) continue;
        MPI_Datatype old = ty[static_cast<std::size_t>(i)];
        entries.push_back({static_cast<i64>(addrs[static_cast<std::size_t>(i)]),
                           make_stream(0, bl, extent_of(old), node(old))});
      }
      return make_blocks(std::move(entries));
    }
    case MPI_COMBINER_SUBARRAY: {
      int ndims = in[0];
      const int* sizes = in + 1;
      const int* subsizes = in + 1 + ndims;
      const int* starts = in + 1 + 2 * ndims;
      int order = in[1 + 3 * ndims];
      NodePtr n = node(ty[0]);
      i64 stride = extent_of(ty[0]);
      // Innermost (fastest) dimension first: the last one in C order, the first in Fortran order.
      for (int k = 0; k < ndims; ++k) {
        int d = order == MPI_ORDER_C ? ndims - 1 - k : k;
        i64 off = checked_mul(starts[d], stride, MPI_ERR_TYPE, "subarray start");
        n = make_stream(off, subsizes[d], stride, n);
        stride = checked_mul(stride, sizes[d], MPI_ERR_TYPE, "subarray size");
      }
      return n;
    }
    case MPI_COMBINER_DARRAY: {
      int ndims = in[2];
      return detail::darray_node(in[0], in[1], ndims, in + 3, in + 3 + ndims, in + 3 + 2 * ndims,
                                 in + 3 + 3 * ndims, in[3 + 4 * ndims], node(ty[0]),
                                 extent_of(ty[0]));
    }
    default: break;
  }
  fail(MPI_ERR_TYPE, "datatype combiner " + std::to_string(combiner) + " is not supported");
}

}  // namespace

NodePtr translate_raw(MPI_Datatype datatype) {
  if (datatype == MPI_DATATYPE_NULL) fail(MPI_ERR_TYPE, "invalid datatype: MPI_DATATYPE_NULL");
  return Translator().node(datatype);
}

Type translate(MPI_Datatype datatype) {
  NodePtr root = translate_raw(datatype);
  MPI_Count lb = 0, extent = 0;
  check(MPI_Type_get_extent_x(datatype, &lb, &extent), "MPI_Type_get_extent_x");
  Type type(std::move(root), static_cast<i64>(lb), static_cast<i64>(extent));
  MPI_Count size = 0;
  check(MPI_Type_size_x(datatype, &size), "MPI_Type_size_x");
  if (size != type.size())
    fail(MPI_ERR_INTERN, "translated datatype has " + std::to_string(type.size()) +
                             " bytes but MPI says " + std::to_string(size));
  return type;
}

}  // namespace ferry
