// The probe of the MPI's typemap and the marking of committed types (typemap.hpp says why).
#include "mpi/typemap.hpp"

#include <ferry/pack.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>
#include <vector>

namespace ferry::mpi_detail {
namespace hot {
bool typemaps = false;
}  // namespace hot

namespace typemap {

std::atomic<int> marked_count{0};

namespace {

// The constructs the probe tries, one bit each.
enum Construct : unsigned {
  stride_minus_one = 1,       // a (h)vector of count >= 2 whose stride is -1 byte
  negative_stride = 2,        // any negative (h)vector stride
  negative_displacement = 4,  // a negative (h)indexed, indexed_block or struct displacement
  negative_bounds = 8,        // a resized type with a negative lower bound or extent
};
constexpr const char* kNames[] = {"(h)vector stride of -1 byte", "negative (h)vector stride",
                                  "negative displacement", "negative lower bound or extent"};

std::atomic<unsigned> wrong_constructs{0};
std::string& wrong_text() {
  static std::string s;
  return s;
}

// Packs `count` of `t` (uncommitted; freed here) from the middle of a buffer of distinct bytes
// and compares with the standard's typemap `offsets` (of the whole `count`).
void check(unsigned* wrong, Construct what, MPI_Datatype t, int count, std::initializer_list<int> offsets) {
  unsigned char mem[64], out[64];
  for (int i = 0; i < 64; ++i) mem[i] = static_cast<unsigned char>(i + 1);
  int pos = 0;
  bool right = PMPI_Type_commit(&t) == MPI_SUCCESS &&
               PMPI_Pack(mem + 32, count, t, out, sizeof out, &pos, MPI_COMM_SELF) == MPI_SUCCESS &&
               pos == static_cast<int>(offsets.size());
  int j = 0;
  for (int off : offsets) right = right && out[j++] == mem[32 + off];
  if (!right) *wrong |= what;
  PMPI_Type_free(&t);
}

unsigned run_probes() {
  unsigned w = 0;
  MPI_Datatype t = MPI_DATATYPE_NULL, u = MPI_DATATYPE_NULL;
  PMPI_Type_create_hvector(2, 1, -1, MPI_CHAR, &t);
  check(&w, stride_minus_one, t, 1, {0, -1});
  PMPI_Type_vector(3, 1, -1, MPI_CHAR, &t);
  check(&w, stride_minus_one, t, 1, {0, -1, -2});
  PMPI_Type_vector(3, 1, -2, MPI_CHAR, &t);
  check(&w, negative_stride, t, 1, {0, -2, -4});
  PMPI_Type_create_hvector(2, 2, -3, MPI_CHAR, &t);
  check(&w, negative_stride, t, 1, {0, 1, -3, -2});
  PMPI_Type_create_hvector(2, 1, -3, MPI_SHORT, &t);
  check(&w, negative_stride, t, 1, {0, 1, -3, -2});
  {
    int bl[2] = {1, 1};
    MPI_Aint d[2] = {3, -2};
    PMPI_Type_create_hindexed(2, bl, d, MPI_CHAR, &t);
    check(&w, negative_displacement, t, 1, {3, -2});
  }
  {
    int bl[2] = {2, 1}, d[2] = {0, -2};
    PMPI_Type_indexed(2, bl, d, MPI_CHAR, &t);
    check(&w, negative_displacement, t, 1, {0, 1, -2});
  }
  {
    int d[2] = {1, -1};
    PMPI_Type_create_indexed_block(2, 1, d, MPI_CHAR, &t);
    check(&w, negative_displacement, t, 1, {1, -1});
  }
  {
    MPI_Aint d[2] = {2, -1};
    PMPI_Type_create_hindexed_block(2, 1, d, MPI_CHAR, &t);
    check(&w, negative_displacement, t, 1, {2, -1});
  }
  {
    int bl[2] = {1, 1};
    MPI_Aint d[2] = {2, -3};
    MPI_Datatype ty[2] = {MPI_CHAR, MPI_SHORT};
    PMPI_Type_create_struct(2, bl, d, ty, &t);
    check(&w, negative_displacement, t, 1, {2, -3, -2});
  }
  PMPI_Type_create_resized(MPI_CHAR, 0, -1, &t);
  check(&w, negative_bounds, t, 3, {0, -1, -2});
  PMPI_Type_create_resized(MPI_CHAR, -2, 3, &t);
  check(&w, negative_bounds, t, 3, {0, 3, 6});
  PMPI_Type_create_resized(MPI_CHAR, 0, -1, &u);
  PMPI_Type_contiguous(3, u, &t);
  check(&w, negative_bounds, t, 1, {0, -1, -2});
  PMPI_Type_free(&u);
  return w;
}

bool named(MPI_Datatype t) {
  int ni = 0, na = 0, nd = 0, combiner = MPI_COMBINER_NAMED;
  PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner);
  return combiner == MPI_COMBINER_NAMED;
}

MPI_Aint extent_of(MPI_Datatype t) {
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(t, &lb, &extent);
  return extent;
}

bool any_negative(const MPI_Aint* d, int n, MPI_Aint unit = 1) {
  for (int i = 0; i < n; ++i)
    if (d[i] * unit < 0) return true;
  return false;
}
bool any_negative(const int* d, int n, MPI_Aint unit) {
  for (int i = 0; i < n; ++i)
    if (d[i] * unit < 0) return true;
  return false;
}

// The constructs of the probe's list that `t`'s construction uses, read through
// MPI_Type_get_envelope/contents down to the named types.
unsigned constructs(MPI_Datatype t, int depth) {
  int ni = 0, na = 0, nd = 0, combiner = MPI_COMBINER_NAMED;
  PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner);
  if (combiner == MPI_COMBINER_NAMED || depth > 64) return 0;
  std::vector<int> ints(static_cast<std::size_t>(ni) + 1);
  std::vector<MPI_Aint> addrs(static_cast<std::size_t>(na) + 1);
  std::vector<MPI_Datatype> types(static_cast<std::size_t>(nd) + 1);
  if (PMPI_Type_get_contents(t, ni, na, nd, ints.data(), addrs.data(), types.data()) != MPI_SUCCESS) return 0;
  unsigned found = 0;
  auto stride = [&](int count, MPI_Aint bytes) {
    if (count >= 2 && bytes == -1) found |= stride_minus_one;
    if (count >= 2 && bytes < 0) found |= negative_stride;
  };
  switch (combiner) {
    case MPI_COMBINER_VECTOR: stride(ints[0], ints[2] * extent_of(types[0])); break;
    case MPI_COMBINER_HVECTOR: stride(ints[0], addrs[0]); break;
    case MPI_COMBINER_INDEXED:
      if (any_negative(&ints[1 + ints[0]], ints[0], extent_of(types[0]))) found |= negative_displacement;
      break;
    case MPI_COMBINER_INDEXED_BLOCK:
      if (any_negative(&ints[2], ints[0], extent_of(types[0]))) found |= negative_displacement;
      break;
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_HINDEXED_BLOCK:
    case MPI_COMBINER_STRUCT:
      if (any_negative(addrs.data(), na)) found |= negative_displacement;
      break;
    case MPI_COMBINER_RESIZED:
      if (addrs[0] < 0 || addrs[1] < 0) found |= negative_bounds;
      break;
    default: break;  // contiguous, subarray, darray, dup: nothing negative of their own
  }
  for (int i = 0; i < nd; ++i) {
    MPI_Datatype d = types[static_cast<std::size_t>(i)];
    if (named(d)) continue;
    found |= constructs(d, depth + 1);
    PMPI_Type_free(&d);
  }
  return found;
}

std::shared_mutex& mutex() {
  static auto* m = new std::shared_mutex();
  return *m;
}
std::unordered_set<MPI_Datatype>& marked_set() {
  static auto* s = new std::unordered_set<MPI_Datatype>();
  return *s;
}

}  // namespace

