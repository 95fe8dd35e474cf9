// tests/random_type.cpp — see random_type.hpp.
#include "random_type.hpp"
#include "random_type_detail.hpp"

namespace ferry_test {

using namespace random_detail;

MpiMeta mpi_meta(MPI_Datatype type) {
  MpiMeta m;
  MPI_Count size = 0, lb = 0, extent = 0, tlb = 0, text = 0;
  check(MPI_Type_size_x(type, &size), "MPI_Type_size_x");
  check(MPI_Type_get_extent_x(type, &lb, &extent), "MPI_Type_get_extent_x");
  check(MPI_Type_get_true_extent_x(type, &tlb, &text), "MPI_Type_get_true_extent_x");
  m.size = size;
  m.lb = lb;
  m.extent = extent;
  m.true_lb = tlb;
  m.true_extent = text;
  return m;
}

std::vector<i64> repeat_map(const std::vector<i64>& map, i64 extent, int count) {
  std::vector<i64> out;
  out.reserve(map.size() * static_cast<size_t>(std::max(count, 0)));
  for (int i = 0; i < count; ++i)
    for (i64 off : map) out.push_back(off + i * extent);
  return out;
}

std::vector<i64> mpi_packed_map(MPI_Datatype type, int count, i64 lo, i64 hi) {
  const MpiMeta m = mpi_meta(type);
  const i64 total = m.size * count;
  std::vector<i64> map(static_cast<size_t>(std::max<i64>(total, 0)), 0);
  if (total <= 0) return map;
  lo -= 4096;
  hi += 4096;
  if (hi - lo >= (i64{1} << 24) || total > std::numeric_limits<int>::max())
    throw std::runtime_error("mpi_packed_map: type too large to label");
  std::vector<unsigned char> buf(static_cast<size_t>(hi - lo));
  std::vector<unsigned char> out(static_cast<size_t>(total));
  // The origin MPI addresses the type from: buf[0] is offset lo.
  void* origin = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(buf.data()) -
                                         static_cast<std::uintptr_t>(lo));
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i >> (8 * pass));
    int pos = 0;
    check(MPI_Pack(origin, count, type, out.data(), static_cast<int>(out.size()), &pos, MPI_COMM_WORLD),
          "MPI_Pack (labelled)");
    for (size_t j = 0; j < out.size(); ++j) map[j] |= static_cast<i64>(out[j]) << (8 * pass);
  }
  for (auto& off : map) off += lo;
  return map;
}

bool map_overlaps(const std::vector<i64>& map) {
  if (map.empty()) return false;
  const auto [mn, mx] = std::minmax_element(map.begin(), map.end());
  std::vector<unsigned char> seen(static_cast<size_t>(*mx - *mn + 1), 0);
  for (i64 off : map) {
    auto& s = seen[static_cast<size_t>(off - *mn)];
    if (s) return true;
    s = 1;
  }
  return false;
}

i64 map_runs(const std::vector<i64>& map) {
  i64 runs = 0;
  for (size_t j = 0; j < map.size(); ++j)
    if (j == 0 || map[j] != map[j - 1] + 1) ++runs;
  return runs;
}

TypeGenerator::TypeGenerator(std::uint64_t seed, int max_depth)
    : rng_(seed), max_depth_(std::max(0, max_depth)) {}

int TypeGenerator::uniform(int lo, int hi) {
  if (hi <= lo) return lo;
  return std::uniform_int_distribution<int>(lo, hi)(rng_);
}

i64 TypeGenerator::uniform64(i64 lo, i64 hi) {
  if (hi <= lo) return lo;
  return std::uniform_int_distribution<i64>(lo, hi)(rng_);
}

bool TypeGenerator::chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

int TypeGenerator::small_count(i64 cap) {
  const int r = uniform(0, 99);
  int n;
  if (r < 3) return 0;
  if (r < 20) n = 1;
  else if (r < 75) n = uniform(2, 4);
  else if (r < 95) n = uniform(5, 16);
  else if (r < 99) n = uniform(17, 64);
  else n = uniform(65, 1000);
  return static_cast<int>(std::max<i64>(1, std::min<i64>(n, cap)));
}

