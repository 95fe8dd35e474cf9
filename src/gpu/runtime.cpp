// The CUDA runtime and driver behind gpu/runtime.hpp and the device, memory and copy calls of
// ferry/gpu.hpp. Pointer queries (which go to the driver): pointers.cpp.
#include "gpu/runtime.hpp"

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "sys/env.hpp"
#include "sys/error.hpp"

// Checks a CUDA runtime call; the error names the call and the site Ferry was called from.
#define FERRY_GPU_CHECK(call, site)                                 \
  do {                                                              \
    const cudaError_t ferry_rc_ = (call);                           \
    if (ferry_rc_ != cudaSuccess) fail_cuda(ferry_rc_, #call, site); \
  } while (0)

namespace ferry::gpu {

static_assert(sizeof(IpcMemHandle) == sizeof(cudaIpcMemHandle_t), "IPC handles are 64 bytes");
static_assert(sizeof(IpcEventHandle) == sizeof(cudaIpcEventHandle_t), "IPC handles are 64 bytes");

namespace {

std::size_t to_size(i64 bytes, Site site) {
  if (bytes < 0) detail::fail(MPI_ERR_ARG, std::string(site.file) + ":" + std::to_string(site.line) +
                                               ": negative size " + std::to_string(bytes));
  return static_cast<std::size_t>(bytes);
}

// One event per thread and device, to wait for a copy of this thread's (never destroyed: a
// thread's events live as long as the process, a few per thread).
cudaEvent_t copy_event(int device, Site site) {
  thread_local std::map<int, cudaEvent_t> events;
  cudaEvent_t& e = events[device];
  if (!e) FERRY_GPU_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), site);
  return e;
}

// A driver entry point, found through the runtime (the right version of a symbol whose name
// changed across CUDA versions, e.g. cuStreamWaitValue32_v2); null where the driver lacks it.
void* driver_entry(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return fn;
}

template <class Fn>
Fn driver_fn(const char* symbol, Site site) {
  auto fn = reinterpret_cast<Fn>(driver_entry(symbol));
  if (!fn) detail::fail(MPI_ERR_OTHER, std::string(site.file) + ":" + std::to_string(site.line) +
                                           ": the CUDA driver has no " + symbol);
  return fn;
}

void check_driver(CUresult rc, const char* call, Site site) {
  if (rc == CUDA_SUCCESS) return;
  detail::fail(MPI_ERR_OTHER, std::string(site.file) + ":" + std::to_string(site.line) + ": " + call +
                                  ": CUDA driver error " + std::to_string(static_cast<int>(rc)));
}

}  // namespace

// ---- Errors

void fail_cuda(int cuda_error, const char* call, Site site) {
  detail::fail(MPI_ERR_OTHER, std::string(site.file) + ":" + std::to_string(site.line) + ": " + call +
                                  ": " + cudaGetErrorString(static_cast<cudaError_t>(cuda_error)));
}

void check_launch(Stream stream, Site site) {
  FERRY_GPU_CHECK(cudaGetLastError(), site);
  // A stream being captured into a graph cannot be synchronized: debug mode checks at replay.
  if (detail::env::debug_sync()) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    FERRY_GPU_CHECK(cudaStreamIsCapturing(stream, &status), site);
    if (status == cudaStreamCaptureStatusNone) FERRY_GPU_CHECK(cudaStreamSynchronize(stream), site);
  }
}

// ---- Devices

bool available() noexcept { return device_count() > 0; }

int device_count() noexcept {
  static const int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  }();
  return n;
}

const DeviceInfo& device_info(int device, Site site) {
  constexpr int kMaxDevices = 64;
  static DeviceInfo infos[kMaxDevices];
  static std::once_flag once[kMaxDevices];
  if (device < 0 || device >= kMaxDevices || device >= device_count())
    detail::fail(MPI_ERR_OTHER, std::string(site.file) + ":" + std::to_string(site.line) +
                                    ": no CUDA device " + std::to_string(device));
  std::call_once(once[device], [device, site] {
    cudaDeviceProp prop{};
    FERRY_GPU_CHECK(cudaGetDeviceProperties(&prop, device), site);
    DeviceInfo& d = infos[device];
    d.ordinal = device;
    d.sms = prop.multiProcessorCount;
    d.major = prop.major;
    d.minor = prop.minor;
    d.memory = static_cast<i64>(prop.totalGlobalMem);
    std::memcpy(d.uuid.data(), prop.uuid.bytes, d.uuid.size());
    std::uint64_t h = 0xCBF29CE484222325ULL;  // FNV-1a over the 16 bytes
    for (unsigned char b : d.uuid) h = (h ^ b) * 0x100000001B3ULL;
    d.key = h ? h : 1;
    d.name = prop.name;
  });
  return infos[device];
}

