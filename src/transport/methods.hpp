// What the transport's method files share: the method decisions (route.cpp), staging through
// pinned and device memory (stage.cpp), and the sends to this process in flight (send.cpp,
// receive.cpp).
#pragma once

#include <ferry/transport.hpp>

#include <memory>

namespace ferry::transport::methods {

// At start_protocol: the model, FERRY_METHOD / FERRY_PACK / the thresholds, the chunk override.
void init();
// The pipelined chunk of route `r` in bytes (whole elements of its type).
i64 chunk_of(const Route& r);
// Staging through device memory (pack there, then one copy; or one copy, then unpack there)
// rather than one-shot over the bus, for `bytes` of blocks of `block` bytes, as the model's
// surfaces (or FERRY_PACK) say.
model::Pack pack_for(i64 bytes, i64 block, model::Direction dir);
// Average contiguous block of a type (the model's second axis).
i64 block_of(const Type& t);

// Waits for Ferry's work queued on the legacy default stream (an event after it, not the stream:
// work other threads queue there meanwhile is not waited for).
void wait_legacy();

// `take` bytes of packed data at `src` (GPU memory: this process's, or a peer's mapped over IPC)
// into the target; a partial last element last. Waits for the GPU.
void deliver_packed(const char* src, i64 take, const Target& to);

// A send of this process to itself (the local method): what the receiver reads.
struct LocalSend {
  const void* origin = nullptr;
  i64 count = 0;
  std::shared_ptr<const Type> type;
  int device = -1;
};
// Registered under the stub's sequence number until the receiver takes it (or the send ends).
void local_put(i64 key, std::shared_ptr<const LocalSend> s);
std::shared_ptr<const LocalSend> local_find(i64 key);
void local_drop(i64 key);

}  // namespace ferry::transport::methods
