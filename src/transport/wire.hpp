// The stub protocol's wire: the stub, the private communicator and its tags, sequence numbers,
// type descriptions, and the state the methods share (transport.hpp says what the protocol does).
#pragma once

#include <ferry/transport.hpp>

#include "gpu/runtime.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ferry::transport::wire {

constexpr std::uint32_t kVersion = 4;
// Stub kinds.
constexpr std::uint32_t kIpc = 1;
constexpr std::uint32_t kPipelined = 2;
constexpr std::uint32_t kLocal = 3;
// Stub flags. kDescribed: the sender's type description follows on the private communicator
// (desc_tag), the first time this receiver meets the type.
constexpr std::uint32_t kDescribed = 1;
// kReady: the data was packed into a staging buffer by the sender's stream, which the sender did
// not wait for: the receiver's stream waits for the interprocess event `ready` (Ready) first.
constexpr std::uint32_t kReady = 2;

// The acknowledgement: {kAckDone or kAckNeedData, the receiver's GPU (device_key, 0: host memory)}.
constexpr std::uint64_t kAckDone = 0;      // the receiver has the data
constexpr std::uint64_t kAckNeedData = 1;  // it could not reach the data: send it staged

struct Stub {
  std::uint64_t magic[2];
  std::uint32_t version;
  std::uint32_t kind;
  std::int32_t sender;   // world rank
  std::uint32_t flags;
  std::int64_t bytes;    // packed size of the message
  std::int64_t seq;      // names the acknowledgement, data and description tags
  // ipc: the offset of the data's lowest byte in the sender's allocation; pipelined: bytes per
  // chunk (whole sender elements); local: 0.
  std::int64_t offset;
  std::uint64_t base;    // ipc: the allocation's address in the sender; local: the record's key
  std::uint64_t alloc_id;
  // The sender's layout: 0 when the bytes at `offset` are the packed message (dense data, or
  // packed into a staging buffer); else the key of its type description (Describe).
  std::uint64_t type_key;
  std::int64_t count;    // sender elements (typed ipc); pipelined: sender elements per chunk
  IpcHandle handle;
  std::uint64_t gpu;     // the sender's GPU (ferry::gpu::device_key; 0: host memory)
  std::int64_t ready_slot;      // kReady: the sender's event slot
  gpu::IpcEventHandle ready;    // kReady: that event's handle
};
static_assert(sizeof(Stub) == kStubBytes, "the stub's size is part of the protocol");

// The interprocess events of kReady stubs. A sender records one after packing into a staging
// buffer instead of waiting for the pack; the slot is the message's until its receiver answers
// (the events are never destroyed, so a handle a receiver opened stays valid). A receiver opens
// each sender's slot once and keeps it.
class Ready {
 public:
  // A free slot of the current device, recorded on `s` now; -1 where this process cannot make
  // interprocess events (then the sender waits for `s` itself).
  int record(gpu::Stream s);
  // Marks `stub` as kReady on `slot`'s event.
  void stamp(int slot, Stub* stub);
  void sync(int slot);           // waits on the host for the slot's last record
  void give_back(int slot) noexcept;
  // The receiver's copy of the stub's event; null where it cannot be opened here.
  gpu::Event opened(const Stub& stub);
  // The same for `slot` of world rank `sender`, exported as `handle` (slot's handle()).
  gpu::Event opened(int sender, i64 slot, const gpu::IpcEventHandle& handle);
  gpu::IpcEventHandle handle(int slot);  // the handle of `slot`'s event, for its readers
  // A stream of the current device for the copy after such an event, in turn among a few, so
  // that a pack not done yet holds up only the receives behind it on its own stream.
  gpu::Stream stream();

 private:
  struct Slot;
  struct Impl;
  Impl& impl();
};
Ready& ready();

// The protocol's state, set once by start_protocol().
struct State {
  bool on = false;
  bool passthrough = false;
  bool pull = false;  // FERRY_PULL at every rank
  int rank = 0;
  MPI_Comm ctl = MPI_COMM_NULL;  // the private duplicate of MPI_COMM_WORLD
  std::uint64_t magic[2] = {0, 0};
  int tag_span = 10000;  // tags on ctl cycle in [0, 3 * tag_span)
};
State& state();

inline int ack_tag(i64 seq) { return static_cast<int>(seq % state().tag_span) * 3; }
inline int data_tag(i64 seq) { return ack_tag(seq) + 1; }
inline int desc_tag(i64 seq) { return ack_tag(seq) + 2; }

// The fields every stub has, for a message of `bytes` to world rank `dest_world` from data on
// `device` (-1: host memory); takes the next sequence number for that destination.
void fill(Stub& s, std::uint32_t kind, i64 bytes, int dest_world, int device);
// The stub of `received` from world rank `sender` (magic, version, kind and sender checked).
bool parse(const void* received, int sender, Stub* out);
// Sends the stub in the application's mode, on its communicator and tag.
int post(Mode mode, const Stub& s, int dest, int tag, MPI_Comm comm, MPI_Request* r);

// Type descriptions: a non-dense sender's layout travels once to each receiver (on ctl, after the
// stub that first needs it), which keeps it by (sender, key), so that an IPC receiver can move the
// data from the sender's layout straight into its own in one kernel.
class Describe {
 public:
  // The description of `t` (its canonical tree as a DAG, lower bound and extent) and its key (a
  // hash of the description, never 0); nullopt when it is larger than kMaxBytes (the sender then
  // packs instead).
  struct Text {
    std::uint64_t key = 0;
    std::shared_ptr<const std::vector<char>> bytes;
  };
  std::optional<Text> of(const std::shared_ptr<const Type>& t);
  // True while `dest` may not know the description `key` (the sender sends it along then): until
  // a receiver's acknowledgement confirmed it. (Only the first is not enough: a receiver may take
  // a later stub of the same type before the one that carried the description, and would not
  // know the layout.)
  bool unconfirmed(int dest, std::uint64_t key);
  void confirm(int dest, std::uint64_t key);
  // A receiver's copy: the type `sender` described under `key`, null if not known.
  std::shared_ptr<const Type> known(int sender, std::uint64_t key);
  // Reads a description that arrived and keeps it; MPI_ERR_OTHER for a malformed one.
  std::shared_ptr<const Type> learn(int sender, std::uint64_t key, const std::vector<char>& text);

  static constexpr std::size_t kMaxBytes = 64 << 10;
  // The text format on its own (for tests): write and read back.
  static std::vector<char> write(const Type& t);
  static Type read(const std::vector<char>& text);
  static std::uint64_t key_of(const std::vector<char>& text);
};
Describe& describe();

// The counters of transport.hpp.
struct Stats {
  std::atomic<long> ipc_sent{0}, ipc_received{0}, local{0}, pipelined{0}, batched{0}, batch_waits{0},
      pulled{0};
};
Stats& stats();

// Ferry's own stream on the current device (a rank may switch devices between messages).
gpu::Stream stream();
// Waits for what is queued on `s` after a failure, whatever the wait reports: the failure is what
// the caller reports, and nothing may be released while the GPU still uses it.
void quiesce(gpu::Stream s) noexcept;

}  // namespace ferry::transport::wire
