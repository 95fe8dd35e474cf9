// tests/type_pairs.cpp — see type_pairs.hpp.
#include "type_pairs.hpp"

#include <ferry/type.hpp>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "random_type.hpp"

namespace ferry_test {

namespace {

using i64 = std::int64_t;

MPI_Datatype commit(MPI_Datatype t) {
  MPI_Type_commit(&t);
  return t;
}

// A generator type; its overlap flag for `count` elements.
struct Generated {
  MPI_Datatype type;
  bool named;
  i64 size;
  bool overlaps;
  std::string description;
};

Generated generated(std::uint64_t seed, int count) {
  TypeGenerator gen(seed);
  RandomType rt = gen.next();
  MPI_Datatype t = rt.type;
  if (!rt.named) t = commit(t);
  const MpiMeta m = mpi_meta(t);
  return {t, rt.named, m.size, map_overlaps(repeat_map(rt.map, m.extent, count)),
          rt.description};
}

void free_type(MPI_Datatype& t, bool named) {
  if (!named && t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
  t = MPI_DATATYPE_NULL;
}

i64 size_of_seed(std::uint64_t seed) {
  Generated g = generated(seed, 1);
  free_type(g.type, g.named);
  return g.size;
}

// `total` bytes as blocks of 1..48 bytes with gaps of 0..40 between them.
MPI_Datatype byte_indexed(i64 total, std::mt19937_64& rng, std::string& desc) {
  std::vector<int> lens, disps;
  int at = static_cast<int>(rng() % 17);
  for (i64 left = total; left > 0;) {
    const int len = static_cast<int>(std::min<i64>(left, 1 + static_cast<i64>(rng() % 48)));
    lens.push_back(len);
    disps.push_back(at);
    at += len + static_cast<int>(rng() % 41);
    left -= len;
  }
  desc = "indexed of " + std::to_string(lens.size()) + " byte blocks";
  MPI_Datatype t;
  MPI_Type_indexed(static_cast<int>(lens.size()), lens.data(), disps.data(), MPI_BYTE, &t);
  return commit(t);
}

// `total` bytes as a vector of equal byte blocks (the widest listed length dividing total).
MPI_Datatype byte_vector(i64 total, std::mt19937_64& rng, std::string& desc) {
  int block = 1;
  for (int b : {2, 3, 4, 6, 8, 12, 16, 24, 32, 48})
    if (total % b == 0 && rng() % 3 != 0) block = b;
  const int n = static_cast<int>(total / block);
  const int stride = block + static_cast<int>(rng() % 33);
  desc = "vector(" + std::to_string(n) + ", " + std::to_string(block) + ", " + std::to_string(stride) +
         ", MPI_BYTE)";
  MPI_Datatype t;
  MPI_Type_vector(n, block, stride, MPI_BYTE, &t);
  return commit(t);
}

MPI_Datatype element_of(int bytes) {
  switch (bytes) {
    case 1: return MPI_CHAR;
    case 2: return MPI_SHORT;
    case 4: return MPI_INT;
    case 8: return MPI_DOUBLE;
    default: return MPI_C_DOUBLE_COMPLEX;  // 16
  }
}

// A box of extents ex x ey x ez (x fastest) at a random place in a random array.
MPI_Datatype box(int e, const int ext[3], std::mt19937_64& rng, std::string& desc) {
  int sizes[3], starts[3], sub[3];
  for (int d = 0; d < 3; ++d) {  // C order: index 0 is z
    sub[d] = ext[2 - d];
    sizes[d] = sub[d] + static_cast<int>(rng() % 7);
    starts[d] = static_cast<int>(rng() % static_cast<unsigned>(sizes[d] - sub[d] + 1));
  }
  desc += "box " + std::to_string(sub[2]) + "x" + std::to_string(sub[1]) + "x" +
          std::to_string(sub[0]) + " at (" + std::to_string(starts[2]) + "," +
          std::to_string(starts[1]) + "," + std::to_string(starts[0]) + ") of " +
          std::to_string(sizes[2]) + "x" + std::to_string(sizes[1]) + "x" +
          std::to_string(sizes[0]) + "; ";
  MPI_Datatype t;
  MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, element_of(e), &t);
  return commit(t);
}

}  // namespace

TypePair make_pair(std::uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 1);
  TypePair p;
  const int recipe = static_cast<int>(seed % 6);
  if (recipe == 5) {  // two boxes of one element size and equal extents
    static const int sizes[] = {1, 2, 4, 8, 16};
    const int e = sizes[rng() % 5];
    int ext[3];
    for (int& x : ext) x = 1 + static_cast<int>(rng() % 9);
    p.description = "element " + std::to_string(e) + " B; src ";
    p.src = box(e, ext, rng, p.description);
    if (rng() % 2) {  // the same array: a copy between equal shapes
      p.description += "dst the same box";
      MPI_Type_dup(p.src, &p.dst);
      p.dst = commit(p.dst);
    } else {
      p.description += "dst ";
      p.dst = box(e, ext, rng, p.description);
    }
    return p;
  }
  p.src_count = 1 + static_cast<int>(rng() % 3);
  Generated a = generated(seed, p.src_count);
  p.src = a.type;
  p.src_named = a.named;
  p.description = "src " + std::to_string(p.src_count) + " x " + a.description + "\ndst ";
  const i64 total = a.size * p.src_count;
  if (recipe == 0) {  // another generator type with a small count ratio
    for (std::uint64_t k = 1; k <= 24; ++k) {
      const i64 size_b = size_of_seed(seed + 1000003 * k);
      if (size_b <= 0 || total == 0) continue;
      const i64 g = std::gcd(total, size_b);
      if (size_b / g > 3 || total / g > 3) continue;
      // src_count * a.size * (size_b / g) == dst_count * size_b  with dst_count = total / g
      const int scale = static_cast<int>(size_b / g);
      if (p.src_count * scale > 6) continue;
      free_type(p.src, p.src_named);
      p.src_count *= scale;
      a = generated(seed, p.src_count);
      p.src = a.type;
      p.src_named = a.named;
      p.dst_count = static_cast<int>(total / g);
      Generated b = generated(seed + 1000003 * k, p.dst_count);
      p.dst = b.type;
      p.dst_named = b.named;
      p.dst_overlaps = b.overlaps;
      p.description = "src " + std::to_string(p.src_count) + " x " + a.description + "\ndst " +
                      std::to_string(p.dst_count) + " x " + b.description;
      return p;
    }
  }
  std::string desc;
  if (total == 0) {
    p.dst = MPI_BYTE;
    p.dst_named = true;
    p.dst_count = 0;
    desc = "0 x MPI_BYTE";
  } else if (recipe == 1 || recipe == 0) {
    p.dst = byte_indexed(total, rng, desc);
  } else if (recipe == 2 || recipe == 4) {
    p.dst = byte_vector(total, rng, desc);
  } else {
    MPI_Type_contiguous(static_cast<int>(total), MPI_BYTE, &p.dst);
    p.dst = commit(p.dst);
    desc = "contiguous " + std::to_string(total) + " bytes";
  }
  p.description += desc;
  return p;
}

