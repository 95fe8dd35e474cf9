// sys/error.hpp — error helpers shared by every layer: raising ferry::Error with the MPI class,
// i64 arithmetic that reports overflow instead of wrapping, and the per-thread last-error message
// of the C API.
#pragma once

#include <ferry/error.hpp>
#include <mpi.h>

#include <cstdint>
#include <string>

namespace ferry::detail {

// MPI-4 added a class for results that do not fit the output type; older MPIs report a bad count.
#ifdef MPI_ERR_VALUE_TOO_LARGE
constexpr int kErrTooLarge = MPI_ERR_VALUE_TOO_LARGE;
#else
constexpr int kErrTooLarge = MPI_ERR_COUNT;
#endif

[[noreturn]] void fail(int mpi_error_class, const std::string& what);

inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, int err, const char* what) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(err, std::string(what) + ": 64-bit overflow");
  return r;
}
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, int err, const char* what) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(err, std::string(what) + ": 64-bit overflow");
  return r;
}

// The C API's error slot: set on failure, read by ferry_error_string().
void set_last_error(const std::string& message);
const char* last_error();

}  // namespace ferry::detail