std::uint64_t device_key(int device) noexcept {
  if (device < 0 || !available()) return 0;
  try {
    return device_info(device).key;
  } catch (const Error&) {
    return 0;  // an ordinal CUDA does not know: no GPU to name
  }
}

int current_device() noexcept {
  int d = -1;
  if (!available() || cudaGetDevice(&d) != cudaSuccess) return -1;
  return d;
}

int this_device(Site site) {
  int d = 0;
  FERRY_GPU_CHECK(cudaGetDevice(&d), site);
  return d;
}

void set_device(int device) {
  if (device >= 0) FERRY_GPU_CHECK(cudaSetDevice(device), Site::here());
}

void synchronize_device(Site site) { FERRY_GPU_CHECK(cudaDeviceSynchronize(), site); }

bool can_access_peer(int device, int peer) noexcept {
  int ok = 0;
  if (cudaDeviceCanAccessPeer(&ok, device, peer) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return ok != 0;
}

void enable_peer_access(int peer, Site site) {
  const cudaError_t rc = cudaDeviceEnablePeerAccess(peer, 0);
  if (rc == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return;
  }
  FERRY_GPU_CHECK(rc, site);
}

DeviceScope::DeviceScope(int device, Site site) : saved_(this_device(site)) {
  if (device != saved_) FERRY_GPU_CHECK(cudaSetDevice(device), site);
}
DeviceScope::~DeviceScope() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != saved_) cudaSetDevice(saved_);
}

// ---- Memory

void* alloc_device(i64 bytes, Site site) {
  void* p = nullptr;
  const std::size_t n = to_size(bytes, site);
  FERRY_GPU_CHECK(cudaMalloc(&p, n > 0 ? n : 1), site);
  return p;
}

void free_device(void* p) noexcept {
  if (p) cudaFree(p);
}

void* alloc_pinned(i64 bytes) {
  if (bytes < 0) detail::fail(MPI_ERR_ARG, "negative allocation size");
  void* p = nullptr;
  FERRY_GPU_CHECK(cudaHostAlloc(&p, static_cast<std::size_t>(bytes > 0 ? bytes : 1),
                                cudaHostAllocMapped | cudaHostAllocPortable),
                  Site::here());
  return p;
}

void free_pinned(void* p) noexcept {
  if (p) cudaFreeHost(p);
}

void register_host(void* p, i64 bytes, Site site) {
  FERRY_GPU_CHECK(cudaHostRegister(p, to_size(bytes, site), cudaHostRegisterPortable | cudaHostRegisterMapped),
                  site);
}

void unregister_host(void* p) noexcept {
  if (p && cudaHostUnregister(p) != cudaSuccess) cudaGetLastError();
}

// ---- Streams

Stream create_stream(int priority, Site site) {
  cudaStream_t s = nullptr;
  if (priority == 0) {
    FERRY_GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), site);
  } else {
    FERRY_GPU_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority), site);
  }
  return s;
}

Priorities stream_priorities(Site site) {
  Priorities p;
  FERRY_GPU_CHECK(cudaDeviceGetStreamPriorityRange(&p.least, &p.greatest), site);
  return p;
}

void destroy_stream(Stream stream) noexcept {
  if (stream) cudaStreamDestroy(stream);
}

void sync_stream(Stream stream, Site site) { FERRY_GPU_CHECK(cudaStreamSynchronize(stream), site); }

bool stream_idle(Stream stream, Site site) {
  const cudaError_t rc = cudaStreamQuery(stream);
  if (rc == cudaErrorNotReady) return false;
  FERRY_GPU_CHECK(rc, site);
  return true;
}

Stream legacy_stream() noexcept { return cudaStreamLegacy; }

Stream internal_stream(Site site) {
  static std::mutex mutex;
  static std::map<int, cudaStream_t> streams;
  const int device = this_device(site);
  std::lock_guard lock(mutex);
  cudaStream_t& s = streams[device];
  if (!s) s = create_stream(0, site);
  return s;
}

// ---- Events

Event create_event(bool timing, Site site) {
  cudaEvent_t e = nullptr;
  FERRY_GPU_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming), site);
  return e;
}

