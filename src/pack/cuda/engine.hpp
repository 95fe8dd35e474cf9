// pack/cuda/engine.hpp — what the CUDA backend's translation units share (gpu.cu: single calls;
// batch.cu: batches and copies): checked CUDA calls, device facts, per-type plans with their
// device tables, argument checks.
#pragma once

#include <ferry/gpu.hpp>

#include <memory>
#include <string>

#include "gpu/runtime.hpp"
#include "pack/cuda/tuning.hpp"
#include "pack/plan_build.hpp"
#include "sys/error.hpp"

namespace ferry::gpu::impl {

// A device's multiprocessors and the launch shape of its architecture (the tuning table, or the
// FERRY_GPU_THREADS / FERRY_GPU_BLOCKS_PER_SM overrides).
struct LaunchInfo {
  int sms = 0;
  detail::LaunchPolicy policy{};
};
const LaunchInfo& launch_info(int device);

// Device memory released when its owner goes.
struct DeviceFree {
  void operator()(void* p) const { free_device(p); }
};
using DeviceBytes = std::unique_ptr<void, DeviceFree>;
// Device memory and a synchronous copy into it; null for 0 bytes.
DeviceBytes upload(const void* host, std::size_t bytes);

// The plan of `count` elements of `type`, with the type's device tables (general forms) bound.
// Throws Error(MPI_ERR_TYPE) for types the GPU engine cannot plan.
detail::PlanHead plan_for(const Type& type, i64 count, int device);

// The same plan with the tables bound to their host copies (for planning on the host; the copies
// live as long as the type).
detail::PlanHead host_plan_for(const Type& type, i64 count, int device);

// A general form's pack or unpack (pieces.cu), or a copy of which one side at least is a general
// form, as one launch of the lean batch kernel with one move per piece, when the pieces fit it
// (batch_plan.hpp, piece_moves); false, with nothing queued, otherwise. Arguments already checked.
bool run_pieces(bool pack, const Type& type, i64 count, char* mem, char* pk, int device, Stream stream);
bool copy_pieces(const Type& stype, i64 scount, const char* src, const Type& dtype, i64 dcount,
                 char* dst, int device, Stream stream);
// Launches made that way so far (tests: the path is taken where it should be).
long piece_launches();
// Launches of copy_many_async's multi-copy kernel so far (tests).
long copies_launches();

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
              Stream stream);

// Grid size for `words` words with the engine's launch policy.
i64 blocks_for(i64 words, const LaunchInfo& info);

}  // namespace ferry::gpu::impl
