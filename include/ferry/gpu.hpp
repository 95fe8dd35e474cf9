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
// cudaMemcpyAsync. copy_async moves data from one layout straight into another. A Batch moves many
// packs, unpacks and copies in one launch, with pointers it can change between launches.
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
  // [lo, hi) (addresses) lies within it; false when it has no base (host memory).
  bool holds(std::uintptr_t lo, std::uintptr_t hi) const {
    const auto b = reinterpret_cast<std::uintptr_t>(base);
    return base && lo >= b && hi >= lo && hi <= b + static_cast<std::uintptr_t>(size);
  }
  bool holds(const void* p, i64 bytes) const {
    const auto lo = reinterpret_cast<std::uintptr_t>(p);
    return bytes >= 0 && holds(lo, lo + static_cast<std::uintptr_t>(bytes));
  }
};
Allocation allocation_of(const void* p);
// allocation_of() through the pointer cache: a pageable host page the cache knows is answered
// without the driver (kind host, no allocation), and a host verdict is added to it. One driver
// query otherwise: what a message's route asks, once.
Allocation where(const void* p);
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

// Copies `scount` elements of `stype` at `src` into the layout of `dcount` elements of `dtype` at
// `dst`: the bytes packing src would give, unpacked into dst, by ONE kernel and with no packed
// buffer in between (what a receive from oneself does). dst may be memory of another GPU mapped
// by peer access or CUDA IPC. Both sides must hold the same number of bytes (count x size): a
// smaller dst is MPI_ERR_TRUNCATE, a larger one MPI_ERR_COUNT. Both must be reachable by the GPU
// (MPI_ERR_BUFFER otherwise); overlapping src and dst give undefined results. Asynchronous on
// `stream` with no host synchronization (capturable in a CUDA graph); `done` is recorded after.
// Cost: the host work of pack_async (two pointer queries, one plan lookup per type) and one
// launch; a contiguous side makes it a pack or an unpack, two contiguous sides one
// cudaMemcpyAsync. The word size is the widest both layouts and both addresses allow (<= 16 B).
void copy_async(const void* src, i64 scount, const Type& stype, void* dst, i64 dcount,
                const Type& dtype, Stream stream = nullptr, Event done = nullptr);
// Synchronous version for any memory: two host buffers use the CPU engine, a pageable side is
// staged (as pack/unpack do). Complete when it returns.
void copy(const void* src, i64 scount, const Type& stype, void* dst, i64 dcount,
          const Type& dtype);

// One copy_async of copy_many_async: `scount` elements of `stype` at `src` into `dcount` of
// `dtype` at `dst`. Keep the types until the stream has done the copies (a copy that goes alone
// reads its types' device tables, as copy_async does).
struct Copy {
  const void* src;
  i64 scount;
  const Type* stype;
  void* dst;
  i64 dcount;
  const Type* dtype;
};
// Runs every copy with copy_async's rules and errors, in few launches on `stream`: copies whose
// layouts are strided with at most 3 dimensions (halo boxes, subarrays) go up to kCopiesPerLaunch
// to one launch, their moves in the kernel's parameters (n single copies cost n launches, about
// 4-5 us of host time each under MPS); the others go one by one. Copies must not overlap. No host
// synchronization; the grouped copies allocate nothing (capturable once their types' plans exist).
// A bad copy does not stop the others: all are queued, then the first error is thrown.
constexpr std::size_t kCopiesPerLaunch = 16;
void copy_many_async(const Copy* copies, std::size_t n, Stream stream = nullptr);

// One contiguous range of GPU memory (this process's, or another's mapped over CUDA IPC or peer
// access) to copy: `bytes` at `src` to `dst`.
struct Span {
  void* dst;
  const void* src;
  i64 bytes;
};
// Copies every span with one kernel launch on `stream` (one per kSpansPerLaunch spans): n small
// cudaMemcpyAsync calls cost n launches whose copies run one after another (about 4 us each on an
// H200 under MPS), this costs one launch whose copies run side by side. Spans must not overlap.
// No host synchronization and no allocation (the spans travel as kernel parameters): capturable.
constexpr std::size_t kSpansPerLaunch = 64;
void copy_spans_async(const Span* spans, std::size_t n, Stream stream = nullptr);

enum class Direction { pack, unpack };

// One job of a pack or unpack batch: `count` elements of `type` at `origin`, packed at `packed`.
struct Job {
  void* origin;
  void* packed;
  i64 count;
  const Type* type;  // must outlive the Batch
};

