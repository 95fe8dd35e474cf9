#include "sys/error.hpp"

namespace ferry::detail {

namespace {
thread_local std::string t_last_error;
}

void fail(int mpi_error_class, const std::string& what) { throw Error(mpi_error_class, what); }

void set_last_error(const std::string& message) {
  try {
    t_last_error = message;
  } catch (...) {  // out of memory for the message: keep the old one rather than throw
  }
}
const char* last_error() { return t_last_error.c_str(); }

}  // namespace ferry::detail
