// The pack layer's C++ API: argument checks with MPI's error classes, then the engine.
#include <ferry/gpu.hpp>
#include <ferry/pack.hpp>

#include <string>

#include "pack/cpu/engine.hpp"
#include "sys/error.hpp"

namespace ferry {

using detail::fail;

namespace {

void check_count(i64 count) {
  if (count < 0) fail(MPI_ERR_COUNT, "negative count: " + std::to_string(count));
}

// Checks the packed buffer's window [*position, *position + bytes) against its size. A null packed
// buffer is MPI_ERR_ARG whatever the count, as Open MPI answers.
void check_window(const void* buf, i64 size, const i64* position, i64 bytes, const char* what) {
  if (buf == nullptr) fail(MPI_ERR_ARG, std::string(what) + " buffer is null");
  if (position == nullptr) fail(MPI_ERR_ARG, "position is a null pointer");
  if (size < 0) fail(MPI_ERR_ARG, std::string("negative ") + what + " size");
  if (*position < 0) fail(MPI_ERR_ARG, "negative position: " + std::to_string(*position));
  if (*position > size || bytes > size - *position)
    fail(MPI_ERR_TRUNCATE, std::string(what) + " buffer too small: " + std::to_string(bytes) +
                               " bytes needed at position " + std::to_string(*position) +
                               ", buffer has " + std::to_string(size));
}

// Either buffer is device or managed memory: the GPU engine moves the data (pinned host memory is
// host memory to the CPU engine, which reaches it directly). The unpacked side is classified at its
// first data byte (the origin may be outside it, or null for MPI_BOTTOM).
bool on_gpu(const void* origin, i64 count, const Type& type, const void* packed) {
  if (!gpu::available() || count == 0 || type.size() == 0) return false;
  auto device = [](gpu::Memory m) { return m == gpu::Memory::device || m == gpu::Memory::managed; };
  return device(gpu::memory_of(static_cast<const char*>(origin) + type.data_lb(count))) ||
         device(gpu::memory_of(packed));
}

// A null user buffer is MPI_BOTTOM: the datatype's displacements are absolute addresses
// (MPI_Get_address). Data that would then sit in the first page cannot be real.
void check_data(const void* buf, i64 count, const Type& type, const char* what) {
  if (buf != nullptr || count == 0 || type.size() == 0) return;
  if (type.data_lb(count) < 4096)
    fail(MPI_ERR_BUFFER, std::string(what) + " buffer is null (MPI_BOTTOM) but the datatype's "
                         "displacements are not absolute addresses");
}

}  // namespace

i64 pack_size(i64 count, const Type& type) {
  check_count(count);
  return detail::checked_mul(count, type.size(), MPI_ERR_COUNT, "packed size");
}

void pack(const void* inbuf, i64 count, const Type& type, void* outbuf, i64 outsize,
          i64* position) {
  if (outbuf == nullptr) fail(MPI_ERR_ARG, "output buffer is null");  // Open MPI checks these first
  if (position == nullptr) fail(MPI_ERR_ARG, "position is a null pointer");
  i64 bytes = pack_size(count, type);
  check_window(outbuf, outsize, position, bytes, "output");
  check_data(inbuf, count, type, "input");
  char* out = static_cast<char*>(outbuf) + *position;
  if (on_gpu(inbuf, count, type, out)) gpu::pack(inbuf, count, type, out);
  else detail::cpu_pack(static_cast<const char*>(inbuf), count, type, out);
  *position += bytes;
}

void unpack(const void* inbuf, i64 insize, i64* position, void* outbuf, i64 count,
            const Type& type) {
  if (inbuf == nullptr) fail(MPI_ERR_ARG, "input buffer is null");
  if (position == nullptr) fail(MPI_ERR_ARG, "position is a null pointer");
  i64 bytes = pack_size(count, type);
  check_window(inbuf, insize, position, bytes, "input");
  check_data(outbuf, count, type, "output");
  const char* in = static_cast<const char*>(inbuf) + *position;
  if (on_gpu(outbuf, count, type, in)) gpu::unpack(in, outbuf, count, type);
  else detail::cpu_unpack(in, static_cast<char*>(outbuf), count, type);
  *position += bytes;
}

void copy(const void* src, i64 scount, const Type& stype, void* dst, i64 dcount,
          const Type& dtype) {
  check_count(scount);
  check_count(dcount);
  const i64 bytes = pack_size(scount, stype);
  const i64 room = pack_size(dcount, dtype);
  if (room < bytes)
    fail(MPI_ERR_TRUNCATE, "copy destination holds " + std::to_string(room) + " bytes, the source " +
                               std::to_string(bytes));
  if (room > bytes)
    fail(MPI_ERR_COUNT, "copy destination holds " + std::to_string(room) + " bytes, more than the "
                        "source's " + std::to_string(bytes) + ": a copy fills its destination exactly");
  check_data(src, scount, stype, "source");
  check_data(dst, dcount, dtype, "destination");
  if (bytes == 0) return;
  if (on_gpu(src, scount, stype, static_cast<const char*>(dst) + dtype.data_lb(dcount)))
    gpu::copy(src, scount, stype, dst, dcount, dtype);
  else detail::cpu_copy(static_cast<const char*>(src), scount, stype, static_cast<char*>(dst), dcount, dtype);
}

}  // namespace ferry
