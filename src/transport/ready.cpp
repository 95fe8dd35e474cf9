// The interprocess events of kReady stubs (wire.hpp, Ready): a sender that packed a message into a
// staging buffer records one instead of waiting for the pack, and the receiver's stream waits for
// it, so a process that sends many packed messages queues every pack at once (the Astaroth case's
// 26 struct types over 8 allocations: one host wait per message before).
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "sys/error.hpp"
#include "transport/wire.hpp"

namespace ferry::transport::wire {

struct Ready::Slot {
  int device = -1;
  gpu::Event event = nullptr;
  gpu::IpcEventHandle handle{};
  bool busy = false;
};

struct Ready::Impl {
  std::mutex mutex;
  std::vector<Slot> slots;  // never shrinks: a slot's index names it to receivers
  bool broken = false;      // events could not be made here once: none is tried again
  struct Opened {
    gpu::IpcEventHandle handle;
    gpu::Event event;
  };
  std::map<std::pair<int, i64>, Opened> opened;  // by sender and slot
  std::map<int, std::vector<gpu::Stream>> streams;  // by device, never destroyed
  unsigned next = 0;
};

Ready::Impl& Ready::impl() {
  static auto* i = new Impl();  // never destroyed: events outlive the process's last message
  return *i;
}

int Ready::record(gpu::Stream s) {
  Impl& m = impl();
  const int device = gpu::this_device();
  int slot = -1;
  gpu::Event event = nullptr;
  {
    std::lock_guard lock(m.mutex);
    for (std::size_t k = 0; k < m.slots.size() && slot < 0; ++k)
      if (!m.slots[k].busy && m.slots[k].device == device) slot = static_cast<int>(k);
    if (slot < 0) {
      if (m.broken) return -1;
      Slot fresh;
      fresh.device = device;
      try {
        fresh.event = gpu::create_ipc_event();
        fresh.handle = gpu::ipc_handle(fresh.event);
      } catch (const Error&) {
        if (fresh.event) gpu::destroy_event(fresh.event);
        m.broken = true;
        return -1;
      }
      m.slots.push_back(fresh);
      slot = static_cast<int>(m.slots.size()) - 1;
    }
    m.slots[static_cast<std::size_t>(slot)].busy = true;
    event = m.slots[static_cast<std::size_t>(slot)].event;  // the vector may grow once unlocked
  }
  try {
    gpu::record(event, s);
  } catch (...) {
    give_back(slot);
    throw;
  }
  return slot;
}

void Ready::stamp(int slot, Stub* stub) {
  Impl& m = impl();
  std::lock_guard lock(m.mutex);
  stub->flags |= kReady;
  stub->ready_slot = slot;
  stub->ready = m.slots.at(static_cast<std::size_t>(slot)).handle;
}

void Ready::sync(int slot) {
  Impl& m = impl();
  gpu::Event e = nullptr;
  {
    std::lock_guard lock(m.mutex);
    e = m.slots.at(static_cast<std::size_t>(slot)).event;
  }
  gpu::sync_event(e);
}

void Ready::give_back(int slot) noexcept {
  Impl& m = impl();
  std::lock_guard lock(m.mutex);
  if (slot >= 0 && static_cast<std::size_t>(slot) < m.slots.size()) m.slots[static_cast<std::size_t>(slot)].busy = false;
}

gpu::Event Ready::opened(const Stub& stub) { return opened(stub.sender, stub.ready_slot, stub.ready); }

gpu::Event Ready::opened(int sender, i64 slot, const gpu::IpcEventHandle& handle) {
  Impl& m = impl();
  std::lock_guard lock(m.mutex);
  auto it = m.opened.find({sender, slot});
  if (it != m.opened.end()) {
    if (std::memcmp(it->second.handle.bytes, handle.bytes, sizeof handle.bytes) == 0) return it->second.event;
    gpu::destroy_event(it->second.event);  // not the event it was (cannot happen within one job)
    m.opened.erase(it);
  }
  try {
    const gpu::Event e = gpu::open_ipc_event(handle);
    m.opened[{sender, slot}] = {handle, e};
    return e;
  } catch (const Error&) {
    return nullptr;  // the sender's data comes staged
  }
}

gpu::IpcEventHandle Ready::handle(int slot) {
  Impl& m = impl();
  std::lock_guard lock(m.mutex);
  return m.slots.at(static_cast<std::size_t>(slot)).handle;
}

gpu::Stream Ready::stream() {
  constexpr std::size_t kStreams = 4;
  Impl& m = impl();
  const int device = gpu::this_device();
  std::lock_guard lock(m.mutex);
  std::vector<gpu::Stream>& v = m.streams[device];
  const std::size_t k = m.next++ % kStreams;
  while (v.size() <= k) v.push_back(gpu::create_stream());
  return v[k];
}

Ready& ready() {
  static Ready r;
  return r;
}

}  // namespace ferry::transport::wire