// One side of a Move. With a type, `count` elements of it at the side's buffer (a user's array);
// without one (type null), a packed buffer: the move's bytes back to back (count is ignored).
// The buffer is `ptr`, or, with slot >= 0, the batch's pointer slot `slot` plus `offset` bytes
// (ptr ignored): sides that share a slot follow it when Batch::set_slot changes it.
struct Side {
  void* ptr = nullptr;
  i64 count = 0;
  const Type* type = nullptr;  // must outlive the Batch
  int slot = -1;
  i64 offset = 0;
};

// One move of a Batch. Pack: typed src, packed dst. Unpack: packed src, typed dst. Copy: both
// typed, the same number of bytes on both sides, no packed buffer in between (copy_async's rules).
struct Move {
  Side src;
  Side dst;
};

// Many moves by ONE kernel launch: any mix of packs, unpacks and copies, from and to any buffers
// the GPU reaches (device memory, mapped pinned host memory, peer or IPC-mapped memory of another
// GPU). Building a Batch plans every move, splits all of them into chunks of about equal bytes
// (one per CUDA block) and uploads one device table: pointer slots, move records, chunks.
//
// Pointers are read by the kernel from the table's slots, so buffers can change without a new
// plan and without re-capturing a CUDA graph that holds the launch: rebind() or set_slot() change
// the host's copy, upload(stream) writes the changes to the device IN STREAM ORDER (a small
// kernel carrying the new values in its arguments: no host wait, nothing to keep alive): launches
// enqueued on that stream before the upload use the old pointers, launches after it the new ones.
// A launch on another stream sees the new pointers only if it is ordered after the upload (an
// event). launch() uploads pending changes first on its own stream; inside a stream capture that
// is refused (MPI_ERR_ARG), since the captured upload would re-apply today's pointers at every
// replay: upload before capturing, and before each replay that should see new pointers.
//
// Small blocks (the 24 B rows of a halo's x faces) move faster two directions at a time: describe
// each +X direction and its -X mirror as one move whose sides are ferry::interleave pairs
// (pack.hpp), so that a row's two ends are read and written by the same warp instruction.
//
// Ordering between moves is not defined: moves whose destinations overlap, or whose destination
// another move reads, give undefined results. A Batch belongs to the device current when it is
// built; it is not thread-safe (one thread at a time changes and launches it).
//
// Errors (ferry::Error): a move with no type on either side or a type the GPU engine cannot plan
// -> MPI_ERR_TYPE; negative count -> MPI_ERR_COUNT; copy sides of different sizes ->
// MPI_ERR_TRUNCATE / MPI_ERR_COUNT as copy_async; a buffer the GPU cannot reach or a null packed
// buffer -> MPI_ERR_BUFFER; a bad slot or move index -> MPI_ERR_ARG; CUDA failures -> MPI_ERR_OTHER.
//
// Costs: building plans each move (types' plans are cached) and does a cudaMalloc and a
// synchronous upload (not allowed inside a capture). launch() is one kernel launch, with no host
// synchronization, allocation or pointer query: capturable. rebind/set_slot cost one pointer
// query each (the new buffer must be reachable); upload one small launch per 240 changed entries.
class Batch {
 public:
  // Packs or unpacks every job (the moves {origin -> packed} or {packed -> origin}).
  Batch(Direction direction, const std::vector<Job>& jobs);
  // Any moves; `slots` are the initial pointers of the shared slots that sides refer to.
  explicit Batch(const std::vector<Move>& moves, const std::vector<void*>& slots = {});
  ~Batch();
  Batch(Batch&&) noexcept;
  Batch& operator=(Batch&&) noexcept;

  // Moves every move (uploading pending pointer changes first); `done` is recorded after.
  void launch(Stream stream = nullptr, Event done = nullptr);
  // Points move `move`'s source and destination buffers (its `ptr`, for sides without a slot) at
  // src and dst; null keeps a side's buffer. A side with a slot: MPI_ERR_ARG (use set_slot). The
  // new buffer may have another alignment: the move's word size follows it.
  void rebind(std::size_t move, void* src, void* dst);
  // Points shared slot `slot` at `ptr`: every side using it moves with it.
  void set_slot(std::size_t slot, void* ptr);
  // Writes changed pointers (and the records of moves whose word size changed) to the device, in
  // order on `stream`. A no-op when nothing changed.
  void upload(Stream stream = nullptr);
  // Moves given to the constructor (jobs for the Direction form), empty ones included.
  std::size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
}  // namespace ferry::gpu
