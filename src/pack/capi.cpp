// The C API: each call runs its C++ counterpart, turns a ferry::Error into its MPI error class and
// keeps the message for ferry_error_string().
#include <ferry/ferry.h>
#include <ferry/pack.hpp>
#include <ferry/registry.hpp>

#include <climits>
#include <cstring>
#include <new>

#include "sys/error.hpp"

namespace {

using ferry::detail::guarded;

int to_int(ferry::i64 v, const char* what) {
  if (v > INT_MAX)
    ferry::detail::fail(ferry::detail::kErrTooLarge,
                        std::string(what) + " does not fit in an int: " + std::to_string(v));
  return static_cast<int>(v);
}

}  // namespace

extern "C" {

int ferry_type_commit(MPI_Datatype datatype) {
  return guarded([&] { ferry::commit(datatype); });
}

int ferry_type_free(MPI_Datatype datatype) {
  return guarded([&] { ferry::release(datatype); });
}

int ferry_pack_size(int incount, MPI_Datatype datatype, int* size) {
  return guarded([&] {
    auto type = ferry::lookup(datatype);
    if (size == nullptr) ferry::detail::fail(MPI_ERR_ARG, "size is a null pointer");
    *size = to_int(ferry::pack_size(incount, *type), "packed size");
  });
}

// Arguments are checked in the order Open MPI checks them, so that a call with several bad
// arguments gets the same class: the packed buffer and position, the count, the sizes, then the
// datatype; truncation last.
int ferry_pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize,
               int* position) {
  return guarded([&] {
    if (outbuf == nullptr) ferry::detail::fail(MPI_ERR_ARG, "output buffer is null");
    if (position == nullptr) ferry::detail::fail(MPI_ERR_ARG, "position is a null pointer");
    if (incount < 0) ferry::detail::fail(MPI_ERR_COUNT, "negative count: " + std::to_string(incount));
    if (outsize < 0) ferry::detail::fail(MPI_ERR_ARG, "negative output size: " + std::to_string(outsize));
    auto type = ferry::lookup(datatype);
    ferry::i64 pos = *position;
    ferry::pack(inbuf, incount, *type, outbuf, outsize, &pos);
    *position = static_cast<int>(pos);  // pos <= outsize, an int
  });
}

int ferry_unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
                 MPI_Datatype datatype) {
  return guarded([&] {
    if (inbuf == nullptr) ferry::detail::fail(MPI_ERR_ARG, "input buffer is null");
    if (position == nullptr) ferry::detail::fail(MPI_ERR_ARG, "position is a null pointer");
    if (outcount < 0) ferry::detail::fail(MPI_ERR_COUNT, "negative count: " + std::to_string(outcount));
    auto type = ferry::lookup(datatype);
    ferry::i64 pos = *position;
    ferry::unpack(inbuf, insize, &pos, outbuf, outcount, *type);
    *position = static_cast<int>(pos);
  });
}

int ferry_type_describe(MPI_Datatype datatype, char* buf, int len) {
  return guarded([&] {
    auto type = ferry::lookup(datatype);
    if (buf == nullptr || len <= 0) ferry::detail::fail(MPI_ERR_ARG, "invalid output buffer");
    std::string s = type->describe();
    std::size_t n = std::min(s.size(), static_cast<std::size_t>(len) - 1);
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
  });
}

const char* ferry_error_string(void) { return ferry::detail::last_error(); }

}  // extern "C"
