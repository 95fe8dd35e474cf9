// CUDA IPC of transport.hpp: handles by allocation (export) and the cache of peers' mappings
// (import).
#include <ferry/transport.hpp>

#include <algorithm>
#include <cstring>

#include "gpu/runtime.hpp"
#include "sys/env.hpp"
#include "sys/error.hpp"

namespace ferry::transport {

static_assert(sizeof(IpcHandle) == sizeof(gpu::IpcMemHandle), "one IPC handle, two names");

// ---------------------------------------------------------------------------- export

Exports::Exports(GetHandle get) : get_(std::move(get)) {}

bool Exports::of(const gpu::Allocation& a, const void* p, Export* out) {
  if (a.kind != gpu::Memory::device || a.base == nullptr) return false;
  const auto base = reinterpret_cast<std::uint64_t>(a.base);
  const auto at = reinterpret_cast<std::uint64_t>(p);
  if (at < base || at - base >= static_cast<std::uint64_t>(a.size > 0 ? a.size : 1))
    detail::fail(MPI_ERR_ARG, "export: the pointer lies outside the allocation given");
  IpcHandle h{};
  bool ok = false;
  {
    std::lock_guard lock(mutex_);
    auto it = by_base_.find(base);
    if (it != by_base_.end() && it->second.id == a.id) {
      ok = it->second.ok;
      h = it->second.handle;
    } else {
      // A new allocation, or a new one at a freed one's address (its id differs): ask once.
      ok = get_(a.base, &h);
      // Bounded: entries of freed allocations are never asked for again, only overwritten.
      if (by_base_.size() >= 65536) by_base_.clear();
      by_base_[base] = Entry{a.id, ok, h};
    }
  }
  if (!ok) return false;
  out->handle = h;
  out->base = base;
  out->id = a.id;
  out->offset = static_cast<i64>(at - base);
  out->device = a.device;
  return true;
}

void Exports::clear() {
  std::lock_guard lock(mutex_);
  by_base_.clear();
}

std::size_t Exports::size() const {
  std::lock_guard lock(mutex_);
  return by_base_.size();
}

Exports& exports() {
  static auto* e = new Exports([](void* base, IpcHandle* out) {
    gpu::IpcMemHandle h{};
    if (!gpu::ipc_handle(base, &h)) return false;
    std::memcpy(out->bytes, h.bytes, sizeof out->bytes);
    return true;
  });
  return *e;
}

bool export_pointer(const void* p, Export* out) {
  const gpu::Allocation a = gpu::allocation_of(p);
  return exports().of(a, p, out);
}

// ---------------------------------------------------------------------------- import

struct IpcCache::Mapping {
  std::pair<int, std::uint64_t> key;
  unsigned long long id = 0;
  void* ptr = nullptr;            // null: the allocation is mapped elsewhere in this process
  IpcCache::Status status = IpcCache::Status::ok;
  int users = 0;                  // leases now
  std::uint64_t used = 0;         // clock of the last open
  bool retired = false;           // close when the last lease goes
};

IpcCache::IpcCache(Open open, Close close, std::size_t capacity)
    : open_(std::move(open)), close_(std::move(close)), capacity_(capacity) {}

IpcCache::~IpcCache() = default;

IpcCache::Lease::Lease(Lease&& o) noexcept
    : cache_(o.cache_), mapping_(o.mapping_), ptr_(o.ptr_), status_(o.status_) {
  o.cache_ = nullptr;
  o.mapping_ = nullptr;
  o.ptr_ = nullptr;
}

IpcCache::Lease& IpcCache::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    if (cache_ && mapping_) cache_->release(mapping_);
    cache_ = o.cache_;
    mapping_ = o.mapping_;
    ptr_ = o.ptr_;
    status_ = o.status_;
    o.cache_ = nullptr;
    o.mapping_ = nullptr;
    o.ptr_ = nullptr;
  }
  return *this;
}

IpcCache::Lease::~Lease() {
  if (cache_ && mapping_) cache_->release(mapping_);
}

