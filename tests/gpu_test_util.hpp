// tests/gpu_test_util.hpp — what the GPU engine's tests share: device buffers, uploads and
// downloads, and the MPI error class a call throws.
#pragma once

#include <cuda_runtime.h>
#include <ferry/error.hpp>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

namespace ferry_test {

// Device memory of at least one byte for one scope.
struct Device {
  char* p = nullptr;
  explicit Device(std::int64_t n) {
    cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(n, 1)));
  }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
};
// Its memory as elements of T.
template <class T>
T* as(const Device& d) {
  return reinterpret_cast<T*>(d.p);
}

// cudaMemcpy from pageable memory may return before its DMA lands, and the work that follows
// runs on non-blocking streams that do not wait for it: wait for the device before going on.
inline cudaError_t upload(void* dst, const void* src, std::size_t n) {
  const cudaError_t e = cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice);
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

inline std::vector<char> download(const char* p, std::int64_t n) {
  std::vector<char> h(static_cast<std::size_t>(n));
  cudaMemcpy(h.data(), p, h.size(), cudaMemcpyDeviceToHost);
  return h;
}

// The MPI error class of the ferry::Error that f throws; MPI_SUCCESS when it throws none.
inline int error_class(const std::function<void()>& f) {
  try {
    f();
  } catch (const ferry::Error& e) {
    return e.mpi_error_class();
  }
  return MPI_SUCCESS;
}

}  // namespace ferry_test
