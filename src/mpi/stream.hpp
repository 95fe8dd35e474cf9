// The stream a send's data is produced on (issue 14, after MPI-ACC's datatype attribute): an
// application that writes a buffer with a kernel on its own stream and sends it at once names that
// stream, and Ferry reads the buffer only after the stream's work, instead of the application
// synchronizing the device before every call. Named per thread (ferry_mpi_set_stream), or as an
// attribute of the datatype or of the communicator (the keyvals of ferry_mpi_stream_keyvals);
// the datatype's attribute wins over the communicator's, which wins over the thread's.
#pragma once

#include <ferry/gpu.hpp>
#include <mpi.h>

#include <atomic>

namespace ferry::mpi_detail::producer {

// Set once any stream was named or a keyval made (release, after the keyvals): until then of()
// is one load.
extern std::atomic<bool> named;

gpu::Stream lookup(MPI_Comm comm, MPI_Datatype type) noexcept;

// The producer stream of a send of `type` on `comm` (MPI_COMM_NULL: MPI_Pack), or null.
inline gpu::Stream of(MPI_Comm comm, MPI_Datatype type) noexcept {
  return named.load(std::memory_order_acquire) ? lookup(comm, type) : nullptr;
}

}  // namespace ferry::mpi_detail::producer
