// sys/error.hpp — error helpers shared by every layer: raising ferry::Error with the MPI class,
// i64 arithmetic that reports overflow instead of wrapping, and the per-thread last-error message
// of the C API.
#pragma once

#include <ferry/error.hpp>
#include <mpi.h>

#include <cstdint>
#include <exception>
#include <new>
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

// The boundary of a C API call: runs `f` and returns MPI_SUCCESS, or the MPI class of what it
// threw with its message in the error slot. Nothing thrown gets out (no exception crosses into C).
template <class F>
int guarded(F&& f) noexcept {
  try {
    f();
    return MPI_SUCCESS;
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.mpi_error_class();
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return MPI_ERR_NO_MEM;
  } catch (const std::exception& e) {
    set_last_error(e.what());
    return MPI_ERR_INTERN;
  } catch (...) {
    return MPI_ERR_INTERN;
  }
}

}  // namespace ferry::detail
