// The calls Ferry does not serve (refused.def): GPU memory in them is MPI_ERR_BUFFER, reported the
// way MPI reports its own errors, instead of a crash inside an MPI that is not CUDA-aware.
//
// Host buffers pay what the host fast path pays (hot.hpp): a named type on a page the pointer
// cache knows as host memory is decided by a few loads; anything else asks the transport's route.
#include <ferry/transport.hpp>

#include "mpi/hot.hpp"
#include "sys/error.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <new>
#include <string>

namespace {

using namespace ferry::mpi_detail;

// `count` elements of `type` at `buf` are GPU memory (an int or, in the _c forms, an MPI_Count).
bool device(const void* buf, long long count, MPI_Datatype type) {
  if (count <= 0 || !hot::gpu) return false;
  const int size = hot::named_size(type);
  if (size >= 0 && hot::host_buffer(buf, static_cast<int>(std::min<long long>(count, INT_MAX)), size)) return false;
  return ferry::transport::route(buf, count, type).device();
}

// Whose error handler hears of a refusal (MPI's rule: the object the call works on; calls
// without one use MPI_COMM_WORLD's).
struct Handler {
  enum Kind { comm, win, file } kind;
  MPI_Comm c = MPI_COMM_NULL;
  MPI_Win w = MPI_WIN_NULL;
  MPI_File f = MPI_FILE_NULL;
  void raise(int error_class) const {
    switch (kind) {
      case comm: PMPI_Comm_call_errhandler(c, error_class); break;
      case win: PMPI_Win_call_errhandler(w, error_class); break;
      case file: PMPI_File_call_errhandler(f, error_class); break;
    }
  }
};
Handler on_comm(MPI_Comm c) { return {Handler::comm, c, MPI_WIN_NULL, MPI_FILE_NULL}; }
Handler on_win(MPI_Win w) { return {Handler::win, MPI_COMM_NULL, w, MPI_FILE_NULL}; }
Handler on_file(MPI_File f) { return {Handler::file, MPI_COMM_NULL, MPI_WIN_NULL, f}; }

// Says what was refused (ferry_error_string(), and stderr under FERRY_MPI_VERBOSE) and raises
// MPI_ERR_BUFFER on the handler.
int refuse(const char* call, const char* argument, const char* group, const Handler& h) noexcept {
  try {
    const std::string what = std::string(call) + ": " + argument + " is GPU memory; Ferry does not serve GPU buffers in " +
                             group + " (README: \"Calls Ferry does not serve\")";
    ferry::detail::set_last_error(what);
    if (verbose()) std::fprintf(stderr, "ferry-mpi: %s\n", what.c_str());
  } catch (...) {  // no memory for the message: the error class still goes out
  }
  h.raise(MPI_ERR_BUFFER);
  return MPI_ERR_BUFFER;
}

// The entry's boundary: its checks, then PMPI. Nothing thrown gets out (checks that fail report
// the error class they carry through the handler).
template <class Checks, class Call>
int guarded(const char* call, const char* group, const Handler& h, Checks checks, Call pmpi) noexcept {
  const char* argument = nullptr;
  try {
    argument = checks();
  } catch (const ferry::Error& e) {
    ferry::detail::set_last_error(std::string(call) + ": " + e.what());
    h.raise(e.mpi_error_class());
    return e.mpi_error_class();
  } catch (const std::bad_alloc&) {
    h.raise(MPI_ERR_NO_MEM);
    return MPI_ERR_NO_MEM;
  } catch (...) {
    h.raise(MPI_ERR_INTERN);
    return MPI_ERR_INTERN;
  }
  if (argument) return refuse(call, argument, group, h);
  return pmpi();
}

}  // namespace

#define ON_COMM(c) on_comm(c)
#define ON_WIN(w) on_win(w)
#define ON_FILE(f) on_file(f)
#define ON_WORLD on_comm(MPI_COMM_WORLD)
#define BUF(b, n, t) \
  if (device(b, n, t)) return #b;
#define FERRY_REFUSED(group, name, params, args, handler, checks)                              \
  extern "C" __attribute__((visibility("default"))) int name params {                          \
    return guarded(#name, #group, handler, [&]() -> const char* { checks return nullptr; }, \
                   [&] { return P##name args; });                                             \
  }
// The large-count forms where the MPI has them (MPI-4).
#if MPI_VERSION >= 4
#define FERRY_REFUSED_C(...) FERRY_REFUSED(__VA_ARGS__)
#else
#define FERRY_REFUSED_C(...)
#endif
#include "mpi/refused.def"
#undef FERRY_REFUSED_C
#undef FERRY_REFUSED
#undef BUF
