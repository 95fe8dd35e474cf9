// The pools of transport.hpp: power-of-two classes of pinned host and device memory.
#include <ferry/transport.hpp>

#include <cstdlib>

#include "gpu/runtime.hpp"
#include "sys/error.hpp"

namespace ferry::transport {

Pool::Pool(Alloc alloc, Free free) : alloc_(std::move(alloc)), free_(std::move(free)) {}

i64 Pool::size_class(i64 bytes) {
  i64 size = 4096;
  while (size < bytes) size *= 2;
  return size;
}

void* Pool::get(i64 bytes) {
  if (bytes < 0) detail::fail(MPI_ERR_ARG, "pool: negative size " + std::to_string(bytes));
  if (bytes > (i64{1} << 46)) detail::fail(MPI_ERR_NO_MEM, "pool: " + std::to_string(bytes) + " bytes");
  const i64 size = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    auto it = free_list_.find(size);
    if (it != free_list_.end()) {
      void* p = it->second;
      free_list_.erase(it);
      return p;
    }
  }
  void* p = alloc_(size);
  std::lock_guard lock(mutex_);
  sizes_[p] = size;
  return p;
}

bool Pool::put(void* p) noexcept {
  if (!p) return true;
  std::lock_guard lock(mutex_);
  auto it = sizes_.find(p);
  if (it == sizes_.end()) return false;
  try {
    free_list_.emplace(it->second, p);
  } catch (...) {  // no memory to keep it: free it instead
    free_(p);
    sizes_.erase(it);
  }
  return true;
}

void Pool::release_all() noexcept {
  std::lock_guard lock(mutex_);
  for (auto& [p, size] : sizes_) free_(p);
  sizes_.clear();
  free_list_.clear();
}

i64 Pool::held() const {
  std::lock_guard lock(mutex_);
  i64 n = 0;
  for (auto& [p, size] : sizes_) n += size;
  return n;
}

Pool& pinned_pool() {
  // Pinned and mapped, so the GPU engine packs straight into it; without a GPU (the host protocol
  // test) plain memory serves.
  static auto* p = new Pool(
      [](i64 size) {
        void* q = gpu::available() ? gpu::alloc_pinned(size) : std::malloc(static_cast<std::size_t>(size));
        if (!q) detail::fail(MPI_ERR_NO_MEM, "staging buffer of " + std::to_string(size) + " bytes");
        return q;
      },
      [](void* q) {
        if (gpu::available()) {
          gpu::free_pinned(q);
        } else {
          std::free(q);
        }
      });
  return *p;
}

Pool& device_pool(int device) {
  constexpr int kMaxDevices = 64;
  static std::mutex mutex;
  static Pool* pools[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices || device >= gpu::device_count())
    detail::fail(MPI_ERR_OTHER, "no CUDA device " + std::to_string(device) + " for a device pool");
  std::lock_guard lock(mutex);
  Pool*& p = pools[device];
  if (!p) {
    p = new Pool(
        [device](i64 size) {
          gpu::DeviceScope on(device);
          return gpu::alloc_device(size);
        },
        [device](void* q) {
          try {
            gpu::DeviceScope on(device);
            gpu::free_device(q);
          } catch (...) {  // the device cannot be made current (a fault): the memory goes with the context
          }
        });
  }
  return *p;
}

}  // namespace ferry::transport
