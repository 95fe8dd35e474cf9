// Staging (transport.hpp): GPU data packed into pinned host memory for the MPI, and packed bytes
// unpacked into a receive's target; copies left to the legacy stream under FERRY_ASYNC_RECV.
//
// Staging runs on the legacy default stream, as the application's cudaMemcpy would: it is ordered
// after the application's work there (and on blocking streams), so it needs no settle(). Each wait
// is for an event recorded after Ferry's own work, not for the stream, so work other threads queue
// there meanwhile is not waited for.
#include <ferry/pack.hpp>
#include <ferry/transport.hpp>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "gpu/runtime.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"
#include "transport/methods.hpp"
#include "transport/wire.hpp"

namespace ferry::transport {

void methods::wait_legacy() { gpu::wait_legacy(); }

namespace {

using methods::wait_legacy;

// A pinned pool buffer for one scope.
struct Pinned {
  void* p;
  explicit Pinned(i64 bytes) : p(pinned_pool().get(bytes)) {}
  ~Pinned() { pinned_pool().put(p); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
};

// Pinned buffers whose copies are queued on a device's legacy stream: they go back to the pool once
// an event recorded after them has fired. One event per kBatch buffers, not one each (an event
// record costs about 1 us on the GPU machines, the copy it follows 1.4 us).
class Deferred {
 public:
  static constexpr int kBatch = 16;
  void add(void* p, int device) {
    std::lock_guard lock(mutex_);
    Queue& q = queues_[device];
    q.buffers.push_back(p);
    if (++q.unmarked >= kBatch) mark(q);
    count_.fetch_add(1, std::memory_order_release);
  }
  void reclaim(bool all) {
    if (count_.load(std::memory_order_acquire) == 0) return;
    std::vector<void*> done;
    {
      std::lock_guard lock(mutex_);
      for (auto& [device, q] : queues_) {
        if (all && q.unmarked > 0) {
          gpu::DeviceScope on(device);
          mark(q);
        }
        while (!q.marks.empty()) {
          auto [event, upto] = q.marks.front();
          if (all) gpu::sync_event(event);
          else if (!gpu::event_idle(event)) break;
          q.marks.pop_front();
          spare_.push_back(event);
          for (std::size_t k = 0; k < upto; ++k) done.push_back(q.buffers[k]);
          q.buffers.erase(q.buffers.begin(), q.buffers.begin() + static_cast<std::ptrdiff_t>(upto));
          for (auto& m : q.marks) m.second -= upto;
        }
      }
      count_.fetch_sub(static_cast<long>(done.size()), std::memory_order_release);
    }
    for (void* p : done) pinned_pool().put(p);
  }