IpcCache::Lease IpcCache::open(int peer, std::uint64_t base, unsigned long long id, const IpcHandle& handle) {
  Lease lease;
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(peer, base);
  auto it = live_.find(key);
  if (it != live_.end() && it->second->id != id) {
    // The peer freed that allocation (and may have made another at its address): let the old
    // mapping go, now or when its last lease goes.
    std::unique_ptr<Mapping> old = std::move(it->second);
    live_.erase(it);
    it = live_.end();
    if (old->users > 0) {
      old->retired = true;
      retired_.push_back(std::move(old));
    } else if (old->ptr) {
      close_(old->ptr);
      ++stats_.closes;
    }
  }
  if (it != live_.end()) {
    Mapping& m = *it->second;
    if (m.status == Status::already_mapped) {  // remembered: not asked again for this allocation
      ++stats_.already_mapped;
      lease.status_ = m.status;
      return lease;
    }
    ++stats_.hits;
    m.used = ++clock_;
    ++m.users;
    lease.cache_ = this;
    lease.mapping_ = &m;
    lease.ptr_ = m.ptr;
    lease.status_ = Status::ok;
    return lease;
  }
  void* p = nullptr;
  Status st = open_(handle, &p);
  if (st == Status::already_mapped && forget_unused_locked(peer)) st = open_(handle, &p);
  if (st == Status::failed || (st == Status::ok && p == nullptr)) {
    ++stats_.failures;  // not remembered: the cause may pass (peer access, memory pressure)
    lease.status_ = Status::failed;
    return lease;
  }
  auto m = std::make_unique<Mapping>();
  m->key = key;
  m->id = id;
  m->status = st;
  m->used = ++clock_;
  if (st == Status::already_mapped) {
    ++stats_.already_mapped;
    live_.emplace(key, std::move(m));
    lease.status_ = st;
    evict_locked();
    return lease;
  }
  ++stats_.opens;
  m->ptr = p;
  m->users = 1;
  lease.cache_ = this;
  lease.mapping_ = m.get();
  lease.ptr_ = p;
  lease.status_ = Status::ok;
  live_.emplace(key, std::move(m));
  evict_locked();
  return lease;
}

// The driver refused a handle of `peer` as "already mapped" while Ferry may hold the memory
// itself: a mapping kept after its message, of an allocation the peer freed, whose memory (or the
// driver's block it came from) the new allocation reuses at another address. Closes every unused
// mapping of that peer (and forgets its remembered refusals); true if any was closed, and then the
// open is worth one more try.
bool IpcCache::forget_unused_locked(int peer) {
  bool closed = false;
  for (auto it = live_.begin(); it != live_.end();) {
    Mapping& m = *it->second;
    if (it->first.first != peer || m.users > 0) {
      ++it;
      continue;
    }
    if (m.ptr) {
      close_(m.ptr);
      ++stats_.closes;
      closed = true;
    }
    it = live_.erase(it);
  }
  return closed;
}

// Closes the least recently used unused mappings while more than capacity_ are open (remembered
// "already mapped" entries count too, so the table stays bounded).
void IpcCache::evict_locked() {
  while (live_.size() > capacity_) {
    auto lru = live_.end();
    for (auto it = live_.begin(); it != live_.end(); ++it)
      if (it->second->users == 0 && (lru == live_.end() || it->second->used < lru->second->used)) lru = it;
    if (lru == live_.end()) return;  // all in use: closed as their leases go
    if (lru->second->ptr) {
      close_(lru->second->ptr);
      ++stats_.closes;
    }
    live_.erase(lru);
  }
}

void IpcCache::release(Mapping* m) noexcept {
  std::lock_guard lock(mutex_);
  if (--m->users > 0) return;
  if (m->retired) {
    if (m->ptr) {
      close_(m->ptr);
      ++stats_.closes;
    }
    retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                  [m](const std::unique_ptr<Mapping>& r) { return r.get() == m; }),
                   retired_.end());
    return;
  }
  evict_locked();
}

void IpcCache::close_all() {
  std::lock_guard lock(mutex_);
  for (auto& [key, m] : live_) {
    if (m->users > 0) {
      m->retired = true;
      retired_.push_back(std::move(m));
    } else if (m->ptr) {
      close_(m->ptr);
      ++stats_.closes;
    }
  }
  live_.clear();
}

std::size_t IpcCache::mapped() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [key, m] : live_) n += m->ptr != nullptr;
  for (const auto& m : retired_) n += m->ptr != nullptr;
  return n;
}

IpcCache::Stats IpcCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

IpcCache& ipc_cache() {
  static auto* c = new IpcCache(
      [](const IpcHandle& handle, void** mapped) {
        gpu::IpcMemHandle h{};
        std::memcpy(h.bytes, handle.bytes, sizeof h.bytes);
        switch (gpu::open_ipc(h, mapped)) {
          case gpu::IpcOpen::ok: return IpcCache::Status::ok;
          case gpu::IpcOpen::already_mapped: return IpcCache::Status::already_mapped;
          case gpu::IpcOpen::failed: break;
        }
        return IpcCache::Status::failed;
      },
      [](void* mapped) { gpu::close_ipc(mapped); },
      static_cast<std::size_t>(detail::env::integer(detail::env::Knob::ipc_cache)));
  return *c;
}

}  // namespace ferry::transport
