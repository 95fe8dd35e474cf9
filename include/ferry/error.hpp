// ferry/error.hpp — the one error type of Ferry's C++ API.
//
// Every failure carries the MPI error class MPI itself would return for the same bad input
// (MPI_ERR_TYPE, MPI_ERR_COUNT, MPI_ERR_TRUNCATE, ...), so the C API and the interposer can hand it
// straight back to the caller, and a human-readable message that says what was wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace ferry {

class Error : public std::runtime_error {
 public:
  Error(int mpi_error_class, const std::string& what)
      : std::runtime_error(what), class_(mpi_error_class) {}
  // The MPI error class (an MPI_ERR_* value) this error maps to.
  int mpi_error_class() const noexcept { return class_; }

 private:
  int class_;
};

}  // namespace ferry
