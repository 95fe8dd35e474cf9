// Where a pointer lives, asked of the CUDA driver and cached.
//
// The driver, not the runtime: an application may link its own (static) CUDA runtime, whose
// allocations Ferry's runtime instance would not know; the driver sees every allocation of the
// process. libcuda is opened at run time (the static runtime does the same), so Ferry loads on
// machines without a driver.
//
// The cache keeps a ferry call on a host buffer to a few nanoseconds (the interposer checks every
// buffer): a direct-mapped table of host pages the driver called host, and an ordered map of the
// device allocations it has seen, with their extent. A host page cannot become device memory
// (device and managed allocations come from the driver's own reserved address range), so host
// verdicts stay true; a device range that is freed stays GPU memory in the cache until the address
// is allocated again, which the allocation id (`Allocation::id`) tells callers that need to know
// (the IPC handle caches). FERRY_POINTER_CACHE=0 turns the cache off.
#include <ferry/gpu.hpp>

#include <cuda.h>
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>

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
  static const bool on = [] {
    const char* e = std::getenv("FERRY_POINTER_CACHE");
    return !(e && e[0] == '0');
  }();
  return on;
}

constexpr int kPageBits = 12;
constexpr std::size_t kHostSlots = 4096;

class PointerCache {
 public:
  bool host_page(std::uintptr_t a) const {
    const std::uintptr_t page = a >> kPageBits;
    return host_[page % kHostSlots].load(std::memory_order_relaxed) == page + 1;
  }
  void add_host_page(std::uintptr_t a) {
    const std::uintptr_t page = a >> kPageBits;
    host_[page % kHostSlots].store(page + 1, std::memory_order_relaxed);
  }
  bool device(std::uintptr_t a, Memory* kind) const {
    std::shared_lock lock(mutex_);
    auto it = ranges_.upper_bound(a);
    if (it == ranges_.begin()) return false;
    --it;
    if (a >= it->second.end) return false;
    *kind = it->second.kind;
    return true;
  }
  void add_device(std::uintptr_t start, std::uintptr_t end, Memory kind) {
    std::unique_lock lock(mutex_);
    // A new allocation replaces every stale range it overlaps.
    auto it = ranges_.lower_bound(start);
    if (it != ranges_.begin() && std::prev(it)->second.end > start) --it;
    while (it != ranges_.end() && it->first < end) it = ranges_.erase(it);
    ranges_.emplace(start, Range{end, kind});
  }

 private:
  struct Range {
    std::uintptr_t end;
    Memory kind;
  };
  std::array<std::atomic<std::uintptr_t>, kHostSlots> host_{};
  mutable std::shared_mutex mutex_;
  std::map<std::uintptr_t, Range> ranges_;
};

PointerCache& cache() {
  static auto* c = new PointerCache();
  return *c;
}

}  // namespace

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

Memory memory_of(const void* p) {
  if (p == nullptr || !available()) return Memory::host;
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const bool use_cache = cache_enabled();
  Memory kind;
  if (use_cache) {
    if (cache().host_page(addr)) return Memory::host;
    if (cache().device(addr, &kind)) return kind;
  }
  const Allocation a = allocation_of(p);
  if (use_cache) {
    if (a.kind == Memory::host) {
      cache().add_host_page(addr);
    } else if ((a.kind == Memory::device || a.kind == Memory::managed) && a.base && a.size > 0) {
      const auto start = reinterpret_cast<std::uintptr_t>(a.base);
      cache().add_device(start, start + static_cast<std::uintptr_t>(a.size), a.kind);
    }
  }
  return a.kind;
}

}  // namespace ferry::gpu