void release(TypePair& p) {
  free_type(p.src, p.src_named);
  free_type(p.dst, p.dst_named);
}

Span span_of(MPI_Datatype type, int count) {
  // Ferry's bounds, not the MPI's: MPICH 4.0 reports other true bounds for some random types (a
  // fresh seed in CI once made the buffer size negative), as test_plan notes for its own spans.
  const ferry::Type t = ferry::translate(type);
  const i64 true_lb = t.true_lb(), true_extent = t.true_extent(), extent = t.extent();
  const i64 span = true_extent + (count > 1 ? (count - 1) * std::llabs(extent) : 0) + 64;
  Span s;
  s.origin = span + 64 - true_lb;
  s.origin -= s.origin % 16;
  if (s.origin + true_lb < 0) s.origin += 16;
  s.size = 2 * span + 256;
  return s;
}

BoxPair make_box_pair(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
  BoxPair p;
  const int es = std::vector<int>{1, 2, 4, 8, 12}[rng() % 5];
  int dims[3], ext[3], at[2][3], dst_dims[3], dst_at[2][3];
  for (int d = 0; d < 3; ++d) {
    dims[d] = pick(1, 9);
    ext[d] = pick(1, dims[d]);
    for (auto& a : at) a[d] = pick(0, dims[d] - ext[d]);
    dst_dims[d] = dims[d];
    for (auto& a : dst_at) a[d] = at[0][d];
  }
  dst_dims[0] = 2 * dims[0];
  dst_at[1][0] += dims[0];
  if (rng() % 2) std::swap(dst_at[0], dst_at[1]);
  MPI_Datatype elem;
  MPI_Type_contiguous(es, MPI_BYTE, &elem);
  for (int k = 0; k < 2; ++k) {
    MPI_Type_create_subarray(3, dims, ext, at[k], MPI_ORDER_C, elem, &p.src[k]);
    MPI_Type_create_subarray(3, dst_dims, ext, dst_at[k], MPI_ORDER_C, elem, &p.dst[k]);
    p.src[k] = commit(p.src[k]);
    p.dst[k] = commit(p.dst[k]);
  }
  MPI_Type_free(&elem);
  p.src_bytes = i64{dims[0]} * dims[1] * dims[2] * es;
  p.dst_bytes = 2 * p.src_bytes;
  // A row spanning the array's whole x extent merges with the next into a longer block, which any
  // divisor of the row divides too.
  const int row = ext[2] * es;
  std::vector<int> divisors;
  for (int k = 1; k <= row; ++k)
    if (row % k == 0) divisors.push_back(k);
  p.piece = divisors[rng() % divisors.size()];
  auto three = [](const int v[3]) {
    return std::to_string(v[0]) + "x" + std::to_string(v[1]) + "x" + std::to_string(v[2]);
  };
  p.description = "boxes " + three(ext) + " of " + std::to_string(es) + " B elements in " + three(dims) +
                  " at " + three(at[0]) + " and " + three(at[1]) + ", into " + three(dst_dims) + " at " +
                  three(dst_at[0]) + " and " + three(dst_at[1]) + ", pieces of " + std::to_string(p.piece) + " B";
  return p;
}

void release(BoxPair& p) {
  for (int k = 0; k < 2; ++k) {
    free_type(p.src[k], false);
    free_type(p.dst[k], false);
  }
}

}  // namespace ferry_test
