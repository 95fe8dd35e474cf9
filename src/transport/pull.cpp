// Pull of transport.hpp: blocks of a collective read in place from the GPU memory of the other
// processes of the node. The sender offers each block as an export of its allocation plus, where
// its legacy stream still has work queued, an interprocess event recorded there (wire::Ready), so
// no sender waits for its GPU; each reader maps the allocations (IpcCache), makes its legacy
// stream wait for the senders' events and copies every block it receives with one
// copy_spans_async launch (blocks on a GPU it has no peer access to: by the copy engines), then
// waits once.
// The caller keeps every Pull until all readers are done (a barrier): the event's slot and the
// senders' buffers are free for reuse only then.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/runtime.hpp"
#include "sys/error.hpp"
#include "transport/wire.hpp"

namespace ferry::transport {

struct Pull::Impl {
  int slot = -1;          // this process's event (wire::Ready), recorded at the first offer
  bool recorded = false;  // ... or tried to be
  bool idle = false;      // the legacy stream had nothing queued: no event
  gpu::Allocation sent{gpu::Memory::host, nullptr, 0, 0, -1};  // the last offer's allocation
  gpu::Allocation into{gpu::Memory::host, nullptr, 0, 0, -1};  // the last take's destination's
  int device = -1;
  std::uint64_t key = 0;
  std::vector<IpcCache::Lease> leases;  // the peers' mappings, held until the copies are done
  std::vector<gpu::Event> waited;       // the peers' events the legacy stream waits for
  std::vector<gpu::Span> spans;         // read by the kernel on this GPU (launches of up to 64)
  std::vector<gpu::Span> peer;          // from a GPU this one has no peer access to: a copy each
};

namespace {

// Whether a kernel on `device` may read GPU `gpu` (device_key): the same GPU, or one of this
// process's with peer access from it. Asked of the driver once per pair for the process.
struct Reach {
  std::mutex mutex;
  std::vector<std::tuple<int, std::uint64_t, bool>> known;
};
bool reaches(int device, std::uint64_t key, std::uint64_t gpu) {
  if (gpu == key) return true;
  static auto* r = new Reach();  // never destroyed: usable at exit
  std::lock_guard lock(r->mutex);
  for (const auto& [d, k, ok] : r->known)
    if (d == device && k == gpu) return ok;
  bool ok = false;
  for (int d = 0; d < gpu::device_count() && !ok; ++d)
    ok = d != device && gpu::device_key(d) == gpu && gpu::can_access_peer(device, d);
  r->known.emplace_back(device, gpu, ok);
  return ok;
}

}  // namespace


Pull::Pull() : impl_(std::make_unique<Impl>()) {}

Pull::~Pull() {
  if (impl_->slot >= 0) wire::ready().give_back(impl_->slot);
}

bool Pull::offer(const void* p, i64 bytes, Offer* out) {
  *out = Offer{};
  out->bytes = bytes;
  if (bytes <= 0) {
    out->ok = bytes == 0 ? 1 : 0;
    return out->ok != 0;
  }
  if (!gpu::available()) return false;
  Impl& m = *impl_;
  if (!m.sent.holds(p, bytes)) {
    m.sent = gpu::where(p);
    if (m.sent.kind != gpu::Memory::device || !m.sent.holds(p, bytes)) {
      m.sent.base = nullptr;
      return false;
    }
    gpu::settle(m.sent);  // readers read from their own contexts: no stream orders them after ours
  }
  if (!m.recorded) {  // an idle legacy stream needs no event (readers need not wait for one)
    m.recorded = true;
    m.idle = gpu::stream_idle(gpu::legacy_stream());
    if (!m.idle) m.slot = wire::ready().record(gpu::legacy_stream());
  }
  if ((!m.idle && m.slot < 0) || !exports().of(m.sent, p, &out->at)) return false;
  if (m.slot >= 0) {
    const gpu::IpcEventHandle h = wire::ready().handle(m.slot);
    std::memcpy(out->event, h.bytes, sizeof out->event);
  }
  out->slot = m.slot;
  out->gpu = gpu::device_key(m.sent.device);
  out->ok = 1;
  return true;
}

bool Pull::take(int peer, const Offer& o, void* dst) {
  if (!o.ok) return false;
  if (o.bytes == 0) return true;
  Impl& m = *impl_;
  if (!m.into.holds(dst, o.bytes)) {
    m.into = gpu::where(dst);
    if (m.into.kind != gpu::Memory::device || !m.into.holds(dst, o.bytes)) {
      m.into.base = nullptr;
      return false;
    }
  }
  if (m.device < 0) {
    m.device = gpu::this_device();
    m.key = gpu::device_key(m.device);
  }
  const char* src = nullptr;
  if (peer == wire::state().rank) {  // this process's own block: its pointer, its stream's order
    src = reinterpret_cast<const char*>(o.at.base) + o.at.offset;
  } else {
    IpcCache::Lease lease = ipc_cache().open(peer, o.at.base, o.at.id, o.at.handle);
    if (!lease) return false;
    if (o.slot >= 0) {  // the sender's legacy stream had work queued: the copy waits for it
      gpu::IpcEventHandle h;
      std::memcpy(h.bytes, o.event, sizeof h.bytes);
      const gpu::Event e = wire::ready().opened(peer, o.slot, h);
      if (!e) return false;
      if (std::find(m.waited.begin(), m.waited.end(), e) == m.waited.end()) {
        gpu::stream_wait_event(gpu::legacy_stream(), e);
        m.waited.push_back(e);
      }
    }
    src = static_cast<const char*>(lease.get()) + o.at.offset;
    m.leases.push_back(std::move(lease));
  }
  // The kernel runs on this GPU: it writes this GPU's memory and reads what this GPU reaches.
  const bool kernel = m.into.device == m.device && reaches(m.device, m.key, o.gpu);
  (kernel ? m.spans : m.peer).push_back(gpu::Span{dst, src, o.bytes});
  return true;
}

void Pull::run() {
  Impl& m = *impl_;
  const gpu::Stream legacy = gpu::legacy_stream();
  try {
    if (!m.spans.empty()) gpu::copy_spans_async(m.spans.data(), m.spans.size(), legacy);
    for (const gpu::Span& s : m.peer) gpu::copy_async(s.dst, s.src, s.bytes, legacy);
    if (!m.spans.empty() || !m.peer.empty()) gpu::wait_legacy();
  } catch (...) {
    wire::quiesce(legacy);  // nothing is let go while the GPU may still read it
    throw;
  }
  wire::stats().pulled += static_cast<long>(m.spans.size() + m.peer.size());
  m.leases.clear();
}

}  // namespace ferry::transport
