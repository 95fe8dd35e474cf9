// The fast path's state (hot.hpp), set at MPI_Init.
#include "mpi/hot.hpp"

#include <ferry/gpu.hpp>
#include <ferry/transport.hpp>

#include <vector>

#include "mpi/boundary.hpp"
#include "sys/env.hpp"

#include <cstdio>

namespace ferry::mpi_detail {

bool verbose() {
  static const bool v = ferry::detail::env::flag(ferry::detail::env::Knob::mpi_verbose);
  return v;
}

namespace {
// Named types, most used first, with their sizes: their data starts at the buffer (lower bound
// 0), so the pointer check needs no type lookup, and their size needs no call into MPI.
const std::vector<hot::NamedSize>& named_types() {
  static const std::vector<hot::NamedSize> table = [] {
    const MPI_Datatype types[] = {
        MPI_BYTE,     MPI_DOUBLE,        MPI_INT,            MPI_FLOAT,         MPI_CHAR,
        MPI_LONG,     MPI_UNSIGNED_CHAR, MPI_UINT8_T,        MPI_INT64_T,       MPI_UINT64_T,
        MPI_INT32_T,  MPI_UINT32_T,      MPI_LONG_LONG,      MPI_UNSIGNED_LONG_LONG, MPI_UNSIGNED,
        MPI_UNSIGNED_LONG, MPI_SHORT,    MPI_UNSIGNED_SHORT, MPI_SIGNED_CHAR,   MPI_LONG_DOUBLE,
        MPI_INT8_T,   MPI_INT16_T,       MPI_UINT16_T,       MPI_C_BOOL,        MPI_PACKED,
        MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX, MPI_AINT, MPI_OFFSET,        MPI_COUNT};
    std::vector<hot::NamedSize> t;
    for (MPI_Datatype d : types) {
      int size = 0;
      PMPI_Type_size(d, &size);
      t.push_back({d, size});
    }
    return t;
  }();
  return table;
}
}  // namespace

namespace hot {
bool gpu = true;  // until init() knows: with no named types yet, every call takes the full path
bool stubs_on = false;
bool host_sends = false;
bool threads = false;
std::atomic<int> stubs{0}, detached{0}, early{0};
std::atomic<std::size_t> pending{0};
std::atomic<int> remembered{0}, remembered_sends{0}, stand_ins{0};
NamedSize named[kMaxNamed];
int named_count = 0;

void init() {
  int n = 0;
  for (const NamedSize& t : named_types())
    if (n < kMaxNamed) named[n++] = t;
  named_count = n;
  // A CUDA-aware MPI moves GPU buffers itself: the pointer check has nothing to decide.
  gpu = ferry::gpu::available() && !transport::passthrough();
  stubs_on = transport::protocol_on();
  host_sends = stubs_on && transport::protocol_test();
  int level = MPI_THREAD_SINGLE;
  threads = PMPI_Query_thread(&level) == MPI_SUCCESS && level == MPI_THREAD_MULTIPLE;
}
}  // namespace hot

int report(MPI_Comm comm, int error_class, const char* what) noexcept {
  if (verbose()) std::fprintf(stderr, "ferry-mpi: %s\n", what);
  PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, error_class);
  return error_class;
}

int type_size(MPI_Datatype type) {
  for (const hot::NamedSize& n : named_types())
    if (n.type == type) return n.size;
  int size = 0;
  PMPI_Type_size(type, &size);
  return size;
}

}  // namespace ferry::mpi_detail
