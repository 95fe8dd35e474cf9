// halo/device.hpp — the GPU backend's state: per GPU a stream (high priority), the fused pack and
// unpack batches and their graphs; per message its buffers, events, MPI requests and, for IPC,
// the neighbour's buffer and flags mapped here. device.cpp runs exchanges on it; device_setup.cpp
// builds it (buffers, IPC handshake, batches).
#pragma once

#include <ferry/gpu.hpp>
#include <ferry/transport.hpp>

#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "gpu/runtime.hpp"
#include "halo/plan.hpp"

namespace ferry::halo::detail {

// Flag words of the IPC handshake, 32-bit (stream memory operations of that width work on every
// GPU), 64 bytes apart so the writer of one and the poller of the other share no cache line.
constexpr i64 kFlagBytes = 64;

struct DeviceBackendState {
  struct Dev {
    int device = -1;
    gpu::Stream stream = nullptr;    // Ferry's own (high-priority) stream on this GPU
    gpu::Stream run = nullptr;       // where this exchange runs: `stream`, or the user's (direct)
    gpu::Event user = nullptr;       // the user's stream reached start()
    gpu::Event packed = nullptr;     // this GPU's pack launch is done
    gpu::Event done = nullptr;       // this GPU's part of the exchange is done
    std::vector<gpu::Batch> pack, unpack;  // one each when fused, else one per move
    // IPC flags this GPU's stream handles: as sender (the receivers' flags, mapped here) before
    // and after its pack; as receiver (its own flags) before and after its unpack.
    std::vector<std::uint32_t*> send_freed, send_ready, recv_ready, recv_freed;
    gpu::GraphExec start_graph = nullptr, finish_graph = nullptr;
    bool needs_upload = false;  // slots changed (swap) since the last upload
  };
  struct End {
    Message* msg = nullptr;
    int home = -1;               // index into devs: the GPU whose memory holds the buffer
    std::vector<int> devs;       // GPUs with pieces in this message (indices into devs)
    char* host = nullptr;        // pinned host buffer (staged, pipelined)
    char* dev = nullptr;         // device buffer (pipelined, mpi; ipc receive buffer)
    char* remote = nullptr;      // ipc send: the receiver's buffer mapped here
    std::uint32_t* ready = nullptr;  // ipc: the receiver's flags (mapped here on the sender)
    std::uint32_t* freed = nullptr;
    std::vector<MPI_Request> reqs;
    std::vector<gpu::Event> part_events;  // pipelined: each part's D2H / H2D copy
    std::vector<char> posted;             // send: part handed to MPI; receive: part arrived
    bool done = false;
    transport::IpcCache::Lease lease, flag_lease;
  };
  // The Copies from one GPU to another of this process (the peer path): packed into one buffer
  // on the source GPU, moved by one copy between GPUs, unpacked from one buffer on the
  // destination. One copy per pair of GPUs, not per region: each copy costs microseconds.
  struct PeerCopy {
    std::vector<std::pair<Copy*, i64>> parts;  // (copy, offset in the buffers)
    i64 bytes = 0;
    int src = -1, dst = -1;  // indices into devs
    char* src_buf = nullptr;
    char* dst_buf = nullptr;
    gpu::Event copied = nullptr;
  };

  std::vector<Dev> devs;
  std::map<int, int> dev_index;          // CUDA ordinal -> index into devs
  std::vector<int> sub_dev;              // local subdomain -> index into devs
  std::vector<End> out, in;
  std::vector<PeerCopy> peers;
  std::deque<Type> paired;               // the interleaved types of paired local copies (stable)
  std::vector<void*> device_allocs;      // (device, pointer) freed at the end
  std::vector<int> device_alloc_dev;
  std::vector<void*> pinned_allocs;
  std::vector<std::uint32_t*> flag_blocks;
  bool graphs = false;
  bool fused = true;
  // One GPU and Options::priority_stream off: the exchange runs on the user's stream itself, with
  // no event handed between streams (two fewer calls each way on the latency path).
  bool direct = false;
  bool need_packed = false;  // some message waits on the pack events (staged, mpi sends)
};

// device_setup.cpp: streams, buffers, the IPC exchange (falling back to staging where a mapping
// fails), batches and graphs.
void setup_devices(Plan::Impl& p, DeviceBackendState& s);
void release_devices(DeviceBackendState& s) noexcept;
// The slot of (local subdomain, field) in every batch's pointer table.
inline int slot_of(const Plan::Impl& p, int sub, int field) {
  return sub * static_cast<int>(p.fields[0].size()) + field;
}
// Enqueues one GPU's start or finish work on its stream (what a graph captures).
void enqueue_start(DeviceBackendState& s, DeviceBackendState::Dev& d);
void enqueue_finish(DeviceBackendState& s, DeviceBackendState::Dev& d);

}  // namespace ferry::halo::detail