void probe() noexcept {
  try {
    const unsigned w = run_probes();
    std::string text;
    for (unsigned bit = 0; bit < 4; ++bit)
      if (w & (1u << bit)) text += std::string(text.empty() ? "" : ", ") + kNames[bit];
    wrong_text() = text;
    wrong_constructs.store(w);
    hot::typemaps = w != 0;
    if (w && verbose()) {
      int rank = 0;
      PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank == 0)
        std::fprintf(stderr,
                     "ferry-mpi: the MPI packs these constructs against the standard's typemap: %s; host "
                     "buffers of types using them go through Ferry's engine\n",
                     text.c_str());
    }
  } catch (...) {  // no memory for the text: the marks still work
  }
}

const char* wrong() noexcept { return wrong_text().c_str(); }

void classify(MPI_Datatype type) noexcept {
  const unsigned w = wrong_constructs.load();
  if (w == 0 || type == MPI_DATATYPE_NULL || named(type)) return;
  try {
    if ((constructs(type, 0) & w) == 0) return;
    std::unique_lock lock(mutex());
    marked_set().insert(type);
    marked_count.store(static_cast<int>(marked_set().size()));
  } catch (...) {  // out of memory: the type keeps the MPI's typemap on host buffers
  }
}

void forget(MPI_Datatype type) noexcept {
  if (marked_count.load() == 0) return;
  std::unique_lock lock(mutex());
  marked_set().erase(type);
  marked_count.store(static_cast<int>(marked_set().size()));
}

bool marked_slow(MPI_Datatype type) {
  std::shared_lock lock(mutex());
  return marked_set().count(type) != 0;
}

std::shared_ptr<const ferry::Type> staged_type(MPI_Datatype type, int count, int* bytes) {
  auto t = ferry::lookup(type);
  const i64 n = ferry::pack_size(count, *t);
  if (n > INT32_MAX) throw ferry::Error(MPI_ERR_COUNT, "staged message over 2 GiB");
  *bytes = static_cast<int>(n);
  return t;
}

Packed::Packed(const void* buf, int count, MPI_Datatype t) : bytes(0), type(staged_type(t, count, &bytes)), staging(bytes) {
  i64 pos = 0;
  ferry::pack(buf, count, *type, staging.p, bytes, &pos);
}

void unpack(const void* staging, const MPI_Status* st, void* buf, int count,
            const std::shared_ptr<const ferry::Type>& type) {
  MPI_Count got = 0;
  PMPI_Get_elements_x(st, MPI_BYTE, &got);
  transport::Target to;
  to.buf = buf;
  to.count = count;
  to.type = type;
  to.device = false;
  transport::unstage(staging, got, to);
}

}  // namespace typemap
}  // namespace ferry::mpi_detail

extern "C" __attribute__((visibility("default"))) const char* ferry_mpi_wrong_typemaps(void) {
  return ferry::mpi_detail::typemap::wrong();
}