 private:
  struct Queue {
    std::vector<void*> buffers;
    std::deque<std::pair<gpu::Event, std::size_t>> marks;  // (event, buffers before it)
    int unmarked = 0;
  };
  void mark(Queue& q) {
    gpu::Event e = nullptr;
    if (!spare_.empty()) {
      e = spare_.back();
      spare_.pop_back();
    } else {
      e = gpu::create_event();
    }
    gpu::record(e, gpu::legacy_stream());
    q.marks.emplace_back(e, q.buffers.size());
    q.unmarked = 0;
  }
  std::mutex mutex_;
  std::map<int, Queue> queues_;
  std::vector<gpu::Event> spare_;
  std::atomic<long> count_{0};
};
Deferred& deferred() {
  static auto* d = new Deferred();
  return *d;
}

}  // namespace

namespace {
thread_local UnstageBatch* open_unstage = nullptr;  // the thread's innermost open UnstageBatch

// Queues the unpack of `nbytes` (whole elements) from a pinned pool buffer into the thread's open
// UnstageBatch, which launches it with the others and then gives the buffer back. False (nothing
// queued) without an open batch, for dense targets (one copy each: nothing to share), where the
// model would copy the bytes to the device first, under FERRY_ASYNC_RECV (not waited for at all),
// or without memory to remember it.
bool queue_unpack(const char* src, i64 nbytes, const Target& to, i64 first, void* pool_buffer) {
  UnstageBatch* b = open_unstage;
  const Type& t = *to.type;
  if (!b || !pool_buffer || t.dense() || nbytes % t.size() != 0) return false;
  if (async_receive() && !to.managed) return false;
  if (methods::pack_for(nbytes, methods::block_of(t), model::Direction::unpack) == model::Pack::device)
    return false;
  static const Type bytes = translate(MPI_BYTE);
  try {
    b->copies.emplace_back(gpu::Copy{src, nbytes, &bytes, to.element(first), nbytes / t.size(), &t},
                           to.type);
  } catch (...) {
    return false;
  }
  try {
    b->held.push_back(pool_buffer);
  } catch (...) {
    b->copies.pop_back();
    return false;
  }
  return true;
}
}  // namespace

// Each batch settles its own copies: a completion nested in another's (a collective's request
// driven from inside a wait) must not return before its data is in place.
UnstageBatch::UnstageBatch() : outer(open_unstage) { open_unstage = this; }

int UnstageBatch::settle() noexcept {
  if (open_unstage == this) open_unstage = outer;
  if (held.empty()) return MPI_SUCCESS;
  int rc = MPI_SUCCESS;
  if (!copies.empty()) {
    rc = detail::guarded([this] {
      std::vector<gpu::Copy> c;
      c.reserve(copies.size());
      for (const auto& q : copies) c.push_back(q.first);
      gpu::copy_many_async(c.data(), c.size(), gpu::legacy_stream());
    });
  }
  const int waited = detail::guarded([] { wait_legacy(); });
  if (rc == MPI_SUCCESS) rc = waited;
  copies.clear();
  for (void* p : held) pinned_pool().put(p);
  held.clear();
  return rc;
}

bool async_receive() {
  static const bool on = detail::env::flag(detail::env::Knob::async_recv);
  return on;
}

void reclaim(bool all) {
  try {
    deferred().reclaim(all);
  } catch (const Error&) {  // a failed event query: the buffers stay queued
  }
}

char* Target::element(i64 k) const {
  return reinterpret_cast<char*>(reinterpret_cast<std::uintptr_t>(buf) +
                                 static_cast<std::uintptr_t>(k * type->extent()));
}

Target target(const Route& r) {
  Target t;
  t.buf = const_cast<void*>(r.origin);
  t.count = r.count;
  t.type = r.type;
  t.device = r.device();
  t.managed = r.memory.kind == gpu::Memory::managed;
  t.gpu = r.device() ? r.memory.alloc.device : -1;
  return t;
}

void stage(const Route& r, void* host) {
  const Type& t = *r.type;
  if (r.count <= 0 || t.size() == 0) return;
  if (r.producer) gpu::sync_stream(r.producer);
  if (t.dense()) {  // one copy
    gpu::copy_async(host, r.first(), r.bytes, gpu::legacy_stream());
  } else if (r.pack == model::Pack::device) {  // pack in device memory, then one copy
    const Buffer dev(device_pool(gpu::this_device()), r.bytes);
    gpu::pack_async(r.origin, r.count, t, dev.get(), gpu::legacy_stream());
    gpu::copy_d2h_async(host, dev.get(), r.bytes, gpu::legacy_stream());
    wait_legacy();
    return;
  } else {  // one-shot: the kernel writes the mapped host memory over the bus
    gpu::pack_async(r.origin, r.count, t, host, gpu::legacy_stream());
  }
  wait_legacy();
}

bool unstage(const void* packed, i64 nbytes, const Target& to, i64 first, bool pinned, void* pool_buffer) {
  const Type& t = *to.type;
  const i64 size = t.size();
  if (size <= 0 || nbytes <= 0) return false;
  const char* src = static_cast<const char*>(packed);
  if (!to.device) {  // host memory: the CPU engine
    if (t.dense()) {
      std::memcpy(to.element(first) + t.true_lb(), src, static_cast<std::size_t>(nbytes));
      return false;
    }
    const i64 full = nbytes / size, rem = nbytes % size;
    i64 pos = 0;
    if (full > 0) unpack(src, full * size, &pos, to.element(first), full, t);
    if (rem > 0) {  // a partial last element receives its leading bytes
      std::vector<char> tmp(static_cast<std::size_t>(size));
      pos = 0;
      ferry::pack(to.element(first + full), 1, t, tmp.data(), size, &pos);
      std::memcpy(tmp.data(), src + full * size, static_cast<std::size_t>(rem));
      pos = 0;
      unpack(tmp.data(), size, &pos, to.element(first + full), 1, t);
    }
    return false;
  }
  if (pinned && queue_unpack(src, nbytes, to, first, pool_buffer)) return true;
  const gpu::Stream s = gpu::legacy_stream();
  if (t.dense()) {
    gpu::copy_async(to.element(first) + t.true_lb(), src, nbytes, s);
  } else {
    // The GPU reads the packed bytes over the bus: they must be pinned.
    std::unique_ptr<Pinned> copy;
    if (!pinned) {
      copy = std::make_unique<Pinned>(nbytes);
      std::memcpy(copy->p, src, static_cast<std::size_t>(nbytes));
      src = static_cast<const char*>(copy->p);
    }
    const i64 full = nbytes / size, rem = nbytes % size;
    if (full > 0) {
      if (methods::pack_for(full * size, methods::block_of(t), model::Direction::unpack) == model::Pack::device) {
        const Buffer dev(device_pool(gpu::this_device()), full * size);
        gpu::copy_h2d_async(dev.get(), src, full * size, s);
        gpu::unpack_async(dev.get(), to.element(first), full, t, s);
        wait_legacy();  // the device buffer goes back to the pool at the end of this scope
      } else {
        gpu::unpack_async(src, to.element(first), full, t, s);
      }
    }
    if (rem > 0) {  // the last element is packed, patched with the bytes that arrived, unpacked
      const Pinned tmp(size);
      char* last = to.element(first + full);
      gpu::pack_async(last, 1, t, tmp.p, s);
      wait_legacy();
      std::memcpy(tmp.p, src + full * size, static_cast<std::size_t>(rem));
      gpu::unpack_async(tmp.p, last, 1, t, s);
      wait_legacy();
    }
    if (copy) {
      wait_legacy();
      return false;
    }
  }
  if (pool_buffer && pinned && open_unstage && !(async_receive() && !to.managed)) {  // waited for once
    try {
      open_unstage->held.push_back(pool_buffer);
      return true;
    } catch (...) {  // no room to remember it: waited for now
    }
  }
  if (pool_buffer && pinned && async_receive() && !to.managed) {
    deferred().add(pool_buffer, gpu::this_device());
    return true;
  }
  wait_legacy();
  return false;
}

// ---------------------------------------------------------------------------- from GPU memory

void methods::deliver_packed(const char* src, i64 take, const Target& to) {
  const Type& t = *to.type;
  const i64 size = t.size();
  if (take <= 0 || size <= 0) return;
  const gpu::Stream s = wire::stream();
  if (t.dense()) {
    gpu::copy_async(to.element(0) + t.true_lb(), src, take, s);
    gpu::sync_stream(s);
    return;
  }
  if (!to.device) {
    const Pinned host(take);
    gpu::copy_d2h_async(host.p, src, take, s);
    gpu::sync_stream(s);
    unstage(host.p, take, to, 0, true);
    return;
  }
  const i64 full = take / size, rem = take % size;
  if (full > 0) gpu::unpack_async(src, to.buf, full, t, s);
  gpu::sync_stream(s);
  if (rem > 0) {
    const Pinned tail(rem);
    gpu::copy_d2h_async(tail.p, src + full * size, rem, s);
    gpu::sync_stream(s);
    unstage(tail.p, rem, to, full, true);
  }
}

}  // namespace ferry::transport