void TypeGenerator::release(Built& b) {
  if (!b.named && b.type != MPI_DATATYPE_NULL) MPI_Type_free(&b.type);
  b.type = MPI_DATATYPE_NULL;
}

bool TypeGenerator::within(const Built& b, Budget budget) {
  const i64 limit = std::min(budget.span, Limits::max_span);
  auto near = [limit](i64 v) { return v >= -limit && v <= limit; };
  if (!near(b.lb) || !near(b.extent) || !near(b.lb + b.extent)) return false;
  // (Open MPI reports odd true bounds for some empty types, e.g. INT64_MAX: they do not matter.)
  if (b.size > 0 && (!near(b.true_lb) || !near(b.true_extent) || !near(b.true_lb + b.true_extent)))
    return false;
  return b.size <= std::min(budget.size, Limits::max_size);
}

TypeGenerator::Built TypeGenerator::finish(MPI_Datatype t, std::string desc, int depth, i64 node_bound,
                                           std::vector<i64> map) {
  Built b;
  b.type = t;
  b.named = false;
  b.desc = std::move(desc);
  b.depth = depth;
  b.node_bound = node_bound;
  b.map = std::move(map);
  const MpiMeta m = mpi_meta(t);
  b.size = m.size;
  b.lb = m.lb;
  b.extent = m.extent;
  // True bounds from the type map (Open MPI reports a true lb of INT64_MAX for some empty types).
  b.true_lb = b.true_extent = 0;
  if (!b.map.empty()) {
    const auto [mn, mx] = std::minmax_element(b.map.begin(), b.map.end());
    b.true_lb = *mn;
    b.true_extent = *mx + 1 - *mn;
  }
  return b;
}

TypeGenerator::Built TypeGenerator::named_type() {
  const auto& all = named_types();
  const NamedType& n = all[static_cast<size_t>(uniform(0, static_cast<int>(all.size()) - 1))];
  Built b;
  b.type = n.type;
  b.named = true;
  b.desc = n.name;
  b.depth = 0;
  b.node_bound = 3;
  const MpiMeta m = mpi_meta(n.type);
  b.size = m.size;
  b.lb = m.lb;
  b.extent = m.extent;
  b.true_lb = m.true_lb;
  b.true_extent = m.true_extent;
  if (n.pair_int_offset >= 0) {
    for (i64 i = 0; i < n.pair_value_size; ++i) b.map.push_back(i);
    for (i64 i = 0; i < static_cast<i64>(sizeof(int)); ++i) b.map.push_back(n.pair_int_offset + i);
  } else {
    for (i64 i = 0; i < m.size; ++i) b.map.push_back(i);
  }
  return b;
}

RandomType TypeGenerator::next() {
  // Log-uniform size budget: mostly small types, now and then one near the limits.
  const i64 size_budget = i64{1} << uniform(4, 18);
  const Budget budget{size_budget, std::min<i64>(Limits::max_span, size_budget * 4 + 256)};
  Built b = build(max_depth_, budget);
  RandomType r;
  r.type = b.type;
  r.named = b.named;
  r.description = b.desc;
  r.depth = b.depth;
  r.node_bound = b.node_bound;
  r.map = std::move(b.map);
  return r;
}

TypeGenerator::Built TypeGenerator::build(int depth_left, Budget budget) {
  const bool top = depth_left == max_depth_;
  if (depth_left <= 0 || chance(top ? 0.03 : 0.25)) return named_type();
  for (int attempt = 0; attempt < 8; ++attempt) {
    Built b;
    if (derived(uniform(0, 13), depth_left, budget, b)) {
      if (within(b, budget)) return b;
      release(b);
    }
  }
  return named_type();
}

}  // namespace ferry_test
