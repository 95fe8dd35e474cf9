// Producer streams (stream.hpp) and their C API (ferry_mpi.h).
#include "mpi/stream.hpp"

#include <ferry/ferry_mpi.h>

#include <mutex>

namespace ferry::mpi_detail::producer {

std::atomic<bool> named{false};

namespace {

thread_local gpu::Stream thread_stream = nullptr;
int comm_key = MPI_KEYVAL_INVALID;
int type_key = MPI_KEYVAL_INVALID;
std::once_flag keys_made;

}  // namespace

gpu::Stream lookup(MPI_Comm comm, MPI_Datatype type) noexcept {
  void* v = nullptr;
  int found = 0;
  if (type_key != MPI_KEYVAL_INVALID && type != MPI_DATATYPE_NULL &&
      PMPI_Type_get_attr(type, type_key, &v, &found) == MPI_SUCCESS && found)
    return static_cast<gpu::Stream>(v);
  if (comm_key != MPI_KEYVAL_INVALID && comm != MPI_COMM_NULL &&
      PMPI_Comm_get_attr(comm, comm_key, &v, &found) == MPI_SUCCESS && found)
    return static_cast<gpu::Stream>(v);
  return thread_stream;
}

}  // namespace ferry::mpi_detail::producer

namespace producer = ferry::mpi_detail::producer;

extern "C" {

__attribute__((visibility("default"))) int ferry_mpi_set_stream(void* stream) {
  producer::thread_stream = static_cast<ferry::gpu::Stream>(stream);
  if (stream) producer::named.store(true, std::memory_order_release);
  return MPI_SUCCESS;
}

__attribute__((visibility("default"))) void* ferry_mpi_get_stream(void) {
  return producer::thread_stream;
}

__attribute__((visibility("default"))) int ferry_mpi_stream_keyvals(int* comm_keyval,
                                                                    int* type_keyval) {
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (!initialized) return MPI_ERR_OTHER;  // keyvals need an initialized MPI
  int rc = MPI_SUCCESS;
  // Attributes are copied with their communicator or datatype (MPI_Comm_dup, MPI_Type_dup): a
  // stream stays the stream of the copy.
  std::call_once(producer::keys_made, [&] {
    rc = PMPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &producer::comm_key,
                                 nullptr);
    if (rc == MPI_SUCCESS)
      rc = PMPI_Type_create_keyval(MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN, &producer::type_key,
                                   nullptr);
    producer::named.store(true, std::memory_order_release);
  });
  if (comm_keyval) *comm_keyval = producer::comm_key;
  if (type_keyval) *type_keyval = producer::type_key;
  const bool made = producer::comm_key != MPI_KEYVAL_INVALID && producer::type_key != MPI_KEYVAL_INVALID;
  return made ? MPI_SUCCESS : rc != MPI_SUCCESS ? rc : MPI_ERR_OTHER;
}

}  // extern "C"
