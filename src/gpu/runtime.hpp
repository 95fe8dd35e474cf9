// gpu/runtime.hpp — the one wrapper of the CUDA runtime and driver outside kernels.
//
// Every CUDA call Ferry makes outside a kernel launch goes through here: devices, pointer queries
// (the public ones are in ferry/gpu.hpp: memory_of, allocation_of, settle, alloc_pinned, copy, ...),
// device and pinned memory, host registration, streams (with priorities), events (IPC events too),
// IPC memory handles, asynchronous copies, stream memory operations (wait for / write a 32- or
// 64-bit flag from a stream, so a handshake between processes can live inside a CUDA graph), graph
// capture and launch. The header needs no CUDA headers: Stream and Event are cudaStream_t and
// cudaEvent_t (ferry/gpu.hpp), Graph and GraphExec are cudaGraph_t and cudaGraphExec_t.
//
// Errors: ferry::Error with MPI_ERR_OTHER, CUDA's message, the CUDA call and the caller's file and
// line (each call takes a Site that defaults to its caller's). Calls documented noexcept report
// through their result instead. Built without CUDA (gpu/stub.cpp), queries answer "no GPU" (no
// devices, host memory, unsupported) and calls that need a GPU throw MPI_ERR_OTHER "built without
// CUDA"; release calls (free_*, destroy_*, close_*) do nothing.
//
// Cost: each call is one CUDA call (a few hundred ns to a few µs of host time), except where
// "cached" says it is a table lookup after the first time.
#pragma once

#include <ferry/gpu.hpp>

#include <array>
#include <cstdint>
#include <string>

struct CUgraph_st;
struct CUgraphExec_st;

namespace ferry::gpu {

using Graph = CUgraph_st*;          // cudaGraph_t
using GraphExec = CUgraphExec_st*;  // cudaGraphExec_t

// Where a call came from, for its error message: the default argument is the caller's file:line.
struct Site {
  const char* file;
  int line;
  static constexpr Site here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return {file, line};
  }
};

// ---- Errors
// Throws ferry::Error(MPI_ERR_OTHER, "<file>:<line>: <call>: <CUDA's message>").
[[noreturn]] void fail_cuda(int cuda_error, const char* call, Site site);
// After a kernel launch on `stream`: throws the launch's error, if any; under FERRY_DEBUG_SYNC also
// waits for the kernel and throws what it hit.
void check_launch(Stream stream, Site site = Site::here());

// ---- Devices
// CUDA devices this process sees (0 without a driver or a GPU).
int device_count() noexcept;
struct DeviceInfo {
  int ordinal = -1;
  int sms = 0;  // multiprocessors
  int major = 0, minor = 0;
  i64 memory = 0;  // bytes
  std::array<unsigned char, 16> uuid{};
  std::uint64_t key = 0;  // device_key(): a hash of the UUID, never 0
  std::string name;
};
// Cached per device. MPI_ERR_OTHER for an ordinal CUDA does not know.
const DeviceInfo& device_info(int device, Site site = Site::here());
// The calling thread's current device (throws where current_device() says -1).
int this_device(Site site = Site::here());
void synchronize_device(Site site = Site::here());
// `device` can read and write `peer`'s memory directly (NVLink or PCIe peer to peer).
bool can_access_peer(int device, int peer) noexcept;
// Lets the current device access `peer`'s memory (once; already enabled is not an error).
void enable_peer_access(int peer, Site site = Site::here());
// Makes `device` current for the calling thread for one scope, then restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device, Site site = Site::here());
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_;
};

// ---- Memory (alloc_pinned / free_pinned: ferry/gpu.hpp)
// Device memory on the current device (cudaMalloc); 0 bytes gives a valid 1-byte allocation.
void* alloc_device(i64 bytes, Site site = Site::here());
void free_device(void* p) noexcept;
// Pins pageable host memory and maps it for every device (cudaHostRegister, portable + mapped).
void register_host(void* p, i64 bytes, Site site = Site::here());
void unregister_host(void* p) noexcept;

// ---- Streams
// A non-blocking stream on the current device. `priority`: 0 the default; lower numbers run first
// (stream_priorities() gives the range; values outside it are clamped, as CUDA does).
Stream create_stream(int priority = 0, Site site = Site::here());
struct Priorities {
  int least = 0;     // the default priority
  int greatest = 0;  // the highest (a negative number on current GPUs)
};
Priorities stream_priorities(Site site = Site::here());
void destroy_stream(Stream stream) noexcept;
void sync_stream(Stream stream, Site site = Site::here());
// The stream's work has finished (a query; never waits).
bool stream_idle(Stream stream, Site site = Site::here());
// The legacy default stream (cudaStreamLegacy), which synchronizes with other blocking streams.
Stream legacy_stream() noexcept;
// Waits for what is queued on the current device's legacy default stream so far: an event recorded
// there now and waited for (cheaper than a stream synchronize, and work queued after it by other
// threads is not waited for). One host-waited GPU operation.
void wait_legacy(Site site = Site::here());
// Ferry's own non-blocking stream on the current device (one per device, created on first use,
// never destroyed) for copies and unpacks it makes on its own. Cached.
Stream internal_stream(Site site = Site::here());

