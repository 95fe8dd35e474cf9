// ferry::interleave (pack.hpp): two layouts of one shape as one strided layout whose pieces
// alternate, so that one move (one kernel, one chunk of a Batch) covers both.
#include <ferry/pack.hpp>
#include <string>
#include <vector>

#include "sys/error.hpp"

namespace ferry {

using detail::fail;

namespace {

struct Dim {
  i64 count;
  i64 stride;
};

// The dimensions of a strided type above pieces of `piece` bytes, innermost first: the innermost
// block cut into pieces, then the type's own dimensions.
std::vector<Dim> dims_above(const StridedBlock& sb, i64 piece, const char* which) {
  const i64 block = sb.counts[0];
  if (block % piece != 0)
    fail(MPI_ERR_TYPE, std::string("interleave: a piece of ") + std::to_string(piece) +
                           " B does not divide " + which + "'s contiguous block of " +
                           std::to_string(block) + " B");
  std::vector<Dim> dims;
  if (block / piece > 1) dims.push_back({block / piece, piece});
  for (int d = 1; d < sb.ndims(); ++d)
    dims.push_back(
        {sb.counts[static_cast<std::size_t>(d)], sb.strides[static_cast<std::size_t>(d)]});
  return dims;
}

}  // namespace

Type interleave(const Type& a, const Type& b, i64 piece) {
  if (piece < 0) fail(MPI_ERR_ARG, "interleave: negative piece size " + std::to_string(piece));
  if (!a.strided() || !b.strided())
    fail(MPI_ERR_TYPE, std::string("interleave: ") + (a.strided() ? "b" : "a") +
                           " is not a strided layout (" + (a.strided() ? b : a).describe() + ")");
  if (a.size() != b.size())
    fail(MPI_ERR_TYPE, "interleave: a holds " + std::to_string(a.size()) + " bytes, b " +
                           std::to_string(b.size()));
  if (a.size() == 0) return a;
  const StridedBlock& sa = *a.strided();
  const StridedBlock& sb = *b.strided();
  if (piece == 0) piece = sa.counts[0];
  const std::vector<Dim> da = dims_above(sa, piece, "a");
  const std::vector<Dim> db = dims_above(sb, piece, "b");
  bool same = da.size() == db.size();
  for (std::size_t d = 0; same && d < da.size(); ++d)
    same = da[d].count == db[d].count && da[d].stride == db[d].stride;
  if (!same)
    fail(MPI_ERR_TYPE, "interleave: cut into pieces of " + std::to_string(piece) +
                           " B, the two layouts have different dimensions (" + to_string(sa) +
                           " and " + to_string(sb) + ")");
  const i64 delta = detail::checked_add(sb.start, -sa.start, MPI_ERR_TYPE, "interleave distance");
  NodePtr n = make_stream(0, 2, delta, make_dense(0, piece));
  for (const Dim& d : da) n = make_stream(0, d.count, d.stride, std::move(n));
  return Type(shifted(n, sa.start), a.lb(), a.extent());
}

}  // namespace ferry
