// ferry/gpu.hpp — the GPU pack engine.
//
// Packs and unpacks committed datatypes between device memory and a packed buffer in device
// memory or in mapped pinned host memory (one-shot / zero-copy: the kernel writes straight over
// the bus). Work is asynchronous on the caller's stream; `done`, when given, is recorded after it.
// Strided types run one kernel specialized on word size and dimensions, with the whole plan in
// kernel arguments (no metadata in device memory); general types (indexed, struct, ...) run one
// kernel over a per-type table of pieces uploaded once: streams above the irregular part (a vector
// of an indexed type) stay dimensions, so the table has one entry per block of the irregular part;
// streams *inside* it are unrolled into pieces (up to 4M pieces; beyond that the GPU engine refuses
// the type with MPI_ERR_TYPE). Strided shapes have at most 16 dimensions. Contiguous types are one
// cudaMemcpyAsync. A Batch packs many (buffer, count, type, destination) jobs in one launch.
//
// The header needs no CUDA headers: Stream and Event are cudaStream_t and cudaEvent_t.
//
// Errors: ferry::Error. A CUDA failure is MPI_ERR_OTHER with the CUDA error string and the call
// site; a pointer the GPU cannot reach (pageable host memory) is MPI_ERR_BUFFER. Launch errors are
// checked after every launch; FERRY_DEBUG_SYNC=1 also synchronizes after each one.
// Built without CUDA, or with no usable GPU, available() is false and the calls below throw
// MPI_ERR_OTHER; ferry::pack/unpack (pack.hpp) then run on the CPU.
#pragma once

#include <ferry/type.hpp>

#include <cstdint>
#include <memory>
#include <vector>

struct CUstream_st;
struct CUevent_st;

namespace ferry::gpu {

using Stream = CUstream_st*;  // cudaStream_t
using Event = CUevent_st*;    // cudaEvent_t

// Built with CUDA and a CUDA device usable by this process.
bool available() noexcept;

// The calling thread's current CUDA device (-1 without a GPU), and setting it for a thread that
// works on another thread's behalf.
int current_device() noexcept;
void set_device(int device);
// The device of the calling thread's current CUDA context, -1 when it has none (the process has
// not chosen or used a device yet): unlike current_device(), which says 0 then.
int context_device() noexcept;
// A 64-bit hash of the device's UUID (0 for -1 or without a GPU): the same GPU gives the same key
// in every process, whatever its ordinal there (CUDA_VISIBLE_DEVICES).
std::uint64_t device_key(int device) noexcept;

// Where a pointer lives, as CUDA sees it.
enum class Memory { host, pinned_host, device, managed };
// Asked of the CUDA driver (so allocations of an application's own static CUDA runtime count) and
// cached: a host buffer costs a table lookup. FERRY_POINTER_CACHE=0 asks the driver every time.
Memory memory_of(const void* p);
// The allocation a pointer lies in, asked of the driver (uncached): its start and size (the whole
// cudaMalloc, when the application sub-allocates from one), an id unique within the process that a
// new allocation at the same address does not share, and its device ordinal (-1 for host memory).
struct Allocation {
  Memory kind;
  void* base;
  i64 size;
  unsigned long long id;
  int device;
};
Allocation allocation_of(const void* p);
// Before Ferry reads GPU data that the application handed to MPI from a stream of its own (a
// non-blocking copy stream, or another process over IPC): makes synchronous memory operations on
// the allocation finish before they return (CU_POINTER_ATTRIBUTE_SYNC_MEMOPS; a cudaMemcpy from
// pageable memory otherwise returns before its DMA has landed) and, the first time an allocation
// is seen, waits for the legacy default stream, where such a copy may still be in flight. Once
// per allocation; a no-op for host memory and without CUDA.
void settle(const Allocation& a);

// The GPU can read and write it (device, managed or pinned-and-mapped host memory).
inline bool reachable(Memory m) { return m != Memory::host; }

// Packs `count` elements of `type` at `origin` into `packed` (device or mapped pinned host memory).
void pack_async(const void* origin, i64 count, const Type& type, void* packed,
                Stream stream = nullptr, Event done = nullptr);
// Unpacks `count` elements of `type` from `packed` into `origin`.
void unpack_async(const void* packed, void* origin, i64 count, const Type& type,
                  Stream stream = nullptr, Event done = nullptr);
// Synchronous versions for any memory: pageable host buffers are staged (GPU pack into device
// scratch then a copy, or the CPU engine then a copy); two host buffers use the CPU engine.
void pack(const void* origin, i64 count, const Type& type, void* packed);
void unpack(const void* packed, void* origin, i64 count, const Type& type);

// Pinned, mapped host memory (cudaHostAlloc): for staging, and as a one-shot packing target.
void* alloc_pinned(i64 bytes);
void free_pinned(void* p) noexcept;

// A synchronous copy between any two memories, ordered after the legacy default stream's work
// like cudaMemcpy, and complete when it returns.
void copy(void* dst, const void* src, i64 bytes);

enum class Direction { pack, unpack };

// One job of a batch: `count` elements of `type` at `origin`, packed at `packed`.
struct Job {
  void* origin;
  void* packed;
  i64 count;
  const Type* type;  // must outlive the Batch
};

// Many jobs moved by one kernel launch. Building a Batch plans every job and uploads the job table
// once; launch() then costs one kernel launch, however many jobs there are.
class Batch {
 public:
  Batch(Direction direction, const std::vector<Job>& jobs);
  ~Batch();
  Batch(Batch&&) noexcept;
  Batch& operator=(Batch&&) noexcept;
  void launch(Stream stream = nullptr, Event done = nullptr) const;
  std::size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::gpu