// ---- Events
// `timing`: usable with elapsed_ms (costs a little more to record).
Event create_event(bool timing = false, Site site = Site::here());
void destroy_event(Event event) noexcept;
void record(Event event, Stream stream, Site site = Site::here());
void sync_event(Event event, Site site = Site::here());
// The work before the event's record has finished (a query; never waits).
bool event_idle(Event event, Site site = Site::here());
// Later work on `stream` waits for the event (on the GPU; the host does not wait).
void stream_wait_event(Stream stream, Event event, Site site = Site::here());
float elapsed_ms(Event start, Event end, Site site = Site::here());
// Events another process on the node can wait for: created interprocess (no timing), exported as
// a handle of 64 bytes and opened there. An opened event is destroyed with destroy_event.
struct IpcEventHandle {
  char bytes[64];
};
Event create_ipc_event(Site site = Site::here());
IpcEventHandle ipc_handle(Event event, Site site = Site::here());
Event open_ipc_event(const IpcEventHandle& handle, Site site = Site::here());

// ---- IPC memory
struct IpcMemHandle {
  char bytes[64];
};
// The IPC handle of the allocation starting at `base`; false where it has none (memory from the
// VMM API or a stream-ordered pool, or no GPU): such memory takes another method.
bool ipc_handle(void* base, IpcMemHandle* out) noexcept;
enum class IpcOpen {
  ok,
  // The allocation is mapped in this process already where CUDA will not count a second open
  // (another context on the device, or an older driver; ucx#3192); `*mapped` is not set. (In the
  // same context current drivers count opens and return the same address: that is `ok`.)
  already_mapped,
  failed  // any other reason (another node's handle, a freed allocation, no peer access)
};
// Maps a peer's allocation into this process (lazily enabling peer access).
IpcOpen open_ipc(const IpcMemHandle& handle, void** mapped) noexcept;
void close_ipc(void* mapped) noexcept;

// ---- Copies, asynchronous on `stream` (copy(), synchronous: ferry/gpu.hpp)
// Between any two memories the GPU can reach or pageable host memory (unified addressing picks the
// direction; a copy from pageable memory may return before it is read).
void copy_async(void* dst, const void* src, i64 bytes, Stream stream, Site site = Site::here());
// The same with the direction stated (the memories must be what the name says).
void copy_h2d_async(void* dst, const void* src, i64 bytes, Stream stream, Site site = Site::here());
void copy_d2h_async(void* dst, const void* src, i64 bytes, Stream stream, Site site = Site::here());
void copy_d2d_async(void* dst, const void* src, i64 bytes, Stream stream, Site site = Site::here());
// From one device's memory to another's (through the host where they have no peer access).
void copy_peer_async(void* dst, int dst_device, const void* src, int src_device, i64 bytes,
                     Stream stream, Site site = Site::here());

// ---- Stream memory operations: the GPU waits for, or writes, a flag word. `flag` is device
// memory, or pinned host memory (its device address), or another process's IPC-mapped memory;
// aligned to its size. They can be captured into a graph.
// 32-bit operations work on every device; 64-bit ones where this says so.
bool memops_64bit(int device) noexcept;
enum class Until {
  geq,  // (signed)(*flag - value) >= 0
  eq,   // *flag == value
  and_  // (*flag & value) != 0
};
void wait_value32(Stream stream, const void* flag, std::uint32_t value, Until until = Until::geq,
                  Site site = Site::here());
void write_value32(Stream stream, void* flag, std::uint32_t value, Site site = Site::here());
void wait_value64(Stream stream, const void* flag, std::uint64_t value, Until until = Until::geq,
                  Site site = Site::here());
void write_value64(Stream stream, void* flag, std::uint64_t value, Site site = Site::here());

// ---- Graphs
// Capture of what the calling thread (thread_local mode: other threads' calls are not affected)
// puts on `stream` until end_capture.
void begin_capture(Stream stream, Site site = Site::here());
Graph end_capture(Stream stream, Site site = Site::here());
bool capturing(Stream stream, Site site = Site::here());
GraphExec instantiate(Graph graph, Site site = Site::here());
void launch(GraphExec exec, Stream stream, Site site = Site::here());
void destroy_graph(Graph graph) noexcept;
void destroy_graph_exec(GraphExec exec) noexcept;

}  // namespace ferry::gpu
