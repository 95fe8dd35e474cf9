// Where a pointer lives, asked of the CUDA driver and cached.
//
// The driver, not the runtime: an application may link its own (static) CUDA runtime, whose
// allocations Ferry's runtime instance would not know; the driver sees every allocation of the
// process. libcuda is opened at run time (the static runtime does the same), so Ferry loads on
// machines without a driver.
//
// The cache keeps a call on a host buffer to a few nanoseconds (the interposer checks every
// buffer of every call): a direct-mapped table of host pages the driver called pageable host
// memory. Only those verdicts are kept. Device memory is asked of the driver every time (its cost
// is small next to any GPU work that follows): a freed device range can be reused by the driver
// for pinned host memory, so a cached device verdict could go stale. A host verdict goes stale
// only if the application unmaps host memory and the driver later maps GPU memory at that
// address; FERRY_POINTER_CACHE=0 turns the cache off for such programs.
#include <ferry/gpu.hpp>

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>

#include "gpu/host_pages.hpp"
#include "gpu/runtime.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::gpu {

namespace {

using GetAttributesFn = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);

GetAttributesFn driver_get_attributes() {
  static const GetAttributesFn fn = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_GLOBAL);
    return lib ? reinterpret_cast<GetAttributesFn>(dlsym(lib, "cuPointerGetAttributes")) : nullptr;
  }();
  return fn;
}

bool cache_enabled() {
  static const bool on = detail::env::flag(detail::env::Knob::pointer_cache);
  return on;
}

}  // namespace

int context_device() noexcept {
  using CtxGetCurrentFn = CUresult (*)(CUcontext*);
  using CtxGetDeviceFn = CUresult (*)(CUdevice*);
  static const auto fns = [] {
    driver_get_attributes();  // opens libcuda
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return std::make_pair(lib ? reinterpret_cast<CtxGetCurrentFn>(dlsym(lib, "cuCtxGetCurrent")) : nullptr,
                          lib ? reinterpret_cast<CtxGetDeviceFn>(dlsym(lib, "cuCtxGetDevice")) : nullptr);
  }();
  CUcontext ctx = nullptr;
  CUdevice dev = -1;
  if (!fns.first || !fns.second || fns.first(&ctx) != CUDA_SUCCESS || !ctx ||
      fns.second(&dev) != CUDA_SUCCESS)
    return -1;
  return static_cast<int>(dev);
}

Allocation allocation_of(const void* p) {
  Allocation a{Memory::host, nullptr, 0, 0, -1};
  GetAttributesFn get = driver_get_attributes();
  if (p == nullptr || !get || !available()) return a;
  unsigned type = 0;
  unsigned managed = 0;  // the driver writes a bool-sized value; a zeroed word reads the same
  CUdeviceptr dev_ptr = 0;
  unsigned long long id = 0;
  int ordinal = -1;
  CUdeviceptr start = 0;
  std::size_t size = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                 CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&type, &managed, &dev_ptr, &id, &ordinal, &start, &size};
  // Unlike cuPointerGetAttribute, this call succeeds on a pointer CUDA does not know (every
  // attribute zero); an error is real (a sticky fault, say) and is reported.
  const CUresult rc = get(7, attrs, data, reinterpret_cast<CUdeviceptr>(p));
  if (rc != CUDA_SUCCESS)
    detail::fail(MPI_ERR_OTHER, "cuPointerGetAttributes failed with CUDA driver error " + std::to_string(rc));
  if (managed) {
    a.kind = Memory::managed;
  } else if (type == CU_MEMORYTYPE_DEVICE) {
    a.kind = Memory::device;
  } else if (type == CU_MEMORYTYPE_HOST) {
    a.kind = dev_ptr ? Memory::pinned_host : Memory::host;
  }
  a.base = reinterpret_cast<void*>(start);
  a.size = static_cast<i64>(size);
  a.id = id;
  a.device = a.kind == Memory::host ? -1 : ordinal;
  return a;
}

void settle(const Allocation& a) {
  if (a.kind != Memory::device && a.kind != Memory::managed) return;
  static std::mutex mutex;
  static std::unordered_set<unsigned long long> seen;
  {
    std::lock_guard lock(mutex);
    if (!seen.insert(a.id).second) return;
    if (seen.size() > 65536) seen.clear();  // ids are never reused: forgetting only costs a repeat
  }
  using SetAttributeFn = CUresult (*)(const void*, CUpointer_attribute, CUdeviceptr);
  static const SetAttributeFn set = [] {
    driver_get_attributes();  // opens libcuda
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return lib ? reinterpret_cast<SetAttributeFn>(dlsym(lib, "cuPointerSetAttribute")) : nullptr;
  }();
  if (set && a.base) {
    unsigned one = 1;
    set(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, reinterpret_cast<CUdeviceptr>(a.base));
  }
  sync_stream(legacy_stream());
}

Allocation where(const void* p) {
  if (p == nullptr || !available()) return {Memory::host, nullptr, 0, 0, -1};
  const bool use_cache = cache_enabled();
  if (use_cache && host_pages::known(p)) return {Memory::host, nullptr, 0, 0, -1};
  const Allocation a = allocation_of(p);
  if (use_cache && a.kind == Memory::host) host_pages::add(p);
  return a;
}

Memory memory_of(const void* p) {
  if (p == nullptr || !available()) return Memory::host;
  const bool use_cache = cache_enabled();
  if (use_cache && host_pages::known(p)) return Memory::host;
  const Allocation a = allocation_of(p);
  if (use_cache && a.kind == Memory::host) host_pages::add(p);
  return a.kind;
}

}  // namespace ferry::gpu