void destroy_event(Event event) noexcept {
  if (event) cudaEventDestroy(event);
}

void record(Event event, Stream stream, Site site) { FERRY_GPU_CHECK(cudaEventRecord(event, stream), site); }

void sync_event(Event event, Site site) { FERRY_GPU_CHECK(cudaEventSynchronize(event), site); }

bool event_idle(Event event, Site site) {
  const cudaError_t rc = cudaEventQuery(event);
  if (rc == cudaErrorNotReady) return false;
  FERRY_GPU_CHECK(rc, site);
  return true;
}

void stream_wait_event(Stream stream, Event event, Site site) {
  FERRY_GPU_CHECK(cudaStreamWaitEvent(stream, event, 0), site);
}

float elapsed_ms(Event start, Event end, Site site) {
  float ms = 0;
  FERRY_GPU_CHECK(cudaEventElapsedTime(&ms, start, end), site);
  return ms;
}

Event create_ipc_event(Site site) {
  cudaEvent_t e = nullptr;
  FERRY_GPU_CHECK(cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming), site);
  return e;
}

IpcEventHandle ipc_handle(Event event, Site site) {
  cudaIpcEventHandle_t h{};
  FERRY_GPU_CHECK(cudaIpcGetEventHandle(&h, event), site);
  IpcEventHandle out{};
  std::memcpy(out.bytes, &h, sizeof out.bytes);
  return out;
}

Event open_ipc_event(const IpcEventHandle& handle, Site site) {
  cudaIpcEventHandle_t h{};
  std::memcpy(&h, handle.bytes, sizeof h);
  cudaEvent_t e = nullptr;
  FERRY_GPU_CHECK(cudaIpcOpenEventHandle(&e, h), site);
  return e;
}

// ---- IPC memory

bool ipc_handle(void* base, IpcMemHandle* out) noexcept {
  cudaIpcMemHandle_t h{};
  if (!available() || cudaIpcGetMemHandle(&h, base) != cudaSuccess) {
    cudaGetLastError();  // not IPC-capable (VMM or stream-ordered pool memory): stage instead
    return false;
  }
  std::memcpy(out->bytes, &h, sizeof out->bytes);
  return true;
}

IpcOpen open_ipc(const IpcMemHandle& handle, void** mapped) noexcept {
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle.bytes, sizeof h);
  void* p = nullptr;
  const cudaError_t rc = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
  if (rc == cudaSuccess) {
    *mapped = p;
    return IpcOpen::ok;
  }
  cudaGetLastError();
  if (detail::env::halo_verbose() || detail::env::flag(detail::env::Knob::mpi_verbose))
    std::fprintf(stderr, "ferry: cudaIpcOpenMemHandle: %s (%s): the message is staged instead\n",
                 cudaGetErrorName(rc), cudaGetErrorString(rc));
  return rc == cudaErrorAlreadyMapped ? IpcOpen::already_mapped : IpcOpen::failed;
}

void close_ipc(void* mapped) noexcept {
  if (mapped && cudaIpcCloseMemHandle(mapped) != cudaSuccess) cudaGetLastError();
}

// ---- Copies

void copy(void* dst, const void* src, i64 bytes) {
  const Site site = Site::here();
  if (to_size(bytes, site) == 0) return;
  // As cudaMemcpy, ordered on the legacy default stream, but waited for whole (a cudaMemcpy from
  // pageable memory may return before its DMA lands), and faster for small copies on the GPU
  // machines (8 B H2D: 5.9 against 6.1 µs). An event after the copy, not a synchronize of the
  // stream, so work other threads queue there meanwhile is not waited for.
  FERRY_GPU_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(bytes), cudaMemcpyDefault,
                                  cudaStreamLegacy),
                  site);
  const cudaEvent_t done = copy_event(this_device(site), site);
  FERRY_GPU_CHECK(cudaEventRecord(done, cudaStreamLegacy), site);
  FERRY_GPU_CHECK(cudaEventSynchronize(done), site);
}

void wait_legacy(Site site) {
  const cudaEvent_t done = copy_event(this_device(site), site);
  FERRY_GPU_CHECK(cudaEventRecord(done, cudaStreamLegacy), site);
  FERRY_GPU_CHECK(cudaEventSynchronize(done), site);
}

