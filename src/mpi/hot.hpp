// The host fast path. Every host-buffer call pays for deciding that Ferry has nothing to do; the
// ping-pong of 8-byte host messages must stay within a few nanoseconds of plain MPI. So the decision
// reads a few globals of this library (hidden: direct loads, no call) and the pointer cache, and the
// MPI_* function then tail-calls PMPI_*. Anything else takes the full path, out of line.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gpu/host_pages.hpp"

namespace ferry::mpi_detail {

using i64 = std::int64_t;

namespace hot {
// Set once by init() (MPI_Init*). Before it, `gpu` is true and the table of named types empty,
// which sends every call down the full path.
extern bool gpu;          // the GPU engine is available: buffers need a pointer check
extern bool stubs_on;     // the stub protocol is on: receives may get stubs
extern bool host_sends;   // FERRY_PROTOCOL_TEST: host sends take the protocol path
extern bool threads;      // the MPI provides MPI_THREAD_MULTIPLE
// The MPI packs some constructs against the standard (typemap.hpp, issue 14): derived types may
// need Ferry's engine on host buffers too, so they take the full path even without a GPU.
extern bool typemaps;
// Receives that may hold a stub and are not finished, requests freed while active, messages taken
// early by probes: while any exist, calls serve them and look for them.
extern std::atomic<int> stubs, detached, early;
extern std::atomic<std::size_t> pending;  // entries in the request table (Requests)
inline bool no_requests() { return pending.load(std::memory_order_acquire) == 0; }
// Persistent requests Ferry may start itself (persistent.hpp): remembered ones, the sends among
// them, and those whose stand-in request is active now.
extern std::atomic<int> remembered, remembered_sends, stand_ins;
// No request of Ferry's and no stand-in: waits and tests go straight to MPI.
inline bool idle() { return no_requests() && stand_ins.load(std::memory_order_acquire) == 0; }
struct NamedSize {
  MPI_Datatype type;
  int size;
};
constexpr int kMaxNamed = 32;
extern NamedSize named[kMaxNamed];  // the named types, most used first (init())
extern int named_count;

void init();

inline bool quiet() {
  return stubs.load(std::memory_order_acquire) == 0 && detached.load(std::memory_order_acquire) == 0 &&
         early.load(std::memory_order_acquire) == 0;
}
// The size of a named type (whose data starts at the buffer); -1 for any other.
inline int named_size(MPI_Datatype type) {
  for (int i = 0; i < named_count; ++i)
    if (named[i].type == type) return named[i].size;
  return -1;
}
// True when `count` elements of a named type of `size` bytes at `buf` are known to be host memory
// (for a derived type or an unknown page: false, and the full path decides).
inline bool host_buffer(const void* buf, int count, int size) {
  return !gpu || count <= 0 || size == 0 || ferry::gpu::host_pages::known(buf);
}
// A send needs nothing of Ferry.
inline bool plain_send(const void* buf, int count, MPI_Datatype type) {
  if (!quiet() || host_sends) return false;
  if (!gpu && !typemaps) return true;
  const int size = named_size(type);
  return size >= 0 && host_buffer(buf, count, size);
}
// A receive needs nothing of Ferry: besides the above, no stub can arrive in it, because the
// protocol is off or the buffer is smaller than `min_stub_capacity` (transport::may_get_stub).
inline bool plain_recv(const void* buf, int count, MPI_Datatype type, i64 min_stub_capacity) {
  if (!quiet()) return false;
  if (!gpu && !stubs_on && !typemaps) return true;
  const int size = named_size(type);
  if (size < 0 || (stubs_on && count > 0 && static_cast<i64>(count) * size >= min_stub_capacity)) return false;
  return host_buffer(buf, count, size);
}
// A buffer argument of a collective needs nothing of Ferry: MPI_IN_PLACE, or a named type's elements
// at a known host page, or null with a named type (a count of zero, or an argument not significant
// here; MPI_BOTTOM with a derived type may be absolute GPU addresses and takes the full path). A
// v-collective's buffer is one allocation: its base address tells.
inline bool plain_buffer(const void* buf, MPI_Datatype type) {
  if (!gpu || buf == MPI_IN_PLACE) return true;
  return named_size(type) >= 0 && (buf == nullptr || ferry::gpu::host_pages::known(buf));
}
// A collective with nothing to serve and these buffers plain: straight to PMPI.
// (FERRY_PROTOCOL_TEST: none is, so that the CPU tests run the collectives of Ferry's messages.)
inline bool plain_collective(const void* a, MPI_Datatype ta) { return quiet() && !host_sends && plain_buffer(a, ta); }
inline bool plain_collective(const void* a, MPI_Datatype ta, const void* b, MPI_Datatype tb) {
  return quiet() && !host_sends && plain_buffer(a, ta) && plain_buffer(b, tb);
}
// The w-forms (a type per block): only without a GPU.
inline bool plain_collective() { return quiet() && !gpu && !host_sends; }
}  // namespace hot

// FERRY_MPI_VERBOSE=1: say what the interposer does (initialization, refused types, errors).
bool verbose();
// MPI_Type_size, without a call into MPI for the named types.
int type_size(MPI_Datatype type);
// This process's rank in `comm`, and its size (PMPI; an intercommunicator's local group).
inline int comm_rank(MPI_Comm comm) {
  int r = 0;
  PMPI_Comm_rank(comm, &r);
  return r;
}
inline int comm_size(MPI_Comm comm) {
  int n = 0;
  PMPI_Comm_size(comm, &n);
  return n;
}

}  // namespace ferry::mpi_detail
