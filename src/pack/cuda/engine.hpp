// pack/cuda/engine.hpp — what the CUDA backend's translation units share (gpu.cu: single calls;
// batch.cu: batches and copies): checked CUDA calls, device facts, per-type plans with their
// device tables, argument checks.
#pragma once

#include <ferry/gpu.hpp>

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "pack/cuda/tuning.hpp"
#include "pack/plan_build.hpp"
#include "sys/error.hpp"

#define FERRY_CUDA_CHECK(call)                                                              \
  do {                                                                                      \
    cudaError_t ferry_err_ = (call);                                                        \
    if (ferry_err_ != cudaSuccess)                                                          \
      ::ferry::detail::fail(MPI_ERR_OTHER, std::string(__FILE__ ":") +                      \
                                               std::to_string(__LINE__) + ": " #call ": " + \
                                               cudaGetErrorString(ferry_err_));             \
  } while (0)

namespace ferry::gpu::impl {

struct DeviceInfo {
  int sms = 0;
  detail::LaunchPolicy policy{};
  std::uint64_t key = 0;  // device_key: a hash of the UUID
};

const DeviceInfo& device_info(int device);
int this_device();

// Device memory released when its owner goes.
struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBytes = std::unique_ptr<void, DeviceFree>;
// cudaMalloc + a synchronous copy; null for 0 bytes.
DeviceBytes upload(const void* host, std::size_t bytes);

// The plan of `count` elements of `type`, with the type's device tables (general forms) bound.
// Throws Error(MPI_ERR_TYPE) for types the GPU engine cannot plan.
detail::PlanHead plan_for(const Type& type, i64 count, int device);

// After a launch: its error, and with FERRY_DEBUG_SYNC=1 a synchronize (skipped while the stream
// is being captured into a graph, where it is not allowed).
void check_launch(cudaStream_t stream);

// The first byte `count` elements of `type` at `origin` touch (the origin itself may lie outside
// any allocation, or be null for MPI_BOTTOM).
inline const void* first_byte(const void* origin, i64 count, const Type& type) {
  return static_cast<const char*>(origin) + type.data_lb(count);
}

// MPI_ERR_BUFFER unless the GPU can reach the memory at p; `what` names the buffer.
void check_reachable(const void* p, const char* what);

// Packs (pack) or unpacks `hp` between mem and pk on the stream: one cudaMemcpyAsync for a
// contiguous plan, else one single-call kernel. Arguments already checked.
void run_plan(bool pack, detail::PlanHead hp, char* mem, char* pk, int device,
              cudaStream_t stream);

// Grid size for `words` words with the engine's launch policy.
i64 blocks_for(i64 words, const DeviceInfo& info);

}  // namespace ferry::gpu::impl