void copy_async(void* dst, const void* src, i64 bytes, Stream stream, Site site) {
  FERRY_GPU_CHECK(cudaMemcpyAsync(dst, src, to_size(bytes, site), cudaMemcpyDefault, stream), site);
}
void copy_h2d_async(void* dst, const void* src, i64 bytes, Stream stream, Site site) {
  FERRY_GPU_CHECK(cudaMemcpyAsync(dst, src, to_size(bytes, site), cudaMemcpyHostToDevice, stream), site);
}
void copy_d2h_async(void* dst, const void* src, i64 bytes, Stream stream, Site site) {
  FERRY_GPU_CHECK(cudaMemcpyAsync(dst, src, to_size(bytes, site), cudaMemcpyDeviceToHost, stream), site);
}
void copy_d2d_async(void* dst, const void* src, i64 bytes, Stream stream, Site site) {
  FERRY_GPU_CHECK(cudaMemcpyAsync(dst, src, to_size(bytes, site), cudaMemcpyDeviceToDevice, stream), site);
}
void copy_peer_async(void* dst, int dst_device, const void* src, int src_device, i64 bytes,
                     Stream stream, Site site) {
  FERRY_GPU_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, to_size(bytes, site), stream),
                  site);
}

// ---- Stream memory operations (driver API, versioned entry points)

bool memops_64bit(int device) noexcept {
  using GetAttr = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  using GetDevice = CUresult (*)(CUdevice*, int);
  static const auto get_attr = reinterpret_cast<GetAttr>(driver_entry("cuDeviceGetAttribute"));
  static const auto get_device = reinterpret_cast<GetDevice>(driver_entry("cuDeviceGet"));
  CUdevice dev = 0;
  int v = 0;
  return get_attr && get_device && device >= 0 && get_device(&dev, device) == CUDA_SUCCESS &&
         get_attr(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev) == CUDA_SUCCESS && v != 0;
}

namespace {
unsigned wait_flags(Until until) {
  switch (until) {
    case Until::eq: return CU_STREAM_WAIT_VALUE_EQ;
    case Until::and_: return CU_STREAM_WAIT_VALUE_AND;
    case Until::geq: break;
  }
  return CU_STREAM_WAIT_VALUE_GEQ;
}
CUdeviceptr dev_ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }
}  // namespace

void wait_value32(Stream stream, const void* flag, std::uint32_t value, Until until, Site site) {
  using Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
  static const Fn fn = driver_fn<Fn>("cuStreamWaitValue32", site);
  check_driver(fn(stream, dev_ptr(flag), value, wait_flags(until)), "cuStreamWaitValue32", site);
}
void write_value32(Stream stream, void* flag, std::uint32_t value, Site site) {
  using Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
  static const Fn fn = driver_fn<Fn>("cuStreamWriteValue32", site);
  check_driver(fn(stream, dev_ptr(flag), value, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32", site);
}
void wait_value64(Stream stream, const void* flag, std::uint64_t value, Until until, Site site) {
  using Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);
  static const Fn fn = driver_fn<Fn>("cuStreamWaitValue64", site);
  check_driver(fn(stream, dev_ptr(flag), value, wait_flags(until)), "cuStreamWaitValue64", site);
}
void write_value64(Stream stream, void* flag, std::uint64_t value, Site site) {
  using Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned);
  static const Fn fn = driver_fn<Fn>("cuStreamWriteValue64", site);
  check_driver(fn(stream, dev_ptr(flag), value, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue64", site);
}

// ---- Graphs

void begin_capture(Stream stream, Site site) {
  FERRY_GPU_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), site);
}

Graph end_capture(Stream stream, Site site) {
  cudaGraph_t g = nullptr;
  FERRY_GPU_CHECK(cudaStreamEndCapture(stream, &g), site);
  return g;
}

bool capturing(Stream stream, Site site) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  FERRY_GPU_CHECK(cudaStreamIsCapturing(stream, &status), site);
  return status == cudaStreamCaptureStatusActive;
}

GraphExec instantiate(Graph graph, Site site) {
  cudaGraphExec_t exec = nullptr;
  FERRY_GPU_CHECK(cudaGraphInstantiate(&exec, graph, 0), site);
  return exec;
}

void launch(GraphExec exec, Stream stream, Site site) { FERRY_GPU_CHECK(cudaGraphLaunch(exec, stream), site); }

void destroy_graph(Graph graph) noexcept {
  if (graph) cudaGraphDestroy(graph);
}
void destroy_graph_exec(GraphExec exec) noexcept {
  if (exec) cudaGraphExecDestroy(exec);
}

}  // namespace ferry::gpu
