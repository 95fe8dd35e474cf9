// MPI_Pack and MPI_Unpack with GPU memory on either side. The user buffer's memory is its route's
// (so MPI_BOTTOM with absolute device addresses is device memory: every block is looked at), the
// packed buffer's one query; host on both sides goes to the MPI. GPU data moves by one kernel (or
// copy) on the legacy stream, straight into or out of the packed buffer where the GPU reaches it,
// through pinned staging where it is pageable.
#include <ferry/pack.hpp>
#include <ferry/transport.hpp>

#include <cstring>
#include <string>

#include "gpu/runtime.hpp"
#include "mpi/boundary.hpp"
#include "mpi/requests.hpp"
#include "mpi/typemap.hpp"
#include "mpi/stream.hpp"

namespace ferry::mpi_detail {
namespace {

using ferry::Error;

bool gpu_memory(ferry::gpu::Memory m) {
  return m == ferry::gpu::Memory::device || m == ferry::gpu::Memory::managed;
}

// MPI's checks of the packed buffer's window [*position, *position + bytes), with Open MPI's classes.
void check_window(const void* packed, int size, const int* position, i64 bytes, const char* what) {
  if (packed == nullptr) throw Error(MPI_ERR_ARG, std::string(what) + " buffer is null");
  if (position == nullptr) throw Error(MPI_ERR_ARG, "position is a null pointer");
  if (size < 0) throw Error(MPI_ERR_ARG, std::string("negative ") + what + " size");
  if (*position < 0) throw Error(MPI_ERR_ARG, "negative position");
  if (*position > size || bytes > size - *position)
    throw Error(MPI_ERR_TRUNCATE, std::string(what) + " buffer too small: " + std::to_string(bytes) +
                                      " bytes needed at position " + std::to_string(*position));
}

void check_user(const transport::Route& r, const char* what) {
  if (r.count < 0) throw Error(MPI_ERR_COUNT, "negative count");
  if (r.origin == nullptr && r.bytes > 0 && r.type->data_lb(r.count) < 4096)
    throw Error(MPI_ERR_BUFFER, std::string(what) + " buffer is null (MPI_BOTTOM) but the datatype's "
                                "displacements are not absolute addresses");
}

[[gnu::noinline]] int pack(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize,
                           int* position, MPI_Comm comm) noexcept {
  return guard(comm, [&] {
    transport::Route r = transport::route(inbuf, incount, type);
    r.producer = producer::of(comm, type);  // issue 14
    const ferry::gpu::Memory out = outbuf && position && *position >= 0
                                       ? ferry::gpu::where(static_cast<char*>(outbuf) + *position).kind
                                       : ferry::gpu::Memory::host;
    const bool marked = !r.device() && !gpu_memory(out) && typemap::marked(type);  // issue 14
    if (!r.type || r.method == transport::Method::passthrough || (!r.device() && !gpu_memory(out) && !marked))
      return PMPI_Pack(inbuf, incount, type, outbuf, outsize, position, comm);
    check_user(r, "input");
    check_window(outbuf, outsize, position, r.bytes, "output");
    char* dst = static_cast<char*>(outbuf) + *position;
    if (r.bytes > 0) {
      if (marked) {  // host to host: the CPU engine, which follows the standard
        i64 pos = 0;
        ferry::pack(inbuf, incount, *r.type, dst, r.bytes, &pos);
      } else if (!r.device()) {  // host data into GPU memory: the CPU engine, then one copy
        Staged host(r.bytes);
        i64 pos = 0;
        ferry::pack(inbuf, incount, *r.type, host.p, r.bytes, &pos);
        ferry::gpu::copy(dst, host.p, r.bytes);
      } else if (out == ferry::gpu::Memory::host) {  // pageable: through pinned staging
        Staged host(r.bytes);
        transport::stage(r, host.p);
        std::memcpy(dst, host.p, static_cast<std::size_t>(r.bytes));
      } else {
        if (r.producer) ferry::gpu::sync_stream(r.producer);
        ferry::gpu::pack_async(inbuf, incount, *r.type, dst, ferry::gpu::legacy_stream());
        ferry::gpu::sync_stream(ferry::gpu::legacy_stream());
      }
    }
    *position += static_cast<int>(r.bytes);
    return MPI_SUCCESS;
  });
}

[[gnu::noinline]] int unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
                             MPI_Datatype type, MPI_Comm comm) noexcept {
  return guard(comm, [&] {
    transport::Route r = transport::route(outbuf, outcount, type);
    const ferry::gpu::Memory in = inbuf && position && *position >= 0
                                      ? ferry::gpu::where(static_cast<const char*>(inbuf) + *position).kind
                                      : ferry::gpu::Memory::host;
    const bool marked = !r.device() && !gpu_memory(in) && typemap::marked(type);  // issue 14
    if (!r.type || r.method == transport::Method::passthrough || (!r.device() && !gpu_memory(in) && !marked))
      return PMPI_Unpack(inbuf, insize, position, outbuf, outcount, type, comm);
    check_user(r, "output");
    check_window(inbuf, insize, position, r.bytes, "input");
    const char* src = static_cast<const char*>(inbuf) + *position;
    if (r.bytes > 0) {
      if (marked) {  // host to host: the CPU engine
        i64 pos = 0;
        ferry::unpack(src, r.bytes, &pos, outbuf, outcount, *r.type);
      } else if (!r.device()) {  // GPU bytes into host data: one copy, then the CPU engine
        Staged host(r.bytes);
        ferry::gpu::copy(host.p, src, r.bytes);
        i64 pos = 0;
        ferry::unpack(host.p, r.bytes, &pos, outbuf, outcount, *r.type);
      } else if (in == ferry::gpu::Memory::host) {  // pageable: through pinned staging
        Staged host(r.bytes);
        std::memcpy(host.p, src, static_cast<std::size_t>(r.bytes));
        transport::choose_unpack(r);
        transport::unstage(host.p, r.bytes, transport::target(r), 0, true);
      } else {
        ferry::gpu::unpack_async(src, outbuf, outcount, *r.type, ferry::gpu::legacy_stream());
        ferry::gpu::sync_stream(ferry::gpu::legacy_stream());
      }
    }
    *position += static_cast<int>(r.bytes);
    return MPI_SUCCESS;
  });
}

}  // namespace
}  // namespace ferry::mpi_detail

using namespace ferry::mpi_detail;

extern "C" {

int MPI_Pack(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize, int* position,
             MPI_Comm comm) {
  if (!hot::gpu && !hot::typemaps) return PMPI_Pack(inbuf, incount, type, outbuf, outsize, position, comm);
  return pack(inbuf, incount, type, outbuf, outsize, position, comm);
}

int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype type,
               MPI_Comm comm) {
  if (!hot::gpu && !hot::typemaps) return PMPI_Unpack(inbuf, insize, position, outbuf, outcount, type, comm);
  return unpack(inbuf, insize, position, outbuf, outcount, type, comm);
}

}  // extern "C"
