// The one boundary between the interposer's C++ and the application's C: every MPI_* function's
// full path runs inside guard(), which turns any exception into the MPI error class it stands for
// (ferry::Error: its class; std::bad_alloc: MPI_ERR_NO_MEM; anything else: MPI_ERR_INTERN) raised
// on the communicator's error handler, as the MPI's own errors are. Nothing crosses into C.
//
// The fast paths (hot.hpp) stay outside it: they cannot throw, and an MPI_* function whose fast
// path is a few loads and a tail call to PMPI_* keeps no frame or unwinding of its own. The full
// path is a separate function (noinline, noexcept) that calls guard().
#pragma once

#include <ferry/error.hpp>
#include <mpi.h>

#include <exception>
#include <new>

namespace ferry::mpi_detail {

// Reports an error the way MPI would: through `comm`'s error handler (MPI_COMM_WORLD's where the
// call names no communicator, or MPI_COMM_NULL is given), which may abort; returns the class.
int report(MPI_Comm comm, int error_class, const char* what) noexcept;
inline int report(MPI_Comm comm, const ferry::Error& e) noexcept {
  return report(comm, e.mpi_error_class(), e.what());
}

// Runs `f` (returning the MPI result); an exception becomes an MPI error class, reported on `comm`
// (read when the exception arrives: `f` may learn the communicator on the way, as MPI_Mrecv does).
template <class F>
int guard(const MPI_Comm& comm, F&& f) noexcept {
  try {
    return f();
  } catch (const ferry::Error& e) {
    return report(comm, e);
  } catch (const std::bad_alloc&) {
    return report(comm, MPI_ERR_NO_MEM, "out of memory");
  } catch (const std::exception& e) {
    return report(comm, MPI_ERR_INTERN, e.what());
  } catch (...) {
    return report(comm, MPI_ERR_INTERN, "unknown exception");
  }
}

// The error of a message Ferry completed (an IPC fetch, a truncated stub message), raised on its
// communicator's handler as MPI's own would be; the result is the class.
inline int raise_on(MPI_Comm comm, int rc) noexcept {
  if (rc != MPI_SUCCESS && comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, rc);
  return rc;
}

}  // namespace ferry::mpi_detail
