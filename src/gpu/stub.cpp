// The GPU layer in builds without CUDA: every query answers "no GPU" (no devices, host memory,
// unsupported), every call that needs a GPU throws MPI_ERR_OTHER saying why, every release does
// nothing. The one stand-in for the CUDA runtime: nothing else in Ferry fakes CUDA.
#include "gpu/runtime.hpp"

#include <string>

#include "sys/error.hpp"

namespace ferry::gpu {

namespace {
[[noreturn]] void no_cuda(const char* what, Site site) {
  detail::fail(MPI_ERR_OTHER, std::string(site.file) + ":" + std::to_string(site.line) + ": " + what +
                                  ": Ferry was built without CUDA");
}
}  // namespace

// ---- ferry/gpu.hpp
bool available() noexcept { return false; }
int current_device() noexcept { return -1; }
int context_device() noexcept { return -1; }
std::uint64_t device_key(int) noexcept { return 0; }
void set_device(int device) {
  if (device >= 0) no_cuda("set_device", Site::here());
}
Memory memory_of(const void*) { return Memory::host; }
Allocation allocation_of(const void*) { return {Memory::host, nullptr, 0, 0, -1}; }
Allocation where(const void*) { return {Memory::host, nullptr, 0, 0, -1}; }
void settle(const Allocation&) {}
void* alloc_pinned(i64) { no_cuda("alloc_pinned", Site::here()); }
void free_pinned(void*) noexcept {}
void copy(void*, const void*, i64) { no_cuda("copy", Site::here()); }

// ---- gpu/runtime.hpp
void fail_cuda(int, const char* call, Site site) { no_cuda(call, site); }
void check_launch(Stream, Site site) { no_cuda("check_launch", site); }

int device_count() noexcept { return 0; }
const DeviceInfo& device_info(int, Site site) { no_cuda("device_info", site); }
int this_device(Site site) { no_cuda("this_device", site); }
void synchronize_device(Site site) { no_cuda("synchronize_device", site); }
bool can_access_peer(int, int) noexcept { return false; }
void enable_peer_access(int, Site site) { no_cuda("enable_peer_access", site); }
DeviceScope::DeviceScope(int, Site site) : saved_(-1) { no_cuda("DeviceScope", site); }
DeviceScope::~DeviceScope() = default;

void* alloc_device(i64, Site site) { no_cuda("alloc_device", site); }
void free_device(void*) noexcept {}
void register_host(void*, i64, Site site) { no_cuda("register_host", site); }
void unregister_host(void*) noexcept {}

Stream create_stream(int, Site site) { no_cuda("create_stream", site); }
Priorities stream_priorities(Site site) { no_cuda("stream_priorities", site); }
void destroy_stream(Stream) noexcept {}
void sync_stream(Stream, Site site) { no_cuda("sync_stream", site); }
bool stream_idle(Stream, Site site) { no_cuda("stream_idle", site); }
Stream legacy_stream() noexcept { return nullptr; }
void wait_legacy(Site site) { no_cuda("wait_legacy", site); }
Stream internal_stream(Site site) { no_cuda("internal_stream", site); }

Event create_event(bool, Site site) { no_cuda("create_event", site); }
void destroy_event(Event) noexcept {}
void record(Event, Stream, Site site) { no_cuda("record", site); }
void sync_event(Event, Site site) { no_cuda("sync_event", site); }
bool event_idle(Event, Site site) { no_cuda("event_idle", site); }
void stream_wait_event(Stream, Event, Site site) { no_cuda("stream_wait_event", site); }
float elapsed_ms(Event, Event, Site site) { no_cuda("elapsed_ms", site); }
Event create_ipc_event(Site site) { no_cuda("create_ipc_event", site); }
IpcEventHandle ipc_handle(Event, Site site) { no_cuda("ipc_handle", site); }
Event open_ipc_event(const IpcEventHandle&, Site site) { no_cuda("open_ipc_event", site); }

bool ipc_handle(void*, IpcMemHandle*) noexcept { return false; }
IpcOpen open_ipc(const IpcMemHandle&, void**) noexcept { return IpcOpen::failed; }
void close_ipc(void*) noexcept {}

void copy_async(void*, const void*, i64, Stream, Site site) { no_cuda("copy_async", site); }
void copy_h2d_async(void*, const void*, i64, Stream, Site site) { no_cuda("copy_h2d_async", site); }
void copy_d2h_async(void*, const void*, i64, Stream, Site site) { no_cuda("copy_d2h_async", site); }
void copy_d2d_async(void*, const void*, i64, Stream, Site site) { no_cuda("copy_d2d_async", site); }
void copy_peer_async(void*, int, const void*, int, i64, Stream, Site site) {
  no_cuda("copy_peer_async", site);
}

bool memops_64bit(int) noexcept { return false; }
void wait_value32(Stream, const void*, std::uint32_t, Until, Site site) { no_cuda("wait_value32", site); }
void write_value32(Stream, void*, std::uint32_t, Site site) { no_cuda("write_value32", site); }
void wait_value64(Stream, const void*, std::uint64_t, Until, Site site) { no_cuda("wait_value64", site); }
void write_value64(Stream, void*, std::uint64_t, Site site) { no_cuda("write_value64", site); }

void begin_capture(Stream, Site site) { no_cuda("begin_capture", site); }
Graph end_capture(Stream, Site site) { no_cuda("end_capture", site); }
bool capturing(Stream, Site site) { no_cuda("capturing", site); }
GraphExec instantiate(Graph, Site site) { no_cuda("instantiate", site); }
void launch(GraphExec, Stream, Site site) { no_cuda("launch", site); }
void destroy_graph(Graph) noexcept {}
void destroy_graph_exec(GraphExec) noexcept {}

}  // namespace ferry::gpu
